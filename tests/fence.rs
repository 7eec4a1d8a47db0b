//! Fencing numbers that survive production, and lock names that leave
//! nothing behind: counters shared per cluster slot, grants of
//! `max(counter + 1, server TIME in µs)`, and no key of a name left once its
//! last holder and waiters are gone.

mod common;

use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use common::{wait_until, Server};
use redis::Commands;
use redislock::{Client, Wait};

const S: Duration = Duration::from_secs(1);
/// Fences stay exact as doubles (Lua, PHP, JavaScript).
const MAX_FENCE: u64 = 1 << 53;

/// Every key on the server matching `pattern`, by SCAN.
fn scan(con: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let iter: redis::Iter<String> = con.scan_match(pattern).unwrap();
    iter.map(|k| k.unwrap()).collect()
}

fn dbsize(con: &mut redis::Connection) -> usize {
    redis::cmd("DBSIZE").query(con).unwrap()
}

/// Only shared counters remain, and no key of a lock name.
fn assert_only_counters(con: &mut redis::Connection, names: usize) -> usize {
    let all = scan(con, "*");
    let strays: Vec<&String> = all
        .iter()
        .filter(|k| !k.starts_with("redislock:fence:{"))
        .collect();
    assert!(
        strays.is_empty(),
        "keys left behind: {:?}",
        &strays[..strays.len().min(10)]
    );
    assert!(all.len() <= 16_384, "{} counter keys", all.len());
    assert!(
        all.len() <= names,
        "{} counters for {names} names",
        all.len()
    );
    assert_eq!(dbsize(con), all.len());
    all.len()
}

#[test]
fn twenty_thousand_names_leave_only_the_slot_counters() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let n = 20_000;
    let threads = 4;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let client = client.clone();
            thread::spawn(move || {
                for i in (t..n).step_by(threads) {
                    let lock = client
                        .acquire(format!("order:{}", i + 1), 10 * S, Wait::TryOnce)
                        .unwrap();
                    assert!(lock.fence().unwrap() > 0 && lock.fence().unwrap() < MAX_FENCE);
                    lock.release().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut raw = srv.raw();
    assert!(scan(&mut raw, "*order:*").is_empty());
    let counters = assert_only_counters(&mut raw, n);
    // 20,000 names over 16,384 slots land in most of them.
    assert!(counters > 10_000, "only {counters} counters");
    println!(
        "20000 names -> {counters} counter keys, DBSIZE {}",
        dbsize(&mut raw)
    );
}

#[test]
fn contended_names_leave_nothing_once_served_and_dead_waiters_go_after_the_grace() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // Ten names, each with a holder and three waiters served by hand-off.
    for i in 0..10 {
        let name = format!("busy:{i}");
        let holder = client.acquire(&name, 10 * S, Wait::TryOnce).unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let client = client.clone();
                let name = name.clone();
                thread::spawn(move || {
                    let l = client
                        .acquire(&name, 10 * S, Wait::Timeout(20 * S))
                        .unwrap();
                    let f = l.fence().unwrap();
                    l.release().unwrap();
                    f
                })
            })
            .collect();
        wait_until("three waiters queued", 10 * S, || {
            client.inspect(&name).unwrap().waiters == 3
        });
        let first = holder.fence().unwrap();
        holder.release().unwrap();
        for w in waiters {
            assert!(w.join().unwrap() > first);
        }
    }
    assert!(scan(&mut raw, "*busy:*").is_empty());
    assert_only_counters(&mut raw, 10);

    // A waiter that dies in the queue (a `redislock run` killed with
    // SIGKILL) while the holder's lock expires instead of being released:
    // its queue entry goes a grace period after the lock.
    let holder = client.acquire("dying", S, Wait::TryOnce).unwrap();
    let mut dead = Command::new(common::redislock_bin())
        .args([
            "run",
            "--url",
            &srv.url(),
            "--wait",
            "60s",
            "dying",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("dying").unwrap().waiters == 1
    });
    dead.kill().unwrap();
    dead.wait().unwrap();
    holder.forget();
    assert!(!scan(&mut raw, "*dying*").is_empty());
    wait_until("the dead waiter's queue expired", 15 * S, || {
        scan(&mut raw, "*dying*").is_empty()
    });
    assert_only_counters(&mut raw, 11);
}

