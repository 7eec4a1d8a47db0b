//! The lock protocol against a real redis-server: exclusion, expiry,
//! extend, fencing, interop with the raw `SET NX` pattern, waiting and
//! hand-off, renewal, bad input.

mod common;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{command_calls, script_calls, timed, wait_until, Server};
use redis::Commands;
use redislock::{AcquireOptions, Client, Error, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn pttl(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).unwrap()
}

fn get(con: &mut redis::Connection, key: &[u8]) -> Option<Vec<u8>> {
    con.get(key).unwrap()
}

#[test]
fn the_key_holds_exactly_the_token_with_the_ttl() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let lock = client.acquire("jobs", 10 * S, Wait::TryOnce).unwrap();
    assert_eq!(lock.token().len(), 32, "128 random bits as hex");
    assert_eq!(get(&mut raw, b"jobs").as_deref(), Some(lock.token()));
    let t = pttl(&mut raw, "jobs");
    assert!(t > 5_000 && t <= 10_000, "pttl {t}");
    assert!(lock.owned().unwrap());
    assert!(client.is_locked("jobs").unwrap());
    // A plain acquisition writes the lock only (what the hand-written
    // helper writes) and an extend of it nothing more.
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert_eq!(keys, vec!["jobs".to_string()]);
    lock.extend(10 * S).unwrap();
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert_eq!(keys, vec!["jobs".to_string()]);
    // Its fence, drawn when asked for, is kept beside the lock for the
    // holder, with its expiry, and moves with an extend.
    let fence = lock.fence().unwrap();
    let token = String::from_utf8(lock.token().to_vec()).unwrap();
    let kept: String = raw.get("{jobs}:meta").unwrap();
    assert_eq!(kept, format!("{fence}:{token}"));
    let t = pttl(&mut raw, "{jobs}:meta");
    assert!(t > 5_000 && t <= 10_000, "pttl {t}");
    lock.extend(20 * S).unwrap();
    let t = pttl(&mut raw, "{jobs}:meta");
    assert!(t > 15_000 && t <= 20_000, "pttl {t}");
    lock.release().unwrap();
    assert_eq!(get(&mut raw, b"jobs"), None);
    assert!(!client.is_locked("jobs").unwrap());
    // Nothing is left behind but the slot's shared fence counter.
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].starts_with("redislock:fence:{"), "{keys:?}");
    let counter: u64 = raw.get(&keys[0]).unwrap();
    assert_eq!(counter, fence);
}

#[test]
fn inspect_reports_holder_ttl_and_fence() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let free = client.inspect("insp").unwrap();
    assert_eq!(
        free,
        redislock::LockInfo {
            holder: None,
            ttl: None,
            fence: None,
            waiters: 0,
        }
    );
    let lock = client.acquire("insp", 10 * S, Wait::TryOnce).unwrap();
    let held = client.inspect("insp").unwrap();
    assert_eq!(held.holder.as_deref(), Some(lock.token()));
    let ttl = held.ttl.unwrap();
    assert!(ttl > 5 * S && ttl <= 10 * S, "{ttl:?}");
    // The fence is known once the holder drew it (asked for it, or took
    // the lock fenced): a plain acquisition does not draw one.
    assert_eq!(held.fence, None);
    assert_eq!(held.waiters, 0);
    lock.extend(10 * S).unwrap();
    assert_eq!(client.inspect("insp").unwrap().fence, None);
    let fence = lock.fence().unwrap();
    assert_eq!(client.inspect("insp").unwrap().fence, Some(fence));
    // Two waiters queue up and are counted.
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let client = client.clone();
            thread::spawn(move || {
                client
                    .acquire("insp", 10 * S, Wait::Timeout(20 * S))
                    .map(|l| l.release())
            })
        })
        .collect();
    wait_until("the waiters queued", 10 * S, || {
        client.inspect("insp").unwrap().waiters == 2
    });
    lock.release().unwrap();
    for w in waiters {
        w.join().unwrap().unwrap().unwrap();
    }
    let after = client.inspect("insp").unwrap();
    assert_eq!(
        after,
        redislock::LockInfo {
            holder: None,
            ttl: None,
            fence: None,
            waiters: 0,
        }
    );
    // A lock taken by a plain SET NX client: holder and TTL, no fence.
    let mut raw = srv.raw();
    let _: () = redis::cmd("SET")
        .arg("insp")
        .arg("foreign")
        .arg("PX")
        .arg(5000)
        .query(&mut raw)
        .unwrap();
    let foreign = client.inspect("insp").unwrap();
    assert_eq!(foreign.holder.as_deref(), Some(&b"foreign"[..]));
    assert_eq!(foreign.fence, None);
    let _: () = raw.hset("insp-h", "f", "v").unwrap();
    assert_eq!(
        client.inspect("insp-h").unwrap_err().kind(),
        ErrorKind::WrongType
    );
}

