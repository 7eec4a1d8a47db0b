//! Processes: contention across forked processes sharing one client, and
//! fork safety (a child opens its own connections; a lock inherited by a
//! child is inert there).

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;
use std::time::Duration;

use common::Server;
use redis::Commands;
use redislock::{AcquireOptions, Client, Wait};

const S: Duration = Duration::from_secs(1);

/// The TTL of the renewed locks: renewed every ~700 ms, so that a renewal
/// thread a busy machine holds up for a second still renews in time.
const RENEWED_TTL: Duration = Duration::from_secs(2);

/// Wait until `client` (of this process) has renewed `n` more locks than
/// `since`: true, or false after 10 s.
fn renewed(client: &Client, since: u64, n: u64) -> bool {
    let t = std::time::Instant::now();
    while client.stats().renewals_ok < since + n {
        if t.elapsed() > 10 * S {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Run `body` in a forked child; returns its pid. The child never returns:
/// it leaves with `_exit` (0 when `body` returned true) so that nothing of
/// the parent (the test server above all) is dropped in it.
fn fork_child(body: impl FnOnce() -> bool) -> libc::pid_t {
    match unsafe { libc::fork() } {
        -1 => panic!("fork failed"),
        0 => {
            let ok = catch_unwind(AssertUnwindSafe(body)).unwrap_or(false);
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
        pid => pid,
    }
}

fn wait_child(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(rc, pid);
    assert!(
        libc::WIFEXITED(status),
        "child {pid} did not exit normally: {status}"
    );
    libc::WEXITSTATUS(status)
}

#[test]
fn eight_processes_keep_a_non_atomic_counter_exact() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    // Warm the pool so that children inherit connections they must not use.
    let l = client.acquire("procs", 5 * S, Wait::TryOnce).unwrap();
    let _ = client.acquire("procs", 5 * S, Wait::Timeout(Duration::from_millis(50)));
    l.release().unwrap();
    let per_child = 40;
    let pids: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            let url = srv.url();
            fork_child(move || {
                let mut raw = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..per_child {
                    let lock = client
                        .acquire("procs", 5 * S, Wait::Timeout(60 * S))
                        .unwrap();
                    let n: i64 = raw.get::<_, Option<i64>>("counter").unwrap().unwrap_or(0);
                    let _: () = raw.set("counter", n + 1).unwrap();
                    lock.release().unwrap();
                }
                true
            })
        })
        .collect();
    for pid in pids {
        assert_eq!(wait_child(pid), 0, "a worker process failed");
    }
    let n: i64 = srv.raw().get("counter").unwrap();
    assert_eq!(n, 8 * per_child);
    // The parent's client still works: the children never used its sockets.
    client
        .acquire("procs", 5 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
}

#[test]
fn a_lock_inherited_by_a_child_is_inert_there() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let lock = client
        .acquire_with("parent", AcquireOptions::new(RENEWED_TTL).auto_renew(true))
        .unwrap();
    let token = lock.token().to_vec();

    // Dropping it in the child, while the child uses the same client.
    let pid = {
        let client = client.clone();
        // Move a second handle to the same lock into the child by value.
        let lock_ref = &lock;
        let child_token = token.clone();
        fork_child(move || {
            let ok_before = client.is_owned_by("parent", &child_token).unwrap();
            let other = client.acquire("child-own", 5 * S, Wait::TryOnce).unwrap();
            other.release().unwrap();
            // Dropping a bitwise copy of the parent's handle is what a
            // child's exit or garbage collector would do.
            let inherited: redislock::Lock = unsafe { std::ptr::read(lock_ref) };
            drop(inherited);
            ok_before && client.is_owned_by("parent", &child_token).unwrap()
        })
    };
    assert_eq!(wait_child(pid), 0, "the child could not use the client");
    assert!(
        lock.owned().unwrap(),
        "the child's drop released the parent's lock"
    );

    // An explicit release in the child does nothing either.
    let lock_ref = &lock;
    let pid = fork_child(move || {
        let inherited: redislock::Lock = unsafe { std::ptr::read(lock_ref) };
        inherited.release().is_ok()
    });
    assert_eq!(wait_child(pid), 0);
    assert!(
        lock.owned().unwrap(),
        "the child's release released the parent's lock"
    );

    // The parent's renewal thread kept going all along, and goes on.
    let since = client.stats().renewals_ok;
    assert!(
        renewed(&client, since, 2),
        "the parent's lock was not renewed after the children"
    );
    assert!(!lock.is_lost());
    assert!(lock.owned().unwrap());
    lock.release().unwrap();
    assert!(!client.is_locked("parent").unwrap());
}

#[test]
fn a_child_can_renew_its_own_locks() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    // The parent renews one lock, so the renewal set is not empty at fork.
    let parent = client
        .acquire_with("p-renew", AcquireOptions::new(RENEWED_TTL).auto_renew(true))
        .unwrap();
    let c = client.clone();
    let pid = fork_child(move || {
        let mine = c
            .acquire_with("c-renew", AcquireOptions::new(RENEWED_TTL).auto_renew(true))
            .unwrap();
        // The child's statistics are its own: these are its renewals.
        let ok = renewed(&c, 0, 2) && mine.owned().unwrap() && !mine.is_lost();
        mine.release().unwrap();
        ok
    });
    assert_eq!(wait_child(pid), 0, "the child's lock was not renewed");
    assert!(parent.owned().unwrap());
    parent.release().unwrap();
}

