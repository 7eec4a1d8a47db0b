//! Counting semaphores and read-write locks on one server: at most `limit`
//! permits held under contention, arrival order with no barging, a waiter
//! for several permits not starved, a writer not starved by readers,
//! readers behind a writer entering together, a dead holder's permits back
//! within its lease, one holder's renewal never extending another, and
//! nothing left behind.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{wait_until, Server};
use redis::Commands;
use redislock::{AcquireOptions, Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

fn opts(ttl: Duration, wait: Wait) -> AcquireOptions {
    AcquireOptions::new(ttl).wait(wait)
}

fn waiting() -> AcquireOptions {
    opts(30 * S, Wait::Timeout(60 * S))
}

fn try_once() -> AcquireOptions {
    opts(30 * S, Wait::TryOnce)
}

/// How many waiters the queue of the semaphore or read-write lock `key`
/// holds (`kind`: "sem" or "rw").
fn queued(srv: &Server, key: &str, kind: &str) -> usize {
    srv.raw().llen(format!("{{{key}}}:{kind}:queue")).unwrap()
}

/// Whether no key of the semaphore or read-write lock `key` is left.
fn nothing_left(srv: &Server, key: &str, kind: &str) -> bool {
    let mut raw = srv.raw();
    ["", ":info", ":queue"].iter().all(|suffix| {
        !raw.exists::<_, bool>(format!("{{{key}}}:{kind}{suffix}"))
            .unwrap()
    })
}

#[test]
fn at_most_limit_permits_are_held_under_contention() {
    let srv = Server::start();
    const LIMIT: usize = 3;
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..10)
        .map(|i| {
            // A client each, as processes have.
            let client = Client::open(&srv.url()).unwrap();
            let (inside, most) = (inside.clone(), most.clone());
            thread::spawn(move || {
                let permits = if i % 3 == 0 { 2 } else { 1 };
                for _ in 0..25 {
                    let lock = client
                        .acquire_semaphore("exports", LIMIT as u32, permits, waiting())
                        .unwrap();
                    let now =
                        inside.fetch_add(permits as usize, Ordering::SeqCst) + permits as usize;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= LIMIT, "{now} permits held at once");
                    thread::sleep(Duration::from_millis(1));
                    inside.fetch_sub(permits as usize, Ordering::SeqCst);
                    lock.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        most.load(Ordering::SeqCst) >= 2,
        "the permits were never shared"
    );
    assert!(nothing_left(&srv, "exports", "sem"));
}

#[test]
fn waiters_are_admitted_in_arrival_order_and_nobody_barges() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let first = client.acquire_semaphore("line", 2, 1, try_once()).unwrap();
    // A waiter for both permits: one is free, not enough.
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for (i, permits) in [2u32, 1, 1, 2].into_iter().enumerate() {
        let (client, order) = (client.clone(), order.clone());
        threads.push(thread::spawn(move || {
            let lock = client
                .acquire_semaphore("line", 2, permits, waiting())
                .unwrap();
            order.lock().unwrap().push(i);
            thread::sleep(Duration::from_millis(20));
            lock.release().unwrap();
        }));
        wait_until("the waiter to queue", 10 * S, || {
            queued(&srv, "line", "sem") == i + 1
        });
    }
    // A free permit, and still no later caller takes it.
    let e = client
        .acquire_semaphore("line", 2, 1, try_once())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired);
    first.release().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    // 1 and 2 may enter together after 0 (both fit); 3 comes last.
    let order = order.lock().unwrap().clone();
    assert_eq!(order[0], 0, "{order:?}");
    assert_eq!(order[3], 3, "{order:?}");
    wait_until("nothing left", 10 * S, || nothing_left(&srv, "line", "sem"));
}

#[test]
fn a_waiter_for_several_permits_is_not_starved_by_single_permits() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let held: Vec<_> = (0..3)
        .map(|_| client.acquire_semaphore("big", 3, 1, try_once()).unwrap())
        .collect();
    let big = {
        let client = client.clone();
        thread::spawn(move || client.acquire_semaphore("big", 3, 3, waiting()).unwrap())
    };
    wait_until("the big waiter to queue", 10 * S, || {
        queued(&srv, "big", "sem") == 1
    });
    // Single permits keep coming; each frees one of the three.
    for lock in held {
        lock.release().unwrap();
        let e = client
            .acquire_semaphore("big", 3, 1, try_once())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotAcquired);
    }
    let big = big.join().unwrap();
    assert!(big.owned().unwrap());
    big.release().unwrap();
    assert!(nothing_left(&srv, "big", "sem"));
}