#[test]
fn sixteen_threads_keep_a_non_atomic_counter_exact() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let per_thread = 60;
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let client = client.clone();
            let url = srv.url();
            thread::spawn(move || {
                let mut raw = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..per_thread {
                    let lock = client
                        .acquire("counter-lock", 5 * S, Wait::Timeout(30 * S))
                        .unwrap();
                    let n: i64 = raw.get::<_, Option<i64>>("counter").unwrap().unwrap_or(0);
                    let _: () = raw.set("counter", n + 1).unwrap();
                    lock.release().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let n: i64 = srv.raw().get("counter").unwrap();
    assert_eq!(n, 16 * per_thread);
}

#[test]
fn an_expired_lock_can_be_taken_and_the_old_owner_cannot_touch_it() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let old = client.acquire("exp", ms(200), Wait::TryOnce).unwrap();
    let old_fence = old.fence().unwrap();
    thread::sleep(ms(300));
    let new = client.acquire("exp", 10 * S, Wait::TryOnce).unwrap();
    assert!(new.fence().unwrap() > old_fence);
    let e = old.extend(10 * S).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotOwner, "{e}");
    assert!(old.is_lost());
    assert!(!old.owned().unwrap());
    let e = old.release().unwrap_err();
    assert!(matches!(e, Error::NotOwner { .. }), "{e}");
    assert_eq!(get(&mut raw, b"exp").as_deref(), Some(new.token()));
    assert!(pttl(&mut raw, "exp") > 5_000);
    // After the new owner is gone, the old one's calls never re-create the key.
    let stale = client.acquire("exp2", ms(100), Wait::TryOnce).unwrap();
    thread::sleep(ms(200));
    assert_eq!(stale.extend(5 * S).unwrap_err().kind(), ErrorKind::NotOwner);
    assert_eq!(get(&mut raw, b"exp2"), None);
    assert_eq!(stale.release().unwrap_err().kind(), ErrorKind::NotOwner);
    assert_eq!(get(&mut raw, b"exp2"), None);
    new.release().unwrap();
}

#[test]
fn extend_sets_the_remaining_time() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let lock = client.acquire("ext", 10 * S, Wait::TryOnce).unwrap();
    lock.extend(4 * S).unwrap();
    let t = pttl(&mut raw, "ext");
    assert!(t > 2_000 && t <= 4_000, "shortened to {t}");
    lock.extend(20 * S).unwrap();
    let t = pttl(&mut raw, "ext");
    assert!(t > 15_000 && t <= 20_000, "lengthened to {t}");
    assert_eq!(lock.ttl(), 20 * S);
    let e = lock.extend(Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    lock.release().unwrap();
}

