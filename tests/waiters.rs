//! Many waiters, few connections: every waiter of a client shares one
//! subscriber connection per server, the pool closes what a burst of
//! threads opened, and a waiter costs the server almost no commands while
//! it waits. Hand-off stays exact when the shared connection is lost.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{clients, script_calls as commands, wait_until, Server};
use redislock::{Client, Wait};

const S: Duration = Duration::from_secs(1);

fn queued(client: &Client, key: &str) -> u64 {
    client.inspect(key).unwrap().waiters
}

/// `n` threads waiting on `key`, each taking the lock in turn: it records
/// its fence, bumps a non-atomic counter and releases.
fn waiters(
    client: &Client,
    key: &'static str,
    n: usize,
    counter: &Arc<AtomicU64>,
    fences: &Arc<Mutex<Vec<u64>>>,
) -> Vec<thread::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let (client, counter, fences) = (client.clone(), counter.clone(), fences.clone());
            thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    let lock = client
                        .acquire(key, 30 * S, Wait::Timeout(120 * S))
                        .expect("a waiter");
                    fences.lock().unwrap().push(lock.fence().unwrap());
                    let v = counter.load(Ordering::Relaxed);
                    counter.store(v + 1, Ordering::Relaxed);
                    lock.release().expect("release");
                })
                .unwrap()
        })
        .collect()
}

#[test]
fn two_hundred_waiting_threads_share_one_subscriber_and_cost_no_commands() {
    const N: usize = 200;
    let srv = Server::start();
    let mut raw = srv.raw();
    let client = Client::open(&srv.url()).unwrap();
    let holder = client.acquire("busy", 60 * S, Wait::TryOnce).unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let threads = waiters(&client, "busy", N, &counter, &fences);
    wait_until("all threads queued", 30 * S, || {
        queued(&client, "busy") == N as u64
    });
    let queued_at = started;

    let kinds = clients(&mut raw);
    assert_eq!(kinds.get("pubsub"), Some(&1), "{kinds:?}");
    // The burst of first ENQUEUEs opened command connections; unused ones
    // are closed after 5 s, down to the 2 kept for the next operations.
    wait_until("idle connections closed", 15 * S, || {
        clients(&mut raw).values().sum::<usize>() <= 4
    });

    // Waiting costs the server almost nothing: only the head of the queue
    // retries, doubling from 25 ms towards the holder's TTL (60 s), so from
    // 8 s on a 2 s window sees at most one of its retries; the waiters
    // behind it come back only after 30 s. Each waiter retrying once a
    // second, as before this policy, would be 2 x 200.
    let wait_from = queued_at + 8 * S;
    thread::sleep(wait_from.saturating_duration_since(Instant::now()));
    let before = commands(&mut raw);
    thread::sleep(2 * S);
    let spent = commands(&mut raw) - before;
    assert!(spent <= 2, "{spent} scripts run in 2 s by {N} waiters");

    // The chain: every waiter gets the lock once, handed over in turn by
    // the release before it (none by a retry, which would wait for the
    // holder's TTL: 30 s).
    holder.release().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), N as u64, "lost updates");
    let fences = fences.lock().unwrap();
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences in hand-off order"
    );
    let stats = client.stats();
    assert_eq!(
        (stats.acquired_handed_over, stats.handoffs_given),
        (N as u64, N as u64),
        "somebody took the lock otherwise than by hand-off: {stats:?}"
    );
    let left: Vec<String> = redis::cmd("KEYS").arg("*busy*").query(&mut raw).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(clients(&mut raw).get("pubsub"), Some(&1));
}

#[test]
fn waiters_whose_subscriber_is_killed_queue_again_and_all_get_the_lock() {
    const N: usize = 20;
    let srv = Server::start();
    let mut raw = srv.raw();
    let client = Client::open(&srv.url()).unwrap();
    let holder = client.acquire("killed", 60 * S, Wait::TryOnce).unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let threads = waiters(&client, "killed", N, &counter, &fences);
    wait_until("all queued", 30 * S, || {
        queued(&client, "killed") == N as u64
    });
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut raw)
        .unwrap();
    assert_eq!(killed, 1);
    // Each left the queue under the dead channel and queued again under a
    // new one: one new subscriber for all of them.
    wait_until("queued again", 30 * S, || {
        clients(&mut raw).get("pubsub") == Some(&1) && queued(&client, "killed") == N as u64
    });
    let queue: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg("{killed}:queue")
        .arg(0)
        .arg(-1)
        .query(&mut raw)
        .unwrap();
    let channels: std::collections::HashSet<&[u8]> = queue.iter().map(|m| &m[..32]).collect();
    assert_eq!(channels.len(), 1, "one channel for all waiters");

    holder.release().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), N as u64);
    let left: Vec<String> = redis::cmd("KEYS").arg("*killed*").query(&mut raw).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_waiter_that_gives_up_leaves_the_shared_subscriber_serving_the_others() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let client = Client::open(&srv.url()).unwrap();
    let holder = client.acquire("mixed", 60 * S, Wait::TryOnce).unwrap();
    let patient = {
        let client = client.clone();
        thread::spawn(move || client.acquire("mixed", 30 * S, Wait::Timeout(60 * S)))
    };
    wait_until("queued", 10 * S, || queued(&client, "mixed") == 1);
    // An impatient waiter on the same channel gives up.
    let err = client
        .acquire("mixed", 30 * S, Wait::Timeout(Duration::from_millis(200)))
        .unwrap_err();
    assert_eq!(err.kind(), redislock::ErrorKind::NotAcquired, "{err}");
    assert_eq!(queued(&client, "mixed"), 1, "it left the queue");
    holder.release().unwrap();
    let lock = patient.join().unwrap().expect("the patient waiter");
    assert_eq!(clients(&mut raw).get("pubsub"), Some(&1));
    lock.release().unwrap();
}

/// A waiter whose retry cannot connect (the server stopped listening for a
/// moment) while its subscriber lives on queues again once the server
/// listens, instead of failing the wait.
#[test]
fn a_retry_that_cannot_connect_queues_again_when_the_server_is_back() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let _: () = redis::cmd("SET")
        .arg("cc")
        .arg("someone-else")
        .arg("PX")
        .arg(30_000)
        .query(&mut raw)
        .unwrap();
    let client = Client::open(&format!("{}?connect_timeout=5s", srv.url())).unwrap();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || client.acquire("cc", 5 * S, Wait::Timeout(20 * S)))
    };
    wait_until("queued", 10 * S, || {
        redis::cmd("LLEN")
            .arg("{cc}:queue")
            .query::<i64>(&mut raw)
            .unwrap()
            == 1
    });
    // Its command connections go and the port closes (Redis 7 moves the
    // listener at once); the subscriber and this connection stay.
    let port = srv.port;
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("port")
        .arg(common::free_port())
        .query(&mut raw)
        .unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the port still takes connections"
    );
    // The head retries at 25 ms doubling: wait until retries found the
    // port closed.
    wait_until("a retry to fail to connect", 20 * S, || {
        client.stats().connection_errors >= 2
    });
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("port")
        .arg(port)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("DEL").arg("cc").query(&mut raw).unwrap();
    let lock = waiter
        .join()
        .unwrap()
        .expect("the wait outlived the closed port");
    lock.release().unwrap();
}
