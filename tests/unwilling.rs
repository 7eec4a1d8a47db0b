//! Exhausted and unwilling servers: `maxclients` reached, `maxmemory` full
//! under `noeviction` (OOM), a script past `busy-reply-threshold` (BUSY)
//! until `SCRIPT KILL`, `CLIENT PAUSE … WRITE`, and ACL users without
//! `EVALSHA`/`EVAL`, `PUBLISH` or `SUBSCRIBE`. Every call ends in a typed
//! error that says what the server refused, or in a wait that ends by its
//! deadline; nothing is half written (no queue entry without its waiter, no
//! waiter's entry dropped without a hand-off, no fence drawn for nobody);
//! and the same client works again as soon as the server does.
//!
//! Every client here has `command_timeout=1s&connect_timeout=1s`; times
//! are only asserted to bound a hang (the call's own budget plus
//! [`SLACK`]).

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use common::{command_calls, info_field, timed, wait_until, Server};
use redislock::{AcquireOptions, Client, Error, ErrorKind, Lock, Wait};

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);
/// The clients' command timeout (and connect timeout).
const TIMEOUT: Duration = S;
/// What a call may take beyond its own budget before it counts as a hang.
const SLACK: Duration = Duration::from_secs(2);

fn url(srv: &Server, user: Option<&str>) -> String {
    let auth = user.map_or_else(String::new, |u| format!("{u}:pw@"));
    format!(
        "redis://{auth}127.0.0.1:{}?command_timeout=1s&connect_timeout=1s",
        srv.port
    )
}

fn client(srv: &Server) -> Client {
    Client::open(&url(srv, None)).unwrap()
}

/// A client of the ACL user `user` (password `pw`).
fn client_as(srv: &Server, user: &str) -> Client {
    Client::open(&url(srv, Some(user))).unwrap()
}

/// `r` failed with an error of `kind` whose text holds every one of
/// `words` (compared in lower case); the error.
fn refused<T>(r: redislock::Result<T>, kinds: &[ErrorKind], words: &[&str], what: &str) -> Error {
    let e = match r {
        Ok(_) => panic!("{what}: succeeded, an error was expected"),
        Err(e) => e,
    };
    assert!(
        kinds.contains(&e.kind()),
        "{what}: {:?} not one of {kinds:?}: {e}",
        e.kind()
    );
    let text = e.to_string().to_lowercase();
    for w in words {
        assert!(
            text.contains(&w.to_lowercase()),
            "{what}: the message does not say {w:?}: {e}"
        );
    }
    e
}

/// What a lock named `key` (without braces) has on the server.
#[derive(Debug, PartialEq, Eq, Clone)]
struct State {
    holder: Option<Vec<u8>>,
    meta: Option<Vec<u8>>,
    queue: Vec<Vec<u8>>,
    /// Every fence counter (`redislock:fence:*`) and its value.
    counters: BTreeMap<String, String>,
}

fn state(raw: &mut redis::Connection, key: &str) -> State {
    let get = |raw: &mut redis::Connection, k: String| -> Option<Vec<u8>> {
        redis::cmd("GET").arg(k).query(raw).unwrap()
    };
    let queue: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg(format!("{{{key}}}:queue"))
        .arg(0)
        .arg(-1)
        .query(raw)
        .unwrap();
    let names: Vec<String> = redis::cmd("KEYS")
        .arg("redislock:fence:*")
        .query(raw)
        .unwrap();
    let counters = names
        .into_iter()
        .map(|n| {
            let v: String = redis::cmd("GET").arg(&n).query(raw).unwrap();
            (n, v)
        })
        .collect();
    State {
        holder: get(raw, key.to_string()),
        meta: get(raw, format!("{{{key}}}:meta")),
        queue,
        counters,
    }
}

/// What a semaphore named `key` has on the server: its holders (with
/// their expiry), their permits and fences, its queue, and the counters.
fn sem_state(raw: &mut redis::Connection, key: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let holders: Vec<String> = redis::cmd("ZRANGE")
        .arg(format!("{{{key}}}:sem"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(raw)
        .unwrap();
    let info: Vec<String> = redis::cmd("HGETALL")
        .arg(format!("{{{key}}}:sem:info"))
        .query(raw)
        .unwrap();
    let queue: Vec<String> = redis::cmd("LRANGE")
        .arg(format!("{{{key}}}:sem:queue"))
        .arg(0)
        .arg(-1)
        .query(raw)
        .unwrap();
    (holders, info, queue)
}

/// `holder` keeps `key`; `waiter` (a clone of its client, so that the
/// hand-off is counted on one client) waits for it and is handed the lock
/// when `holder` releases it.
fn handed_over(client: &Client, key: &'static str, holder: Lock, what: &str) {
    let before = client.stats();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || client.acquire(key, 30 * S, Wait::Timeout(30 * S)))
    };
    wait_until(&format!("{what}: the waiter to queue"), 10 * S, || {
        client.inspect(key).unwrap().waiters == 1
    });
    holder.release().unwrap();
    let lock = waiter
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{what}: the waiter: {e}"));
    common::assert_one_hand_off(client, &before, what);
    lock.release().unwrap();
}

