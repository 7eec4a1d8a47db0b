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

extern "C" fn on_signal(_: libc::c_int) {}

/// `redislock run ARGS…` with stderr piped.
fn run_cli(args: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_redislock"))
        .arg("run")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A handler for `sig` that does nothing, installed with or without
/// SA_RESTART (Python's own handlers go without it).
fn install_handler(sig: libc::c_int, restart: bool) {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
    }
}

/// Run `f` on a thread of its own while `sig` is sent to that thread every
/// 20 ms for `during`; its result.
fn under_signals<T: Send + 'static>(
    sig: libc::c_int,
    during: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = thread::spawn(move || {
        tx.send(unsafe { libc::pthread_self() }).unwrap();
        f()
    });
    let tid = rx.recv().unwrap();
    let end = Instant::now() + during;
    while Instant::now() < end && !h.is_finished() {
        unsafe { libc::pthread_kill(tid, sig) };
        thread::sleep(Duration::from_millis(20));
    }
    h.join().unwrap()
}

#[test]
fn signals_never_break_a_wait_an_acquire_or_a_release() {
    let srv = Server::start_with(&["--enable-debug-command", "local"]);
    ride_out_signals(&srv, Client::open(&srv.url()).unwrap());
}

#[test]
fn signals_never_break_a_wait_an_acquire_or_a_release_over_tls() {
    let srv = Server::start_tls_with(&["--enable-debug-command", "local"]);
    let ca = std::fs::read(&srv.tls.as_ref().unwrap().ca).unwrap();
    let client = Client::builder(&srv.url())
        .tls_root_cert(ca)
        .build()
        .unwrap();
    ride_out_signals(&srv, client);
}

#[test]
fn signals_never_break_a_wait_an_acquire_or_a_release_in_a_cluster() {
    let servers = common::start_cluster_with(3, &["--enable-debug-command", "local"]);
    let client = Client::open(&common::cluster_url(&servers)).unwrap();
    // The node serving the name's slot (the others answer MOVED).
    let node = servers
        .iter()
        .find(|s| s.raw().get::<_, Option<Vec<u8>>>("sig").is_ok())
        .unwrap();
    ride_out_signals(node, client);
}

/// A wait, a release and an acquisition of `client` (on `srv`, the server
/// that holds the name) under
/// signals with handlers, with and without SA_RESTART.
fn ride_out_signals(srv: &Server, client: Client) {
    for (sig, restart) in [(libc::SIGUSR1, false), (libc::SIGUSR2, true)] {
        install_handler(sig, restart);
        // A wait: the waiter sits in its subscriber while signals arrive.
        let holder = client.acquire("sig", 10 * S, Wait::TryOnce).unwrap();
        let releaser = thread::spawn(move || {
            thread::sleep(S / 2);
            holder.release().unwrap();
        });
        let c = client.clone();
        let got = under_signals(sig, S, move || {
            c.acquire("sig", 10 * S, Wait::Timeout(20 * S))
        });
        releaser.join().unwrap();
        let lock = got.unwrap_or_else(|e| panic!("wait, SA_RESTART {restart}: {e}"));
        // A release and an acquisition whose replies are held up by a
        // stalled server while signals arrive.
        let mut raws = [srv.raw(), srv.raw()].into_iter();
        let mut stall = move || {
            let mut raw = raws.next().unwrap();
            move || {
                let _: () = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg("0.4")
                    .query(&mut raw)
                    .unwrap();
            }
        };
        let stalled = thread::spawn(stall());
        thread::sleep(S / 10);
        let released = under_signals(sig, S / 2, move || lock.release());
        stalled.join().unwrap();
        // Its true outcome: released, not "unconfirmed" nor a connection
        // error (the reply was on its way all along).
        released.unwrap_or_else(|e| panic!("release, SA_RESTART {restart}: {e}"));
        let held: Option<Vec<u8>> = srv.raw().get("sig").unwrap();
        assert_eq!(held, None);
        let stalled = thread::spawn(stall());
        thread::sleep(S / 10);
        let c = client.clone();
        let taken = under_signals(sig, S / 2, move || c.acquire("sig", 10 * S, Wait::TryOnce));
        stalled.join().unwrap();
        let lock = taken.unwrap_or_else(|e| panic!("acquire, SA_RESTART {restart}: {e}"));
        let held: Option<Vec<u8>> = srv.raw().get("sig").unwrap();
        assert_eq!(held.as_deref(), Some(lock.token()));
        assert!(lock.fence() > 0);
        lock.release().unwrap();
    }
}

#[test]
fn a_stopped_and_continued_waiter_still_gets_the_lock() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let holder = client.acquire("stopped", 30 * S, Wait::TryOnce).unwrap();
    let mut waiter = run_cli(&[
        "--url",
        &srv.url(),
        "--wait",
        "30s",
        "stopped",
        "--",
        "true",
    ]);
    common::wait_until("the waiter queued", 10 * S, || {
        client.inspect("stopped").unwrap().waiters == 1
    });
    common::stop_and_continue(&waiter, Duration::from_millis(50));
    holder.release().unwrap();
    let status = waiter.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(waiter.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{status}: {err}");
}

#[test]
fn a_stopped_and_continued_releaser_gets_its_true_outcome() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    // Writes are paused, so the release the runner sends when its command
    // ends waits for its reply; meanwhile the runner is stopped and
    // continued five times, then writes resume.
    let mut runner = run_cli(&["--url", &srv.url(), "released", "--", "sleep", "0.2"]);
    common::wait_until("the runner holds the lock", 10 * S, || {
        client.inspect("released").unwrap().holder.is_some()
    });
    let mut raw = srv.raw();
    common::pause_writes(&mut raw, true);
    common::wait_until("the release is sent and held up", 10 * S, || {
        !common::held_up_scripts(&mut raw).is_empty()
    });
    let before = common::held_up_scripts(&mut raw);
    common::stop_and_continue(&runner, Duration::from_millis(40));
    // Still the same connection waiting for the same reply: the release
    // was not given up and sent again.
    assert_eq!(common::held_up_scripts(&mut raw), before);
    common::pause_writes(&mut raw, false);
    let status = runner.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(runner.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{status}: {err}");
    // The release reported no error (the CLI prints one if it does) and
    // took effect.
    assert_eq!(err, "", "the release said: {err}");
    let held: Option<Vec<u8>> = srv.raw().get("released").unwrap();
    assert_eq!(held, None);
}
