//! Sentinel: one master, one replica, three sentinels on free loopback
//! ports, over plain TCP and over TLS (one CA for every server). The client
//! finds the master through the sentinels, keeps working after a failover,
//! and can wait for replicas on acquire. Sentinels with credentials of their
//! own (a password, an ACL user) beside the master's.

mod common;

use std::thread::sleep;
use std::time::{Duration, Instant};

use common::sentinel::{deployment, hosts, master_port, replicated};
use common::{shared_tls, wait_until, Server};
use redis::Commands;
use redislock::{Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

/// What the plain and the TLS deployments must both do: lock through the
/// sentinels, wait for replicas, survive a failover with growing fences.
/// `open` makes a client for a Sentinel URL (its TLS options added).
fn lock_wait_and_fail_over(
    master: &mut Server,
    replica: &Server,
    sentinels: &[Server],
    url: &str,
    open: &dyn Fn(&str) -> Client,
) {
    let client = open(url);
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
    let waiting = open(&format!("{url}wait_replicas=1&wait_timeout=5s"));
    let lock = waiting.acquire("job", 10 * S, Wait::TryOnce).unwrap();
    let on_replica: Option<Vec<u8>> = replica.raw().get("job").unwrap();
    assert_eq!(
        on_replica.as_deref(),
        Some(lock.token()),
        "WAIT returned before the replica had it"
    );
    lock.release().unwrap();
    let greedy = open(&format!("{url}wait_replicas=2&wait_timeout=200ms"));
    let e = greedy.acquire("job", 10 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    assert!(e.to_string().contains("replicas"), "{e}");
    let left: Option<Vec<u8>> = master.raw().get("job").unwrap();
    assert_eq!(left, None, "an unreplicated lock was left behind");

    // Failover: the master dies, a sentinel promotes the replica, and the
    // same client goes on.
    let old = client.acquire("before", 30 * S, Wait::TryOnce).unwrap();
    let fenced = client.acquire("fenced", 30 * S, Wait::TryOnce).unwrap();
    let fence_before = fenced.fence().unwrap();
    fenced.release().unwrap();
    // Replication is asynchronous: the replica acknowledges all of it
    // before the master dies, so what the new master has is known.
    replicated(master);
    master.kill();
    wait_until("the failover", 30 * S, || {
        master_port(&sentinels[0]) == Some(replica.port)
    });
    let t = Instant::now();
    let lock = loop {
        match client.acquire("after", 10 * S, Wait::Timeout(5 * S)) {
            Ok(l) => break l,
            // The promoted replica may refuse writes for a moment, and the
            // other sentinels may still name the dead master.
            Err(e) if t.elapsed() < 30 * S && e.kind() != ErrorKind::InvalidArgument => {
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
        fenced.fence().unwrap() > fence_before,
        "fence {} after the failover, {fence_before} before",
        fenced.fence().unwrap()
    );
    fenced.release().unwrap();
    // The lock taken before survived the failover here (it was replicated).
    drop(old);
}

/// Timeouts that a busy machine does not run out (the command timeout
/// also bounds `wait_timeout`'s WAIT), yet far below a hang: refusals and
/// TLS errors come at once.
fn timeouts(url: &str) -> redislock::ClientBuilder {
    Client::builder(url)
        .connect_timeout(10 * S)
        .command_timeout(10 * S)
}

/// Wait until `client` has one waiter queued: ENQUEUE found the lock held
/// and queued it, its subscriber is up.
fn until_one_waiter(client: &Client) {
    wait_until("the waiter to queue", 10 * S, || {
        client.stats().waiters_now == 1
    });
}

#[test]
fn the_master_is_found_through_sentinel_and_refound_after_a_failover() {
    let (mut master, replica, sentinels) = deployment(None);
    let url = format!("redis+sentinel://{}/mymaster?", hosts(&sentinels));
    lock_wait_and_fail_over(&mut master, &replica, &sentinels, &url, &|url| {
        timeouts(url).build().unwrap()
    });
}

#[test]
fn tls_to_the_sentinels_and_the_master_before_and_after_a_failover() {
    let tls = shared_tls();
    let (mut master, replica, sentinels) = deployment(Some(&tls));
    let base = format!("rediss+sentinel://{}/mymaster", hosts(&sentinels));

    // Without the private CA: a typed TLS error naming the certificate.
    let untrusted = timeouts(&base).build().unwrap();
    let e = untrusted.acquire("job", 5 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains("certificate"), "{e}");
    assert!(e.to_string().contains("tls_ca_file"), "{e}");
    // A plain Sentinel URL finds no plain sentinel there.
    let plain = timeouts(&base.replacen("rediss+", "redis+", 1))
        .build()
        .unwrap();
    let e = plain.acquire("job", 5 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");

    // The CA from the builder, and (in the WAIT clients) from the URL.
    let pem = tls.ca_pem();
    let with_root = timeouts(&base).tls_root_cert(pem).build().unwrap();
    assert!(with_root.addr().contains("TLS"), "{}", with_root.addr());
    with_root
        .acquire("job", 5 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    let url = format!("{base}?tls_ca_file={}&", tls.ca.display());
    lock_wait_and_fail_over(&mut master, &replica, &sentinels, &url, &|url| {
        timeouts(url).build().unwrap()
    });
    // The builder's client goes on after the failover too.
    with_root
        .acquire("job", 5 * S, Wait::Timeout(5 * S))
        .unwrap()
        .release()
        .unwrap();
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
        "rediss+sentinel://127.0.0.1:1/mymaster#insecure",
        "redis+sentinel://127.0.0.1:1/mymaster?sentinel_user=u",
    ] {
        let e = Client::open(url).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{url}: {e}");
    }
    // No sentinel answers: a connection error naming the sentinels.
    let refusing = common::RefusingPort::new();
    let port = refusing.port;
    let c = Client::builder(&format!(
        "redis+sentinel://:pw@127.0.0.1:{port}/mymaster?sentinel_password=spw"
    ))
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

/// AUTH on a raw connection, for checking what the library wrote.
fn raw_as(srv: &Server, auth: &[&str]) -> redis::Connection {
    let mut con = srv.raw();
    let _: () = redis::cmd("AUTH").arg(auth).query(&mut con).unwrap();
    con
}

#[test]
fn a_sentinel_that_refuses_subscribe_is_asked_at_each_period_instead() {
    // Without SUBSCRIBE the client cannot listen to the sentinel's
    // announcements; it must still hear it (or fail closed), so it asks the
    // master at each PING period (down-after 1000 ms: every 250 ms).
    let master = Server::start();
    let conf = format!(
        "user default off\n\
         user watcher on >watch-pw ~* &* +@all -subscribe -psubscribe\n\
         sentinel monitor mymaster 127.0.0.1 {} 1\n\
         sentinel down-after-milliseconds mymaster 1000",
        master.port
    );
    let mut sentinel = Server::start_sentinel(&conf);
    let client = Client::builder(&format!(
        "redis+sentinel://127.0.0.1:{}/mymaster?sentinel_user=watcher&sentinel_password=watch-pw",
        sentinel.port
    ))
    .connect_timeout(S)
    .command_timeout(S)
    .build()
    .unwrap();
    // Granted: the client hears its one sentinel.
    let take = || client.acquire("job", 5 * S, Wait::TryOnce);
    take().unwrap().release().unwrap();
    // On one connection, asked the master again and again: the
    // connection's last command is that question, and it was idle for less
    // than its age.
    let mut raw = raw_as(&sentinel, &["watcher", "watch-pw"]);
    wait_until(
        "the sentinel to be asked again on one connection",
        30 * S,
        || {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut raw).unwrap();
            list.lines().any(|l| {
                let field = |name: &str| {
                    l.split(' ')
                        .find_map(|f| f.strip_prefix(name))
                        .and_then(|v| v.parse::<u64>().ok())
                };
                l.contains("cmd=sentinel|master")
                    && field("age=").is_some_and(|age| age >= 2)
                    && field("idle=").is_some_and(|idle| idle + 1 < field("age=").unwrap())
            })
        },
    );
    // Frozen, it is no longer heard (after half of down-after), and the
    // client grants nothing; heard again, it grants.
    sentinel.pause();
    wait_until("the client to stop granting", 60 * S, || match take() {
        Ok(lock) => lock.release().is_err(),
        Err(e) => e.to_string().contains("hears 0 of the 1"),
    });
    sentinel.resume();
    wait_until("the client to grant again", 60 * S, || {
        take().is_ok_and(|lock| lock.release().is_ok())
    });
}

/// The error of one acquisition through `url`.
fn refusal(url: &str) -> redislock::Error {
    let client = timeouts(url).build().unwrap();
    client.acquire("job", 5 * S, Wait::TryOnce).unwrap_err()
}

#[test]
fn sentinels_with_a_password_of_their_own_beside_the_masters() {
    let master = Server::start_with(&["--requirepass", "master-pw"]);
    let conf = format!(
        "requirepass s3nt@&+pw\n\
         sentinel monitor mymaster 127.0.0.1 {} 2\n\
         sentinel auth-pass mymaster master-pw",
        master.port
    );
    let sentinels: Vec<Server> = (0..2).map(|_| Server::start_sentinel(&conf)).collect();
    let base = format!("redis+sentinel://:master-pw@{}/mymaster", hosts(&sentinels));

    // Both credentials, each where it belongs (percent-encoded in the query).
    let client = timeouts(&format!("{base}?sentinel_password=s3nt%40%26%2Bpw"))
        .build()
        .unwrap();
    let lock = client.acquire("job", 30 * S, Wait::TryOnce).unwrap();
    let on_master: Option<Vec<u8>> = raw_as(&master, &["master-pw"]).get("job").unwrap();
    assert_eq!(on_master.as_deref(), Some(lock.token()));
    // A waiter's subscriber reaches the master with the master's password:
    // the release hands the lock over through it.
    let c2 = client.clone();
    let waiter = std::thread::spawn(move || c2.acquire("job", 5 * S, Wait::Timeout(20 * S)));
    until_one_waiter(&client);
    let before = client.stats();
    lock.release().unwrap();
    waiter.join().unwrap().unwrap().release().unwrap();
    common::assert_one_hand_off(&client, &before, "the hand-off");

    // No sentinel password: the sentinels' refusal, naming one, typed.
    let e = refusal(&base);
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    let text = e.to_string();
    assert!(text.contains("NOAUTH"), "{text}");
    assert!(
        text.contains(&format!("sentinel 127.0.0.1:{}", sentinels[0].port)),
        "{text}"
    );
    assert!(text.contains("sentinel_password"), "{text}");
    assert!(!text.contains("master-pw"), "{text}");
    // A wrong one: WRONGPASS, and neither password shown.
    let e = refusal(&format!("{base}?sentinel_password=not-it"));
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    let text = e.to_string();
    assert!(text.contains("WRONGPASS"), "{text}");
    assert!(
        !text.contains("not-it") && !text.contains("master-pw"),
        "{text}"
    );
    // The master's password where the sentinels' belongs does not do.
    let e = refusal(&format!(
        "redis+sentinel://{}/mymaster?sentinel_password=master-pw",
        hosts(&sentinels)
    ));
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    assert!(!e.to_string().contains("master-pw"), "{e}");

    // The sentinels answer, the master refuses: the master's error.
    let e = refusal(&format!(
        "redis+sentinel://:wrong-pw@{}/mymaster?sentinel_password=s3nt%40%26%2Bpw",
        hosts(&sentinels)
    ));
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    let text = e.to_string();
    assert!(text.contains("WRONGPASS"), "{text}");
    assert!(
        text.contains(&format!("master 127.0.0.1:{}", master.port)),
        "{text}"
    );
    assert!(text.contains("check the user name and password"), "{text}");
    assert!(
        !text.contains("wrong-pw") && !text.contains("s3nt"),
        "{text}"
    );
    // No master password at all.
    let e = refusal(&format!(
        "redis+sentinel://{}/mymaster?sentinel_password=s3nt%40%26%2Bpw",
        hosts(&sentinels)
    ));
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    assert!(e.to_string().contains("NOAUTH"), "{e}");
    assert!(e.to_string().contains("the master of sentinel"), "{e}");
    assert!(!e.to_string().contains("s3nt"), "{e}");
}

#[test]
fn a_sentinel_acl_user_beside_a_master_acl_user() {
    let master = Server::start_with(&[
        "--user", "default", "off", "--user", "app", "on", ">app-pw", "~*", "&*", "+@all",
    ]);
    let conf = format!(
        "user default off\n\
         user watcher on >watch-pw ~* &* +@all\n\
         sentinel monitor mymaster 127.0.0.1 {} 1\n\
         sentinel auth-user mymaster app\n\
         sentinel auth-pass mymaster app-pw",
        master.port
    );
    let sentinel = Server::start_sentinel(&conf);
    let at = format!("127.0.0.1:{}/mymaster", sentinel.port);
    let client = timeouts(&format!(
        "redis+sentinel://app:app-pw@{at}?sentinel_user=watcher&sentinel_password=watch-pw"
    ))
    .build()
    .unwrap();
    let lock = client.acquire("job", 5 * S, Wait::TryOnce).unwrap();
    let on_master: Option<Vec<u8>> = raw_as(&master, &["app", "app-pw"]).get("job").unwrap();
    assert_eq!(on_master.as_deref(), Some(lock.token()));
    lock.release().unwrap();
    // The right password for the wrong user (the default user, off).
    let e = refusal(&format!(
        "redis+sentinel://app:app-pw@{at}?sentinel_password=watch-pw"
    ));
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    let text = e.to_string();
    assert!(text.contains("WRONGPASS"), "{text}");
    assert!(
        !text.contains("watch-pw") && !text.contains("app-pw"),
        "{text}"
    );
    // The sentinel's user given as the master's: the master refuses it.
    let e = refusal(&format!(
        "redis+sentinel://watcher:watch-pw@{at}?sentinel_user=watcher&sentinel_password=watch-pw"
    ));
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    assert!(
        e.to_string()
            .contains(&format!("master 127.0.0.1:{}", master.port)),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_api_through_tls_sentinels_with_passwords() {
    let tls = shared_tls();
    let master = Server::start_tls_shared(&tls, &["--requirepass", "master-pw"]);
    let conf = format!(
        "requirepass sentinel-pw\n\
         sentinel monitor mymaster 127.0.0.1 {} 1\n\
         sentinel auth-pass mymaster master-pw",
        master.port
    );
    let sentinel = Server::start_sentinel_tls(&tls, &conf);
    let url = format!(
        "rediss+sentinel://:master-pw@127.0.0.1:{}/mymaster?sentinel_password=sentinel-pw\
         &tls_ca_file={}",
        sentinel.port,
        tls.ca.display()
    );
    let client = timeouts(&url).build().unwrap();
    let lock = client
        .acquire_async("job", 30 * S, Wait::TryOnce)
        .await
        .unwrap();
    let on_master: Option<Vec<u8>> = raw_as(&master, &["master-pw"]).get("job").unwrap();
    assert_eq!(on_master.as_deref(), Some(lock.token()));
    // A waiting task is handed the lock over the TLS subscriber.
    let c2 = client.clone();
    let waiter =
        tokio::spawn(async move { c2.acquire_async("job", 10 * S, Wait::Timeout(20 * S)).await });
    let queued = Instant::now();
    while client.stats().waiters_now != 1 {
        assert!(queued.elapsed() < 10 * S, "the waiter did not queue");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = lock.fence().unwrap();
    let before = client.stats();
    lock.release_async().await.unwrap();
    let next = waiter.await.unwrap().unwrap();
    common::assert_one_hand_off(&client, &before, "the hand-off");
    assert!(next.fence().unwrap() > first);
    next.release_async().await.unwrap();
    // Without the CA: the certificate error, typed, from the async API too.
    let untrusted = timeouts(&format!(
        "rediss+sentinel://:master-pw@127.0.0.1:{}/mymaster?sentinel_password=sentinel-pw",
        sentinel.port
    ))
    .build()
    .unwrap();
    let e = untrusted
        .acquire_async("job", 10 * S, Wait::TryOnce)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains("certificate"), "{e}");
}

/// The master's count of refusals with `code` (`INFO errorstats`).
fn refusals(srv: &Server, code: &str) -> u64 {
    let stats = common::sentinel::info(srv, "errorstats");
    let prefix = format!("errorstat_{code}:count=");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[test]
fn noreplicas_is_unavailability_named_by_the_master_and_a_wait_rides_it_out() {
    let (master, mut replica, sentinels) = deployment(None);
    for (name, value) in [
        ("min-replicas-to-write", "1"),
        ("min-replicas-max-lag", "1"),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut master.raw())
            .unwrap();
    }
    let c = Client::builder(&format!("redis+sentinel://{}/mymaster", hosts(&sentinels)))
        .connect_timeout(10 * S)
        .command_timeout(2 * S)
        .build()
        .unwrap();
    c.acquire("warm", 10 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    // A frozen replica stops acknowledging: after the max lag the master
    // refuses writes (NOREPLICAS), before any of them takes effect.
    replica.pause();
    wait_until("the master to count no good replica", 30 * S, || {
        common::sentinel::info(&master, "replication").contains("min_slaves_good_slaves:0")
    });
    let e = c.acquire("k", 10 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("master 127.0.0.1:{} of sentinel", master.port))
            && text.contains("NOREPLICAS"),
        "{text}"
    );
    assert!(
        refusals(&master, "NOREPLICAS") >= 2,
        "asked again within the command timeout"
    );
    // A wait asks again until the master writes again.
    let before = refusals(&master, "NOREPLICAS");
    let waiter = {
        let c = c.clone();
        std::thread::spawn(move || c.acquire("k", 10 * S, Wait::Timeout(120 * S)))
    };
    wait_until("the waiter to be refused", 30 * S, || {
        refusals(&master, "NOREPLICAS") > before
    });
    replica.resume();
    let lock = waiter
        .join()
        .unwrap()
        .expect("granted once the replica is back");
    lock.release().unwrap();
    let held: bool = master.raw().exists("k").unwrap();
    assert!(!held);
}
