//! A client's statistics add up after a scripted run; the lost-lock
//! callback runs once, on the renewal thread, within a TTL of the theft;
//! the debug log explains waits and losses.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use common::{wait_until, Server};
use redislock::{Client, ErrorKind, Stats, Wait, BUCKETS};

const S: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn set(raw: &mut redis::Connection, key: &str, value: &str) {
    let () = redis::cmd("SET").arg(key).arg(value).query(raw).unwrap();
}

/// Wait until `client` has `n` waiters.
fn until_waiters(client: &Client, n: u64) {
    wait_until("the waiters to queue", 10 * S, || {
        client.stats().waiters_now == n
    });
}

/// Let `key`, held by another owner, run out now (PEXPIRE 1 ms): a waiter
/// then finds it free by a retry.
fn expire_now(raw: &mut redis::Connection, key: &str) {
    let set: i64 = redis::cmd("PEXPIRE").arg(key).arg(1).query(raw).unwrap();
    assert_eq!(set, 1, "{key} was not held");
}

/// Hand the lock `key`, held by `client`, to a waiter thread of the same
/// client; returns once the waiter has it and released it.
fn hand_over(client: &Client, key: &str) {
    let holder = client.acquire(key, 30 * S, Wait::TryOnce).unwrap();
    let c = client.clone();
    let k = key.to_string();
    let waiter = thread::spawn(move || {
        let lock = c.acquire(&k, 10 * S, Wait::Timeout(10 * S)).unwrap();
        lock.release().unwrap();
    });
    until_waiters(client, 1);
    holder.release().unwrap();
    waiter.join().unwrap();
}

