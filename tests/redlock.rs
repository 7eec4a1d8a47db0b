//! Redlock over five independent throwaway servers: majorities, dead and
//! paused nodes, validity used up by slow nodes, extend and release on
//! every node, and mutual exclusion under contention.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{info_field, script_calls, timed, wait_until, Server};
use redis::Commands;
use redislock::{AcquireOptions, Client, Error, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `n` servers and a client whose per-node timeout (2 s) is far above any
/// scheduling pause: these tests are about majorities, not about the
/// default timeout (a few ms for short locks), which has tests of its own.
fn cluster(n: usize) -> (Vec<Server>, Client) {
    let servers: Vec<Server> = (0..n).map(|_| Server::start()).collect();
    let client = Client::redlock(servers.iter().map(|s| s.url()))
        .node_timeout(2 * S)
        .build()
        .unwrap();
    (servers, client)
}

fn value(srv: &Server, key: &str) -> Option<Vec<u8>> {
    srv.raw().get(key).unwrap()
}

#[test]
fn a_majority_of_free_nodes_is_needed_and_foreign_keys_are_never_touched() {
    let (servers, client) = cluster(5);
    assert!(
        client.addr().starts_with("Redlock over "),
        "{}",
        client.addr()
    );
    let mut subsets = Vec::new();
    for mask in 0u32..32 {
        if (1..=3).contains(&mask.count_ones()) {
            subsets.push(mask);
        }
    }
    assert_eq!(subsets.len(), 25);
    for (i, mask) in subsets.into_iter().enumerate() {
        let key = format!("subset-{i}");
        let taken: Vec<usize> = (0..5).filter(|n| mask & (1 << n) != 0).collect();
        for &n in &taken {
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg("other")
                .arg("PX")
                .arg(60_000)
                .query(&mut servers[n].raw())
                .unwrap();
        }
        let r = client.acquire(&key, 30 * S, Wait::TryOnce);
        let free = 5 - taken.len();
        match r {
            Ok(lock) => {
                assert!(free >= 3, "acquired with only {free} free nodes");
                // A free node that answers after the majority did grants
                // the same lock (kept: it is the holder's).
                wait_until("every free node to grant", 10 * S, || {
                    (0..5)
                        .filter(|n| !taken.contains(n))
                        .all(|n| value(&servers[n], &key).as_deref() == Some(lock.token()))
                });
                for &n in &taken {
                    assert_eq!(value(&servers[n], &key).as_deref(), Some(&b"other"[..]));
                }
                lock.release().unwrap();
            }
            Err(e) => {
                assert!(free < 3, "refused with {free} free nodes: {e}");
                assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
            }
        }
        // Nodes that answered after the decision are finished in the
        // background: nothing of ours is left once they are.
        wait_until("our keys to be taken back", 10 * S, || {
            (0..5)
                .filter(|n| !taken.contains(n))
                .all(|n| value(&servers[n], &key).is_none())
        });
        // Foreign values and their TTLs untouched.
        for (n, srv) in servers.iter().enumerate() {
            let v = value(srv, &key);
            if taken.contains(&n) {
                assert_eq!(v.as_deref(), Some(&b"other"[..]));
                let pttl: i64 = srv.raw().pttl(&key).unwrap();
                assert!(pttl > 50_000, "a foreign TTL changed: {pttl}");
            } else {
                assert_eq!(v, None, "left behind on node {n} (subset {mask:05b})");
            }
        }
    }
}

#[test]
fn two_dead_nodes_of_five_still_acquire_three_are_no_quorum() {
    let (mut servers, client) = cluster(5);
    servers[0].kill();
    servers[3].kill();
    let lock = client.acquire("dead", 30 * S, Wait::TryOnce).unwrap();
    lock.extend(10 * S).unwrap();
    lock.release().unwrap();
    servers[4].kill();
    // Refused connections: no majority is possible, so the 10 s the caller
    // would wait are not waited.
    let (r, took) = timed(|| client.acquire("dead", 30 * S, Wait::Timeout(10 * S)));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    assert!(e.to_string().contains("3 of 5"), "{e}");
    assert!(took < 3 * S, "a quorum error should not wait: {took:?}");
    // Grants that came after the decision are taken back in the background.
    wait_until("the live nodes' grants to be taken back", 10 * S, || {
        value(&servers[1], "dead").is_none() && value(&servers[2], "dead").is_none()
    });
}

/// `client` once it has a pooled connection to every node.
/// (A 60 s lock: without a per-node timeout of the client's own, the
/// default one is 300 ms, more than a pause of the machine.)
fn warm(servers: &[Server], client: Client) -> Client {
    client
        .acquire("warm", 60 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    // The release returns at a majority: a node still running it when a
    // test stops it would count as slow, not as stopped.
    wait_until("the warm-up released everywhere", 10 * S, || {
        nowhere(servers, "warm")
    });
    client
}

/// Five servers and a warm client whose per-node timeout is `node_timeout`.
fn five_with(node_timeout: Duration) -> (Vec<Server>, Client) {
    let servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let client = Client::redlock(servers.iter().map(|s| s.url()))
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    let client = warm(&servers, client);
    (servers, client)
}

/// Whether no node holds `key` (nor its fence or queue keys holding our
/// token: only the lock key is ever left by a late grant).
fn nowhere(servers: &[Server], key: &str) -> bool {
    servers.iter().all(|s| value(s, key).is_none())
}

#[test]
fn stopped_nodes_of_five_do_not_delay_an_acquire_a_majority_decides() {
    // A per-node timeout far above a round trip and any scheduling pause:
    // a wait for a stopped node would take all of it (3 s).
    let (mut servers, client) = five_with(3 * S);
    for stopped in 1..=2 {
        servers[stopped - 1].pause();
        let (r, took) = timed(|| client.acquire("maj", 30 * S, Wait::TryOnce));
        let lock = r.unwrap_or_else(|e| panic!("{stopped} stopped: {e}"));
        assert!(
            took < 3 * S / 2,
            "{stopped} stopped: the acquire waited {took:?} (node timeout 3 s)"
        );
        assert!(lock.owned().unwrap());
        let (r, took) = timed(|| lock.release());
        r.unwrap();
        assert!(
            took < 3 * S / 2,
            "{stopped} stopped: the release took {took:?} (node timeout 3 s)"
        );
        wait_until("the release to reach the running nodes", 10 * S, || {
            nowhere(&servers[stopped..], "maj")
        });
    }
    // Once running again, the stopped nodes execute the grants they were
    // sent, whose locks are released by now: the grants are taken back.
    servers[0].resume();
    servers[1].resume();
    wait_until("the late grants to be released", 10 * S, || {
        nowhere(&servers, "maj")
    });
}

#[test]
fn three_stopped_nodes_of_five_are_no_quorum_after_one_node_timeout() {
    let (mut servers, client) = five_with(S);
    for srv in &mut servers[..3] {
        srv.pause();
    }
    let (r, took) = timed(|| client.acquire("nq", 30 * S, Wait::TryOnce));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    assert!(e.to_string().contains("3 of 5"), "{e}");
    assert!(e.to_string().contains("no answer in time"), "{e}");
    // All three were waited for at once (one node timeout, 1 s), not in
    // turn (3 s).
    assert!(took >= S && took < 5 * S / 2, "{took:?}");
    // The nodes that granted are taken back.
    wait_until("the grants of the running nodes taken back", 10 * S, || {
        nowhere(&servers[3..], "nq")
    });
    // Still stopped: the next attempts do not wait for them again. They
    // are not asked at all, so the attempt ends before a node timeout.
    let (r, took) = timed(|| client.acquire("nq2", 10 * S, Wait::Timeout(10 * S)));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    assert!(e.to_string().contains("not asked"), "{e}");
    assert!(took < S, "{took:?} (node timeout 1 s)");
    for srv in &mut servers[..3] {
        srv.resume();
    }
    // Their late grants (the lock was not taken) are released.
    wait_until("the late grants to be released", 10 * S, || {
        nowhere(&servers, "nq")
    });
    let lock = client.acquire("nq", 30 * S, Wait::TryOnce).unwrap();
    lock.release().unwrap();
    wait_until("the release", 10 * S, || nowhere(&servers, "nq"));
}

#[test]
fn the_default_node_timeout_is_a_tenth_of_the_ttl() {
    let mut servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let client = warm(
        &servers,
        Client::redlock(servers.iter().map(|s| s.url()))
            .build()
            .unwrap(),
    );
    for srv in &mut servers[..3] {
        srv.pause();
    }
    // 10 s TTL: 1 s per node, within the command timeout (2 s).
    let (r, took) = timed(|| client.acquire("default", 10 * S, Wait::TryOnce));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    assert!(e.to_string().contains("node timeout 1s"), "{e}");
    assert!(took >= S && took < 2 * S, "{took:?}");
    for srv in &mut servers[..3] {
        srv.resume();
    }
}

#[test]
fn a_free_lock_is_not_refused_while_every_node_pauses_for_a_moment() {
    // What a busy machine does to every reply at once (a compiler beside
    // it pauses processes for 50-300 ms): the try-once starts while all
    // three nodes are stopped and they go on 300 ms later. The default
    // per-node timeout of a 10 s lock (1 s) rides that out; the Redlock
    // description's 1/200 of the TTL (50 ms) refused the free lock.
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let client = warm(
        &servers,
        Client::redlock(servers.iter().map(|s| s.url()))
            .build()
            .unwrap(),
    );
    for srv in &mut servers {
        srv.pause();
    }
    let acquiring = std::thread::spawn(move || {
        let lock = client.acquire("paused", 10 * S, Wait::TryOnce)?;
        lock.release().map(|_| ())
    });
    std::thread::sleep(ms(300));
    for srv in &mut servers {
        srv.resume();
    }
    acquiring
        .join()
        .unwrap()
        .expect("a free lock over healthy nodes that paused for 300 ms");
    wait_until("the release to reach every node", 10 * S, || {
        nowhere(&servers, "paused")
    });
}

#[test]
fn the_node_timeout_can_be_given_in_the_urls() {
    let mut servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let client = warm(
        &servers,
        Client::redlock(
            servers
                .iter()
                .map(|s| format!("{}?node_timeout=400ms", s.url())),
        )
        .build()
        .unwrap(),
    );
    for srv in &mut servers[..3] {
        srv.pause();
    }
    let (r, took) = timed(|| client.acquire("url", 10 * S, Wait::TryOnce));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    assert!(e.to_string().contains("node timeout 400ms"), "{e}");
    assert!(took >= ms(400) && took < 3 * S, "{took:?}");
    for srv in &mut servers[..3] {
        srv.resume();
    }
}

#[test]
fn a_late_grant_of_a_held_lock_is_kept_and_released_with_it() {
    // The node timeout only bounds how long the acquire would wait for the
    // stopped node (it does not: a majority decides). A node whose reply
    // the client has not read for a fifth of it counts as slow and is not
    // asked: 5 s keeps a busy client's own delays from making node 4 slow
    // for the extend and the release.
    let (mut servers, client) = five_with(5 * S);
    servers[4].pause();
    let lock = client.acquire("late", 30 * S, Wait::TryOnce).unwrap();
    thread::sleep(ms(300));
    servers[4].resume();
    // The late node granted the lock to the same owner: kept, it is the
    // holder's.
    wait_until("the stopped node to run the grant", 10 * S, || {
        value(&servers[4], "late").as_deref() == Some(lock.token())
    });
    thread::sleep(ms(100));
    assert_eq!(value(&servers[4], "late").as_deref(), Some(lock.token()));
    // Extended with the others: from 30 s to 60 s (the late node may be
    // reached just after the majority answered).
    lock.extend(60 * S).unwrap();
    wait_until("the late node to be extended", 10 * S, || {
        servers[4].raw().pttl::<_, i64>("late").unwrap() > 45_000
    });
    lock.release().unwrap();
    wait_until("the release", 10 * S, || nowhere(&servers, "late"));
}

#[test]
fn a_late_grant_is_released_when_the_lock_was_released_without_its_node() {
    // Node 4 is stopped through the acquire and long enough after it to
    // count as slow (a fifth of the 1 s node timeout): the release is not
    // sent to it. When it runs the grant it was sent, nobody else will
    // ever ask it for anything: the grant must still be taken back (not
    // left for the 30 s TTL).
    let (mut servers, client) = five_with(S);
    servers[4].pause();
    let lock = client.acquire("unasked", 30 * S, Wait::TryOnce).unwrap();
    thread::sleep(ms(500));
    lock.release().unwrap();
    wait_until("the release to reach the running nodes", 10 * S, || {
        nowhere(&servers[..4], "unasked")
    });
    servers[4].resume();
    wait_until("the late grant to be released", 10 * S, || {
        nowhere(&servers, "unasked")
    });
}

#[test]
fn a_release_the_last_node_answers_with_noscript_after_the_call_returned_still_runs() {
    // Node 2 lost its scripts (SCRIPT FLUSH) and is stopped while the lock
    // is released: the release returns once the others answered, and the
    // NOSCRIPT that node 2 sends when it runs again is read by nobody the
    // caller waits for. The release must still be run there (as EVAL), not
    // left for the 60 s TTL: nobody will ask that node anything else.
    let (mut servers, client) = cluster(3);
    let client = warm(&servers, client);
    let lock = client.acquire("unscripted", 60 * S, Wait::TryOnce).unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut servers[2].raw())
        .unwrap();
    servers[2].pause();
    lock.release().unwrap();
    servers[2].resume();
    wait_until(
        "the release to run on the node that lost its scripts",
        10 * S,
        || nowhere(&servers, "unscripted"),
    );
}

#[test]
fn a_lock_whose_validity_was_used_up_by_slow_nodes_is_not_acquired_and_cleaned_up() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let client = warm(
        &servers,
        Client::redlock(servers.iter().map(|s| s.url()))
            .node_timeout(3 * S)
            .build()
            .unwrap(),
    );
    let scripts_before: Vec<u64> = servers.iter().map(|s| script_calls(&mut s.raw())).collect();
    // Two of three nodes answer only after 1.2 s; the lock lives 1 s.
    let mut servers = servers;
    servers[0].pause();
    servers[1].pause();
    let (s0, s1) = {
        let (a, b) = servers.split_at_mut(1);
        (&mut a[0], &mut b[0])
    };
    let started = Instant::now();
    let (r, returned) = thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(ms(1200));
            s0.resume();
            s1.resume();
        });
        let r = client.acquire("slow", S, Wait::TryOnce);
        (r, started.elapsed())
    });
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotAcquired, "{e}");
    assert!(
        returned >= ms(1200),
        "decided before the nodes answered: {returned:?}"
    );
    // The keys the slow nodes set (a grant that came after the decision)
    // are taken back in the background, not left to expire: each slow node
    // ran the grant and then the compare-and-delete, and none of their
    // keys expired (a GET of an expired key counts in `expired_keys`).
    wait_until("the grants to be taken back", 10 * S, || {
        nowhere(&servers, "slow")
    });
    for (n, srv) in servers.iter().enumerate().take(2) {
        let mut raw = srv.raw();
        let ran = script_calls(&mut raw) - scripts_before[n];
        assert!(
            ran >= 2,
            "node {n} ran {ran} scripts: the grant and its take-back"
        );
        let expired = info_field(&mut raw, "stats", "expired_keys");
        assert_eq!(
            expired, 0,
            "node {n}: its grant expired instead of being taken back"
        );
    }
}