// ---------------------------------------------------------------- maxclients

/// Raw connections to `srv` until the server refuses one (`maxclients`):
/// the ones it took, held open.
fn fill_connections(srv: &Server) -> Vec<TcpStream> {
    let mut held = Vec::new();
    loop {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(5 * S)).unwrap();
        s.write_all(b"PING\r\n").unwrap();
        let mut buf = [0u8; 128];
        let n = s.read(&mut buf).unwrap();
        let reply = String::from_utf8_lossy(&buf[..n]).to_string();
        if reply.starts_with("+PONG") {
            held.push(s);
            assert!(held.len() < 100, "maxclients is never reached");
        } else {
            assert!(reply.contains("max number of clients"), "{reply:?}");
            return held;
        }
    }
}

/// Whether a new connection to `srv` is served.
fn accepts(srv: &Server) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", srv.port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(2 * S));
    let mut buf = [0u8; 64];
    s.write_all(b"PING\r\n").is_ok()
        && matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// The words a refusal for `maxclients` must hold: the server's, and the
/// setting to raise.
const MAXCLIENTS: &[&str] = &["max number of clients reached", "maxclients"];

#[test]
fn maxclients_reached_is_a_typed_error_and_the_same_client_recovers() {
    let srv = Server::start_with(&["--maxclients", "8"]);
    let mut raw = srv.raw();
    let holder = client(&srv);
    let held_lock = holder.acquire("mc", 60 * S, Wait::TryOnce).unwrap();
    // A client with a pooled connection, which a wait needs a second one
    // (the waiters' subscriber) beside; and one with no connection yet.
    let waiter = client(&srv);
    refused(
        waiter.acquire("mc", 60 * S, Wait::TryOnce),
        &[ErrorKind::NotAcquired],
        &[],
        "before the limit",
    );
    let fresh = client(&srv);
    let before = state(&mut raw, "mc");

    let sockets = fill_connections(&srv);
    let kinds = [ErrorKind::Connection, ErrorKind::Server];
    let (r, took) = timed(|| fresh.acquire("free", 60 * S, Wait::TryOnce));
    let e = refused(r, &kinds, MAXCLIENTS, "a try-once acquire");
    assert!(
        !e.to_string().contains("protocol"),
        "the server's refusal is not a protocol error: {e}"
    );
    assert!(took < TIMEOUT + SLACK, "a try-once acquire took {took:?}");
    let fenced = AcquireOptions::new(60 * S).fenced(true);
    let (r, took) = timed(|| fresh.acquire_with("free", fenced.clone()));
    refused(r, &kinds, MAXCLIENTS, "a fenced acquire");
    assert!(took < TIMEOUT + SLACK, "a fenced acquire took {took:?}");
    let wait = 2 * S;
    let (r, took) = timed(|| fresh.acquire("free", 60 * S, Wait::Timeout(wait)));
    refused(r, &kinds, MAXCLIENTS, "a waiting acquire");
    assert!(
        took < wait + TIMEOUT + SLACK,
        "a waiting acquire took {took:?}"
    );
    // Its pooled connection finds the lock held; the subscriber it needs
    // to wait is refused. Nothing is queued.
    let (r, took) = timed(|| waiter.acquire("mc", 60 * S, Wait::Timeout(wait)));
    refused(r, &kinds, MAXCLIENTS, "a wait that needs a subscriber");
    assert!(took < wait + TIMEOUT + SLACK, "the wait took {took:?}");
    assert_eq!(state(&mut raw, "mc"), before, "the refused wait wrote");
    assert_eq!(state(&mut raw, "free").holder, None);

    drop(sockets);
    wait_until("the server to take connections again", 10 * S, || {
        accepts(&srv)
    });
    // The same clients, without anything done to them.
    fresh
        .acquire("free", 60 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    fresh
        .acquire_with("free", fenced)
        .unwrap()
        .release()
        .unwrap();
    let before = holder.stats();
    let w = {
        let waiter = waiter.clone();
        thread::spawn(move || waiter.acquire("mc", 30 * S, Wait::Timeout(30 * S)))
    };
    wait_until("the waiter to queue", 10 * S, || {
        holder.inspect("mc").unwrap().waiters == 1
    });
    held_lock.release().unwrap();
    let lock = w.join().unwrap().expect("the waiter after the limit");
    assert_eq!(holder.stats().handoffs_given - before.handoffs_given, 1);
    lock.release().unwrap();
    assert!(info_field(&mut raw, "stats", "rejected_connections") >= 4);
}

// ------------------------------------------------------------------ maxmemory

fn used_memory(raw: &mut redis::Connection) -> u64 {
    info_field(raw, "memory", "used_memory")
}

/// Fill the server's memory: a 4 MB value (made by the server, so that no
/// big request stays in a buffer), then `maxmemory` halfway between the
/// memory used before and after it, so that every write that may grow
/// memory is refused with OOM until the value is deleted.
fn fill_memory(raw: &mut redis::Connection) {
    let before = used_memory(raw);
    let _: i64 = redis::cmd("SETRANGE")
        .arg("filler")
        .arg((4 << 20) - 1)
        .arg("x")
        .query(raw)
        .unwrap();
    let after = used_memory(raw);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg((before + after) / 2)
        .query(raw)
        .unwrap();
    let probe = redis::cmd("SET").arg("probe").arg("x").query::<()>(raw);
    assert!(
        probe.as_ref().is_err_and(|e| e.to_string().contains("OOM")),
        "the server is not full: {probe:?}"
    );
}

/// Delete the filler and wait until writes are taken again.
fn free_memory(raw: &mut redis::Connection) {
    let _: i64 = redis::cmd("DEL").arg("filler").query(raw).unwrap();
    wait_until("writes to be taken again", 10 * S, || {
        redis::cmd("SET")
            .arg("probe")
            .arg("x")
            .query::<()>(raw)
            .is_ok()
    });
    let _: i64 = redis::cmd("DEL").arg("probe").query(raw).unwrap();
}

const OOM: &[&str] = &["OOM"];

#[test]
fn a_full_memory_refuses_acquires_with_oom_and_writes_nothing() {
    let srv = Server::start_with(&["--maxmemory-policy", "noeviction"]);
    let mut raw = srv.raw();
    let client = client(&srv);
    let other = Client::open(&url(&srv, None)).unwrap();
    // A fence counter exists: a draw would change it.
    client
        .acquire_with("oom", AcquireOptions::new(60 * S).fenced(true))
        .unwrap()
        .release()
        .unwrap();
    // `held` is held by the other client; this client found it held (a
    // short wait), so its next wait goes straight to ENQUEUE.
    let held = other.acquire("held", 60 * S, Wait::TryOnce).unwrap();
    refused(
        client.acquire("held", 60 * S, Wait::Timeout(S / 10)),
        &[ErrorKind::NotAcquired],
        &[],
        "before the memory is full",
    );
    // A lock of this client whose fence is not drawn yet.
    let mine = client.acquire("mine", 60 * S, Wait::TryOnce).unwrap();
    // A semaphore of one permit, held.
    let permit = other
        .acquire_semaphore("sem", 1, 1, AcquireOptions::new(60 * S))
        .unwrap();
    let sem_before = sem_state(&mut raw, "sem");
    let free_before = state(&mut raw, "oom");
    let held_before = state(&mut raw, "held");
    let mine_before = state(&mut raw, "mine");

    fill_memory(&mut raw);
    let server = [ErrorKind::Server];
    let (r, took) = timed(|| client.acquire("oom", 60 * S, Wait::TryOnce));
    refused(r, &server, OOM, "a try-once acquire");
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    let (r, took) = timed(|| client.acquire_with("oom", AcquireOptions::new(60 * S).fenced(true)));
    refused(r, &server, OOM, "a fenced acquire");
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    let wait = 3 * S;
    let (r, took) = timed(|| client.acquire("oom", 60 * S, Wait::Timeout(wait)));
    refused(r, &server, OOM, "a waiting acquire of a free lock");
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    assert_eq!(
        state(&mut raw, "oom"),
        free_before,
        "a refused acquire wrote"
    );

    // The ENQUEUE of a wait is refused: nothing queued.
    let scripts = command_calls(&mut raw, "evalsha");
    let (r, took) = timed(|| client.acquire("held", 60 * S, Wait::Timeout(wait)));
    refused(r, &server, OOM, "the ENQUEUE of a wait");
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    assert!(
        command_calls(&mut raw, "evalsha") > scripts,
        "the wait never ran its ENQUEUE"
    );
    assert_eq!(
        state(&mut raw, "held"),
        held_before,
        "a refused ENQUEUE wrote"
    );

    // Semaphores: a permit of a free one, and the queueing of a wait for a
    // full one.
    let (r, took) =
        timed(|| client.acquire_semaphore("sem-free", 2, 1, AcquireOptions::new(60 * S)));
    refused(r, &server, OOM, "a semaphore's permit");
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    let (r, took) = timed(|| {
        client.acquire_semaphore(
            "sem",
            1,
            1,
            AcquireOptions::new(60 * S).wait(Wait::Timeout(wait)),
        )
    });
    refused(r, &server, OOM, "a wait for a semaphore's permit");
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    assert_eq!(
        sem_state(&mut raw, "sem"),
        sem_before,
        "a refused permit wrote"
    );
    assert_eq!(
        sem_state(&mut raw, "sem-free"),
        (vec![], vec![], vec![]),
        "a refused permit wrote"
    );
    assert_eq!(state(&mut raw, "oom").counters, free_before.counters);

    // The fence of a held lock, drawn now: refused, nothing drawn, the
    // lock still held.
    refused(mine.fence(), &server, OOM, "a lazy fence");
    assert_eq!(
        state(&mut raw, "mine"),
        mine_before,
        "a refused fence wrote"
    );
    assert_eq!(mine.fence_if_drawn(), None);

    free_memory(&mut raw);
    // The same client recovers: a lock is taken, its fence drawn, and a
    // waiter is handed the lock.
    assert!(mine.fence().unwrap() > 0);
    mine.release().unwrap();
    client
        .acquire_with("oom", AcquireOptions::new(60 * S).fenced(true))
        .unwrap()
        .release()
        .unwrap();
    permit.release().unwrap();
    client
        .acquire_semaphore("sem", 1, 1, AcquireOptions::new(60 * S))
        .unwrap()
        .release()
        .unwrap();
    held.release().unwrap();
    let holder = client.acquire("held", 60 * S, Wait::TryOnce).unwrap();
    handed_over(&client, "held", holder, "after the memory was freed");
}

#[test]
fn a_queued_waiter_meeting_oom_leaves_the_queue_by_its_deadline() {
    let srv = Server::start_with(&["--maxmemory-policy", "noeviction"]);
    let mut raw = srv.raw();
    let client = client(&srv);
    let holder = client.acquire("q", 60 * S, Wait::TryOnce).unwrap();
    let wait = 5 * S;
    let waiter = {
        let client = client.clone();
        thread::spawn(move || timed(|| client.acquire("q", 60 * S, Wait::Timeout(wait))))
    };
    wait_until("the waiter to queue", 10 * S, || {
        client.inspect("q").unwrap().waiters == 1
    });
    let before = state(&mut raw, "q");
    fill_memory(&mut raw);
    // Its retries are refused (OOM): it ends by its deadline, with an OOM
    // error or not acquired, and leaves no entry behind.
    let (r, took) = waiter.join().unwrap();
    refused(
        r,
        &[ErrorKind::Server, ErrorKind::NotAcquired],
        &[],
        "a queued waiter",
    );
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    let after = state(&mut raw, "q");
    assert!(
        after.queue.is_empty(),
        "an entry without its waiter: {after:?}"
    );
    assert_eq!(after.holder, before.holder);
    assert_eq!(after.counters, before.counters);
    free_memory(&mut raw);
    handed_over(&client, "q", holder, "after the memory was freed");
}

#[test]
fn a_full_memory_still_lets_holders_release() {
    let srv = Server::start_with(&["--maxmemory-policy", "noeviction"]);
    let mut raw = srv.raw();
    let client = client(&srv);
    // Taken at once (RELEASE), with a kept fence (RELEASE's slow path),
    // and after a wait (RELEASE_QUEUED).
    let plain = client.acquire("plain", 60 * S, Wait::TryOnce).unwrap();
    let fenced = client.acquire("fenced", 60 * S, Wait::TryOnce).unwrap();
    fenced.fence().unwrap();
    let first = client.acquire("waited", 60 * S, Wait::TryOnce).unwrap();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || client.acquire("waited", 60 * S, Wait::Timeout(30 * S)))
    };
    wait_until("the waiter to queue", 10 * S, || {
        client.inspect("waited").unwrap().waiters == 1
    });
    first.release().unwrap();
    let waited = waiter.join().unwrap().unwrap();
    let counters = state(&mut raw, "plain").counters;

    fill_memory(&mut raw);
    // A release only deletes: the server lets it run.
    for (name, lock) in [("plain", plain), ("fenced", fenced), ("waited", waited)] {
        let (r, took) = timed(|| lock.release());
        r.unwrap_or_else(|e| panic!("the release of {name} under OOM: {e}"));
        assert!(took < TIMEOUT + SLACK, "{took:?}");
        let s = state(&mut raw, name);
        assert_eq!((s.holder, s.meta), (None, None), "{name} after its release");
        assert!(s.queue.is_empty(), "{name}: {:?}", s.queue);
        assert_eq!(s.counters, counters);
    }
    free_memory(&mut raw);
    let holder = client.acquire("plain", 60 * S, Wait::TryOnce).unwrap();
    handed_over(&client, "plain", holder, "after the memory was freed");
}