#[test]
fn a_scripted_run_adds_up() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let other = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    assert_eq!(client.stats(), Stats::default());

    // N = 5 acquisitions at once.
    for _ in 0..5 {
        let lock = client.acquire("free", 10 * S, Wait::TryOnce).unwrap();
        assert_eq!(client.stats().held_now, 1);
        lock.release().unwrap();
    }
    // M = 3 that do not get a lock another client holds.
    let busy = other.acquire("busy", 10 * S, Wait::TryOnce).unwrap();
    let e = client.acquire("busy", 10 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired);
    for _ in 0..2 {
        let e = client
            .acquire("busy", 10 * S, Wait::Timeout(ms(50)))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotAcquired);
    }
    busy.release().unwrap();
    // K = 2 hand-offs between this client's own threads: each is given and
    // received here.
    hand_over(&client, "relay");
    hand_over(&client, "relay");
    // One acquisition after a wait: the other client's lock expires while
    // this one is queued, at least 200 ms after it queued.
    let short = other.acquire("brief", 30 * S, Wait::TryOnce).unwrap();
    let c = client.clone();
    let waiter = thread::spawn(move || c.acquire("brief", 10 * S, Wait::Timeout(10 * S)));
    until_waiters(&client, 1);
    thread::sleep(ms(200)); // the wait's least length, not a synchronisation
    expire_now(&mut raw, "brief");
    let lock = waiter.join().unwrap().unwrap();
    lock.extend(10 * S).unwrap();
    lock.release().unwrap();
    short.forget();
    // One release that finds its lock expired.
    let gone = client.acquire("gone", ms(100), Wait::TryOnce).unwrap();
    thread::sleep(ms(200));
    assert_eq!(gone.release().unwrap_err().kind(), ErrorKind::NotOwner);
    // One lock lost to renewal: another writer takes the key.
    let stolen = client
        .acquire_with(
            "stolen",
            redislock::AcquireOptions::new(3 * S)
                .wait(Wait::TryOnce)
                .auto_renew(true),
        )
        .unwrap();
    set(&mut raw, "stolen", "someone else");
    wait_until("renewal to find the lock lost", 10 * S, || stolen.is_lost());
    assert_eq!(stolen.release().unwrap_err().kind(), ErrorKind::NotOwner);
    // By token: one release that works, one that finds nothing.
    let kept = client.acquire("by-token", 10 * S, Wait::TryOnce).unwrap();
    let token = kept.token().to_vec();
    kept.forget();
    assert!(client.release_token("by-token", &token).unwrap());
    assert!(!client.release_token("by-token", &token).unwrap());

    let s = client.stats();
    // 5 + 1 (relay holders, 2) + ... every acquisition that got a lock:
    // free 5, relay holders 2, brief 1, gone 1, stolen 1, by-token 1.
    assert_eq!(s.acquired_at_once, 5 + 2 + 1 + 1 + 1);
    assert_eq!(s.acquired_handed_over, 2);
    assert_eq!(s.acquired_after_wait, 1);
    assert_eq!(s.acquire_timed_out, 3);
    assert_eq!(s.acquire_errors, 0);
    assert_eq!(s.handoffs_given, 2);
    assert_eq!(s.handoffs_received, 2);
    // free 5, relay waiters 2 (the holders' releases are the hand-offs,
    // which count as releases too: 2), brief 1, by-token 1.
    assert_eq!(s.releases_ok, 5 + 2 + 2 + 1 + 1);
    assert_eq!(s.releases_not_owner, 1 + 1 + 1, "gone, stolen, by-token");
    assert_eq!((s.extends_ok, s.extends_lost), (1, 0));
    assert_eq!((s.renewals_ok, s.renewals_lost), (0, 1));
    assert_eq!(s.locks_lost, 2, "gone (found by release), stolen");
    assert_eq!((s.connection_errors, s.reconnects), (0, 0));
    assert_eq!((s.held_now, s.waiters_now), (0, 0));
    let acquisitions = 10 + 2 + 1 + 3;
    assert_eq!(s.wait.count, acquisitions);
    assert_eq!(s.wait.buckets.iter().sum::<u64>(), acquisitions);
    assert_eq!(s.wait.buckets.len(), BUCKETS);
    // Every handle let go records its held time, but the forgotten ones.
    assert_eq!(s.held.count, 5 + 2 * 2 + 1 + 1 + 1);
    for h in [&s.wait, &s.held] {
        assert!(h.p50() <= h.p90() && h.p90() <= h.p99() && h.p99() <= h.max);
        assert!(h.sum >= h.max);
    }
    // The timed-out waits took at least 50 ms, the expiry wait 200 ms.
    assert!(
        s.wait.max >= ms(200),
        "the longest wait recorded: {:?}",
        s.wait.max
    );
    // The other client's figures are its own.
    let o = other.stats();
    assert_eq!((o.acquired_at_once, o.releases_ok, o.held_now), (2, 1, 0));
}

#[test]
fn a_handoff_that_meets_the_waiters_retry_is_still_a_handoff() {
    // The head of the queue retries after 12.5-25 ms; releases land all
    // around that moment, so that some find the waiter's retry ahead of
    // the hand-off message. Each is counted as handed over all the same.
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let rounds = 160u64;
    for i in 0..rounds {
        let holder = client.acquire("race", 30 * S, Wait::TryOnce).unwrap();
        let c = client.clone();
        let waiter = thread::spawn(move || {
            c.acquire("race", 10 * S, Wait::Timeout(10 * S))
                .unwrap()
                .release()
                .unwrap()
        });
        until_waiters(&client, 1);
        thread::sleep(Duration::from_micros(10_000 + (i % 80) * 250));
        holder.release().unwrap();
        waiter.join().unwrap();
    }
    let s = client.stats();
    assert_eq!(s.acquired_handed_over, rounds, "{s:?}");
    assert_eq!(s.acquired_after_wait, 0, "{s:?}");
    assert_eq!((s.handoffs_given, s.handoffs_received), (rounds, rounds));
}