#[test]
fn a_queued_writer_stops_new_readers_and_the_readers_behind_it_enter_together() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let reader = client.acquire_read("catalog", try_once()).unwrap();
    let second = client.acquire_read("catalog", try_once()).unwrap();
    assert!(client.acquire_write("catalog", try_once()).is_err());
    let writer = {
        let client = client.clone();
        thread::spawn(move || {
            let w = client.acquire_write("catalog", waiting()).unwrap();
            thread::sleep(Duration::from_millis(200));
            w.release().unwrap();
        })
    };
    wait_until("the writer to queue", 10 * S, || {
        queued(&srv, "catalog", "rw") == 1
    });
    // Readers behind the writer: new readers queue too.
    let together = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (client, together, most) = (client.clone(), together.clone(), most.clone());
            thread::spawn(move || {
                let r = client.acquire_read("catalog", waiting()).unwrap();
                let n = together.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                // Held until all three are in.
                wait_until("the other readers", 10 * S, || {
                    together.load(Ordering::SeqCst) == 3
                });
                r.release().unwrap();
            })
        })
        .collect();
    wait_until("the readers to queue", 10 * S, || {
        queued(&srv, "catalog", "rw") == 4
    });
    assert_eq!(together.load(Ordering::SeqCst), 0);
    reader.release().unwrap();
    second.release().unwrap();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 3);
    wait_until("nothing left", 10 * S, || {
        nothing_left(&srv, "catalog", "rw")
    });
}

#[test]
fn a_dead_holders_permit_comes_back_when_its_lease_runs_out() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    // As a process killed while holding: never released.
    client
        .acquire_semaphore(
            "crashed",
            1,
            1,
            opts(Duration::from_millis(600), Wait::TryOnce),
        )
        .unwrap()
        .forget();
    let lock = client
        .acquire_semaphore("crashed", 1, 1, opts(30 * S, Wait::Timeout(30 * S)))
        .unwrap();
    lock.release().unwrap();
    assert!(nothing_left(&srv, "crashed", "sem"));
}

#[test]
fn renewing_one_holder_never_extends_another() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let short = client
        .acquire_semaphore("leases", 2, 1, opts(2 * S, Wait::TryOnce))
        .unwrap();
    let long = client
        .acquire_semaphore("leases", 2, 1, opts(2 * S, Wait::TryOnce))
        .unwrap();
    long.extend(60 * S).unwrap();
    let score = |token: &[u8]| -> f64 {
        srv.raw()
            .zscore::<_, _, f64>("{leases}:sem", token)
            .unwrap()
    };
    assert!(score(long.token()) - score(short.token()) > 50_000.0);
    assert!(short.fence().unwrap() < long.fence().unwrap());
    short.release().unwrap();
    long.release().unwrap();
    assert!(nothing_left(&srv, "leases", "sem"));
}

#[test]
fn a_waiter_that_gives_up_leaves_nothing_and_names_never_collide() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let lock = client
        .acquire("shared-name", 30 * S, Wait::TryOnce)
        .unwrap();
    let sem = client
        .acquire_semaphore("shared-name", 1, 1, try_once())
        .unwrap();
    let write = client.acquire_write("shared-name", try_once()).unwrap();
    let e = client
        .acquire_semaphore(
            "shared-name",
            1,
            1,
            opts(30 * S, Wait::Timeout(Duration::from_millis(200))),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired);
    assert_eq!(queued(&srv, "shared-name", "sem"), 0);
    sem.release().unwrap();
    write.release().unwrap();
    lock.release().unwrap();
    assert!(nothing_left(&srv, "shared-name", "sem"));
    assert!(nothing_left(&srv, "shared-name", "rw"));
}