/// `PEXPIRE` is not refused for memory, so neither is keeping a lock
/// alive: an extend (and a renewal) under OOM works, whether the lock has
/// a kept fence or not.
#[test]
fn a_full_memory_still_lets_holders_extend_and_renew() {
    let srv = Server::start_with(&["--maxmemory-policy", "noeviction"]);
    let mut raw = srv.raw();
    let client = client(&srv);
    let plain = client.acquire("plain", 5 * S, Wait::TryOnce).unwrap();
    let fenced = client.acquire("fenced", 5 * S, Wait::TryOnce).unwrap();
    let fence = fenced.fence().unwrap();
    // Renewals by a client that has extended a lock already (it knows
    // whether the server takes `SET … IFEQ`), two locks in one round trip.
    let renewer = Client::open(&url(&srv, None)).unwrap();
    let learn = renewer.acquire("learn", 5 * S, Wait::TryOnce).unwrap();
    learn.extend(5 * S).unwrap();
    let renewed: Vec<Lock> = ["renewed-1", "renewed-2"]
        .iter()
        .map(|name| {
            renewer
                .acquire_with(name, AcquireOptions::new(1500 * MS).auto_renew(true))
                .unwrap()
        })
        .collect();
    fill_memory(&mut raw);
    for (name, lock) in [("plain", &plain), ("fenced", &fenced)] {
        let (r, took) = timed(|| lock.extend(60 * S));
        r.unwrap_or_else(|e| panic!("the extend of {name} under OOM: {e}"));
        assert!(took < TIMEOUT + SLACK, "{took:?}");
        let pttl: i64 = redis::cmd("PTTL").arg(name).query(&mut raw).unwrap();
        assert!(pttl > 30_000, "{name}: PTTL {pttl} after an extend to 60 s");
    }
    // Two TTLs under OOM: the renewals keep them.
    thread::sleep(3 * S);
    for (lock, name) in renewed.iter().zip(["renewed-1", "renewed-2"]) {
        assert!(!lock.is_lost(), "a renewal under OOM lost {name}");
        assert_eq!(state(&mut raw, name).holder.as_deref(), Some(lock.token()));
    }
    free_memory(&mut raw);
    assert_eq!(fenced.fence().unwrap(), fence);
    for lock in [plain, fenced, learn].into_iter().chain(renewed) {
        lock.release().unwrap();
    }
}

