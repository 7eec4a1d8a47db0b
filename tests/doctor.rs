//! `Client::doctor` and `redislock doctor`, against servers configured each
//! way: eviction, scripting and pub/sub refused by ACL, TIME renamed,
//! persistence, replicas with and without min-replicas-to-write, a replica
//! named as the server, maxclients headroom, cluster state, Sentinel quorum,
//! Redlock nodes down, a slow round trip, and an unreachable server (exit
//! 69). Nothing is left on the server.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use common::{cluster_url, start_cluster, wait_until, Server};
use redislock::{Client, Finding, Report, Severity};

const S: Duration = Duration::from_secs(1);

fn doctor(url: &str) -> Report {
    Client::open(url)
        .unwrap()
        .doctor()
        .unwrap_or_else(|e| panic!("doctor on {url}: {e}"))
}

/// The findings of one check.
fn of<'a>(r: &'a Report, check: &str) -> Vec<&'a Finding> {
    r.findings.iter().filter(|f| f.check == check).collect()
}

/// The one finding of `check` (on a single server), which must have
/// `severity`.
fn expect(r: &Report, check: &str, severity: Severity) -> Finding {
    let found = of(r, check);
    assert_eq!(found.len(), 1, "one {check} finding expected in:\n{r}");
    assert_eq!(found[0].severity, severity, "{check} in:\n{r}");
    found[0].clone()
}

/// `redislock doctor --url URL`: the exit code and stdout, stderr.
fn cli(url: &str) -> (i32, String, String) {
    let out = Command::new(common::redislock_bin())
        .args(["doctor", "--url", url])
        .env_remove("REDISLOCK_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().expect("killed by a signal"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_default_server_is_safe_and_nothing_is_left_on_it() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let r = doctor(&srv.url());
    assert!(r.is_safe(), "{r}");
    for check in [
        "server",
        "eviction",
        "scripting",
        "time",
        "acl",
        "pubsub",
        "clients",
        "latency",
        "lock-cycle",
    ] {
        expect(&r, check, Severity::Ok);
    }
    // The harness runs servers without persistence.
    let p = expect(&r, "persistence", Severity::Warning);
    assert!(p.message.contains("persistence is off"), "{}", p.message);
    assert!(p.fix.contains("appendonly yes"), "{}", p.fix);
    assert!(of(&r, "replication").is_empty(), "no replicas: {r}");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut raw).unwrap();
    assert!(keys.is_empty(), "doctor left {keys:?}");

    let (code, out, err) = cli(&srv.url());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("verdict: safe for locks, 1 warning"), "{out}");
    assert!(out.contains("warning persistence"), "{out}");
}

#[test]
fn eviction_policies_that_can_evict_a_lock_are_unsafe() {
    for policy in [
        "allkeys-lru",
        "volatile-lru",
        "volatile-ttl",
        "allkeys-random",
    ] {
        let srv = Server::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", policy]);
        let r = doctor(&srv.url());
        let e = expect(&r, "eviction", Severity::Unsafe);
        assert!(e.message.contains(policy), "{}", e.message);
        assert!(e.message.contains("second owner"), "{}", e.message);
        assert!(e.fix.contains("noeviction"), "{}", e.fix);
        assert!(!r.is_safe());
        let (code, out, _) = cli(&srv.url());
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("UNSAFE  eviction"), "{out}");
    }
    // Without maxmemory nothing is evicted yet: a warning.
    let srv = Server::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let r = doctor(&srv.url());
    expect(&r, "eviction", Severity::Warning);
    assert!(r.is_safe(), "{r}");
    assert_eq!(cli(&srv.url()).0, 0);
}

#[test]
fn noeviction_near_maxmemory_warns_that_acquires_will_fail() {
    let srv = Server::start_with(&["--maxmemory", "2mb", "--maxmemory-policy", "noeviction"]);
    let mut raw = srv.raw();
    // Fill to the limit: the last writes are refused with OOM.
    let blob = vec![b'x'; 64 * 1024];
    for i in 0..64 {
        if redis::cmd("SET")
            .arg(format!("fill:{i}"))
            .arg(&blob)
            .query::<()>(&mut raw)
            .is_err()
        {
            break;
        }
    }
    let r = doctor(&srv.url());
    expect(&r, "eviction", Severity::Ok);
    let m = expect(&r, "memory", Severity::Warning);
    assert!(m.message.contains("OOM"), "{}", m.message);
}