#[test]
fn fencing_numbers_strictly_increase_across_clients() {
    let srv = Server::start();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let client = Client::open(&srv.url()).unwrap();
            let seen = seen.clone();
            thread::spawn(move || {
                for _ in 0..250 {
                    let lock = client
                        .acquire("fenced", 5 * S, Wait::Timeout(30 * S))
                        .unwrap();
                    // Recorded while holding the lock: the order of acquisitions.
                    seen.lock().unwrap().push(lock.fence().unwrap());
                    lock.release().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1000);
    for w in seen.windows(2) {
        assert!(w[1] > w[0], "fence went from {} to {}", w[0], w[1]);
    }
}

#[test]
fn the_raw_set_nx_pattern_and_this_library_exclude_each_other() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // predis: $redis->set($key, $requestId, 'PX', $ms, 'NX')
    let ok: Option<String> = redis::cmd("SET")
        .arg("shared")
        .arg("59")
        .arg("PX")
        .arg(30_000)
        .arg("NX")
        .query(&mut raw)
        .unwrap();
    assert!(ok.is_some());
    // Try-once is the helper's own `SET NX`, whose reply says nothing of
    // the TTL; a wait reads it.
    let e = client.acquire("shared", 5 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    // ... so it says nothing of it (it once said "its key has no expiry").
    assert!(
        matches!(
            e,
            Error::NotAcquired {
                holder_ttl: None,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!e.to_string().contains("expir"), "{e}");
    let e = client
        .acquire("shared", 5 * S, Wait::Timeout(ms(100)))
        .unwrap_err();
    match &e {
        Error::NotAcquired { holder_ttl, .. } => {
            let t = holder_ttl.expect("the raw key has a TTL");
            assert!(t > 20 * S && t <= 30 * S, "{t:?}");
        }
        other => panic!("expected NotAcquired, got {other}"),
    }
    // A raw key with no expiry: said, and `Duration::MAX`.
    let _: () = redis::cmd("SET")
        .arg("forever")
        .arg("59")
        .query(&mut raw)
        .unwrap();
    let e = client
        .acquire("forever", 5 * S, Wait::Timeout(ms(100)))
        .unwrap_err();
    common::assert_held_with_no_expiry(&e);
    let _: () = redis::cmd("DEL").arg("forever").query(&mut raw).unwrap();
    // The stateless release by request id works on a raw lock...
    assert!(!client.release_token("shared", "4").unwrap());
    assert_eq!(get(&mut raw, b"shared").as_deref(), Some(&b"59"[..]));
    assert!(client.release_token("shared", "59").unwrap());
    assert_eq!(get(&mut raw, b"shared"), None);
    // ...and our lock excludes a raw SET NX.
    let lock = client
        .acquire_with("shared", AcquireOptions::new(5 * S).token("4"))
        .unwrap();
    assert_eq!(lock.token(), b"4");
    let ok: Option<String> = redis::cmd("SET")
        .arg("shared")
        .arg("59")
        .arg("PX")
        .arg(5000)
        .arg("NX")
        .query(&mut raw)
        .unwrap();
    assert!(ok.is_none(), "raw SET NX must fail while we hold the lock");
    assert_eq!(get(&mut raw, b"shared").as_deref(), Some(&b"4"[..]));
    lock.release().unwrap();
}

#[test]
fn release_survives_script_flush() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let lock = client.acquire("flush", 10 * S, Wait::TryOnce).unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    lock.release().unwrap();
    assert_eq!(get(&mut raw, b"flush"), None);
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    let lock = client.acquire("flush", 10 * S, Wait::TryOnce).unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    lock.extend(5 * S).unwrap();
    lock.release().unwrap();
}

#[test]
fn try_once_returns_at_once_and_a_deadline_is_kept() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let _held = client.acquire("busy", 30 * S, Wait::TryOnce).unwrap();
    // Try once is one command (the helper's `SET NX`), no script, no
    // retry, no queueing.
    let (scripts, sets) = (script_calls(&mut raw), command_calls(&mut raw, "set"));
    let (r, took) = timed(|| client.acquire("busy", 5 * S, Wait::TryOnce));
    assert_eq!(r.unwrap_err().kind(), ErrorKind::NotAcquired);
    assert_eq!(script_calls(&mut raw) - scripts, 0, "try-once ran a script");
    assert_eq!(
        command_calls(&mut raw, "set") - sets,
        1,
        "try-once sent more than one SET"
    );
    assert!(took < 5 * S, "try-once took {took:?} (the holder has 30 s)");
    // A deadline is kept: not shorter, and not the holder's 30 s.
    let (r, took) = timed(|| client.acquire("busy", 5 * S, Wait::Timeout(ms(400))));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    assert!(
        took >= ms(400) && took < 10 * S,
        "400 ms wait took {took:?}"
    );
    // The waiter left the queue behind it: no hand-off to a departed waiter.
    let queued: i64 = raw.llen("{busy}:queue").unwrap();
    assert_eq!(queued, 0);
}

#[test]
fn a_release_wakes_a_waiter_long_before_the_ttl() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let holder = client.acquire("wake", 30 * S, Wait::TryOnce).unwrap();
    let c2 = client.clone();
    let waiter = thread::spawn(move || {
        let lock = c2.acquire("wake", 30 * S, Wait::Timeout(20 * S)).unwrap();
        (Instant::now(), lock.fence().unwrap())
    });
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("wake").unwrap().waiters == 1
    });
    let released_at = Instant::now();
    let holder_fence = holder.fence().unwrap();
    holder.release().unwrap();
    let (woke_at, fence) = waiter.join().unwrap();
    let handoff = woke_at - released_at;
    eprintln!("hand-off latency: {handoff:?}");
    // Woken by the release itself (not by one of its retries, which would
    // count as taken after a wait), long before the holder's 30 s.
    let stats = client.stats();
    assert_eq!(stats.acquired_handed_over, 1, "{stats:?}");
    assert_eq!(stats.acquired_after_wait, 0, "{stats:?}");
    assert!(
        handoff < 10 * S,
        "waiter woke {handoff:?} after the release"
    );
    assert!(fence > holder_fence);
}

