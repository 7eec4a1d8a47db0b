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
    // The port closes (Redis 7 moves the listener at once), then its
    // command connections go; the subscriber and this connection stay. In
    // the other order a retry between the two could connect again, and its
    // connection would outlive the port.
    let port = srv.port;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("port")
        .arg(common::free_port())
        .query(&mut raw)
        .unwrap();
    common::kill_clients(&mut raw, "normal");
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

/// A waiter whose first ENQUEUE is cut off by the server going away (it
/// may have run, its reply lost) rides out the outage for the connect
/// timeout, as a waiter already queued does, and is served by the server
/// that comes back (empty: the lock is free).
#[test]
fn a_first_enqueue_cut_off_by_a_restart_waits_for_the_server() {
    let mut srv = Server::start();
    let h = Client::open(&srv.url()).unwrap();
    let w = Client::open(&format!("{}?connect_timeout=10s", srv.url())).unwrap();
    // A waiter served by hand-off: `w` knows the lock as contended, and its
    // next acquire goes to the queue at once (ENQUEUE first, no plain try).
    let holder = h.acquire("pr", 60 * S, Wait::TryOnce).unwrap();
    let first = {
        let w = w.clone();
        thread::spawn(move || w.acquire("pr", 10 * S, Wait::Timeout(60 * S)))
    };
    wait_until("queued", 10 * S, || w.stats().waiters_now == 1);
    holder.release().unwrap();
    first.join().unwrap().unwrap().release().unwrap();
    // Held again, and the server holds every write: the waiter's ENQUEUE
    // stays unanswered until the server goes.
    let holder = h.acquire("pr", 60 * S, Wait::TryOnce).unwrap();
    let mut raw = srv.raw();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query(&mut raw)
        .unwrap();
    let errors = w.stats().connection_errors;
    let waiter = {
        let w = w.clone();
        thread::spawn(move || w.acquire("pr", 10 * S, Wait::Timeout(60 * S)))
    };
    wait_until("the ENQUEUE to be held by the pause", 10 * S, || {
        common::info_field(&mut srv.raw(), "clients", "blocked_clients") == 1
    });
    srv.kill();
    wait_until("the waiter to find the server gone", 20 * S, || {
        w.stats().connection_errors > errors
    });
    srv.restart();
    holder.forget();
    let lock = waiter
        .join()
        .unwrap()
        .expect("the wait outlived the restart");
    lock.release().unwrap();
}

/// Waiting threads of one client take turns reading the shared subscriber:
/// the one that reads gives up while another still waits behind it. The
/// turn passes on, and the hand-off reaches the one left by its message:
/// it sends nothing more (a retry would run ENQUEUE again, and the one
/// second in the queue retries only once the holder's minute has run out).
#[test]
fn a_reading_waiter_that_gives_up_passes_the_reading_on() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let client = Client::open(&srv.url()).unwrap();
    common::load_scripts(&client);
    let holder = client.acquire("turns", 60 * S, Wait::TryOnce).unwrap();
    // The first to wait reads the connection.
    let impatient = {
        let client = client.clone();
        thread::spawn(move || client.acquire("turns", 30 * S, Wait::Timeout(2 * S)))
    };
    wait_until("the first queued", 10 * S, || queued(&client, "turns") == 1);
    let patient = {
        let client = client.clone();
        thread::spawn(move || client.acquire("turns", 30 * S, Wait::Timeout(120 * S)))
    };
    wait_until("the second queued", 10 * S, || {
        queued(&client, "turns") == 2
    });
    let err = impatient.join().unwrap().unwrap_err();
    assert_eq!(err.kind(), redislock::ErrorKind::NotAcquired, "{err}");
    assert_eq!(queued(&client, "turns"), 1, "it left the queue");
    let before = client.stats();
    let scripts = commands(&mut raw);
    holder.release().unwrap();
    let lock = patient.join().unwrap().expect("the patient waiter");
    assert_eq!(
        commands(&mut raw) - scripts,
        1,
        "scripts since the release: only it"
    );
    common::assert_one_hand_off(&client, &before, "the waiter left reading");
    lock.release().unwrap();
}

/// An async task waits behind a thread that reads the shared subscriber;
/// the thread gives up, and the background reader takes over for the task.
#[test]
fn a_task_waiting_behind_a_thread_that_gives_up_still_gets_its_hand_off() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let client = Client::open(&srv.url()).unwrap();
    common::load_scripts(&client);
    let holder = client.acquire("mix", 60 * S, Wait::TryOnce).unwrap();
    let thread_waiter = {
        let client = client.clone();
        thread::spawn(move || client.acquire("mix", 30 * S, Wait::Timeout(2 * S)))
    };
    wait_until("the thread queued", 10 * S, || queued(&client, "mix") == 1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let task = {
        let client = client.clone();
        rt.spawn(async move {
            client
                .acquire_async("mix", 30 * S, Wait::Timeout(120 * S))
                .await
        })
    };
    wait_until("the task queued", 10 * S, || queued(&client, "mix") == 2);
    let err = thread_waiter.join().unwrap().unwrap_err();
    assert_eq!(err.kind(), redislock::ErrorKind::NotAcquired, "{err}");
    let before = client.stats();
    let scripts = commands(&mut raw);
    holder.release().unwrap();
    let lock = rt.block_on(task).unwrap().expect("the task");
    assert_eq!(
        commands(&mut raw) - scripts,
        1,
        "scripts since the release: only it"
    );
    common::assert_one_hand_off(&client, &before, "the task");
    rt.block_on(lock.release_async()).unwrap();
}