#[test]
fn time_renamed_is_unsafe_for_fences() {
    let srv = Server::start_with(&["--rename-command", "TIME", ""]);
    let r = doctor(&srv.url());
    let t = expect(&r, "time", Severity::Unsafe);
    assert!(t.message.contains("go backwards"), "{}", t.message);
    assert!(t.fix.contains("rename-command TIME"), "{}", t.fix);
    // Locks themselves still work.
    expect(&r, "lock-cycle", Severity::Ok);
    assert_eq!(cli(&srv.url()).0, 1);
}

#[test]
fn scripting_or_pubsub_refused_by_acl_is_unsafe() {
    let srv = Server::start();
    let mut raw = srv.raw();
    for (user, rules) in [
        (
            "noscript",
            vec!["on", ">pw", "~*", "&*", "+@all", "-eval", "-evalsha"],
        ),
        (
            "nochannels",
            vec!["on", ">pw", "~*", "resetchannels", "+@all"],
        ),
    ] {
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg(&rules)
            .query::<()>(&mut raw)
            .unwrap();
    }
    let url = |user: &str| format!("redis://{user}:pw@127.0.0.1:{}", srv.port);

    let r = doctor(&url("noscript"));
    let s = expect(&r, "scripting", Severity::Unsafe);
    assert!(s.message.contains("ACL"), "{}", s.message);
    assert!(s.fix.contains("+eval"), "{}", s.fix);
    expect(&r, "lock-cycle", Severity::Unsafe);
    let (code, out, _) = cli(&url("noscript"));
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains(":pw@"), "a password in the output: {out}");

    let r = doctor(&url("nochannels"));
    expect(&r, "scripting", Severity::Ok);
    let p = expect(&r, "pubsub", Severity::Unsafe);
    assert!(p.fix.contains("&redislock:w:*"), "{}", p.fix);
    assert_eq!(cli(&url("nochannels")).0, 1);
}

/// Each permission an ACL user lacks is named: EVALSHA or EVAL (both when
/// both), PUBLISH, SUBSCRIBE, and a command the scripts run (LPOP). The
/// lock cycle of a user whose release is refused leaves no key.
#[test]
fn each_missing_permission_is_named() {
    let srv = Server::start();
    let mut raw = srv.raw();
    for (user, minus) in [
        ("noevalsha", vec!["-evalsha"]),
        ("noscript", vec!["-eval", "-evalsha"]),
        ("nopublish", vec!["-publish"]),
        ("nosubscribe", vec!["-subscribe"]),
        ("nolpop", vec!["-lpop"]),
    ] {
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg(&["on", ">pw", "~*", "&*", "+@all"][..])
            .arg(&minus)
            .query::<()>(&mut raw)
            .unwrap();
    }
    let url = |user: &str| format!("redis://{user}:pw@127.0.0.1:{}", srv.port);

    let r = doctor(&url("noevalsha"));
    let s = expect(&r, "scripting", Severity::Unsafe);
    assert!(
        s.message
            .starts_with("EVALSHA is refused to this user by ACL"),
        "{}",
        s.message
    );
    assert!(s.message.contains("NOPERM"), "{}", s.message);
    assert!(
        s.fix.contains("+evalsha") && !s.fix.contains("+eval "),
        "{}",
        s.fix
    );
    let c = expect(&r, "lock-cycle", Severity::Unsafe);
    assert!(c.message.contains("evalsha"), "{}", c.message);

    let r = doctor(&url("noscript"));
    let s = expect(&r, "scripting", Severity::Unsafe);
    assert!(
        s.message
            .starts_with("EVAL and EVALSHA are refused to this user by ACL"),
        "{}",
        s.message
    );
    assert!(s.fix.contains("+eval +evalsha"), "{}", s.fix);
    let c = expect(&r, "lock-cycle", Severity::Unsafe);
    assert!(c.message.contains("deleted with DEL"), "{}", c.message);
    // The plain SET of its acquire was taken, the release refused: the key
    // was deleted all the same.
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("redislock:*")
        .query(&mut raw)
        .unwrap();
    assert!(left.is_empty(), "doctor left {left:?}");

    let r = doctor(&url("nopublish"));
    let p = expect(&r, "pubsub", Severity::Unsafe);
    assert!(
        p.message
            .starts_with("PUBLISH on a waiters' channel is refused"),
        "{}",
        p.message
    );
    assert!(p.message.contains("hand a lock over"), "{}", p.message);
    assert!(
        p.fix.contains("+publish") && !p.fix.contains("+subscribe"),
        "{}",
        p.fix
    );
    expect(&r, "acl", Severity::Ok);
    expect(&r, "lock-cycle", Severity::Ok);

    let r = doctor(&url("nosubscribe"));
    let p = expect(&r, "pubsub", Severity::Unsafe);
    assert!(
        p.message
            .starts_with("SUBSCRIBE on a waiters' channel is refused"),
        "{}",
        p.message
    );
    assert!(p.message.contains("cannot wait"), "{}", p.message);
    assert!(p.fix.contains("+subscribe"), "{}", p.fix);
    expect(&r, "lock-cycle", Severity::Ok);

    let r = doctor(&url("nolpop"));
    expect(&r, "scripting", Severity::Ok);
    expect(&r, "pubsub", Severity::Ok);
    let a = expect(&r, "acl", Severity::Unsafe);
    assert!(
        a.message.starts_with("this user may not run LPOP on"),
        "{}",
        a.message
    );
    assert!(a.fix.contains("+lpop"), "{}", a.fix);

    for user in [
        "noevalsha",
        "noscript",
        "nopublish",
        "nosubscribe",
        "nolpop",
    ] {
        let (code, out, _) = cli(&url(user));
        assert_eq!(code, 1, "{user}: {out}");
        assert!(!out.contains(":pw@"), "a password in the output: {out}");
    }
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut raw).unwrap();
    assert!(left.is_empty(), "doctor left {left:?}");
}