/// The head of a queue retries on its own (backing off from 25 ms), so its
/// hand-off may come by the release's message or by a retry that meets it
/// (both count as handed over). A waiter behind the head does not retry
/// before the holder's TTL (30 s here): when the head releases, that waiter
/// can only be woken by the message, at once and without a script of its
/// own.
#[test]
fn a_waiter_behind_the_head_is_woken_by_the_release_message() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    common::load_scripts(&client);
    let handed_before = client.stats().acquired_handed_over;
    let holder = client.acquire("relay", 30 * S, Wait::TryOnce).unwrap();
    let (got, has_it) = std::sync::mpsc::channel();
    let (go, let_go) = std::sync::mpsc::channel::<()>();
    let head = {
        let client = client.clone();
        thread::spawn(move || {
            let lock = client
                .acquire("relay", 30 * S, Wait::Timeout(60 * S))
                .unwrap();
            got.send(()).unwrap();
            let_go.recv().unwrap();
            lock.release().unwrap();
        })
    };
    wait_until("the head queued", 10 * S, || {
        client.inspect("relay").unwrap().waiters == 1
    });
    let behind = {
        let client = client.clone();
        thread::spawn(move || {
            let lock = client
                .acquire("relay", 30 * S, Wait::Timeout(60 * S))
                .unwrap();
            (Instant::now(), lock)
        })
    };
    wait_until("the second waiter queued", 10 * S, || {
        client.inspect("relay").unwrap().waiters == 2
    });
    holder.release().unwrap();
    has_it
        .recv_timeout(20 * S)
        .expect("the head was handed the lock");
    let scripts = script_calls(&mut raw);
    let released_at = Instant::now();
    go.send(()).unwrap();
    head.join().unwrap();
    let (woke_at, lock) = behind.join().unwrap();
    let woke = woke_at - released_at;
    assert_eq!(
        script_calls(&mut raw) - scripts,
        1,
        "the second waiter ran a script: it took the lock by a retry, not by the message"
    );
    assert!(
        woke < 10 * S,
        "woken {woke:?} after the release (its retry: 30 s)"
    );
    assert_eq!(client.stats().acquired_handed_over - handed_before, 2);
    lock.release().unwrap();
}

#[test]
fn waiters_are_served_in_arrival_order() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let holder = client.acquire("fifo", 30 * S, Wait::TryOnce).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..4 {
        let c = client.clone();
        let order = order.clone();
        handles.push(thread::spawn(move || {
            let lock = c.acquire("fifo", 30 * S, Wait::Timeout(20 * S)).unwrap();
            order.lock().unwrap().push(i);
            thread::sleep(ms(20));
            lock.release().unwrap();
        }));
        // Each waiter queues before the next arrives.
        wait_until("the waiter queued", 10 * S, || {
            client.inspect("fifo").unwrap().waiters == i + 1
        });
    }
    holder.release().unwrap();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
}

#[test]
fn a_releaser_does_not_jump_the_queue() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let first = client.acquire("turns", 30 * S, Wait::TryOnce).unwrap();
    let c2 = client.clone();
    let waiter = thread::spawn(move || c2.acquire("turns", 30 * S, Wait::Timeout(20 * S)).unwrap());
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("turns").unwrap().waiters == 1
    });
    first.release().unwrap();
    // Re-taking at once must fail: the lock went to the waiter.
    let e = client.acquire("turns", 30 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired);
    waiter.join().unwrap().release().unwrap();
}

#[test]
fn a_dead_waiter_never_blocks_the_queue() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let holder = client.acquire("ghost", 30 * S, Wait::TryOnce).unwrap();
    // A queue entry whose process is gone: nobody listens on its channel.
    let member = format!("{}:{}:30000:deadbeef", "0".repeat(32), "0".repeat(16));
    let _: () = raw.rpush("{ghost}:queue", member).unwrap();
    holder.release().unwrap();
    assert_eq!(
        get(&mut raw, b"ghost"),
        None,
        "the lock went to a dead waiter"
    );
    client
        .acquire("ghost", 5 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
}

#[test]
fn a_foreign_release_is_noticed_before_the_ttl() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let _: () = redis::cmd("SET")
        .arg("foreign")
        .arg("other")
        .arg("PX")
        .arg(30_000)
        .arg("NX")
        .query(&mut raw)
        .unwrap();
    let c2 = client.clone();
    let waiter = thread::spawn(move || {
        let lock = c2.acquire("foreign", 5 * S, Wait::Timeout(20 * S)).unwrap();
        let t = Instant::now();
        lock.release().unwrap();
        t
    });
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("foreign").unwrap().waiters == 1
    });
    let deleted_at = Instant::now();
    let _: () = raw.del("foreign").unwrap();
    let got_at = waiter.join().unwrap();
    let after = got_at - deleted_at;
    // Noticed by a retry (nobody announced the DEL), long before the
    // foreign holder's 30 s.
    let stats = client.stats();
    assert_eq!(stats.acquired_after_wait, 1, "{stats:?}");
    assert!(after < 10 * S, "a raw DEL was noticed only after {after:?}");
}