#[test]
fn bad_limits_are_refused_before_any_io() {
    // A client of a port nobody listens on: no I/O happens.
    let client = Client::open("redis://127.0.0.1:1").unwrap();
    for (limit, permits) in [(0, 1), (1, 0), (2, 3), (1_000_001, 1)] {
        let e = client
            .acquire_semaphore("bad", limit, permits, try_once())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{limit} {permits}");
    }
}

/// `n` servers and a Redlock client whose per-node timeout (2 s) is far
/// above any pause of the machine.
fn redlock(n: usize) -> (Vec<Server>, Client) {
    let nodes: Vec<Server> = (0..n).map(|_| Server::start()).collect();
    let client = Client::redlock(nodes.iter().map(|s| s.url()))
        .node_timeout(2 * S)
        .build()
        .unwrap();
    (nodes, client)
}

#[test]
fn over_redlock_a_semaphore_of_l_needs_more_than_a_majority() {
    let (nodes, client) = redlock(3);
    // Holders A on nodes {0,1} and B on {1,2}, as partial grants or a node
    // restarted without its data would leave them: node 1 is full (2 of 2),
    // nodes 0 and 2 each have a permit free.
    let hold = |i: usize, token: &str| {
        Client::open(&nodes[i].url())
            .unwrap()
            .acquire_semaphore("l2", 2, 1, opts(30 * S, Wait::TryOnce).token(token))
            .unwrap()
            .forget()
    };
    for (i, t) in [(0, "A"), (1, "A"), (1, "B"), (2, "B")] {
        hold(i, t);
    }
    // C gets nodes 0 and 2, a majority: with A and B that would be 3
    // holders of a semaphore of 2. A semaphore of 2 over 3 nodes needs all
    // 3, so C is refused, and what it took on 0 and 2 is given back.
    let e = client
        .acquire_semaphore("l2", 2, 1, opts(30 * S, Wait::TryOnce))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    // (The refusal of node 1 decided; grants that came after are given
    // back in the background.)
    wait_until("C's grants to be given back", 10 * S, || {
        nodes.iter().enumerate().all(|(i, srv)| {
            let mut holders: Vec<String> = srv.raw().zrange("{l2}:sem", 0, -1).unwrap();
            holders.sort();
            let want: &[&str] = match i {
                0 => &["A"],
                1 => &["A", "B"],
                _ => &["B"],
            };
            holders == want
        })
    });

    // On free nodes: 2 holders, not 3; each with its fence; extended and
    // released everywhere, nothing left.
    let a = client
        .acquire_semaphore("free", 2, 1, opts(30 * S, Wait::TryOnce))
        .unwrap();
    let b = client
        .acquire_semaphore("free", 2, 1, opts(30 * S, Wait::TryOnce))
        .unwrap();
    assert!(a.fence().unwrap() > 0 && b.fence().unwrap() > 0);
    let e = client
        .acquire_semaphore("free", 2, 1, opts(30 * S, Wait::TryOnce))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    let seen = client.inspect_semaphore("free").unwrap();
    assert_eq!(seen.holder_count, 2);
    let mut tokens: Vec<Vec<u8>> = seen.holders.iter().map(|h| h.token.clone()).collect();
    tokens.sort();
    let mut want = vec![a.token().to_vec(), b.token().to_vec()];
    want.sort();
    assert_eq!(tokens, want);
    a.extend(40 * S).unwrap();
    assert!(a.owned().unwrap());
    // A waiter is let in once a permit is released (over Redlock by its
    // retries, as for the lock).
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            client
                .acquire_semaphore("free", 2, 1, opts(30 * S, Wait::Timeout(60 * S)))
                .unwrap()
        })
    };
    wait_until("the waiter to wait", 30 * S, || {
        client.stats().waiters_now == 1
    });
    a.release().unwrap();
    let c = waiter.join().unwrap();
    b.release().unwrap();
    c.release().unwrap();
    wait_until("every node released", 10 * S, || {
        nodes.iter().all(|n| nothing_left(n, "free", "sem"))
    });

    // One node dead: a semaphore of 2 over 3 nodes is refused with a
    // quorum error (it needs every node); a semaphore of 1 needs a
    // majority, as a lock does.
    let (mut nodes, client) = redlock(3);
    nodes[2].kill();
    let e = client
        .acquire_semaphore("one-dead", 2, 1, opts(30 * S, Wait::TryOnce))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    wait_until(
        "the grants of the refused attempt given back",
        10 * S,
        || {
            nodes[..2]
                .iter()
                .all(|n| nothing_left(n, "one-dead", "sem"))
        },
    );
    // The refused attempt returned once the dead node decided it: a live
    // node's grant may land after the check above and is then given back
    // in the background (a late grant of a failed attempt). So this
    // acquisition waits for that rather than trying once.
    let one = client
        .acquire_semaphore("one-dead", 1, 1, opts(30 * S, Wait::Timeout(20 * S)))
        .unwrap();
    one.release().unwrap();
}

