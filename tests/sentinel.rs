//! Sentinel: one master, one replica, three sentinels on free loopback
//! ports. The client finds the master through the sentinels, keeps working
//! after a failover, and can wait for replicas on acquire.

mod common;

use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{wait_until, Server};
use redis::Commands;
use redislock::{Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

fn info(srv: &Server, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut srv.raw())
        .unwrap_or_default()
}

fn master_port(sentinel: &Server) -> Option<u16> {
    let r: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg("mymaster")
        .query(&mut sentinel.raw())
        .ok()?;
    r.map(|(_, p)| p)
}

#[test]
fn the_master_is_found_through_sentinel_and_refound_after_a_failover() {
    let mut master = Server::start();
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    wait_until("replication", 10 * S, || {
        info(&replica, "replication").contains("master_link_status:up")
    });
    let conf = format!(
        "sentinel monitor mymaster 127.0.0.1 {} 2\n\
         sentinel down-after-milliseconds mymaster 500\n\
         sentinel failover-timeout mymaster 4000",
        master.port
    );
    let sentinels: Vec<Server> = (0..3).map(|_| Server::start_sentinel(&conf)).collect();
    wait_until(
        "sentinels to find each other and the replica",
        20 * S,
        || {
            sentinels.iter().all(|s| {
                let m: Vec<String> = redis::cmd("SENTINEL")
                    .arg("master")
                    .arg("mymaster")
                    .query(&mut s.raw())
                    .unwrap_or_default();
                let field = |name: &str| {
                    m.iter()
                        .position(|x| x == name)
                        .and_then(|i| m.get(i + 1))
                        .cloned()
                        .unwrap_or_default()
                };
                field("num-other-sentinels") == "2" && field("num-slaves") == "1"
            })
        },
    );
    let hosts: Vec<String> = sentinels
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port))
        .collect();
    let url = format!("redis+sentinel://{}/mymaster", hosts.join(","));
    let client = Client::builder(&url)
        .connect_timeout(S)
        .command_timeout(S)
        .build()
        .unwrap();
    assert!(
        client.addr().contains("service mymaster"),
        "{}",
        client.addr()
    );

    let lock = client.acquire("job", 10 * S, Wait::TryOnce).unwrap();
    let on_master: Option<Vec<u8>> = master.raw().get("job").unwrap();
    assert_eq!(on_master.as_deref(), Some(lock.token()));
    lock.release().unwrap();

    // Opt-in WAIT: one replica acknowledges; two cannot.
    let waiting = Client::open(&format!("{url}?wait_replicas=1&wait_timeout=2s")).unwrap();
    let lock = waiting.acquire("job", 10 * S, Wait::TryOnce).unwrap();
    let on_replica: Option<Vec<u8>> = replica.raw().get("job").unwrap();
    assert_eq!(
        on_replica.as_deref(),
        Some(lock.token()),
        "WAIT returned before the replica had it"
    );
    lock.release().unwrap();
    let greedy = Client::open(&format!("{url}?wait_replicas=2&wait_timeout=200ms")).unwrap();
    let e = greedy.acquire("job", 10 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    assert!(e.to_string().contains("replicas"), "{e}");
    let left: Option<Vec<u8>> = master.raw().get("job").unwrap();
    assert_eq!(left, None, "an unreplicated lock was left behind");

    // Failover: the master dies, a sentinel promotes the replica, and the
    // same client goes on.
    let old = client.acquire("before", 30 * S, Wait::TryOnce).unwrap();
    let fenced = client.acquire("fenced", 30 * S, Wait::TryOnce).unwrap();
    let fence_before = fenced.fence();
    fenced.release().unwrap();
    master.kill();
    wait_until("the failover", 30 * S, || {
        master_port(&sentinels[0]) == Some(replica.port)
    });
    let t = Instant::now();
    let lock = loop {
        match client.acquire("after", 10 * S, Wait::Timeout(5 * S)) {
            Ok(l) => break l,
            // The promoted replica may refuse writes for a moment.
            Err(e) if t.elapsed() < 10 * S && e.kind() != ErrorKind::InvalidArgument => {
                sleep(S / 5)
            }
            Err(e) => panic!("no lock after the failover: {e}"),
        }
    };
    let on_new: Option<Vec<u8>> = replica.raw().get("after").unwrap();
    assert_eq!(on_new.as_deref(), Some(lock.token()));
    lock.release().unwrap();
    // The fence of a name keeps growing on the new master.
    let fenced = client.acquire("fenced", 30 * S, Wait::TryOnce).unwrap();
    assert!(
        fenced.fence() > fence_before,
        "fence {} after the failover, {fence_before} before",
        fenced.fence()
    );
    fenced.release().unwrap();
    // The lock taken before survived the failover here (it was replicated).
    drop(old);
}

#[test]
fn bad_sentinel_urls_are_invalid_arguments() {
    for url in [
        "redis+sentinel://127.0.0.1:1",
        "redis+sentinel://127.0.0.1:1/",
        "redis+sentinel://127.0.0.1/mymaster",
        "redis+sentinel://127.0.0.1:1/mymaster?wait_timeout=1s",
        "redis+sentinel://127.0.0.1:1/mymaster?db=x",
        "redis+sentinel://127.0.0.1:1/mymaster?nope=1",
    ] {
        let e = Client::open(url).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{url}: {e}");
    }
    // No sentinel answers: a connection error naming the sentinels.
    let port = common::free_port();
    let c = Client::builder(&format!("redis+sentinel://:pw@127.0.0.1:{port}/mymaster"))
        .connect_timeout(S / 2)
        .build()
        .unwrap();
    let e = c.acquire("k", S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(
        e.to_string().contains("no sentinel named the master"),
        "{e}"
    );
    assert!(!e.to_string().contains("pw"), "{e}");
}
