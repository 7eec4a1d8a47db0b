//! The async API on tokio: every wait mode, hand-off chains of tasks that
//! hold no thread and share the client's connections, cancellation at every
//! point of a wait, a server restart under waiting tasks, and Redlock.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{clients, wait_until, Server};
use redislock::{AcquireOptions, Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn keys_like(srv: &Server, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(pattern)
        .query(&mut srv.raw())
        .unwrap()
}

fn queue_len(srv: &Server, key: &str) -> i64 {
    redis::cmd("LLEN")
        .arg(format!("{{{key}}}:queue"))
        .query(&mut srv.raw())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_wait_mode_and_operation_works_with_the_same_errors() {
    let srv = Server::start();
    let c = Client::open(&srv.url()).unwrap();

    // Try once, free and held.
    let lock = c.acquire_async("m", 10 * S, Wait::TryOnce).await.unwrap();
    assert!(lock.fence_async().await.unwrap() > 0);
    let e = c
        .acquire_async("m", 10 * S, Wait::TryOnce)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");

    // A bounded wait runs out, and leaves nothing queued.
    let started = Instant::now();
    let e = c
        .acquire_async("m", 10 * S, Wait::Timeout(ms(300)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    assert!(started.elapsed() >= ms(300), "{:?}", started.elapsed());
    assert_eq!(queue_len(&srv, "m"), 0);

    // Inspect, ownership, extend.
    let info = c.inspect_async("m").await.unwrap();
    assert_eq!(info.holder.as_deref(), Some(lock.token()));
    assert!(c.is_locked_async("m").await.unwrap());
    assert!(lock.owned_async().await.unwrap());
    assert!(c.is_owned_by_async("m", lock.token()).await.unwrap());
    lock.extend_async(60 * S).await.unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg("m").query(&mut srv.raw()).unwrap();
    assert!(ttl > 50_000, "{ttl}");

    // Waiting forever: handed over on release, with a larger fence.
    let c2 = c.clone();
    let waiter = tokio::spawn(async move { c2.acquire_async("m", 10 * S, Wait::Forever).await });
    wait_until("the waiter queued", 10 * S, || queue_len(&srv, "m") == 1);
    let first = lock.fence_async().await.unwrap();
    lock.release_async().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert!(second.fence_async().await.unwrap() > first);

    // A stolen lock: NotOwner on extend and release, as the blocking API.
    let _: () = redis::cmd("SET")
        .arg("m")
        .arg("thief")
        .query(&mut srv.raw())
        .unwrap();
    let e = second.extend_async(S).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotOwner, "{e}");
    let e = second.release_async().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotOwner, "{e}");
    assert!(c.release_token_async("m", "thief").await.unwrap());
    assert!(!c.is_locked_async("m").await.unwrap());

    // Bad arguments fail before any I/O; a key of another type is named.
    let e = c.acquire_async("", S, Wait::TryOnce).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = c
        .acquire_async("k", Duration::ZERO, Wait::TryOnce)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let _: () = redis::cmd("LPUSH")
        .arg("alist")
        .arg("x")
        .query(&mut srv.raw())
        .unwrap();
    let e = c
        .acquire_async("alist", S, Wait::TryOnce)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
    assert!(e.to_string().contains("alist"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_is_a_connection_error_not_a_hang() {
    let dead = common::RefusingPort::new();
    let c = Client::open(&format!(
        "redis://127.0.0.1:{}?connect_timeout=300ms",
        dead.port
    ))
    .unwrap();
    let started = Instant::now();
    let e = c.acquire_async("x", S, Wait::Forever).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(started.elapsed() < 5 * S);
}

/// 200 tasks on one lock, on two worker threads: every one gets it once,
/// in hand-off order, over one subscriber and one command connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_two_hundred_tasks_shares_two_connections() {
    const N: usize = 200;
    let srv = Server::start();
    let c = Client::open(&srv.url()).unwrap();
    let holder = c
        .acquire_async("chain", 60 * S, Wait::TryOnce)
        .await
        .unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..N)
        .map(|_| {
            let (c, counter, fences) = (c.clone(), counter.clone(), fences.clone());
            tokio::spawn(async move {
                let lock = c
                    .acquire_async("chain", 30 * S, Wait::Timeout(120 * S))
                    .await
                    .expect("a waiter");
                let fence = lock.fence_async().await.unwrap();
                fences.lock().unwrap().push(fence);
                let v = counter.load(Ordering::Relaxed);
                tokio::task::yield_now().await;
                counter.store(v + 1, Ordering::Relaxed);
                lock.release_async().await.expect("release");
            })
        })
        .collect();
    wait_until("all tasks queued", 30 * S, || {
        queue_len(&srv, "chain") == N as i64
    });
    let kinds = clients(&mut srv.raw());
    assert_eq!(kinds.get("pubsub"), Some(&1), "{kinds:?}");
    assert!(kinds.values().sum::<usize>() <= 3, "{kinds:?}");

    holder.release_async().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), N as u64, "lost updates");
    let fences = fences.lock().unwrap();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "fences in order");
    assert!(keys_like(&srv, "*chain*").is_empty());
}