#[test]
fn persistence_on_is_ok_and_snapshots_only_warn() {
    let aof = Server::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let p = expect(&doctor(&aof.url()), "persistence", Severity::Ok);
    assert!(p.message.contains("everysec"), "{}", p.message);

    let rdb = Server::start_with(&["--save", "60 1"]);
    let p = expect(&doctor(&rdb.url()), "persistence", Severity::Warning);
    assert!(p.message.contains("RDB snapshots only"), "{}", p.message);
}

#[test]
fn replicas_without_min_replicas_warn_and_a_replica_as_the_server_is_unsafe() {
    let master = Server::start();
    let port = master.port.to_string();
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut raw = master.raw();
    wait_until("the replica to connect", 20 * S, || {
        common::info_field(&mut raw, "replication", "connected_slaves") == 1
    });

    let r = doctor(&master.url());
    let w = expect(&r, "replication", Severity::Warning);
    assert!(
        w.message.contains("min-replicas-to-write 0"),
        "{}",
        w.message
    );
    assert!(w.fix.contains("wait_replicas"), "{}", w.fix);
    assert!(r.is_safe(), "a failover risk is a warning: {r}");

    // The client's own wait_replicas covers it.
    let waiting = format!("{}?wait_replicas=1&wait_timeout=500ms", master.url());
    expect(&doctor(&waiting), "replication", Severity::Ok);

    redis::cmd("CONFIG")
        .arg("SET")
        .arg("min-replicas-to-write")
        .arg(1)
        .query::<()>(&mut raw)
        .unwrap();
    let ok = expect(&doctor(&master.url()), "replication", Severity::Ok);
    assert!(
        ok.message.contains("min-replicas-to-write 1"),
        "{}",
        ok.message
    );

    let r = doctor(&replica.url());
    let role = expect(&r, "role", Severity::Unsafe);
    assert!(role.message.contains(&port), "{}", role.message);
    assert_eq!(cli(&replica.url()).0, 1);
}

#[test]
fn maxclients_headroom_is_checked() {
    let srv = Server::start_with(&["--maxclients", "10"]);
    let held: Vec<redis::Connection> = (0..8).map(|_| srv.raw()).collect();
    let r = doctor(&srv.url());
    let c = expect(&r, "clients", Severity::Warning);
    assert!(c.message.contains("of maxclients 10"), "{}", c.message);
    drop(held);
}

#[test]
fn a_cluster_is_checked_on_every_master_and_a_failed_state_is_unsafe() {
    let nodes = start_cluster(3);
    let url = cluster_url(&nodes);
    let r = doctor(&url);
    let cluster = of(&r, "cluster");
    assert_eq!(cluster.len(), 3, "one per master: {r}");
    assert!(cluster.iter().all(|f| f.severity == Severity::Ok), "{r}");
    assert_eq!(of(&r, "eviction").len(), 3, "{r}");
    expect(&r, "lock-cycle", Severity::Ok);
    assert!(r.is_safe(), "{r}");

    // A node that serves fewer slots than assigned: the cluster is down as
    // it sees it (cluster-require-full-coverage).
    let mut raw = nodes[0].raw();
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut raw).unwrap();
    let mine = slots
        .iter()
        .find_map(|range| match range {
            redis::Value::Array(parts) => match (&parts[0], &parts[2]) {
                (redis::Value::Int(first), redis::Value::Array(master))
                    if master.get(1) == Some(&redis::Value::Int(i64::from(nodes[0].port))) =>
                {
                    Some(*first)
                }
                _ => None,
            },
            _ => None,
        })
        .expect("node 0 serves a slot");
    redis::cmd("CLUSTER")
        .arg("DELSLOTS")
        .arg(mine)
        .query::<()>(&mut raw)
        .unwrap();
    wait_until("node 0 to see the cluster down", 20 * S, || {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut raw).unwrap();
        info.contains("cluster_state:fail")
    });
    let r = doctor(&url);
    let failed: Vec<&Finding> = of(&r, "cluster")
        .into_iter()
        .filter(|f| f.severity == Severity::Unsafe)
        .collect();
    assert!(
        failed
            .iter()
            .any(|f| f.server.ends_with(&nodes[0].port.to_string())),
        "{r}"
    );
    assert!(failed[0].message.contains("cluster_state:fail"), "{r}");
    assert_eq!(cli(&url).0, 1);
}