// ----------------------------------------------------------------------- BUSY

/// `EVAL "while true do end"` on a connection of its own, in a thread;
/// returns once the server answers BUSY. The thread ends with the
/// script's error when it is killed.
fn busy_script(srv: &Server) -> thread::JoinHandle<redis::RedisResult<()>> {
    let mut con = srv.raw();
    con.set_read_timeout(Some(60 * S)).unwrap();
    let script = thread::spawn(move || {
        redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<()>(&mut con)
    });
    let mut raw = srv.raw();
    wait_until("the server to answer BUSY", 10 * S, || {
        matches!(redis::cmd("PING").query::<String>(&mut raw),
                 Err(e) if e.code() == Some("BUSY"))
    });
    script
}

fn script_kill(srv: &Server, script: thread::JoinHandle<redis::RedisResult<()>>) {
    let _: () = redis::cmd("SCRIPT")
        .arg("KILL")
        .query(&mut srv.raw())
        .unwrap();
    let ended = script.join().unwrap();
    assert!(ended.is_err(), "the killed script: {ended:?}");
}

const BUSY: &[&str] = &["BUSY"];

#[test]
fn calls_during_busy_end_within_their_budget_and_change_nothing() {
    let srv = Server::start_with(&["--busy-reply-threshold", "100"]);
    let mut raw = srv.raw();
    let client = client(&srv);
    let held = client.acquire("held", 60 * S, Wait::TryOnce).unwrap();
    let before = state(&mut raw, "held");
    let script = busy_script(&srv);
    let server = [ErrorKind::Server];
    let (r, took) = timed(|| client.acquire("free", 60 * S, Wait::TryOnce));
    refused(r, &server, BUSY, "a try-once acquire");
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    let (r, took) = timed(|| client.acquire_with("free", AcquireOptions::new(60 * S).fenced(true)));
    refused(r, &server, BUSY, "a fenced acquire");
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    // A wait that ends before the script does: at its deadline.
    let wait = 1500 * MS;
    let (r, took) = timed(|| client.acquire("held", 60 * S, Wait::Timeout(wait)));
    refused(
        r,
        &[ErrorKind::Server, ErrorKind::NotAcquired],
        &[],
        "a wait shorter than the script",
    );
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    let (r, took) = timed(|| held.extend(60 * S));
    refused(r, &server, BUSY, "an extend");
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    script_kill(&srv, script);
    assert_eq!(state(&mut raw, "held"), before, "a call during BUSY wrote");
    assert_eq!(state(&mut raw, "free").holder, None);
    // Recovered: the same client takes and hands over.
    client
        .acquire_with("free", AcquireOptions::new(60 * S).fenced(true))
        .unwrap()
        .release()
        .unwrap();
    handed_over(&client, "held", held, "after SCRIPT KILL");
}

