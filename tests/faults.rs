//! Faults that must not turn into false errors: a release whose reply was
//! lost with its connection, and a server that refuses for a moment
//! (LOADING while it reads its data set).

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::Server;
use redis::Commands;
use redislock::{Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

#[test]
fn a_release_whose_reply_was_cut_is_unconfirmed_not_not_owner() {
    let srv = Server::start_with(&["--enable-debug-command", "local"]);
    let client = Client::open(&srv.url()).unwrap();
    // The scripts are loaded (a release that meets NOSCRIPT first would
    // lose only that refusal).
    client
        .acquire("cut", S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    for round in 0..3 {
        // The acquisition leaves its connection in the pool; the release
        // takes it again.
        let lock = client.acquire("cut", 10 * S, Wait::TryOnce).unwrap();
        let url = srv.url();
        // Connected before the stall: it must not wait for the server.
        let mut killer = srv.raw();
        // Stall the server; queue the release; then a CLIENT KILL that the
        // server reads after it, so the release runs and its connection is
        // closed before the reply leaves.
        let stall = thread::spawn(move || {
            let mut raw = redis::Client::open(url).unwrap().get_connection().unwrap();
            let _ = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg("0.6")
                .query::<()>(&mut raw);
        });
        thread::sleep(S / 5);
        let release = thread::spawn(move || lock.release());
        thread::sleep(S / 5);
        let _: () = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query(&mut killer)
            .unwrap();
        stall.join().unwrap();
        let e = release.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unconfirmed, "round {round}: {e}");
        assert!(e.to_string().contains("unconfirmed"), "{e}");
        // It did take effect: the lock is free.
        let held: Option<String> = killer.get("cut").unwrap();
        assert_eq!(held, None);
    }
    // A lock that really expired is still NotOwner.
    let lock = client
        .acquire("cut", Duration::from_millis(100), Wait::TryOnce)
        .unwrap();
    thread::sleep(S / 4);
    assert_eq!(lock.release().unwrap_err().kind(), ErrorKind::NotOwner);
}

#[test]
fn a_loading_server_is_waited_for_within_the_budget() {
    let mut srv = Server::start_with(&["--enable-debug-command", "local"]);
    let mut raw = srv.raw();
    // 20,000 keys loaded at 100 µs each: about 2 s of LOADING.
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(20_000)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SAVE").query(&mut raw).unwrap();
    // Events (and so LOADING replies) between every KiB read.
    srv.restart_with(&[
        "--key-load-delay",
        "100",
        "--loading-process-events-interval-bytes",
        "1024",
    ]);
    let started = Instant::now();
    // A try-once acquisition with a short command timeout: the state is named.
    let impatient = Client::builder(&srv.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let e = impatient
        .acquire("boot", 10 * S, Wait::TryOnce)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    assert!(e.to_string().contains("LOADING"), "{e}");
    // A waiting acquisition gets the lock once loading ends, within its budget.
    let client = Client::open(&srv.url()).unwrap();
    let lock = client
        .acquire("boot", 10 * S, Wait::Timeout(20 * S))
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited > S / 2,
        "loading took only {waited:?}: the test proves nothing"
    );
    lock.release().unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut srv.raw()).unwrap();
    assert!(n >= 20_000);
}