#[test]
fn sentinel_the_master_and_the_quorum_are_checked() {
    let master = Server::start();
    let conf = format!(
        "sentinel monitor mymaster 127.0.0.1 {} 2\n\
         sentinel down-after-milliseconds mymaster 1000",
        master.port
    );
    let mut sentinels: Vec<Server> = (0..3).map(|_| Server::start_sentinel(&conf)).collect();
    let hosts: Vec<String> = sentinels
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port))
        .collect();
    let url = format!("redis+sentinel://{}/mymaster", hosts.join(","));
    wait_until("the sentinels to agree on a quorum", 30 * S, || {
        Client::open(&url)
            .unwrap()
            .doctor()
            .is_ok_and(|r| of(&r, "sentinel").first().map(|f| f.severity) == Some(Severity::Ok))
    });
    let r = doctor(&url);
    let s = expect(&r, "sentinel", Severity::Ok);
    assert!(s.message.contains("3 of 3"), "{}", s.message);
    expect(&r, "server", Severity::Ok);
    assert!(
        r.findings
            .iter()
            .any(|f| f.check == "eviction" && f.server.ends_with(&master.port.to_string())),
        "the master is examined: {r}"
    );

    // One sentinel gone: the quorum is a warning (two can still agree).
    sentinels[0].kill();
    let r = doctor(&url);
    let s = expect(&r, "sentinel", Severity::Warning);
    assert!(s.message.contains("2 of 3"), "{}", s.message);
    expect(&r, "lock-cycle", Severity::Ok);
    assert_eq!(cli(&url).0, 0);
    // Two gone: one is left, the master is still found, and the client
    // fails closed: the lock cycle is refused, and the report says why.
    sentinels[1].kill();
    let r = Client::builder(&url)
        .command_timeout(S)
        .build()
        .unwrap()
        .doctor()
        .unwrap();
    let s = expect(&r, "sentinel", Severity::Unsafe);
    assert!(s.message.contains("only 1 of the 3"), "{}", s.message);
    let cycle = expect(&r, "lock-cycle", Severity::Unsafe);
    assert!(
        cycle.message.contains("hears 1 of the 3"),
        "{}",
        cycle.message
    );
    assert_eq!(cli(&url).0, 1);
}