/// 1,000 tasks each waiting on a held lock: a free lock is still taken at
/// once, the process keeps at most 4 connections, and the waiters cost the
/// server no commands beyond the few retries of each queue's head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiting_tasks_starve_nobody_and_hold_four_connections() {
    const N: usize = 1000;
    let srv = Server::start_with(&["--maxclients", "2000"]);
    let c = Client::open(&srv.url()).unwrap();
    let mut held = Vec::new();
    for i in 0..100 {
        held.push(
            c.acquire_async(format!("h{i}"), 60 * S, Wait::TryOnce)
                .await
                .unwrap(),
        );
    }
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move {
                let l = c
                    .acquire_async(format!("h{}", i % 100), 10 * S, Wait::Timeout(120 * S))
                    .await?;
                l.release_async().await
            })
        })
        .collect();
    wait_until("all tasks queued", 30 * S, || {
        (0..100)
            .map(|i| queue_len(&srv, &format!("h{i}")))
            .sum::<i64>()
            == N as i64
    });
    // A free lock is not starved by the waiting tasks: one try, answered
    // at once (a starved one would never be answered: 10 s is the bound).
    let free = tokio::time::timeout(10 * S, c.acquire_async("free", S, Wait::TryOnce))
        .await
        .expect("a free lock is not starved by waiting tasks")
        .unwrap();
    free.release_async().await.unwrap();
    let kinds = clients(&mut srv.raw());
    assert!(kinds.values().sum::<usize>() <= 4, "{kinds:?}");

    for l in held {
        l.release_async().await.unwrap();
    }
    for t in tasks {
        t.await.unwrap().expect("every waiter served");
    }
    assert!(keys_like(&srv, "h*").is_empty());
    assert!(keys_like(&srv, "{h*").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_the_queue_and_is_never_handed_the_lock() {
    let srv = Server::start();
    let c = Client::open(&srv.url()).unwrap();
    let holder = c.acquire_async("cx", 60 * S, Wait::TryOnce).await.unwrap();

    // Cancelled before it could enqueue: the future is dropped unpolled
    // and after one poll.
    drop(c.acquire_async("cx", S, Wait::Forever));
    let _ = tokio::time::timeout(Duration::ZERO, c.acquire_async("cx", S, Wait::Forever)).await;

    // Cancelled while queued: the task of a wait that never ends is
    // aborted once it is in the queue.
    let c2 = c.clone();
    let waiter = tokio::spawn(async move { c2.acquire_async("cx", 10 * S, Wait::Forever).await });
    wait_until("the waiter queued", 10 * S, || queue_len(&srv, "cx") == 1);
    waiter.abort();
    assert!(
        waiter.await.unwrap_err().is_cancelled(),
        "the wait ended by itself"
    );
    wait_until("the cancelled waiter left the queue", 10 * S, || {
        queue_len(&srv, "cx") == 0
    });

    // The release finds nobody to hand over to: the lock is free at once,
    // not handed to a waiter that is gone.
    holder.release_async().await.unwrap();
    assert!(!c.is_locked_async("cx").await.unwrap());
    assert!(keys_like(&srv, "*cx*").is_empty());
}

/// A waiter aborted just as the lock is handed to it: whatever the order,
/// the lock ends up free (released by the cancelled waiter's clean-up), never
/// held by nobody until its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_cancelled_at_hand_off_releases_what_it_was_handed() {
    let srv = Server::start();
    let c = Client::open(&srv.url()).unwrap();
    for round in 0..40u64 {
        let holder = c.acquire_async("ho", 60 * S, Wait::TryOnce).await.unwrap();
        let c2 = c.clone();
        let waiter =
            tokio::spawn(async move { c2.acquire_async("ho", 60 * S, Wait::Forever).await });
        wait_until("queued", 10 * S, || queue_len(&srv, "ho") == 1);
        // Release and abort in the same instant, in both orders, with a
        // little skew between them.
        let skew = Duration::from_micros(round * 25);
        if round % 2 == 0 {
            holder.release_async().await.unwrap();
            tokio::time::sleep(skew).await;
            waiter.abort();
        } else {
            waiter.abort();
            tokio::time::sleep(skew).await;
            holder.release_async().await.unwrap();
        }
        if let Ok(Ok(lock)) = waiter.await {
            // It finished before the abort: an ordinary holder.
            lock.release_async().await.unwrap();
        }
        wait_until("the lock is free again", 10 * S, || {
            keys_like(&srv, "*ho*").is_empty()
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_dropped_in_a_task_is_released_in_the_background() {
    let srv = Server::start();
    let c = Client::open(&srv.url()).unwrap();
    let lock = c
        .acquire_async("dropped", 60 * S, Wait::TryOnce)
        .await
        .unwrap();
    drop(lock);
    wait_until("released", 10 * S, || keys_like(&srv, "dropped").is_empty());
    // Renewal works for locks taken by the async API: a 1.5 s lock,
    // renewed every 0.5 s, owned after four renewals (past its TTL).
    let lock = c
        .acquire_with_async("renewed", AcquireOptions::new(ms(1500)).auto_renew(true))
        .await
        .unwrap();
    while c.stats().renewals_ok < 4 {
        tokio::time::sleep(ms(50)).await;
    }
    assert!(lock.owned_async().await.unwrap());
    assert!(!lock.is_lost());
    lock.release_async().await.unwrap();
}

/// The server restarts (empty) under waiting tasks: they queue again on a
/// new subscriber, and each gets the lock once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_waiting_through_a_server_restart_are_all_served() {
    const N: u64 = 20;
    let mut srv = Server::start();
    let c = Client::open(&format!("{}?connect_timeout=5s", srv.url())).unwrap();
    let holder = c.acquire_async("rs", 60 * S, Wait::TryOnce).await.unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..N)
        .map(|_| {
            let (c, counter) = (c.clone(), counter.clone());
            tokio::spawn(async move {
                let lock = c
                    .acquire_async("rs", 10 * S, Wait::Timeout(60 * S))
                    .await
                    .expect("served after the restart");
                let v = counter.load(Ordering::Relaxed);
                tokio::time::sleep(ms(2)).await;
                counter.store(v + 1, Ordering::Relaxed);
                lock.release_async().await.expect("release");
            })
        })
        .collect();
    wait_until("all queued", 10 * S, || queue_len(&srv, "rs") == N as i64);
    srv.restart();
    holder.forget();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), N);
    assert!(keys_like(&srv, "*rs*").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_acquires_waits_and_releases_asynchronously() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    // The default per-node timeout (a tenth of the TTL) is tested in
    // tests/redlock.rs; here a pause of the machine must not fail a try.
    let c = Client::redlock(servers.iter().map(|s| s.url()))
        .node_timeout(2 * S)
        .build()
        .unwrap();
    let lock = c.acquire_async("rl", 10 * S, Wait::TryOnce).await.unwrap();
    let e = c
        .acquire_async("rl", 10 * S, Wait::TryOnce)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    let counter = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (c, counter) = (c.clone(), counter.clone());
            tokio::spawn(async move {
                let l = c
                    .acquire_async("rl", 10 * S, Wait::Timeout(60 * S))
                    .await
                    .unwrap();
                let v = counter.load(Ordering::Relaxed);
                tokio::time::sleep(ms(5)).await;
                counter.store(v + 1, Ordering::Relaxed);
                l.release_async().await.unwrap();
            })
        })
        .collect();
    lock.extend_async(20 * S).await.unwrap();
    lock.release_async().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), 8);
    // A wait cancelled between attempts leaves no key on any node.
    let holder = c.acquire_async("rl", 60 * S, Wait::TryOnce).await.unwrap();
    let _ = tokio::time::timeout(ms(250), c.acquire_async("rl", 60 * S, Wait::Forever)).await;
    holder.release_async().await.unwrap();
    // The release returns once a majority answered: wait for the last node.
    wait_until("no key left on any node", 10 * S, || {
        servers.iter().all(|s| keys_like(s, "*rl*").is_empty())
    });
}