#[test]
fn extend_needs_a_majority_and_release_reaches_every_node() {
    let (mut servers, client) = cluster(5);
    let lock = client.acquire("ext", 5 * S, Wait::TryOnce).unwrap();
    let token = lock.token().to_vec();
    // The nodes beyond the majority may answer just after the call.
    wait_until("every node to grant", 10 * S, || {
        servers
            .iter()
            .all(|s| value(s, "ext").as_deref() == Some(&token[..]))
    });
    // Another owner took two nodes: extend still has a majority.
    for n in [0, 1] {
        let _: () = servers[n].raw().set("ext", "thief").unwrap();
    }
    lock.extend(20 * S).unwrap();
    wait_until("the other three to be extended", 10 * S, || {
        servers.iter().skip(2).all(|s| {
            let pttl: i64 = s.raw().pttl("ext").unwrap();
            pttl > 15_000
        })
    });
    // A third node gone: no majority, the lock is lost.
    servers[2].kill();
    let e = lock.extend(20 * S).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::NotOwner | ErrorKind::NoQuorum),
        "{e}"
    );
    assert!(lock.is_lost());
    // Release still goes to every node that is up.
    let lock2 = client.acquire("rel", 60 * S, Wait::TryOnce).unwrap();
    lock2.release().unwrap();
    wait_until("the release to reach every live node", 10 * S, || {
        [0, 1, 3, 4]
            .iter()
            .all(|&n| value(&servers[n], "rel").is_none())
    });
    for n in [0, 1, 3, 4] {
        assert_eq!(
            value(&servers[n], "ext").as_deref() == Some(&token[..]),
            n >= 3
        );
    }
    assert_eq!(value(&servers[0], "ext").as_deref(), Some(&b"thief"[..]));
}