/// A waiting acquisition keeps asking a busy server until its own
/// deadline (not only for one command timeout): started while a script
/// blocks the server, it gets the lock once the script is killed. A waiter
/// queued before the script keeps its place and is handed the lock.
#[test]
fn a_wait_during_busy_gets_the_lock_after_script_kill() {
    let srv = Server::start_with(&["--busy-reply-threshold", "100"]);
    let client = client(&srv);
    let holder = client.acquire("queued", 60 * S, Wait::TryOnce).unwrap();
    let queued = {
        let client = client.clone();
        thread::spawn(move || client.acquire("queued", 60 * S, Wait::Timeout(30 * S)))
    };
    wait_until("the waiter to queue", 10 * S, || {
        client.inspect("queued").unwrap().waiters == 1
    });
    // Another client: its first wait opens its subscriber during BUSY.
    let other = Client::open(&url(&srv, None)).unwrap();
    let script = busy_script(&srv);
    let wait = 20 * S;
    let fresh = thread::spawn(move || timed(|| other.acquire("free", 60 * S, Wait::Timeout(wait))));
    // Longer than a command timeout: a wait that gives up after one fails.
    thread::sleep(2 * TIMEOUT + S / 2);
    script_kill(&srv, script);
    let (r, took) = fresh.join().unwrap();
    r.unwrap_or_else(|e| panic!("a wait started during BUSY, after {took:?}: {e}"))
        .release()
        .unwrap();
    let before = client.stats();
    holder.release().unwrap();
    queued
        .join()
        .unwrap()
        .expect("the waiter queued before BUSY")
        .release()
        .unwrap();
    assert_eq!(client.stats().handoffs_given - before.handoffs_given, 1);
}