#[test]
fn connection_errors_and_reconnects_are_counted() {
    let mut srv = Server::start();
    // Reconnecting must succeed at its first try, however busy the machine
    // (a refused connection fails at once all the same).
    let client = Client::builder(&srv.url())
        .connect_timeout(10 * S)
        .build()
        .unwrap();
    client
        .acquire("k", 10 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    // The pooled connection dies with the server; the next call finds it
    // dead and opens a new one.
    srv.restart();
    client
        .acquire("k", 10 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    let s = client.stats();
    assert_eq!((s.connection_errors, s.reconnects), (1, 1));
    assert_eq!(s.acquired_at_once, 2);
    // No server at all: one error, counted as a failed acquisition.
    srv.kill();
    let e = client.acquire("k", 10 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection);
    let s = client.stats();
    assert_eq!(s.acquire_errors, 1);
    assert!(s.connection_errors >= 2, "{s:?}");
    assert_eq!(s.held_now, 0);
    // Invalid arguments are refused before any acquisition.
    assert!(client.acquire("", 10 * S, Wait::TryOnce).is_err());
    assert_eq!(client.stats().acquire_errors, 1);
}

#[test]
fn the_lost_callback_runs_once_on_the_renewal_thread_within_a_ttl() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // Renewed every second: a theft is found within about a second, two
    // seconds inside the bound (one TTL) however busy the machine.
    let ttl = 3 * S;
    let calls = Arc::new(Mutex::new(Vec::<(Option<String>, Instant)>::new()));
    let opts = |w| redislock::AcquireOptions::new(ttl).wait(w).auto_renew(true);
    let lock = client.acquire_with("victim", opts(Wait::TryOnce)).unwrap();
    let seen = calls.clone();
    lock.on_lost(move || {
        let name = thread::current().name().map(str::to_string);
        seen.lock().unwrap().push((name, Instant::now()));
    });
    // A second lock of the same client whose callback panics: renewal of
    // the first goes on meanwhile, and the panic stays in the callback.
    let other = client
        .acquire_with("bystander", opts(Wait::TryOnce))
        .unwrap();
    let keeper = client.acquire_with("keeper", opts(Wait::TryOnce)).unwrap();
    other.on_lost(|| panic!("a callback that fails"));
    // Renewed first.
    wait_until("the first renewals", 10 * S, || {
        client.stats().renewals_ok >= 3
    });
    assert!(!lock.is_lost());
    set(&mut raw, "bystander", "thief");
    wait_until("the bystander to be lost", 10 * S, || other.is_lost());
    let stolen = Instant::now();
    set(&mut raw, "victim", "thief");
    wait_until("the callback", 10 * S, || !calls.lock().unwrap().is_empty());
    // Two more renewals of the keeper, after which a second call would
    // have come.
    let renewed = client.stats().renewals_ok;
    wait_until("two more renewals of the keeper", 10 * S, || {
        client.stats().renewals_ok >= renewed + 2
    });
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "exactly once");
    assert_eq!(calls[0].0.as_deref(), Some("redislock-renew"));
    let after = calls[0].1 - stolen;
    assert!(
        after <= ttl,
        "lost found {after:?} after the theft, TTL {ttl:?}"
    );
    assert!(lock.is_lost());
    // The third lock is still renewed after both losses.
    assert!(keeper.owned().unwrap(), "renewal goes on");
    assert!(!keeper.is_lost());
    let s = client.stats();
    assert_eq!((s.renewals_lost, s.locks_lost), (2, 2));
    assert!(s.renewals_ok >= 5, "{s:?}");
    assert_eq!(s.held_now, 1, "only the keeper");
    keeper.release().unwrap();
    // A callback set on a lock already lost runs at once, on this thread.
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    lock.on_lost(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    drop(lock);
    drop(other);
}

#[test]
fn an_extend_that_finds_the_lock_gone_runs_the_callback_on_the_caller() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let lock = client.acquire("x", 10 * S, Wait::TryOnce).unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let r = ran.clone();
    lock.on_lost(move || r.lock().unwrap().push(thread::current().id()));
    set(&mut raw, "x", "thief");
    assert_eq!(lock.extend(10 * S).unwrap_err().kind(), ErrorKind::NotOwner);
    assert_eq!(*ran.lock().unwrap(), vec![thread::current().id()]);
    // Not again on release.
    assert_eq!(lock.release().unwrap_err().kind(), ErrorKind::NotOwner);
    assert_eq!(ran.lock().unwrap().len(), 1);
    let s = client.stats();
    assert_eq!(
        (s.extends_lost, s.locks_lost, s.releases_not_owner),
        (1, 1, 1)
    );
    // A lock released normally never calls it.
    let lock = client.acquire("y", 10 * S, Wait::TryOnce).unwrap();
    let r = ran.clone();
    lock.on_lost(move || r.lock().unwrap().push(thread::current().id()));
    lock.release().unwrap();
    assert_eq!(ran.lock().unwrap().len(), 1);
}

