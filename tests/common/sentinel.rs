//! Sentinel deployments for the tests: a master, its replica and three
//! sentinels on free loopback ports.

use super::{wait_until, Server, Tls};

const S: std::time::Duration = std::time::Duration::from_secs(1);

pub fn info(srv: &Server, section: &str) -> String {
    srv.query(redis::cmd("INFO").arg(section))
        .unwrap_or_default()
}

pub fn master_port(sentinel: &Server) -> Option<u16> {
    let r: Option<(String, u16)> = sentinel
        .query(
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg("mymaster"),
        )
        .ok()?;
    r.map(|(_, p)| p)
}

/// `127.0.0.1:port,…` of `sentinels`.
pub fn hosts(sentinels: &[Server]) -> String {
    let hosts: Vec<String> = sentinels
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port))
        .collect();
    hosts.join(",")
}

/// A master, its replica and three sentinels that know both and each
/// other, all over TLS with the certificate of `tls` if given.
pub fn deployment(tls: Option<&Tls>) -> (Server, Server, Vec<Server>) {
    deployment_with(tls, 2000)
}

/// [`deployment`] with the sentinels' `down-after-milliseconds`.
pub fn deployment_with(tls: Option<&Tls>, down_after_ms: u64) -> (Server, Server, Vec<Server>) {
    let (master, replica) = match tls {
        Some(tls) => {
            let master = Server::start_tls_shared(tls, &["--tls-replication", "yes"]);
            let port = master.port.to_string();
            let replica = Server::start_tls_shared(
                tls,
                &[
                    "--tls-replication",
                    "yes",
                    "--replicaof",
                    "127.0.0.1",
                    &port,
                ],
            );
            (master, replica)
        }
        None => {
            let master = Server::start();
            let port = master.port.to_string();
            (
                master,
                Server::start_with(&["--replicaof", "127.0.0.1", &port]),
            )
        }
    };
    wait_until("replication", 30 * S, || {
        info(&replica, "replication").contains("master_link_status:up")
    });
    // With 2 s (`deployment`), a busy machine's pauses never fail over a
    // live master, and a dead one is soon replaced.
    let conf = format!(
        "sentinel monitor mymaster 127.0.0.1 {} 2\n\
         sentinel down-after-milliseconds mymaster {down_after_ms}\n\
         sentinel failover-timeout mymaster 4000",
        master.port
    );
    let sentinels: Vec<Server> = (0..3)
        .map(|_| match tls {
            Some(tls) => Server::start_sentinel_tls(tls, &conf),
            None => Server::start_sentinel(&conf),
        })
        .collect();
    // A sentinel learns of the replica from the master's INFO, asked every
    // 10 s, and of the other sentinels from their hellos, every 2 s: about
    // 12 s at worst when idle, and a loaded machine stretches it.
    wait_until(
        "sentinels to find each other and the replica",
        60 * S,
        || {
            sentinels.iter().all(|s| {
                let m: Vec<String> = s
                    .query(redis::cmd("SENTINEL").arg("master").arg("mymaster"))
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
    (master, replica, sentinels)
}

/// `SENTINEL FAILOVER mymaster`, sent to `sentinel` (which then leads it).
pub fn fail_over(sentinel: &Server) {
    let _: () = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg("mymaster")
        .query(&mut sentinel.raw())
        .unwrap();
}

/// Wait until the replica acknowledged every write of `master` (WAIT), so
/// that what a new master will hold after a failover is known.
pub fn replicated(master: &Server) {
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query(&mut master.raw())
        .unwrap();
    assert_eq!(acked, 1, "the replica did not acknowledge the writes");
}