// --------------------------------------------------------- CLIENT PAUSE WRITE

fn client_pause(raw: &mut redis::Connection, ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("WRITE")
        .query(raw)
        .unwrap();
}

/// How many connections the server holds up (CLIENT LIST `flags=…b…`).
fn held_up(raw: &mut redis::Connection) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(raw).unwrap();
    list.lines()
        .filter(|l| {
            l.split(' ')
                .find_map(|f| f.strip_prefix("flags="))
                .is_some_and(|f| f.contains('b'))
        })
        .count()
}

#[test]
fn an_acquire_during_client_pause_write_completes_after_it_or_ends_in_time() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let client = client(&srv);
    client
        .acquire("warm", 60 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();

    // A pause that ends within the command timeout (of a client that
    // gives commands 10 s): the acquire is held up (the server says so),
    // then completes.
    let patient = Client::open(&format!(
        "{}?command_timeout=10s&connect_timeout=1s",
        srv.url()
    ))
    .unwrap();
    client_pause(&mut raw, 10_000);
    let (r, took) = {
        let t = thread::spawn(move || {
            timed(|| patient.acquire("short", 60 * S, Wait::Timeout(10 * S)))
        });
        wait_until("the acquire to be held up", 10 * S, || {
            held_up(&mut raw) == 1
        });
        let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut raw).unwrap();
        t.join().unwrap()
    };
    let lock = r.unwrap_or_else(|e| panic!("after a short pause ({took:?}): {e}"));
    assert!(took < 10 * S + SLACK, "{took:?}");

    // A pause longer than every budget: typed errors, in time.
    client_pause(&mut raw, 30_000);
    let conn = [ErrorKind::Connection, ErrorKind::Server];
    let (r, took) = timed(|| client.acquire("long", 60 * S, Wait::TryOnce));
    refused(r, &conn, &[], "a try-once acquire");
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    let (r, took) = timed(|| client.acquire_with("long", AcquireOptions::new(60 * S).fenced(true)));
    refused(r, &conn, &[], "a fenced acquire");
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    let wait = 2 * S;
    let (r, took) = timed(|| client.acquire("long", 60 * S, Wait::Timeout(wait)));
    refused(r, &conn, &[], "a waiting acquire");
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    let (r, took) = timed(|| client.acquire("short", 60 * S, Wait::Timeout(wait)));
    refused(
        r,
        &[
            ErrorKind::Connection,
            ErrorKind::Server,
            ErrorKind::NotAcquired,
        ],
        &[],
        "a wait for a held lock",
    );
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    // The connections that gave up were closed: the server drops their
    // held-up commands, which never run.
    wait_until("the given-up commands to be dropped", 10 * S, || {
        held_up(&mut raw) == 0
    });
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut raw).unwrap();
    let s = state(&mut raw, "long");
    assert_eq!(
        (&s.holder, &s.meta, s.queue.len()),
        (&None, &None, 0),
        "{s:?}"
    );
    let s = state(&mut raw, "short");
    assert_eq!(s.holder.as_deref(), Some(lock.token()));
    assert!(s.queue.is_empty(), "an entry without its waiter: {s:?}");
    // Recovered.
    lock.release().unwrap();
    client
        .acquire("long", 60 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    let holder = client.acquire("short", 60 * S, Wait::TryOnce).unwrap();
    handed_over(&client, "short", holder, "after the pause");
}

// ------------------------------------------------------------------------ ACL

fn acl_user(raw: &mut redis::Connection, user: &str, minus: &[&str]) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(user)
        .arg(&["on", ">pw", "~*", "&*", "+@all"][..]);
    for m in minus {
        cmd.arg(format!("-{m}"));
    }
    let _: () = cmd.query(raw).unwrap();
}