#[test]
fn redlock_and_async_acquisitions_count_the_same() {
    let nodes: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    // A per-node timeout that a busy machine's pauses do not run out (the
    // default is a 200th of the TTL): the counts are the point here.
    let redlock = || Client::redlock(&urls).node_timeout(2 * S).build().unwrap();
    let client = redlock();
    let other = redlock();
    client
        .acquire("r", 10 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    // The release returned once a majority answered: the last node lets go
    // a moment later.
    wait_until("every node to let go of the lock", 10 * S, || {
        nodes.iter().all(|n| {
            let held: i64 = redis::cmd("EXISTS").arg("r").query(&mut n.raw()).unwrap();
            held == 0
        })
    });
    let held = other.acquire("r", 30 * S, Wait::TryOnce).unwrap();
    let e = client.acquire("r", 10 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired);
    let c = client.clone();
    let waiter = thread::spawn(move || c.acquire("r", 10 * S, Wait::Timeout(10 * S)));
    until_waiters(&client, 1);
    // Released by the other client (Redlock hands nothing over): the
    // waiter's retry finds it free.
    held.release().unwrap();
    let got = waiter.join().unwrap().unwrap();
    got.release().unwrap();
    let s = client.stats();
    assert_eq!(
        (
            s.acquired_at_once,
            s.acquire_timed_out,
            s.acquired_after_wait
        ),
        (1, 1, 1)
    );
    assert_eq!((s.releases_ok, s.held_now, s.waiters_now), (2, 0, 0));

    // The async API, on one server: a cancelled wait leaves no waiter.
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let lock = client
            .acquire_async("a", 10 * S, Wait::TryOnce)
            .await
            .unwrap();
        let waiting = client.acquire_async("a", 10 * S, Wait::Forever);
        assert!(tokio::time::timeout(ms(200), waiting).await.is_err());
        lock.release_async().await.unwrap();
    });
    let s = client.stats();
    assert_eq!((s.acquired_at_once, s.releases_ok), (1, 1));
    assert_eq!((s.held_now, s.waiters_now), (0, 0));
    // The dropped wait counts as an interrupted one, with its time waited.
    assert_eq!((s.acquire_timed_out, s.acquire_errors), (1, 0));
    assert_eq!(s.wait.count, 2);
    assert!(s.wait.max >= ms(200), "{:?}", s.wait.max);
}

#[test]
fn a_forked_child_starts_from_zero() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let lock = client.acquire("parent", 10 * S, Wait::TryOnce).unwrap();
    assert_eq!(client.stats().held_now, 1);
    // SAFETY: the child only reads atomics, takes and releases a lock, and
    // leaves with _exit.
    match unsafe { libc::fork() } {
        0 => {
            let zero = client.stats() == Stats::default();
            let own = client
                .acquire("child", 10 * S, Wait::TryOnce)
                .and_then(|l| l.release())
                .is_ok();
            let s = client.stats();
            let ok = zero && own && s.acquired_at_once == 1 && s.held_now == 0;
            drop(lock); // inert in the child
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        pid => {
            let mut status = 0;
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        }
    }
    let s = client.stats();
    assert_eq!((s.acquired_at_once, s.held_now), (1, 1), "the parent's own");
    lock.release().unwrap();
}