#[test]
fn threads_contending_over_redlock_keep_a_counter_exact() {
    let (servers, client) = cluster(3);
    let url = servers[0].url();
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            let url = url.clone();
            thread::spawn(move || {
                let mut raw = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..25 {
                    let lock = client
                        .acquire("rl-counter", 5 * S, Wait::Timeout(30 * S))
                        .unwrap();
                    let n: i64 = raw.get::<_, Option<i64>>("n").unwrap().unwrap_or(0);
                    let _: () = raw.set("n", n + 1).unwrap();
                    lock.release().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let n: i64 = servers[0].raw().get("n").unwrap();
    assert_eq!(n, 150);
}

#[test]
fn processes_contending_over_redlock_keep_a_counter_exact() {
    let (servers, client) = cluster(3);
    // The parent's worker threads and connections exist before the fork:
    // the children must start their own.
    client
        .acquire("rl-procs", 5 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    let url = servers[0].url();
    let pids: Vec<libc::pid_t> = (0..4)
        .map(|_| match unsafe { libc::fork() } {
            0 => {
                let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut raw = redis::Client::open(url.as_str())
                        .unwrap()
                        .get_connection()
                        .unwrap();
                    for _ in 0..20 {
                        let lock = client
                            .acquire("rl-procs", 5 * S, Wait::Timeout(60 * S))
                            .unwrap();
                        let n: i64 = raw.get::<_, Option<i64>>("p").unwrap().unwrap_or(0);
                        let _: () = raw.set("p", n + 1).unwrap();
                        lock.release().unwrap();
                    }
                }))
                .is_ok();
                unsafe { libc::_exit(if ok { 0 } else { 1 }) }
            }
            pid => pid,
        })
        .collect();
    for pid in pids {
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
    let n: i64 = servers[0].raw().get("p").unwrap();
    assert_eq!(n, 80);
}

#[test]
fn renewal_and_inspection_over_redlock() {
    let (servers, client) = cluster(3);
    // A 1.5 s lock renewed every 0.5 s: four renewals take it past its
    // TTL, with a second to spare for a pause of the renewal thread.
    let lock = client
        .acquire_with("rl-renew", AcquireOptions::new(3 * S / 2).auto_renew(true))
        .unwrap();
    wait_until("four renewals", 20 * S, || client.stats().renewals_ok >= 4);
    assert!(!lock.is_lost());
    assert!(lock.owned().unwrap());
    assert!(client.is_locked("rl-renew").unwrap());
    assert_eq!(
        client.inspect("rl-renew").unwrap().holder.as_deref(),
        Some(lock.token())
    );
    // Stolen on two of three nodes: renewal finds no majority.
    for srv in &servers[..2] {
        let _: () = srv.raw().set("rl-renew", "thief").unwrap();
    }
    wait_until("renewal to find the lock lost", 10 * S, || lock.is_lost());
    assert!(!lock.owned().unwrap());
    assert_eq!(
        client.inspect("rl-renew").unwrap().holder.as_deref(),
        Some(&b"thief"[..])
    );
    drop(lock);
    // Release by token goes to every node.
    let l = client
        .acquire_with("rl-token", AcquireOptions::new(60 * S).token("req-1"))
        .unwrap();
    l.forget();
    assert!(client.release_token("rl-token", "req-1").unwrap());
    // A majority released before the call returned; the last node may
    // take one more round trip.
    wait_until("the release to reach every node", 10 * S, || {
        servers.iter().all(|srv| value(srv, "rl-token").is_none())
    });
    assert!(!client.release_token("rl-token", "req-1").unwrap());
}

#[test]
fn connections_the_nodes_closed_and_a_flushed_script_cache_fail_no_acquisition() {
    // The caller's thread sends on pooled connections itself: one the
    // server closed meanwhile, or a reply of NOSCRIPT, sends the command
    // again whole (on a fresh connection, as EVAL).
    let (servers, client) = cluster(3);
    let client = warm(&servers, client);
    for round in 0..3 {
        for srv in &servers {
            let mut raw = srv.raw();
            let killed = common::kill_clients(&mut raw, "normal");
            assert!(killed >= 1, "round {round}: the client had no connection");
            let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
        }
        let before = client.stats().reconnects;
        let lock = client.acquire("closed", 10 * S, Wait::TryOnce).unwrap();
        assert!(client.stats().reconnects > before, "round {round}");
        wait_until("every node to hold the lock", 10 * S, || {
            servers
                .iter()
                .all(|s| value(s, "closed").as_deref() == Some(lock.token()))
        });
        lock.release().unwrap();
        wait_until("the release everywhere", 10 * S, || {
            nowhere(&servers, "closed")
        });
    }
}

#[test]
fn a_key_with_no_expiry_on_a_majority_is_said_and_waited_out() {
    // PTTL -1 is `Duration::MAX`: a wait's pause never adds to it (it once
    // overflowed in the async wait: a panic, seen from Node.js).
    let (servers, client) = cluster(3);
    for srv in &servers[1..] {
        let _: () = srv.raw().set("rl-forever", "other").unwrap();
    }
    let check = |e: Error| common::assert_held_with_no_expiry(&e);
    check(
        client
            .acquire("rl-forever", 10 * S, Wait::Timeout(ms(150)))
            .unwrap_err(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    check(
        rt.block_on(client.acquire_async("rl-forever", 10 * S, Wait::Timeout(ms(150))))
            .unwrap_err(),
    );
    assert_eq!(value(&servers[0], "rl-forever"), None);
}

/// One protocol for a fleet whose servers differ: one Redlock over Debian's
/// Redis 7.0, Valkey 8.1 and Valkey 9.1 at once (whatever `$REDIS_SERVER`
/// says): the same commands reach every node, and the lock behaves as over
/// identical nodes: exclusion, extends, a waiter served, fences
/// that rise, nothing left behind but the fence counters.
#[test]
fn one_redlock_over_redis_7_valkey_8_and_valkey_9_speaks_one_protocol() {
    let servers: Vec<Server> = ["redis7", "valkey8", "valkey9"]
        .iter()
        .map(|w| Server::start_bin(common::matrix_server(w)))
        .collect();
    let versions: Vec<String> = servers
        .iter()
        .map(|s| common::server_version(&mut s.raw()))
        .collect();
    assert!(versions[0].starts_with("7.0."), "{versions:?}");
    assert_eq!(
        common::family(&mut servers[1].raw()),
        common::Family::Valkey
    );
    assert!(versions[1].starts_with("8.1."), "{versions:?}");
    assert!(versions[2].starts_with("9.1."), "{versions:?}");
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let open = || {
        Client::redlock(urls.iter().cloned())
            .node_timeout(2 * S)
            .build()
            .unwrap()
    };
    let (a, b) = (open(), open());
    let opts = || AcquireOptions::new(10 * S).fenced(true);
    let first = a.acquire_with("fleet", opts()).unwrap();
    let fence1 = first.fence().unwrap();
    let token = first.token().to_vec();
    wait_until("every node to grant", 10 * S, || {
        servers
            .iter()
            .all(|s| value(s, "fleet").as_deref() == Some(&token[..]))
    });
    assert_eq!(
        b.acquire("fleet", 10 * S, Wait::TryOnce)
            .unwrap_err()
            .kind(),
        ErrorKind::NotAcquired
    );

    // Extends: the same script on every node (Redlock does not use the
    // Valkeys' `SET … IFEQ`), each reaching every node. The first loads
    // the script where it is missing.
    first.extend(30 * S).unwrap();
    wait_until("the first extend on every node", 10 * S, || {
        servers.iter().all(|s| {
            let pttl: i64 = s.raw().pttl("fleet").unwrap();
            pttl > 20_000
        })
    });
    let scripts: Vec<u64> = servers.iter().map(|s| script_calls(&mut s.raw())).collect();
    for _ in 0..4 {
        first.extend(30 * S).unwrap();
    }
    wait_until("four extends to run on every node", 10 * S, || {
        servers
            .iter()
            .zip(&scripts)
            .all(|(s, before)| script_calls(&mut s.raw()) - before >= 4)
    });
    let scripts: Vec<u64> = servers
        .iter()
        .zip(scripts)
        .map(|(s, before)| script_calls(&mut s.raw()) - before)
        .collect();
    assert_eq!(scripts, [4, 4, 4], "one script per extend on every node");
    for s in &servers {
        let pttl: i64 = s.raw().pttl("fleet").unwrap();
        assert!(pttl > 20_000 && pttl <= 30_000, "{pttl}");
    }

    // A waiter of the other client (Redlock waits by retries) takes it
    // after the release: its tries are seen on the nodes first.
    let tries = script_calls(&mut servers[2].raw());
    let waiter = thread::spawn(move || {
        let lock = b
            .acquire_with("fleet", opts().wait(Wait::Timeout(30 * S)))
            .unwrap();
        let fence = lock.fence().unwrap();
        lock.release().unwrap();
        fence
    });
    wait_until("the waiter to try twice", 20 * S, || {
        script_calls(&mut servers[2].raw()) >= tries + 2
    });
    assert_eq!(value(&servers[2], "fleet").as_deref(), Some(&token[..]));
    first.release().unwrap();
    let fence2 = waiter.join().unwrap();
    assert!(fence2 > fence1, "{fence1} then {fence2}");
    wait_until("nothing left but the fence counters", 10 * S, || {
        servers.iter().all(|s| {
            let keys: Vec<String> = s.raw().keys("*").unwrap();
            keys.iter().all(|k| k.starts_with("redislock:fence:"))
        })
    });
}

/// Fences rise over Redlock whatever the nodes' clocks say. Each node draws
/// `max(counter + 1, its clock)` and a grant keeps the largest; a node 10 s
/// ahead (libfaketime) gives one grant a fence 10 s "ahead", and a later
/// majority without that node would draw below it. A fenced grant raises
/// the counters of its majority to its fence first (`FLOOR`), so the later
/// majority, which shares a node with it, draws above.
#[test]
fn fenced_grants_rise_over_nodes_whose_clocks_differ() {
    let mut servers = [
        Server::start_skewed("+10s"),
        Server::start(),
        Server::start(),
    ];
    let client = Client::redlock(servers.iter().map(|s| s.url()))
        .node_timeout(2 * S)
        .build()
        .unwrap();
    let fenced = || AcquireOptions::new(10 * S).fenced(true);
    // Warm every node (connections, scripts), so that no reply is late.
    client
        .acquire_with("warm", fenced())
        .unwrap()
        .release()
        .unwrap();

    // The grant of nodes 0 and 2: node 1 is frozen.
    servers[1].pause();
    let first = client.acquire_with("skew", fenced()).unwrap();
    let f1 = first.fence().unwrap();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    assert!(
        f1 > now_us + 5_000_000,
        "the fence came from node 0's clock: {f1} vs {now_us}"
    );
    servers[1].resume();
    first.release().unwrap();
    wait_until("the release on every node", 10 * S, || {
        servers.iter().all(|s| value(s, "skew").is_none())
    });

    // The grant of nodes 1 and 2: node 0 is frozen.
    servers[0].pause();
    let second = client.acquire_with("skew", fenced()).unwrap();
    let f2 = second.fence().unwrap();
    assert!(f2 > f1, "fences went backwards: {f1} then {f2}");
    second.release().unwrap();
    servers[0].resume();

    // Without asking for fences, nothing more is sent (the fence stays
    // advisory): one script per node and attempt.
    let before: Vec<u64> = servers.iter().map(|s| script_calls(&mut s.raw())).collect();
    let lock = client.acquire("plain", 10 * S, Wait::TryOnce).unwrap();
    wait_until("every node to grant", 10 * S, || {
        servers
            .iter()
            .all(|s| value(s, "plain").as_deref() == Some(lock.token()))
    });
    let after: Vec<u64> = servers.iter().map(|s| script_calls(&mut s.raw())).collect();
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a - b, 1, "{before:?} then {after:?}");
    }
    lock.release().unwrap();
}