#[test]
fn a_user_without_scripts_gets_noperm_naming_the_command_and_nothing_is_written() {
    let srv = Server::start();
    let mut raw = srv.raw();
    acl_user(&mut raw, "noscript", &["eval", "evalsha"]);
    acl_user(&mut raw, "noevalsha", &["evalsha"]);
    let admin = client(&srv);
    let held = admin.acquire("held", 60 * S, Wait::TryOnce).unwrap();
    let server = [ErrorKind::Server];
    for user in ["noscript", "noevalsha"] {
        let c = client_as(&srv, user);
        let free = format!("free-{user}");
        let before = state(&mut raw, &free);
        let (r, took) = timed(|| c.acquire_with(&free, AcquireOptions::new(60 * S).fenced(true)));
        refused(r, &server, &["NOPERM", "evalsha"], "a fenced acquire");
        assert!(took < TIMEOUT + SLACK, "{took:?}");
        assert_eq!(
            state(&mut raw, &free),
            before,
            "{user}: a refused acquire wrote"
        );

        // A wait: the lock is seen held, ENQUEUE is refused, nothing queued.
        let held_before = state(&mut raw, "held");
        let wait = 2 * S;
        let (r, took) = timed(|| c.acquire("held", 60 * S, Wait::Timeout(wait)));
        refused(r, &server, &["NOPERM", "evalsha"], "a waiting acquire");
        assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
        assert_eq!(
            state(&mut raw, "held"),
            held_before,
            "{user}: a refused wait wrote"
        );

        // The plain SET NX of a try is allowed; the release script is not:
        // refused, and the lock stays its holder's until its TTL.
        let lock = c.acquire(&free, 60 * S, Wait::TryOnce).unwrap();
        let token = lock.token().to_vec();
        let (r, took) = timed(|| lock.release());
        refused(r, &server, &["NOPERM", "evalsha"], "a release");
        assert!(took < TIMEOUT + SLACK, "{took:?}");
        let s = state(&mut raw, &free);
        assert_eq!(
            s.holder,
            Some(token),
            "{user}: a refused release changed the lock"
        );
        assert_eq!(s.counters, before.counters);
    }
    held.release().unwrap();
}

