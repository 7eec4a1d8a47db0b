//! Faults that must not turn into false errors: a release whose reply was
//! lost with its connection, and a server that refuses for a moment
//! (LOADING while it reads its data set).

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{wait_until, Server};
use redis::Commands;
use redislock::{Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

/// The server with this process id stopped (SIGSTOP) until this is dropped
/// (SIGCONT): its port still takes connections and requests, but nothing
/// is read or answered meanwhile.
struct Stopped(libc::pid_t);

impl Stopped {
    /// Returns once the process is stopped (state T): a request that
    /// reached it between the signal and the stop would be read early.
    fn new(pid: libc::pid_t) -> Stopped {
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        let stopped = Stopped(pid);
        common::wait_stopped(pid);
        stopped
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// The connections to the server on `port` (by their client's address)
/// that hold requests it has not read yet: its ends' receive queues, as
/// /proc/net/tcp shows them.
fn unread_connections(port: u16) -> Vec<String> {
    let ours = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .expect("/proc/net/tcp")
        .lines()
        .skip(1)
        .filter_map(|line| {
            // sl local remote state tx_queue:rx_queue ...
            let f: Vec<&str> = line.split_whitespace().collect();
            let unread = f.len() > 4
                && f[1].ends_with(&ours)
                && f[3] == "01"
                && f[4]
                    .split_once(':')
                    .and_then(|(_, rx)| u64::from_str_radix(rx, 16).ok())
                    .is_some_and(|rx| rx > 0);
            unread.then(|| f[2].to_string())
        })
        .collect()
}

/// How many connections to the server on `port` hold unread requests,
/// leaving out those that did at `before` (a connection being closed may
/// still hold its last bytes, a TLS alert).
fn new_unread(port: u16, before: &[String]) -> usize {
    unread_connections(port)
        .iter()
        .filter(|c| !before.contains(c))
        .count()
}

#[test]
fn a_release_whose_reply_was_cut_is_unconfirmed_not_not_owner() {
    let srv = Server::start();
    let pid = srv.pid();
    // A command timeout that the stop below never reaches.
    let client = Client::builder(&srv.url())
        .command_timeout(30 * S)
        .build()
        .unwrap();
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
        // Connected before the stop: it must not wait for the server.
        let mut killer = srv.raw();
        // The server waits for requests once more (a PING on another
        // connection) before it stops: its level-triggered epoll lists a
        // connection that just sent a request until the next wait, and a
        // connection listed early would be read first.
        let _: String = redis::cmd("PING").query(&mut srv.raw()).unwrap();
        // Stop the server; queue the release; then a CLIENT KILL behind
        // it. Continued, the server reads both in the order they came, so
        // the release runs and its connection is closed before the reply
        // leaves.
        let stopped = Stopped::new(pid);
        let before = unread_connections(srv.port);
        let release = thread::spawn(move || lock.release());
        wait_until("the release to reach the stopped server", 10 * S, || {
            new_unread(srv.port, &before) == 1
        });
        let kill = thread::spawn(move || {
            let _: () = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .arg("SKIPME")
                .arg("yes")
                .query(&mut killer)
                .unwrap();
            killer
        });
        wait_until("the CLIENT KILL to queue behind it", 10 * S, || {
            new_unread(srv.port, &before) == 2
        });
        drop(stopped);
        let mut killer = kill.join().unwrap();
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

/// The scripts the server refused while loading (LOADING), from
/// commandstats' `rejected_calls`.
fn scripts_refused(srv: &Server) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut srv.raw())
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_eval:") || l.starts_with("cmdstat_evalsha:"))
        .filter_map(|l| l.split("rejected_calls=").nth(1))
        .map(|v| v.split(',').next().unwrap().parse::<i64>().unwrap())
        .sum()
}

#[test]
fn a_loading_server_is_waited_for_within_the_budget() {
    let mut srv = Server::start_with(&["--enable-debug-command", "local"]);
    let mut raw = srv.raw();
    // 20,000 keys loaded at 100 µs each: at least 2 s of LOADING, in which
    // the two acquisitions below start.
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
    // A waiting acquisition gets the lock once loading ends, within its
    // budget, after the server refused its script (LOADING) at least once.
    let refused = scripts_refused(&srv);
    let client = Client::open(&srv.url()).unwrap();
    let lock = client
        .acquire("boot", 10 * S, Wait::Timeout(20 * S))
        .unwrap();
    let refused_since = scripts_refused(&srv) - refused;
    assert!(
        refused_since > 0,
        "loading was over before the acquisition: the test proves nothing"
    );
    lock.release().unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut srv.raw()).unwrap();
    assert!(n >= 20_000);
}

extern "C" fn on_signal(_: libc::c_int) {}

/// `redislock run ARGS…` with stderr piped.
fn run_cli(args: &[&str]) -> std::process::Child {
    std::process::Command::new(common::redislock_bin())
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
/// 20 ms until it returns (or `during` has passed); its result.
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
    let srv = Server::start();
    let client = Client::builder(&srv.url())
        .command_timeout(30 * S)
        .build()
        .unwrap();
    ride_out_signals(&srv, client);
}

#[test]
fn signals_never_break_a_wait_an_acquire_or_a_release_over_tls() {
    let srv = Server::start_tls();
    let ca = std::fs::read(&srv.tls.as_ref().unwrap().ca).unwrap();
    let client = Client::builder(&srv.url())
        .tls_root_cert(ca)
        .command_timeout(30 * S)
        .build()
        .unwrap();
    ride_out_signals(&srv, client);
}

#[test]
fn signals_never_break_a_wait_an_acquire_or_a_release_in_a_cluster() {
    let servers = common::start_cluster(3);
    let client = Client::builder(&common::cluster_url(&servers))
        .command_timeout(30 * S)
        .build()
        .unwrap();
    // The node serving the name's slot (the others answer MOVED).
    let node = servers
        .iter()
        .find(|s| s.raw().get::<_, Option<Vec<u8>>>("sig").is_ok())
        .unwrap();
    ride_out_signals(node, client);
}

/// `f` on a thread of its own under `sig` (see [`under_signals`]) while the
/// server (`srv`, process `pid`) is stopped: from before `f` sends its
/// request until that request has waited there 200 ms. Its result.
fn held_up<T: Send + 'static>(
    srv: &Server,
    pid: libc::pid_t,
    sig: libc::c_int,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let stopped = Stopped::new(pid);
    let port = srv.port;
    let before = unread_connections(port);
    let resume = thread::spawn(move || {
        let t = Instant::now();
        let mut arrived = false;
        while !arrived && t.elapsed() < 10 * S {
            thread::sleep(Duration::from_millis(10));
            arrived = new_unread(port, &before) > 0;
        }
        // Signals arrive meanwhile; then the reply comes.
        thread::sleep(S / 5);
        drop(stopped);
        arrived
    });
    let (out, took) = under_signals(sig, 30 * S, move || {
        let t = Instant::now();
        let out = f();
        (out, t.elapsed())
    });
    assert!(
        resume.join().unwrap(),
        "the request never reached the stopped server"
    );
    // It sent its request, then waited for the server to go on.
    assert!(took >= S / 5, "the reply was not held up: it took {took:?}");
    out
}