/// The debug lines, captured through the `log` crate (where they go when no
/// tracing subscriber is installed, as under Python).
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.target().starts_with("redislock")
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            let line = format!("{} {} {}", r.level(), r.target(), r.args());
            self.0.lock().unwrap().push(line);
        }
    }

    fn flush(&self) {}
}

fn captured() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let c: &'static Capture = Box::leak(Box::new(Capture(Mutex::new(Vec::new()))));
        log::set_logger(c).unwrap();
        log::set_max_level(log::LevelFilter::Debug);
        c
    })
}

#[test]
fn debug_lines_explain_waits_and_losses() {
    let lines = captured();
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // Uncontended: nothing is logged.
    client
        .acquire("quiet", 10 * S, Wait::Timeout(S))
        .unwrap()
        .release()
        .unwrap();
    let quiet: Vec<String> = lines.0.lock().unwrap().clone();
    assert!(
        !quiet.iter().any(|l| l.contains("quiet")),
        "an uncontended cycle logs nothing: {quiet:?}"
    );
    hand_over(&client, "logged");
    // Another client's lock: retries name its holder until it expires.
    let other = Client::open(&srv.url()).unwrap();
    let foreign = other.acquire("logged", 30 * S, Wait::TryOnce).unwrap();
    let holder = String::from_utf8(foreign.token().to_vec()).unwrap();
    foreign.forget();
    let c = client.clone();
    let waiter = thread::spawn(move || c.acquire("logged", 10 * S, Wait::Timeout(10 * S)));
    let named = format!("holder=\"{holder}\"");
    wait_until("a retry to find the lock still held", 10 * S, || {
        lines
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("still held after a retry") && l.contains(&named))
    });
    expire_now(&mut raw, "logged");
    waiter.join().unwrap().unwrap().release().unwrap();
    let lock = client.acquire("logged", 10 * S, Wait::TryOnce).unwrap();
    set(&mut raw, "logged", "thief");
    assert!(lock.extend(10 * S).is_err());
    let all = lines.0.lock().unwrap().join("\n");
    for want in [
        "redislock::deploy::wait",
        "lock=\"logged\"",
        "queued to wait",
        "handed over",
        // The release reached the waiter of its own process directly (see
        // RELEASE's reply in docs/PROTOCOL.md).
        "released: handed to a waiter of this process",
        "still held after a retry",
        &named,
        "retrying: first in the queue",
        "took the lock by a retry",
        "lost: an extend found it",
    ] {
        assert!(all.contains(want), "no {want:?} in:\n{all}");
    }
    assert!(
        all.lines()
            .filter(|l| l.contains("\"logged\""))
            .all(|l| l.starts_with("DEBUG")),
        "{all}"
    );
}

#[test]
fn a_release_wakes_a_waiter_of_another_client_of_its_process_itself() {
    let lines = captured();
    let srv = Server::start();
    let (a, b) = (
        Client::open(&srv.url()).unwrap(),
        Client::open(&srv.url()).unwrap(),
    );
    let holder = a.acquire("across", 30 * S, Wait::TryOnce).unwrap();
    let b2 = b.clone();
    let waiter = thread::spawn(move || {
        let lock = b.acquire("across", 10 * S, Wait::Timeout(10 * S)).unwrap();
        lock.release().unwrap();
    });
    // The waiter's client has its own subscriber: the release's reply names
    // that subscriber's channel, which this process knows. (The release
    // wakes the waiter unless the subscriber read its message first: which
    // comes first is the machine's choice, not asserted.)
    until_waiters(&b2, 1);
    holder.release().unwrap();
    waiter.join().unwrap();
    assert_eq!(b2.stats().handoffs_received, 1);
    let all = lines.0.lock().unwrap().join("\n");
    assert!(
        all.lines().any(|l| l.contains("lock=\"across\"")
            && l.contains("released: handed to a waiter of this process")),
        "{all}"
    );
}