#[test]
fn over_redlock_read_write_locks_need_a_majority() {
    let (mut nodes, client) = redlock(3);
    let r1 = client.acquire_read("rw", try_once()).unwrap();
    let r2 = client.acquire_read("rw", try_once()).unwrap();
    let e = client.acquire_write("rw", try_once()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    r1.release().unwrap();
    r2.release().unwrap();
    // (A release returns once a majority answered.)
    wait_until("the readers released on every node", 10 * S, || {
        nodes.iter().all(|n| nothing_left(n, "rw", "rw"))
    });
    // One node down: a majority is left, and a writer still excludes.
    nodes[0].kill();
    let w = client.acquire_write("rw", try_once()).unwrap();
    assert!(w.fence().unwrap() > 0);
    let e = client.acquire_read("rw", try_once()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    let seen = client.inspect_rw("rw").unwrap();
    assert_eq!(seen.holders.len(), 1);
    assert!(seen.holders[0].writer);
    w.release().unwrap();
    wait_until("released on the live nodes", 10 * S, || {
        nodes[1..].iter().all(|n| nothing_left(n, "rw", "rw"))
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_share_permits_and_a_dropped_wait_leaves_the_queue() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (client, inside, most) = (client.clone(), inside.clone(), most.clone());
            tokio::spawn(async move {
                let lock = client
                    .acquire_semaphore_async("tasks", 2, 1, waiting())
                    .await
                    .unwrap();
                let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                lock.release_async().await.unwrap();
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 2);

    // A writer's wait dropped while a reader holds: it leaves the queue.
    let reader = client
        .acquire_read_async("tasks", try_once())
        .await
        .unwrap();
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        client.acquire_write_async("tasks", waiting()),
    )
    .await;
    assert!(dropped.is_err());
    wait_until("the dropped writer to leave the queue", 10 * S, || {
        queued(&srv, "tasks", "rw") == 0
    });
    // New readers are not held up by a writer that is gone.
    let second = client
        .acquire_read_async("tasks", try_once())
        .await
        .unwrap();
    second.release_async().await.unwrap();
    reader.release_async().await.unwrap();
    assert!(nothing_left(&srv, "tasks", "sem") && nothing_left(&srv, "tasks", "rw"));
}

#[test]
fn a_renewed_holder_outlives_its_ttl_and_keeps_out_others() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let ttl = Duration::from_millis(600);
    let holder = client
        .acquire_semaphore("renewed", 1, 1, opts(ttl, Wait::TryOnce).auto_renew(true))
        .unwrap();
    // Three leases long: renewal (at a third of the TTL) kept it.
    let e = client
        .acquire_semaphore("renewed", 1, 1, opts(ttl, Wait::Timeout(3 * ttl)))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired);
    assert!(holder.owned().unwrap() && !holder.is_lost());
    holder.release().unwrap();
    assert!(nothing_left(&srv, "renewed", "sem"));
}

#[test]
fn an_uncontended_cycle_runs_16_commands_and_every_key_it_makes_expires() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let mut raw = srv.raw();
    let sem = |wait: Wait| {
        client
            .acquire_semaphore("cheap", 4, 1, opts(10 * S, wait))
            .unwrap()
            .release()
            .unwrap()
    };
    let read = |wait: Wait| {
        client
            .acquire_read("cheap", opts(10 * S, wait))
            .unwrap()
            .release()
            .unwrap()
    };
    // Warm: scripts loaded, connections open.
    sem(Wait::TryOnce);
    read(Wait::TryOnce);
    let waits = [Wait::TryOnce, Wait::Timeout(10 * S), Wait::Forever];
    // INFO counts in the next INFO, not in its own reply: hence the 1.
    let base = common::info_field(&mut raw, "stats", "total_commands_processed");
    for wait in waits {
        sem(wait);
        read(wait);
    }
    let total = common::info_field(&mut raw, "stats", "total_commands_processed") - base - 1;
    // Acquire: EVALSHA, TIME, the purge, HGETALL, LLEN, the fence's SET …
    // GET, ZADD, HSET, 2 PEXPIREs. Release: EVALSHA, TIME, the purge,
    // ZREM, HDEL, LLEN.
    assert_eq!(total, 6 * 16, "six cycles");
    // Nothing of either name is left, and no other key was made (the
    // fence counter of the slot is the only one that stays).
    assert!(nothing_left(&srv, "cheap", "sem"));
    assert!(nothing_left(&srv, "cheap", "rw"));
    let mut keys: Vec<String> = raw.keys("*").unwrap();
    keys.sort();
    assert_eq!(keys.len(), 1, "{keys:?}");

    // While held, every key of the name expires: the holders' keys with the
    // latest lease, the queue 10 s after it.
    let a = client
        .acquire_semaphore("kept", 1, 1, opts(20 * S, Wait::TryOnce))
        .unwrap();
    let b = {
        let client = Client::open(&srv.url()).unwrap();
        thread::spawn(move || {
            client
                .acquire_semaphore("kept", 1, 1, opts(5 * S, Wait::Timeout(60 * S)))
                .unwrap()
        })
    };
    wait_until("the waiter queued", 30 * S, || {
        queued(&srv, "kept", "sem") == 1
    });
    let pttl = |raw: &mut redis::Connection, k: &str| -> i64 { raw.pttl(k).unwrap() };
    for k in ["{kept}:sem", "{kept}:sem:info"] {
        let ms = pttl(&mut raw, k);
        assert!(ms > 10_000 && ms <= 20_000, "{k}: {ms} ms");
    }
    let q = pttl(&mut raw, "{kept}:sem:queue");
    assert!(q > 20_000 && q <= 30_000, "queue: {q} ms");
    // A shorter lease after it does not shorten the keys; a longer
    // renewal pushes them (and the queue) further.
    a.extend(40 * S).unwrap();
    let ms = pttl(&mut raw, "{kept}:sem");
    assert!(ms > 30_000 && ms <= 40_000, "{ms} ms");
    let q = pttl(&mut raw, "{kept}:sem:queue");
    assert!(q > 40_000 && q <= 50_000, "queue: {q} ms");
    a.release().unwrap();
    let b = b.join().unwrap();
    // a was the only holder: its keys went with it, and b's hand-off made
    // them again, expiring with b's lease.
    for k in ["{kept}:sem", "{kept}:sem:info"] {
        let ms = pttl(&mut raw, k);
        assert!(ms > 0 && ms <= 5_000, "{k}: {ms} ms");
    }
    b.release().unwrap();
    assert!(nothing_left(&srv, "kept", "sem"));
}

#[test]
fn statistics_count_acquisitions_by_kind_and_the_permits_held() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let two = client
        .acquire_semaphore("counted", 3, 2, try_once())
        .unwrap();
    let read = client.acquire_read("counted", try_once()).unwrap();
    let lock = client.acquire("counted", 30 * S, Wait::TryOnce).unwrap();
    // Refused: counted as timed out, under no kind.
    assert!(client
        .acquire_semaphore("counted", 3, 2, try_once())
        .is_err());
    let s = client.stats();
    assert_eq!(
        (
            s.acquired_locks,
            s.acquired_semaphores,
            s.acquired_reads,
            s.acquired_writes
        ),
        (1, 1, 1, 0)
    );
    assert_eq!(
        (s.permits_held_now, s.held_now, s.acquire_timed_out),
        (2, 3, 1)
    );
    two.release().unwrap();
    read.release().unwrap();
    client
        .acquire_write("counted", try_once())
        .unwrap()
        .release()
        .unwrap();
    lock.release().unwrap();
    let s = client.stats();
    assert_eq!(
        (s.acquired_writes, s.permits_held_now, s.held_now),
        (1, 0, 0)
    );
}