#[test]
fn an_expiring_holder_is_noticed_at_its_ttl() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    // A holder that never releases: its 1 s run out on the server. The
    // waiter comes back no later than the holder's remaining TTL (backing
    // off from 25 ms): it takes the lock soon after 1 s, not at the end of
    // its 10 s deadline.
    let started = Instant::now();
    let _abandoned =
        std::mem::ManuallyDrop::new(client.acquire("lapse", S, Wait::TryOnce).unwrap());
    client
        .acquire("lapse", 5 * S, Wait::Timeout(10 * S))
        .unwrap()
        .release()
        .unwrap();
    let took = started.elapsed();
    assert!(took >= S && took < 5 * S, "took {took:?} for a 1 s holder");
}

#[test]
fn renewal_keeps_a_short_lock_alive_and_stops_at_release() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // A 1.5 s lock, renewed every 0.5 s: a second to spare for a pause of
    // the renewal thread.
    let lock = client
        .acquire_with("renewed", AcquireOptions::new(ms(1500)).auto_renew(true))
        .unwrap();
    // Five renewals: 2.5 s, well past the TTL, owned all along.
    while client.stats().renewals_ok < 5 {
        thread::sleep(ms(100));
        assert!(lock.owned().unwrap(), "lost after renewal");
        assert!(!lock.is_lost(), "{:?}", client.stats());
    }
    lock.release().unwrap();
    // Renewal is the only user of plain EVAL, and (where the server has
    // `SET … IFEQ`) of SET after the acquire: count them from here on.
    let evals = |raw: &mut redis::Connection| {
        common::command_calls(raw, "eval") + common::command_calls(raw, "set")
    };
    let before = evals(&mut raw);
    assert!(before > 5, "renewal sent only {} extends", before - 1);
    // Two renewal periods: an extend after the release would show.
    thread::sleep(ms(1200));
    assert_eq!(evals(&mut raw), before, "an extend was sent after release");
    assert_eq!(get(&mut raw, b"renewed"), None);
}

#[test]
fn renewal_reports_a_stolen_lock_as_lost() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let lock = client
        .acquire_with("stolen", AcquireOptions::new(ms(300)).auto_renew(true))
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("stolen")
        .arg("thief")
        .arg("PX")
        .arg(60_000)
        .query(&mut raw)
        .unwrap();
    wait_until("renewal to report the stolen lock lost", 10 * S, || {
        lock.is_lost()
    });
    assert_eq!(get(&mut raw, b"stolen").as_deref(), Some(&b"thief"[..]));
    assert!(
        pttl(&mut raw, "stolen") > 50_000,
        "the thief's TTL was changed"
    );
    assert_eq!(lock.release().unwrap_err().kind(), ErrorKind::NotOwner);
    assert_eq!(get(&mut raw, b"stolen").as_deref(), Some(&b"thief"[..]));
}

#[test]
fn a_lock_that_cannot_be_extended_is_reported_lost_before_its_ttl_runs_out() {
    // The server freezes right after the acquire: every extend hangs, for
    // up to the command timeout (30 s) without a bound. The lock must be
    // reported lost before the server could let it go: its TTL counted
    // from before the acquire was sent (the server set it later).
    let mut srv = Server::start();
    let client = Client::builder(&srv.url())
        .command_timeout(30 * S)
        .build()
        .unwrap();
    let ttl = 5 * S;
    let sent = std::time::Instant::now();
    let lock = client
        .acquire_with("frozen", AcquireOptions::new(ttl).auto_renew(true))
        .unwrap();
    srv.pause();
    let (tx, rx) = std::sync::mpsc::channel();
    lock.on_lost(move || tx.send(std::time::Instant::now()).unwrap());
    let lost_at = rx.recv_timeout(60 * S).expect("reported lost");
    assert!(
        lost_at < sent + ttl,
        "reported lost {:?} after the TTL ran out",
        lost_at - (sent + ttl)
    );
    assert!(lock.is_lost());
    assert!(client.stats().renewals_lost >= 1, "{:?}", client.stats());
    srv.resume();
}

#[test]
fn dropping_a_guard_releases_it() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    {
        let _lock = client.acquire("scoped", 30 * S, Wait::TryOnce).unwrap();
        assert!(client.is_locked("scoped").unwrap());
    }
    assert!(!client.is_locked("scoped").unwrap());
}