/// Acquire and release `inv`; its fence must exceed every one in `seen`.
fn take(client: &Client, seen: &mut Vec<u64>, what: &str) {
    let l = client.acquire("inv", 5 * S, Wait::TryOnce).unwrap();
    let f = l.fence().unwrap();
    l.release().unwrap();
    let last = *seen.last().unwrap();
    assert!(f > last, "{what}: fence {f} after {last}");
    assert!(f < MAX_FENCE, "{what}: {f}");
    seen.push(f);
}

#[test]
fn fences_increase_across_a_restart_an_eviction_and_a_lagging_server() {
    let mut srv = Server::start();
    // An independent server, used once early: its counter is behind.
    let other = Server::start();
    let behind = Client::open(&other.url()).unwrap();
    let early = behind.acquire("inv", 5 * S, Wait::TryOnce).unwrap();
    let early_fence = early.fence().unwrap();
    early.release().unwrap();

    let client = Client::open(&srv.url()).unwrap();
    let mut seen = vec![early_fence];
    for _ in 0..3 {
        take(&client, &mut seen, "plain");
    }
    // SHUTDOWN NOSAVE and a restart on the same port: the counter is gone.
    let _ = redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query::<()>(&mut srv.raw());
    srv.restart();
    assert!(
        scan(&mut srv.raw(), "*").is_empty(),
        "the restart kept data"
    );
    take(&client, &mut seen, "after a restart without persistence");
    // The counter evicted (what allkeys-lru does to it): DEL.
    let mut raw = srv.raw();
    let counters = scan(&mut raw, "redislock:fence:*");
    assert_eq!(counters.len(), 1, "{counters:?}");
    let _: () = raw.del(&counters[0]).unwrap();
    take(&client, &mut seen, "after the counter was evicted");
    // The lock moves to the other server, whose counter stayed behind (what
    // a failover to a lagging replica looks like).
    let counter: u64 = other.raw().get(&counters[0]).unwrap();
    assert!(counter < *seen.last().unwrap());
    take(&behind, &mut seen, "on a server whose counter was behind");
    println!("fences: {seen:?}");
}

#[test]
fn without_time_in_scripts_the_counter_alone_still_increases() {
    let srv = Server::start_with(&["--rename-command", "TIME", ""]);
    let client = Client::open(&srv.url()).unwrap();
    let mut last = 0;
    for i in 1..=5 {
        let l = client.acquire("no-time", 5 * S, Wait::TryOnce).unwrap();
        // TIME is refused: the counter alone, from 1.
        assert_eq!(l.fence().unwrap(), i);
        assert!(l.fence().unwrap() > last);
        last = l.fence().unwrap();
        l.release().unwrap();
    }
    // A hand-off draws from the same counter (each holder when it asks).
    let holder = client.acquire("no-time", 5 * S, Wait::TryOnce).unwrap();
    assert_eq!(holder.fence().unwrap(), 6);
    let c2 = client.clone();
    let waiter =
        thread::spawn(move || c2.acquire("no-time", 5 * S, Wait::Timeout(10 * S)).unwrap());
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("no-time").unwrap().waiters == 1
    });
    holder.release().unwrap();
    let next = waiter.join().unwrap();
    assert_eq!(next.fence().unwrap(), 7);
    next.release().unwrap();
    assert_only_counters(&mut srv.raw(), 1);
}

#[test]
fn a_hand_off_keeps_the_new_holders_fence_beside_the_lock() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let holder = client.acquire("ho", 10 * S, Wait::TryOnce).unwrap();
    let c2 = client.clone();
    let waiter = thread::spawn(move || c2.acquire("ho", 7 * S, Wait::Timeout(10 * S)).unwrap());
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("ho").unwrap().waiters == 1
    });
    let first = holder.fence().unwrap();
    holder.release().unwrap();
    let next = waiter.join().unwrap();
    assert!(next.fence().unwrap() > first);
    let stored: String = raw.get("{ho}:meta").unwrap();
    let token = String::from_utf8(next.token().to_vec()).unwrap();
    assert_eq!(stored, format!("{}:{token}", next.fence().unwrap()));
    // The waiter's own TTL (7 s, not the holder's 10 s), on both keys.
    for key in ["ho", "{ho}:meta"] {
        let t: i64 = redis::cmd("PTTL").arg(key).query(&mut raw).unwrap();
        assert!(t > 3_000 && t <= 7_000, "{key}: {t}");
    }
    // Extend moves both.
    next.extend(20 * S).unwrap();
    let t: i64 = redis::cmd("PTTL").arg("{ho}:meta").query(&mut raw).unwrap();
    assert!(t > 15_000, "{t}");
    let info = client.inspect("ho").unwrap();
    assert_eq!(info.fence, Some(next.fence().unwrap()));
    next.release().unwrap();
    assert_only_counters(&mut raw, 1);
}