/// The offset in seconds a clock finding gives ("clock 90.002 s ahead").
fn offset_s(f: &Finding) -> f64 {
    let rest = f.message.split("clock ").nth(1).expect("an offset");
    rest.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_clock_far_from_this_hosts_warns_and_redlock_nodes_are_compared() {
    // libfaketime moves the server's clock 90 s ahead.
    let skewed = Server::start_skewed("+90s");
    let r = doctor(&skewed.url());
    let c = expect(&r, "clock", Severity::Warning);
    assert!(c.message.contains("ahead of this host's"), "{}", c.message);
    assert!((offset_s(&c) - 90.0).abs() < 1.0, "{}", c.message);
    assert!(r.is_safe(), "a warning, not unsafe: {r}");
    let plain = Server::start();
    let c = expect(&doctor(&plain.url()), "clock", Severity::Ok);
    assert!(offset_s(&c) < 1.0, "{}", c.message);

    // Redlock: each node's clock, then the nodes against each other.
    let more = Server::start();
    let urls = [plain.url(), more.url(), skewed.url()];
    let r = Client::redlock(&urls).build().unwrap().doctor().unwrap();
    let clocks = of(&r, "clock");
    assert_eq!(clocks.len(), 4, "{r}");
    let spread = clocks
        .iter()
        .find(|f| f.message.contains("the nodes' clocks differ"))
        .unwrap_or_else(|| panic!("no spread finding: {r}"));
    assert_eq!(spread.severity, Severity::Warning, "{r}");
    assert!(
        spread.message.contains(&format!(":{} ahead", skewed.port)),
        "{}",
        spread.message
    );
    // Without the skewed node: no spread finding.
    let r = Client::redlock(&[plain.url(), more.url(), Server::start().url()])
        .build()
        .unwrap()
        .doctor()
        .unwrap();
    assert_eq!(of(&r, "clock").len(), 3, "{r}");
}

/// A master's replicas are read too: a replica 30 s ahead of its master
/// (libfaketime) would expire every lock 30 s early after a failover.
#[test]
fn a_replica_whose_clock_is_off_from_its_masters_warns() {
    // Valkey 8.1 for all three: libfaketime needs it (see start_skewed).
    let valkey = || common::matrix_server("valkey8");
    let master = Server::start_bin(valkey());
    let port = master.port.to_string();
    let replica_of = ["--replicaof", "127.0.0.1", port.as_str()];
    let ahead = Server::start_skewed_with("+30s", &replica_of);
    let right = Server::start_bin_with(valkey(), &replica_of);
    wait_until("both replicas online", 20 * S, || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut master.raw())
            .unwrap();
        info.matches("state=online").count() == 2
    });
    let r = doctor(&master.url());
    let replica = |srv: &Server| {
        of(&r, "clock")
            .into_iter()
            .find(|f| {
                f.server
                    .starts_with(&format!("127.0.0.1:{} (replica of", srv.port))
            })
            .unwrap_or_else(|| panic!("no clock finding for replica {}: {r}", srv.port))
    };
    let a = replica(&ahead);
    assert_eq!(a.severity, Severity::Warning, "{r}");
    assert!(a.message.contains("ahead of its master's"), "{}", a.message);
    assert!(
        a.message.contains("expires that much early"),
        "{}",
        a.message
    );
    assert!((offset_s(a) - 30.0).abs() < 1.0, "{}", a.message);
    let b = replica(&right);
    assert_eq!(b.severity, Severity::Ok, "{r}");
    assert!(offset_s(b) < 1.0, "{}", b.message);
    assert!(r.is_safe(), "warnings, not unsafe: {r}");
}

#[test]
fn redlock_nodes_are_each_examined_and_a_majority_down_is_unreachable() {
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let open = || Client::redlock(&urls).build().unwrap();
    let r = open().doctor().unwrap();
    assert_eq!(of(&r, "scripting").len(), 3, "{r}");
    let size = expect(&r, "redlock", Severity::Ok);
    assert!(size.message.contains("1 may be down"), "{}", size.message);
    expect(&r, "lock-cycle", Severity::Ok);

    servers[0].kill();
    let r = open().doctor().unwrap();
    let reach = expect(&r, "reach", Severity::Warning);
    assert!(reach.server.ends_with(&servers[0].port.to_string()), "{r}");
    assert!(r.is_safe(), "{r}");

    servers[1].kill();
    let e = open().doctor().unwrap_err();
    assert_eq!(e.kind(), redislock::ErrorKind::NoQuorum, "{e}");
}

#[test]
fn an_unreachable_server_exits_69_and_a_bad_url_64() {
    let refusing = common::RefusingPort::new();
    let port = refusing.port;
    let url = format!("redis://127.0.0.1:{port}");
    let e = Client::open(&url).unwrap().doctor().unwrap_err();
    assert_eq!(e.kind(), redislock::ErrorKind::Connection, "{e}");
    let (code, out, err) = cli(&url);
    assert_eq!(code, 69, "{out}{err}");
    assert!(err.contains("cannot reach Redis"), "{err}");
    assert!(out.is_empty(), "{out}");
    let (code, _, err) = cli("mysql://nowhere");
    assert_eq!(code, 64, "{err}");
}

/// A TCP proxy to `port` that holds every chunk for `delay` before passing
/// it on: a slow network, on loopback.
fn slow_proxy(port: u16, delay: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        thread::sleep(delay);
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    proxy_port
}

#[test]
fn a_slow_round_trip_is_a_warning() {
    let srv = Server::start();
    let fast = expect(&doctor(&srv.url()), "latency", Severity::Ok);
    assert!(fast.message.contains("median of 5"), "{}", fast.message);
    let port = slow_proxy(srv.port, Duration::from_millis(15));
    let r = doctor(&format!("redis://127.0.0.1:{port}"));
    let slow = expect(&r, "latency", Severity::Warning);
    assert!(slow.message.contains("2 round trips"), "{}", slow.message);
    assert!(r.is_safe(), "slow is not unsafe: {r}");
}