/// A waiter that never retries, so that what a release does to its entry
/// can be read on the server: a connection subscribed to its channel
/// `redislock:w:<id>`, and its entry `<id>:<nonce>:<tail>` at the tail of
/// `queue`, with `meta` (a lock's `{K}:meta`) made to say that waiters
/// are queued, as `ENQUEUE` does for the head.
fn fake_waiter(
    srv: &Server,
    raw: &mut redis::Connection,
    queue: &str,
    tail: &str,
    meta: Option<&str>,
) -> (TcpStream, Vec<u8>) {
    let id = "f".repeat(32);
    let mut sub = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    sub.set_read_timeout(Some(5 * S)).unwrap();
    sub.write_all(format!("SUBSCRIBE redislock:w:{id}\r\n").as_bytes())
        .unwrap();
    let mut buf = [0u8; 256];
    let n = sub.read(&mut buf).unwrap();
    assert!(
        buf[..n].starts_with(b"*3"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    let entry = format!("{id}:{}:{tail}", "0".repeat(16)).into_bytes();
    let _: i64 = redis::cmd("RPUSH")
        .arg(queue)
        .arg(&entry)
        .query(raw)
        .unwrap();
    if let Some(meta) = meta {
        let _: () = redis::cmd("SET")
            .arg(meta)
            .arg("0:")
            .arg("PX")
            .arg(60_000)
            .query(raw)
            .unwrap();
    }
    (sub, entry)
}

#[test]
fn a_user_without_publish_takes_waits_and_releases() {
    let srv = Server::start();
    let mut raw = srv.raw();
    acl_user(&mut raw, "nopublish", &["publish"]);
    let admin = client(&srv);
    let c = client_as(&srv, "nopublish");
    // Nothing of an uncontended cycle or a wait publishes.
    c.acquire_with("plain", AcquireOptions::new(60 * S).fenced(true))
        .unwrap()
        .release()
        .unwrap();
    let held = admin.acquire("served", 60 * S, Wait::TryOnce).unwrap();
    let waiter = {
        let c = c.clone();
        thread::spawn(move || c.acquire("served", 60 * S, Wait::Timeout(30 * S)))
    };
    wait_until("the waiter to queue", 10 * S, || {
        admin.inspect("served").unwrap().waiters == 1
    });
    let before = admin.stats();
    held.release().unwrap();
    waiter
        .join()
        .unwrap()
        .expect("a waiter without PUBLISH")
        .release()
        .unwrap();
    assert_eq!(admin.stats().handoffs_given - before.handoffs_given, 1);

    // Its release with a real waiter (of another user) queued: the waiter
    // ends by its deadline, with the lock or without it.
    let lock = c.acquire("handoff", 60 * S, Wait::TryOnce).unwrap();
    let wait = 5 * S;
    let waiter = {
        let admin = admin.clone();
        thread::spawn(move || timed(|| admin.acquire("handoff", 60 * S, Wait::Timeout(wait))))
    };
    wait_until("the waiter to queue", 10 * S, || {
        admin.inspect("handoff").unwrap().waiters == 1
    });
    let _ = lock.release();
    let (r, took) = waiter.join().unwrap();
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    match r {
        Ok(lock) => lock.release().unwrap(),
        Err(e) => assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}"),
    }
}

/// A release by a user who may not PUBLISH, with a waiter queued: a typed
/// error that names PUBLISH, and the waiter's entry is never dropped
/// without the lock going to it.
#[test]
fn a_lock_release_without_publish_never_drops_a_waiter() {
    let srv = Server::start();
    let mut raw = srv.raw();
    acl_user(&mut raw, "nopublish", &["publish"]);
    let c = client_as(&srv, "nopublish");
    let lock = c.acquire("handoff", 60 * S, Wait::TryOnce).unwrap();
    let (_sub, entry) = fake_waiter(
        &srv,
        &mut raw,
        "{handoff}:queue",
        "30000:fake-waiter",
        Some("{handoff}:meta"),
    );
    let counters = state(&mut raw, "handoff").counters;
    let (r, took) = timed(|| lock.release());
    let e = refused(
        r,
        &[ErrorKind::Server],
        &["publish"],
        "a release that must hand over",
    );
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    let s = state(&mut raw, "handoff");
    assert!(
        s.queue.contains(&entry) || s.holder.as_deref() == Some(&b"fake-waiter"[..]),
        "the waiter's entry was dropped and the lock not handed to it ({e}): {s:?}"
    );
    assert_eq!(s.counters, counters);
}

/// The same for a semaphore: its release serves the queue, drawing the
/// admitted waiter's fence, before it publishes.
#[test]
fn a_semaphore_release_without_publish_never_drops_a_waiter_nor_draws_a_fence_for_it() {
    let srv = Server::start();
    let mut raw = srv.raw();
    acl_user(&mut raw, "nopublish", &["publish"]);
    let c = client_as(&srv, "nopublish");
    let permit = c
        .acquire_semaphore("sem", 1, 1, AcquireOptions::new(60 * S))
        .unwrap();
    let (_sub, entry) = fake_waiter(
        &srv,
        &mut raw,
        "{sem}:sem:queue",
        "30000:1:1:fake-waiter",
        None,
    );
    let counters = state(&mut raw, "sem").counters;
    let (r, took) = timed(|| permit.release());
    let e = refused(
        r,
        &[ErrorKind::Server],
        &["publish"],
        "a release that must admit a waiter",
    );
    assert!(took < TIMEOUT + SLACK, "{took:?}");
    let queue: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg("{sem}:sem:queue")
        .arg(0)
        .arg(-1)
        .query(&mut raw)
        .unwrap();
    let admitted: Option<f64> = redis::cmd("ZSCORE")
        .arg("{sem}:sem")
        .arg("fake-waiter")
        .query(&mut raw)
        .unwrap();
    assert!(
        queue.contains(&entry) || admitted.is_some(),
        "the waiter's entry was dropped and it was not admitted ({e}): queue {queue:?}"
    );
    if admitted.is_none() {
        assert_eq!(
            state(&mut raw, "sem").counters,
            counters,
            "a fence was drawn for nobody ({e})"
        );
    }
}

#[test]
fn a_user_without_subscribe_gets_noperm_on_a_wait_and_nothing_is_queued() {
    let srv = Server::start();
    let mut raw = srv.raw();
    acl_user(&mut raw, "nosubscribe", &["subscribe"]);
    let admin = client(&srv);
    let c = client_as(&srv, "nosubscribe");
    // Nothing of an uncontended cycle subscribes.
    c.acquire_with("plain", AcquireOptions::new(60 * S).fenced(true))
        .unwrap()
        .release()
        .unwrap();
    let held = admin.acquire("held", 60 * S, Wait::TryOnce).unwrap();
    let before = state(&mut raw, "held");
    let wait = 2 * S;
    let (r, took) = timed(|| c.acquire("held", 60 * S, Wait::Timeout(wait)));
    refused(
        r,
        &[ErrorKind::Server],
        &["NOPERM", "subscribe"],
        "a waiting acquire",
    );
    assert!(took < wait + TIMEOUT + SLACK, "{took:?}");
    assert_eq!(state(&mut raw, "held"), before, "a refused wait wrote");
    // Its release serves the admin's waiters.
    held.release().unwrap();
    let lock = c.acquire("held", 60 * S, Wait::TryOnce).unwrap();
    let waiter = {
        let admin = admin.clone();
        thread::spawn(move || admin.acquire("held", 60 * S, Wait::Timeout(30 * S)))
    };
    wait_until("the waiter to queue", 10 * S, || {
        admin.inspect("held").unwrap().waiters == 1
    });
    lock.release().unwrap();
    waiter
        .join()
        .unwrap()
        .expect("served by a user without SUBSCRIBE")
        .release()
        .unwrap();
    assert_eq!(admin.stats().handoffs_received, 1);
}