/// A wait, a release and an acquisition of `client` (on `srv`, the server
/// that holds the name) under signals with handlers, with and without
/// SA_RESTART. The client's command timeout outlasts the server's stops.
fn ride_out_signals(srv: &Server, client: Client) {
    let pid = srv.pid();
    for (sig, restart) in [(libc::SIGUSR1, false), (libc::SIGUSR2, true)] {
        install_handler(sig, restart);
        // A wait: the waiter sits in its subscriber while signals arrive.
        let holder = client.acquire("sig", 30 * S, Wait::TryOnce).unwrap();
        let watch = client.clone();
        let releaser = thread::spawn(move || {
            wait_until("the waiter to queue", 10 * S, || {
                watch.stats().waiters_now == 1
            });
            // Signals reach the queued waiter meanwhile.
            thread::sleep(S / 2);
            holder.release().unwrap();
        });
        let c = client.clone();
        let got = under_signals(sig, 30 * S, move || {
            c.acquire("sig", 10 * S, Wait::Timeout(20 * S))
        });
        releaser.join().unwrap();
        let lock = got.unwrap_or_else(|e| panic!("wait, SA_RESTART {restart}: {e}"));
        // A release and an acquisition whose replies are held up by a
        // stopped server while signals arrive.
        let released = held_up(srv, pid, sig, move || lock.release());
        // Its true outcome: released, not "unconfirmed" nor a connection
        // error (the reply was on its way all along).
        released.unwrap_or_else(|e| panic!("release, SA_RESTART {restart}: {e}"));
        let held: Option<Vec<u8>> = srv.raw().get("sig").unwrap();
        assert_eq!(held, None);
        let c = client.clone();
        let taken = held_up(srv, pid, sig, move || {
            c.acquire("sig", 10 * S, Wait::TryOnce)
        });
        let lock = taken.unwrap_or_else(|e| panic!("acquire, SA_RESTART {restart}: {e}"));
        let held: Option<Vec<u8>> = srv.raw().get("sig").unwrap();
        assert_eq!(held.as_deref(), Some(lock.token()));
        assert!(lock.fence().unwrap() > 0);
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
    // continued five times, then writes resume. The command ends when told
    // to, once writes are paused (on its own after 30 s).
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "for i in $(seq 1500); do [ -e {} ] && break; sleep 0.02; done",
        go.display()
    );
    let mut runner = run_cli(&["--url", &srv.url(), "released", "--", "sh", "-c", &script]);
    common::wait_until("the runner holds the lock", 10 * S, || {
        client.inspect("released").unwrap().holder.is_some()
    });
    let mut raw = srv.raw();
    common::pause_writes(&mut raw, true);
    std::fs::write(&go, "").unwrap();
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