/// The commands the server logged since the slow log was reset (it logs
/// every command at threshold 0), oldest first, the command's name in
/// upper case, without the test's own SLOWLOG, CONFIG and INFO. Redis
/// leaves out what scripts ran (their client is its own, `?:0`); Valkey
/// lists those too, before the script's own entry.
fn slowlog(raw: &mut redis::Connection) -> Vec<Vec<String>> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(-1).query(raw).unwrap();
    let mut cmds: Vec<Vec<String>> = entries
        .iter()
        .filter_map(|e| {
            let redis::Value::Array(parts) = e else {
                panic!("slow log entry {e:?}")
            };
            let client: String = redis::from_redis_value(parts[4].clone()).unwrap();
            if client.starts_with('?') {
                return None;
            }
            let args: Vec<Vec<u8>> = redis::from_redis_value(parts[3].clone()).unwrap();
            let mut c: Vec<String> = args
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            c[0] = c[0].to_uppercase();
            Some(c)
        })
        .filter(|c| !matches!(c[0].as_str(), "SLOWLOG" | "CONFIG" | "INFO"))
        .collect();
    cmds.reverse();
    cmds
}

/// The plain try, `SET K token NX PX ttl GET` (a script's `SET NX` has no
/// `GET`).
fn is_plain_try(c: &[String]) -> bool {
    c[0] == "SET" && c.last().is_some_and(|a| a.eq_ignore_ascii_case("GET"))
}

/// A client that found a lock held sends its next blocking acquisition of
/// it straight to ENQUEUE (the plain try would fail again), and a holder
/// that waited releases with the script that looks at the queue first; the
/// last release leaves no key behind. Observed in the server's slow log
/// (every command, at threshold 0), which lists what clients sent.
#[test]
fn a_contended_lock_skips_the_plain_try_and_releases_through_the_queue() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let h = Client::open(&srv.url()).unwrap();
    let w = Client::open(&srv.url()).unwrap();
    // The first round loads the scripts (EVALSHA, NOSCRIPT, EVAL) and opens
    // the subscriber; the second is checked.
    let round = |check: bool, raw: &mut redis::Connection| {
        let holder = h.acquire("hot", 60 * S, Wait::TryOnce).unwrap();
        let _: () = redis::cmd("SLOWLOG").arg("RESET").query(raw).unwrap();
        let waiter = {
            let w = w.clone();
            thread::spawn(move || w.acquire("hot", 30 * S, Wait::Timeout(120 * S)))
        };
        wait_until("queued", 10 * S, || w.stats().waiters_now == 1);
        let sent = slowlog(raw);
        if check {
            // ENQUEUE (maybe its retries already: the head retries from
            // 25 ms), never the plain try first.
            assert!(
                sent.iter().any(|c| c[0] == "EVALSHA") && !sent.iter().any(|c| is_plain_try(c)),
                "what the waiter sent: {sent:?}"
            );
        }
        holder.release().unwrap();
        let lock = waiter.join().unwrap().expect("the waiter");
        let _: () = redis::cmd("SLOWLOG").arg("RESET").query(raw).unwrap();
        lock.release().unwrap();
        let release: Vec<Vec<String>> = slowlog(raw)
            .into_iter()
            .filter(|c| c[0] == "EVALSHA")
            .collect();
        if check {
            assert_eq!(release.len(), 1, "{release:?}");
            assert_eq!(
                release[0][2], "3",
                "the release of a holder that waited names the lock, meta and queue"
            );
        }
    };
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-max-len")
        .arg(1000)
        .query(&mut raw)
        .unwrap();
    round(false, &mut raw);
    round(true, &mut raw);
    let left: Vec<String> = redis::cmd("KEYS").arg("*hot*").query(&mut raw).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
    // Found free through ENQUEUE, the name is forgotten: a free lock's next
    // blocking acquisition is the plain try again.
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut raw).unwrap();
    w.acquire("hot", 30 * S, Wait::Timeout(S))
        .unwrap()
        .release()
        .unwrap();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut raw).unwrap();
    w.acquire("hot", 30 * S, Wait::Timeout(S))
        .unwrap()
        .release()
        .unwrap();
    let sent = slowlog(&mut raw);
    assert!(
        is_plain_try(&sent[0]) && sent.iter().filter(|c| c[0] == "EVALSHA").count() == 1,
        "a free lock: the try, then the release: {sent:?}"
    );
}

/// Every waiter that queues pushes the queue's expiry past the holder's
/// remaining TTL, not only the first: a queue that never empties under
/// steady contention must not expire under its waiters.
#[test]
fn each_waiter_that_queues_keeps_the_queue_alive_as_long_as_the_holder() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let client = Client::open(&srv.url()).unwrap();
    let holder = client.acquire("long", 5 * S, Wait::TryOnce).unwrap();
    let first = {
        let client = client.clone();
        thread::spawn(move || client.acquire("long", 5 * S, Wait::Timeout(120 * S)))
    };
    wait_until("the first queued", 10 * S, || queued(&client, "long") == 1);
    let pttl = |raw: &mut redis::Connection| -> i64 {
        redis::cmd("PTTL").arg("{long}:queue").query(raw).unwrap()
    };
    assert!(pttl(&mut raw) <= 15_000, "{}", pttl(&mut raw));
    holder.extend(60 * S).unwrap();
    let second = {
        let client = client.clone();
        thread::spawn(move || client.acquire("long", 5 * S, Wait::Timeout(120 * S)))
    };
    wait_until("the second queued", 10 * S, || queued(&client, "long") == 2);
    assert!(
        pttl(&mut raw) > 60_000,
        "the queue lives the holder's 60 s and a grace: {} ms",
        pttl(&mut raw)
    );
    holder.release().unwrap();
    first.join().unwrap().unwrap().release().unwrap();
    second.join().unwrap().unwrap().release().unwrap();
}