#[test]
fn a_key_of_another_type_is_wrong_type_and_left_alone() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let _: () = raw.hset("ahash", "field", "value").unwrap();
    for wait in [Wait::TryOnce, Wait::Timeout(ms(300))] {
        let e = client.acquire("ahash", 5 * S, wait).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
        assert!(
            e.to_string().contains("\"ahash\" holds a Redis hash value"),
            "{e}"
        );
    }
    let v: String = raw.hget("ahash", "field").unwrap();
    assert_eq!(v, "value");
    assert_eq!(pttl(&mut raw, "ahash"), -1);
    let keys: Vec<String> = raw.keys("*ahash*").unwrap();
    assert_eq!(
        keys,
        vec!["ahash".to_string()],
        "a waiter left something behind"
    );
    // Release by token on it does not touch it either.
    assert!(!client.release_token("ahash", "x").unwrap());
    let v: String = raw.hget("ahash", "field").unwrap();
    assert_eq!(v, "value");
}

#[test]
fn damaged_companion_keys_are_reported_and_never_block_a_release() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // A fence counter holding a string that is not a number below 2^53 is
    // taken for lost: the clock puts the next fence above the earlier ones.
    let first = client.acquire("f", 5 * S, Wait::TryOnce).unwrap();
    let mut last = first.fence().unwrap();
    first.release().unwrap();
    let counters: Vec<String> = raw.keys("redislock:fence:*").unwrap();
    assert_eq!(counters.len(), 1, "{counters:?}");
    let counter = counters[0].as_bytes();
    for junk in ["not-a-number", "9007199254740993", "-5", "1.5"] {
        let _: () = raw.set(counter, junk).unwrap();
        let l = client.acquire("f", 5 * S, Wait::TryOnce).unwrap();
        assert!(
            l.fence().unwrap() > last && l.fence().unwrap() < 1 << 53,
            "{junk}: {}",
            l.fence().unwrap()
        );
        last = l.fence().unwrap();
        l.release().unwrap();
    }
    // A counter of another type: a fenced acquire fails naming it, and
    // changes nothing; a plain one gets the lock, and drawing its fence
    // fails the same way.
    let _: () = raw.del(counter).unwrap();
    let _: () = raw.rpush(counter, "junk").unwrap();
    let names_it = |e: &redislock::Error| {
        assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
        assert!(e.to_string().contains(&format!("{:?}", counters[0])), "{e}");
    };
    for wait in [Wait::TryOnce, Wait::Timeout(ms(200))] {
        let fenced = AcquireOptions::new(5 * S).wait(wait).fenced(true);
        names_it(&client.acquire_with("f", fenced).unwrap_err());
        assert_eq!(get(&mut raw, b"f"), None, "the lock key was left behind");
        assert_eq!(get(&mut raw, b"{f}:meta"), None);
        let plain = client.acquire("f", 5 * S, wait).unwrap();
        names_it(&plain.fence().unwrap_err());
        plain.release().unwrap();
        let kept: Vec<String> = raw.lrange(counter, 0, -1).unwrap();
        assert_eq!(kept, vec!["junk".to_string()]);
    }
    // Such a counter never stops the release of a lock already held, nor
    // its hand-off to a waiter (whose fence then reports the counter).
    let _: () = raw.del(counter).unwrap();
    let held = client.acquire("f", 5 * S, Wait::TryOnce).unwrap();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || client.acquire("f", 5 * S, Wait::Timeout(10 * S)))
    };
    wait_until("the waiter queued", 10 * S, || {
        client.inspect("f").unwrap().waiters == 1
    });
    let _: () = raw.del(counter).unwrap();
    let _: () = raw.rpush(counter, "junk").unwrap();
    held.release().unwrap();
    let next = waiter.join().unwrap().unwrap();
    names_it(&next.fence().unwrap_err());
    next.release().unwrap();
    assert_eq!(get(&mut raw, b"f"), None);
    assert_eq!(get(&mut raw, b"{f}:meta"), None);
    assert_eq!(get(&mut raw, b"{f}:queue"), None);
    // A queue of the wrong type: waiting is refused with a clear error...
    let _: () = raw.set("{q}:queue", "junk").unwrap();
    let held = client.acquire("q", 5 * S, Wait::TryOnce).unwrap();
    let e = client
        .acquire("q", 5 * S, Wait::Timeout(ms(200)))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
    assert!(e.to_string().contains("\"{q}:queue\""), "{e}");
    // ...and the holder can still release.
    held.release().unwrap();
    assert_eq!(get(&mut raw, b"q"), None);
    assert_eq!(get(&mut raw, b"{q}:queue").as_deref(), Some(&b"junk"[..]));
}