#[test]
fn a_child_never_makes_the_tokens_its_parent_makes() {
    // The parent has drawn from its random pool; a child must not replay it.
    let _ = redislock::random_token();
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (r, w) = (fds[0], fds[1]);
    let pid = fork_child(move || {
        let mut out = Vec::new();
        for _ in 0..4 {
            out.extend_from_slice(&redislock::random_token());
        }
        let n = unsafe { libc::write(w, out.as_ptr().cast(), out.len()) };
        n as usize == out.len()
    });
    unsafe { libc::close(w) };
    let mut parent = Vec::new();
    for _ in 0..4 {
        parent.extend_from_slice(&redislock::random_token());
    }
    let mut child = vec![0u8; parent.len()];
    let n = unsafe { libc::read(r, child.as_mut_ptr().cast(), child.len()) };
    unsafe { libc::close(r) };
    assert_eq!(wait_child(pid), 0);
    assert_eq!(n as usize, child.len());
    for (p, c) in parent.chunks(32).zip(child.chunks(32)) {
        assert_ne!(p, c, "parent and child made the same token");
    }
}

#[test]
fn a_child_never_uses_the_async_connections_of_its_parent() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let holder = client.acquire("a-fork", 30 * S, Wait::TryOnce).unwrap();
    // A task of the parent waits: its multiplexed connection, subscriber and
    // runtime threads are all busy when the child is made.
    let waiter = {
        let c = client.clone();
        rt.spawn(async move {
            c.acquire_async("a-fork", 10 * S, Wait::Timeout(30 * S))
                .await
        })
    };
    common::wait_until("the parent's task queued", 10 * S, || {
        srv.raw().llen::<_, i64>("{a-fork}:queue").unwrap() == 1
    });
    let c = client.clone();
    let pid = fork_child(move || {
        // The parent's runtime has no threads here: the child brings its own.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mine = c
                .acquire_async("c-async", 30 * S, Wait::TryOnce)
                .await
                .unwrap();
            // A wait of the child's own, handed over through its own subscriber.
            let second = {
                let c = c.clone();
                tokio::spawn(async move {
                    c.acquire_async("c-async", 5 * S, Wait::Timeout(10 * S))
                        .await
                })
            };
            let t = std::time::Instant::now();
            while c.stats().waiters_now != 1 {
                if t.elapsed() > 10 * S {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            mine.release_async().await.unwrap();
            let second = second.await.unwrap().unwrap();
            second.release_async().await.unwrap();
            if c.stats().acquired_handed_over != 1 {
                return false;
            }
            // The parent's lock is still its own, and still held.
            !c.acquire_async("a-fork", 5 * S, Wait::TryOnce)
                .await
                .is_ok_and(|l| l.release().is_ok())
        })
    });
    assert_eq!(wait_child(pid), 0, "the child's async calls failed");
    // The parent's task is served through the parent's own connections.
    holder.release().unwrap();
    let got = rt.block_on(waiter).unwrap().expect("the parent's waiter");
    rt.block_on(got.release_async()).unwrap();
    rt.block_on(async {
        client
            .acquire_async("a-fork", 5 * S, Wait::TryOnce)
            .await
            .unwrap()
            .release_async()
            .await
            .unwrap()
    });
    assert!(srv
        .raw()
        .keys::<_, Vec<String>>("*fork*")
        .unwrap()
        .is_empty());
}