/// Whether `key` holds `value` on every one of `servers`.
fn everywhere(servers: &[Server], key: &str, value: &[u8]) -> bool {
    servers.iter().all(|s| {
        let v: Option<Vec<u8>> = s.raw().get(key).unwrap();
        v.as_deref() == Some(value)
    })
}

#[test]
fn redlock_fences_follow_the_same_rule_on_every_node() {
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    // A per-node timeout no scheduling pause reaches: every node is asked
    // every time (a node late by more than a fifth of it is skipped).
    let client = Client::redlock(&urls).node_timeout(5 * S).build().unwrap();
    let lock = client.acquire("rl-fence", 60 * S, Wait::TryOnce).unwrap();
    // Acquire and extend return once a majority answered: wait for the
    // last node before reading every node.
    wait_until("every node to grant", 10 * S, || {
        everywhere(&servers, "rl-fence", lock.token())
    });
    lock.extend(60 * S).unwrap();
    let token = String::from_utf8(lock.token().to_vec()).unwrap();
    let kept = format!("{}:{token}", lock.fence().unwrap());
    wait_until("every node to store the holder's fence", 10 * S, || {
        everywhere(&servers, "{rl-fence}:meta", kept.as_bytes())
    });
    assert_eq!(
        client.inspect("rl-fence").unwrap().fence,
        Some(lock.fence().unwrap())
    );
    let first = lock.fence().unwrap();
    lock.release().unwrap();
    wait_until("the release to reach every node", 10 * S, || {
        servers
            .iter()
            .all(|s| scan(&mut s.raw(), "*rl-fence*").is_empty())
    });
    for s in &servers {
        assert_only_counters(&mut s.raw(), 1);
    }
    // Two of three nodes lose everything: the fence still grows.
    for s in servers.iter_mut().take(2) {
        s.restart();
    }
    let again = client.acquire("rl-fence", 60 * S, Wait::TryOnce).unwrap();
    assert!(
        again.fence().unwrap() > first,
        "{} after {first}",
        again.fence().unwrap()
    );
    again.release().unwrap();
}

#[test]
fn renewal_keeps_the_holders_fence_as_long_as_the_lock() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let lock = client
        .acquire_with(
            "renewed",
            redislock::AcquireOptions::new(Duration::from_millis(1500)).auto_renew(true),
        )
        .unwrap();
    // Its fence, once asked for, is kept beside it. Renewed every 0.5 s:
    // after four renewals (two seconds, more than the TTL) both keys are
    // still there, renewed together.
    let fence = lock.fence().unwrap();
    wait_until("four renewals", 20 * S, || client.stats().renewals_ok >= 4);
    assert!(!lock.is_lost());
    let stored: Option<String> = raw.get("{renewed}:meta").unwrap();
    let token = String::from_utf8(lock.token().to_vec()).unwrap();
    assert_eq!(stored, Some(format!("{fence}:{token}")));
    assert_eq!(
        client.inspect("renewed").unwrap().fence,
        Some(lock.fence().unwrap())
    );
    lock.release().unwrap();
    assert_only_counters(&mut raw, 1);
}

/// A fenced acquisition that was handed over returns with its fence drawn
/// (as a fenced one taken at once does): no request is left for `fence()`.
#[test]
fn a_fenced_hand_off_returns_with_its_fence() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let fenced = redislock::AcquireOptions::new(10 * S).fenced(true);
    let holder = client.acquire_with("fh", fenced.clone()).unwrap();
    let first = holder.fence_if_drawn().expect("drawn at once");
    let waiter = {
        let client = client.clone();
        let opts = fenced.clone().wait(Wait::Timeout(30 * S));
        thread::spawn(move || client.acquire_with("fh", opts))
    };
    wait_until("the waiter to queue", 10 * S, || {
        client.stats().waiters_now == 1
    });
    holder.release().unwrap();
    let lock = waiter.join().unwrap().unwrap();
    assert_eq!(
        client.stats().acquired_handed_over,
        1,
        "it came by hand-off"
    );
    let drawn = lock.fence_if_drawn().expect("drawn before it returned");
    assert!(drawn > first, "{drawn} > {first}");
    lock.release().unwrap();
}