#[test]
fn binary_names_and_tokens_round_trip() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let key: &[u8] = b"bin\x00\xff\xfe:lock";
    let token: &[u8] = b"tok\x00en\xff";
    let lock = client
        .acquire_with(key, AcquireOptions::new(5 * S).token(token))
        .unwrap();
    assert_eq!(lock.token(), token);
    assert_eq!(lock.key(), key);
    assert_eq!(get(&mut raw, key).as_deref(), Some(token));
    assert!(client.is_owned_by(key, token).unwrap());
    assert!(client.release_token(key, token).unwrap());
    assert_eq!(get(&mut raw, key), None);
    // The handle now finds nothing to release.
    assert_eq!(lock.release().unwrap_err().kind(), ErrorKind::NotOwner);
}

#[test]
fn bad_input_is_rejected_before_any_io() {
    // Nothing listens here: a Connection error would mean I/O happened.
    let dead = common::RefusingPort::new();
    let client = Client::builder(&format!("redis://127.0.0.1:{}", dead.port))
        .connect_timeout(ms(200))
        .build()
        .unwrap();
    let long = vec![b'k'; redislock::MAX_KEY_LEN + 1];
    let cases: Vec<(&str, redislock::Result<redislock::Lock>)> = vec![
        ("empty key", client.acquire("", 5 * S, Wait::TryOnce)),
        ("huge key", client.acquire(&long, 5 * S, Wait::TryOnce)),
        ("ttl 0", client.acquire("k", Duration::ZERO, Wait::TryOnce)),
        (
            "ttl 1 µs",
            client.acquire("k", Duration::from_micros(1), Wait::TryOnce),
        ),
        (
            "ttl 100 years",
            client.acquire("k", 100 * 365 * 24 * 3600 * S, Wait::TryOnce),
        ),
        (
            "empty token",
            client.acquire_with("k", AcquireOptions::new(5 * S).token("")),
        ),
        (
            "huge token",
            client.acquire_with("k", AcquireOptions::new(5 * S).token(long.clone())),
        ),
        (
            "empty key, waiting",
            client.acquire("", 5 * S, Wait::Forever),
        ),
    ];
    for (what, r) in cases {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{what}: {e}");
        assert!(!e.to_string().is_empty());
    }
    assert_eq!(
        client.release_token("", "t").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        client.release_token("k", "").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        client.is_locked("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    for url in [
        "",
        "localhost:6390",
        "http://127.0.0.1:1",
        "redis://127.0.0.1:99999",
        "redis://:pw@/0",
    ] {
        let e = Client::open(url).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{url:?}: {e}");
    }
}

#[test]
fn extend_by_token_sets_the_time_of_the_owner_only_and_never_recreates() {
    let server = Server::start();
    let client = Client::open(&server.url()).unwrap();
    let mut raw = server.raw();
    // A lock of the raw predis pattern, extended by its request id.
    let _: () = redis::cmd("SET")
        .arg("job")
        .arg("59")
        .arg("PX")
        .arg(30_000)
        .query(&mut raw)
        .unwrap();
    assert!(!client.extend_token("job", "4", 60 * S).unwrap());
    assert!(pttl(&mut raw, "job") <= 30_000);
    // Set to 10 s (not 30 s + 10 s).
    assert!(client.extend_token("job", "59", 10 * S).unwrap());
    let t = pttl(&mut raw, "job");
    assert!(t > 5_000 && t <= 10_000, "{t}");
    assert!(client.is_owned_by("job", "59").unwrap());
    assert!(client.release_token("job", "59").unwrap());
    assert!(!client.extend_token("job", "59", 10 * S).unwrap());
    assert_eq!(get(&mut raw, b"job"), None, "an extend re-created the lock");
    assert_eq!(
        client.extend_token("job", "59", ms(0)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        client.extend_token("", "59", S).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

/// What the server ran since `before` (INFO commandstats), by command.
fn ran(raw: &mut redis::Connection, commands: &[&str]) -> Vec<u64> {
    commands.iter().map(|c| command_calls(raw, c)).collect()
}

#[test]
fn an_uncontended_cycle_costs_the_server_what_the_hand_written_helper_costs() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let watched = [
        "set", "evalsha", "eval", "get", "del", "lpop", "publish", "time",
    ];
    let cycle = |wait: Wait| {
        client
            .acquire("cheap", 10 * S, wait)
            .unwrap()
            .release()
            .unwrap()
    };
    // Warm: scripts loaded, connections open.
    cycle(Wait::TryOnce);
    let waits = [Wait::TryOnce, Wait::Timeout(10 * S), Wait::Forever];
    // Every command the server ran (INFO counts in the next INFO, not in
    // its own reply: the first INFO is the 1).
    let total = common::info_field(&mut raw, "stats", "total_commands_processed");
    for wait in waits {
        cycle(wait);
    }
    let total = common::info_field(&mut raw, "stats", "total_commands_processed") - total - 1;
    // Which ones.
    let before = ran(&mut raw, &watched);
    for wait in waits {
        cycle(wait);
    }
    let after = ran(&mut raw, &watched);
    let per: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // Whatever the wait: one SET NX, one script (its GET and its DEL);
    // no queue, no message, no clock, no fence counter.
    assert_eq!(
        per,
        vec![3, 3, 0, 3, 3, 0, 0, 0],
        "per three cycles, {watched:?}"
    );
    // The helper: SET NX PX, then EVALSHA of GET + DEL: 4 commands.
    let tok = "helper-token";
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end")
        .query(&mut raw)
        .unwrap();
    let base = common::info_field(&mut raw, "stats", "total_commands_processed");
    let _: () = redis::cmd("SET")
        .arg("helped")
        .arg(tok)
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query(&mut raw)
        .unwrap();
    let _: i64 = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg("helped")
        .arg(tok)
        .query(&mut raw)
        .unwrap();
    // (each INFO counts itself)
    let helper = common::info_field(&mut raw, "stats", "total_commands_processed") - base - 1;
    assert_eq!(helper, 4);
    assert_eq!(total, 3 * helper, "ours, three cycles");
    // Nothing but the lock was ever written: no counter, no companion key.
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[test]
fn fences_are_drawn_once_per_holder_in_the_acquire_or_when_asked() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // Plain: no fence until asked; then one draw, the same number after,
    // also by token.
    let warm = client.acquire("f0", 10 * S, Wait::TryOnce).unwrap();
    warm.fence().unwrap();
    warm.release().unwrap();
    let plain = client.acquire("f1", 10 * S, Wait::TryOnce).unwrap();
    assert_eq!(plain.fence_if_drawn(), None);
    let scripts = script_calls(&mut raw);
    let fence = plain.fence().unwrap();
    assert_eq!(plain.fence().unwrap(), fence);
    assert_eq!(plain.fence_if_drawn(), Some(fence));
    assert_eq!(script_calls(&mut raw) - scripts, 1, "drawn once");
    assert_eq!(
        client.fence_token("f1", plain.token()).unwrap(),
        Some(fence)
    );
    assert_eq!(client.fence_token("f1", "another").unwrap(), None);
    plain.release().unwrap();
    // Fenced: drawn in the acquire (one script), larger than the last.
    let warm = AcquireOptions::new(10 * S).fenced(true);
    client.acquire_with("f0", warm).unwrap().release().unwrap();
    for wait in [Wait::TryOnce, Wait::Timeout(10 * S)] {
        let scripts = script_calls(&mut raw);
        let fenced = client
            .acquire_with("f1", AcquireOptions::new(10 * S).wait(wait).fenced(true))
            .unwrap();
        assert_eq!(script_calls(&mut raw) - scripts, 1);
        let f = fenced.fence_if_drawn().expect("drawn in the acquire");
        assert!(f > fence);
        assert_eq!(fenced.fence().unwrap(), f);
        fenced.release().unwrap();
    }
    // A holder that lost the lock before asking gets no number.
    let lost = client.acquire("f2", 10 * S, Wait::TryOnce).unwrap();
    let _: () = raw.set("f2", "thief").unwrap();
    assert_eq!(lost.fence().unwrap_err().kind(), ErrorKind::NotOwner);
    assert!(lost.is_lost());
}

#[test]
fn extend_uses_set_ifeq_where_the_server_has_it_and_the_script_elsewhere() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    // What this server says of SET … IFEQ.
    let _: () = raw.set("probe", "x").unwrap();
    let ifeq = redis::cmd("SET")
        .arg("probe")
        .arg("x")
        .arg("IFEQ")
        .arg("x")
        .query::<redis::Value>(&mut raw)
        .is_ok();
    let _: () = raw.del("probe").unwrap();
    let lock = client.acquire("ext", 10 * S, Wait::TryOnce).unwrap();
    // The first extend finds out (and loads the script where it is needed).
    lock.extend(20 * S).unwrap();
    let scripts = script_calls(&mut raw);
    for _ in 0..5 {
        lock.extend(20 * S).unwrap();
    }
    let t = pttl(&mut raw, "ext");
    assert!(t > 15_000 && t <= 20_000, "{t}");
    let scripts = script_calls(&mut raw) - scripts;
    assert_eq!(
        scripts,
        if ifeq { 0 } else { 5 },
        "IFEQ on this server: {ifeq}"
    );
    // Never re-creates the key, either way.
    let _: () = raw.del("ext").unwrap();
    assert_eq!(lock.extend(20 * S).unwrap_err().kind(), ErrorKind::NotOwner);
    assert_eq!(get(&mut raw, b"ext"), None);
}