/// Wait up to `limit` for `pid`: its exit code, or None when it did not end
/// (it is killed then).
fn wait_child_for(pid: libc::pid_t, limit: Duration) -> Option<i32> {
    let t = std::time::Instant::now();
    loop {
        let mut status = 0;
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            assert!(
                libc::WIFEXITED(status),
                "child {pid} did not exit normally: {status}"
            );
            return Some(libc::WEXITSTATUS(status));
        }
        assert_eq!(rc, 0, "waitpid failed");
        if t.elapsed() > limit {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::waitpid(pid, &mut status, 0) };
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn children_forked_while_other_threads_use_the_client_never_hang() {
    // A mutex that another thread holds at the fork stays held in the child
    // for ever: seen as a child's first Redlock call stopped in a node's
    // connection pool that a thread of the parent was putting a connection
    // back into. Here threads of the parent use the same clients without
    // a pause (pools, the subscriber, the renewal thread, Redlock's
    // workers) while the test forks children that use them at once.
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let redlock = Client::redlock(servers.iter().map(|s| s.url()))
        .node_timeout(2 * S)
        .build()
        .unwrap();
    let single = Client::open(&servers[0].url()).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let running = |f: Box<dyn Fn() + Send>| {
        let stop = stop.clone();
        thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                f();
            }
        })
    };
    let mut busy = Vec::new();
    for i in 0..2 {
        let c = redlock.clone();
        busy.push(running(Box::new(move || {
            if let Ok(l) = c.acquire(format!("fork-rl-{i}"), 5 * S, Wait::TryOnce) {
                let _ = l.release();
            }
        })));
    }
    for _ in 0..2 {
        // Two threads taking turns on one lock: hand-offs through the
        // subscriber.
        let c = single.clone();
        busy.push(running(Box::new(move || {
            if let Ok(l) = c.acquire("fork-single", 5 * S, Wait::Timeout(5 * S)) {
                let _ = l.release();
            }
        })));
    }
    let renewed: Vec<_> = ["fork-renew-a", "fork-renew-b"]
        .iter()
        .map(|k| {
            single
                .acquire_with(
                    k,
                    AcquireOptions::new(Duration::from_millis(300)).auto_renew(true),
                )
                .unwrap()
        })
        .collect();
    let mut hung = None;
    let children = 120;
    for n in 0..children {
        let (redlock, single) = (redlock.clone(), single.clone());
        let pid = fork_child(move || {
            let key = format!("fork-child-{n}");
            let done = redlock
                .acquire(&key, 5 * S, Wait::TryOnce)
                .and_then(|l| l.release())
                .and_then(|_| {
                    // Not the Redlock key: its release may still be on its
                    // way to this node (a majority answered).
                    single.acquire_with(
                        format!("{key}-single"),
                        AcquireOptions::new(5 * S).auto_renew(true),
                    )
                })
                .and_then(|l| l.release());
            if let Err(e) = &done {
                eprintln!("child {n}: {e}");
            }
            done.is_ok()
        });
        match wait_child_for(pid, 20 * S) {
            Some(code) => assert_eq!(code, 0, "child {n} failed"),
            None => {
                hung = Some(n);
                break;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in busy {
        t.join().unwrap();
    }
    assert_eq!(hung, None, "a child hung (the first of {children} is 0)");
    // The parent's renewal thread lived through every fork: it still
    // renews. (Not "never lost": on a machine that stalls for longer than
    // the 300 ms TTL a renewal may come late, and the lock is then lost
    // rightly.)
    let renewals = single.stats().renewals_ok;
    let fresh = single
        .acquire_with(
            "fork-renew-after",
            AcquireOptions::new(Duration::from_millis(900)).auto_renew(true),
        )
        .unwrap();
    common::wait_until("renewals after the last fork", 30 * S, || {
        single.stats().renewals_ok >= renewals + 3
    });
    // Lost only on a machine stalled for most of its TTL: the count above
    // is what this checks.
    let _ = fresh.release();
    for l in renewed {
        let lost = l.is_lost();
        match l.release() {
            Ok(()) => assert!(!lost, "a lost lock released"),
            Err(e) => assert!(lost, "{e}"),
        }
    }
}
