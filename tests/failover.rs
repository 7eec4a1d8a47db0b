//! Failovers followed: a Sentinel client moves to the new master as soon as
//! the sentinels announce it (clean failover, killed master, frozen
//! master), its commands and its waiters' subscriber alike, and sends no
//! lock script to the old master once it has heard; waiters keep their
//! place in the queue across the switch; a client that cannot hear a
//! majority of its sentinels grants nothing until it does (fails closed). In a cluster, a waiter's
//! subscriber follows its slot to the replica that takes it over (FIFO
//! holds across `CLUSTER FAILOVER`), and waiters ride out a killed master
//! until its replica is promoted, never failing with a connection error.
//!
//! What is observed is the servers' own record (`INFO commandstats`, the
//! subscribers `PUBSUB` lists) and the client's statistics, never the wall
//! clock: each wait has a generous deadline. The client's command timeout
//! is long (30 s), so that a command left waiting on a frozen master would
//! show: only the switch can move it within the tests' deadlines.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::cluster::{owner, replica_of};
use common::sentinel::{deployment, fail_over, hosts, info, master_port, replicated};
use common::{
    cluster_url, command_calls, info_field, start_cluster_with_replicas, wait_until, Server,
};
use redislock::{AcquireOptions, Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

fn url(sentinels: &[Server]) -> String {
    format!("redis+sentinel://{}/mymaster", hosts(sentinels))
}

fn client(sentinels: &[Server]) -> Client {
    Client::builder(&url(sentinels))
        .connect_timeout(10 * S)
        .command_timeout(30 * S)
        .build()
        .unwrap()
}

/// Take `name` and release it.
fn lock_once(c: &Client, name: &str) {
    c.acquire(name, 10 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
}

/// Lock scripts and commands a server ran: SET (the plain acquire),
/// EVALSHA and EVAL (every other lock command).
fn lock_calls(srv: &Server) -> u64 {
    let mut raw = srv.raw();
    ["set", "evalsha", "eval"]
        .iter()
        .map(|c| command_calls(&mut raw, c))
        .sum()
}

/// Channels with a subscriber on `srv` among the waiters' channels.
fn waiter_channels(srv: &Server) -> Vec<String> {
    redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("redislock:w:*")
        .query(&mut srv.raw())
        .unwrap_or_default()
}

/// Threads (and, with `tasks`, tokio tasks) that take and release locks in
/// a loop on `client` until stopped, counting their cycles. An acquire
/// that fails ends the test: each waits up to 30 s. A release may find its
/// lock lost in the failover (granted by the old master and never
/// replicated): that is counted, not fatal.
struct Workload {
    stop: Arc<AtomicBool>,
    cycles: Arc<AtomicU64>,
    lost: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Workload {
    fn start(client: &Client, threads: usize, tasks: usize) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let cycles = Arc::new(AtomicU64::new(0));
        let lost = Arc::new(AtomicU64::new(0));
        let opts = AcquireOptions::new(10 * S)
            .wait(Wait::Timeout(30 * S))
            .fenced(true);
        let mut handles: Vec<JoinHandle<()>> = (0..threads)
            .map(|i| {
                let (client, stop, cycles, lost) =
                    (client.clone(), stop.clone(), cycles.clone(), lost.clone());
                let opts = opts.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let lock = client
                            .acquire_with(format!("work:{i}"), opts.clone())
                            .unwrap_or_else(|e| panic!("worker {i}: acquire: {e}"));
                        count(lock.release(), &lost);
                        cycles.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        if tasks > 0 {
            let (client, stop, cycles, lost) =
                (client.clone(), stop.clone(), cycles.clone(), lost.clone());
            handles.push(std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let tasks: Vec<_> = (0..tasks)
                        .map(|i| {
                            let (client, stop, cycles, lost) =
                                (client.clone(), stop.clone(), cycles.clone(), lost.clone());
                            let opts = opts.clone();
                            tokio::spawn(async move {
                                while !stop.load(Ordering::Relaxed) {
                                    let lock = client
                                        .acquire_with_async(format!("task:{i}"), opts.clone())
                                        .await
                                        .unwrap_or_else(|e| panic!("task {i}: acquire: {e}"));
                                    count(lock.release_async().await, &lost);
                                    cycles.fetch_add(1, Ordering::Relaxed);
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.expect("a task failed");
                    }
                });
            }));
        }
        Workload {
            stop,
            cycles,
            lost,
            threads: handles,
        }
    }

    fn cycles(&self) -> u64 {
        self.cycles.load(Ordering::Relaxed)
    }

    /// Wait until `n` more cycles were done.
    fn until_more(&self, what: &str, n: u64) {
        let from = self.cycles();
        wait_until(what, 30 * S, || self.cycles() >= from + n);
    }

    /// Stop; how many releases found their lock lost.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("a worker failed");
        }
        self.lost.load(Ordering::Relaxed)
    }
}

/// A release's outcome: a lock lost in the failover is counted; any other
/// error ends the test.
fn count(released: redislock::Result<()>, lost: &AtomicU64) {
    match released {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::NotOwner | ErrorKind::Unconfirmed) => {
            lost.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => panic!("release: {e}"),
    }
}

/// The port of the master the sentinels announce next, read from a
/// subscription to `+switch-master` opened before the failover.
struct SwitchWatch(redis::Connection);

impl SwitchWatch {
    fn open(sentinel: &Server) -> SwitchWatch {
        let mut con = sentinel.raw();
        redis::cmd("SUBSCRIBE")
            .arg("+switch-master")
            .exec(&mut con)
            .unwrap();
        SwitchWatch(con)
    }

    fn next(&mut self) -> u16 {
        self.0.set_read_timeout(Some(60 * S)).unwrap();
        let msg = self
            .0
            .recv_response()
            .expect("no +switch-master within 60 s");
        let redis::Value::Array(parts) = msg else {
            panic!("{msg:?}")
        };
        let redis::Value::BulkString(text) = &parts[2] else {
            panic!("{parts:?}")
        };
        let text = String::from_utf8_lossy(text);
        text.rsplit(' ').next().unwrap().parse().unwrap()
    }
}

/// A holder of "job" (fenced) and a first waiter queued behind it, each on
/// a client of its own; [`QueueOrder::check`] then (after a failover)
/// queues a second waiter, releases, and asserts that the first waiter got
/// the lock by hand-off ahead of the second, fences increasing.
struct QueueOrder {
    held: redislock::Lock,
    held_fence: u64,
    first: JoinHandle<redislock::Result<redislock::Lock>>,
    waiting: Client,
    late: Client,
}

impl QueueOrder {
    fn start(holder: &Client, waiting: Client, late: Client) -> QueueOrder {
        let held = holder.acquire_with("job", Self::opts()).unwrap();
        let held_fence = held.fence().unwrap();
        let first = Self::wait_for_job(&waiting, "the first waiter to queue");
        QueueOrder {
            held,
            held_fence,
            first,
            waiting,
            late,
        }
    }

    fn opts() -> AcquireOptions {
        AcquireOptions::new(60 * S).fenced(true)
    }

    /// A thread that waits for "job" on `client`, once it is queued.
    fn wait_for_job(client: &Client, what: &str) -> JoinHandle<redislock::Result<redislock::Lock>> {
        let c = client.clone();
        let opts = Self::opts().wait(Wait::Timeout(60 * S));
        let t = std::thread::spawn(move || c.acquire_with("job", opts));
        wait_until(what, 10 * S, || client.stats().waiters_now == 1);
        t
    }

    fn check(self) {
        let second = Self::wait_for_job(&self.late, "the second waiter to queue");
        self.held.release().unwrap();
        let got = self.first.join().unwrap().expect("the first waiter's lock");
        assert_eq!(self.waiting.stats().acquired_handed_over, 1);
        assert!(got.fence().unwrap() > self.held_fence);
        assert_eq!(
            self.late.stats().waiters_now,
            1,
            "the second waiter jumped the queue"
        );
        let got_fence = got.fence().unwrap();
        got.release().unwrap();
        let last = second.join().unwrap().expect("the second waiter's lock");
        assert!(last.fence().unwrap() > got_fence);
        last.release().unwrap();
    }
}

#[test]
fn a_clean_failover_moves_commands_and_waiters_at_once_and_keeps_the_queue_order() {
    let (master, replica, sentinels) = deployment(None);
    let holder = client(&sentinels);
    let order = QueueOrder::start(&holder, client(&sentinels), client(&sentinels));
    let work = client(&sentinels);
    let load = Workload::start(&work, 2, 2);
    load.until_more("work before the failover", 20);
    replicated(&master);

    // The waiter's channel (and any of the workload's, whose locks may be
    // found held after a failover) moves under the same name.
    let channels = waiter_channels(&master);
    assert!(!channels.is_empty());
    let mut watch = SwitchWatch::open(&sentinels[0]);
    fail_over(&sentinels[0]);
    assert_eq!(watch.next(), replica.port);
    // The waiters' subscriber moved to the new master, and the workload
    // runs there; the old master, which still answers as a master for
    // seconds, gets nothing more once the clients have heard.
    wait_until("the waiters' subscriber on the new master", 10 * S, || {
        let now = waiter_channels(&replica);
        channels.iter().all(|c| now.contains(c))
    });
    assert!(waiter_channels(&master).is_empty());
    load.until_more("work on the new master", 20);
    let before = lock_calls(&master);
    load.until_more("more work on the new master", 50);
    assert_eq!(
        lock_calls(&master),
        before,
        "lock commands ran on the old master after the clients followed the failover"
    );

    // A waiter that queues after the failover comes after the first one.
    order.check();
    // Locks the old master granted between the promotion and the
    // announcement may be lost (asynchronous replication): counted only.
    load.stop();
}

/// The sentinel that leads a failover announces the promotion
/// (`+failover-state-send-slaveof-noone`) a moment before it sends the
/// replica `SLAVEOF NO ONE`, and announces the new master up to a second
/// after: what the old master writes in between is lost. The clients hold
/// their commands from the first announcement until the replica answers as
/// master. The replica is frozen here so that the moment lasts: the
/// workload stops reaching the old master while the promotion waits, and
/// the old master never runs another lock command. (What it wrote while
/// the replica was frozen, before the announcement, may never reach the
/// replica, so a few locks may be lost; no more than that.)
#[test]
fn commands_wait_while_the_sentinels_promote_the_replica() {
    let (master, mut replica, sentinels) = deployment(None);
    let work = client(&sentinels);
    let load = Workload::start(&work, 2, 2);
    load.until_more("work before the failover", 20);
    replicated(&master);
    let mut switch = SwitchWatch::open(&sentinels[0]);
    let mut promoting = sentinels[0].raw();
    redis::cmd("SUBSCRIBE")
        .arg("+failover-state-send-slaveof-noone")
        .exec(&mut promoting)
        .unwrap();
    promoting.set_read_timeout(Some(60 * S)).unwrap();

    replica.pause();
    let frozen = lock_calls(&master);
    fail_over(&sentinels[0]);
    promoting
        .recv_response()
        .expect("no +failover-state-send-slaveof-noone within 60 s");
    // Held: neither the workload nor the old master moves any more.
    let mut held = (lock_calls(&master), load.cycles());
    wait_until("the commands to wait for the promotion", 10 * S, || {
        std::thread::sleep(Duration::from_millis(50));
        let now = (lock_calls(&master), load.cycles());
        std::mem::replace(&mut held, now) == now
    });
    replica.resume();
    assert_eq!(switch.next(), replica.port);
    load.until_more("work on the new master", 50);
    assert_eq!(
        lock_calls(&master),
        held.0,
        "the old master ran lock commands while the sentinels promoted its replica"
    );
    let lost = load.stop();
    assert!(
        lost <= held.0 - frozen,
        "{lost} locks lost, more than the {} lock commands the old master ran while the replica \
         was frozen",
        held.0 - frozen
    );
}

/// A master that dies or freezes: the sentinels promote the replica after
/// `down-after` (2 s), and the client moves there at the announcement,
/// commands waiting on the frozen master included (its command timeout,
/// 30 s, is far beyond the deadlines here).
fn follow_a_failed_master(kill: bool) {
    let (mut master, replica, sentinels) = deployment(None);
    let work = client(&sentinels);
    let load = Workload::start(&work, 3, 2);
    load.until_more("work before the failure", 20);
    let mut watch = SwitchWatch::open(&sentinels[0]);
    if kill {
        master.kill();
    } else {
        master.pause();
    }
    assert_eq!(watch.next(), replica.port);
    load.until_more("work on the new master", 50);
    if !kill {
        // Still frozen: everything done since came from the new master.
        assert!(lock_calls(&replica) >= 50);
        master.resume();
        wait_until("the old master to turn replica", 60 * S, || {
            info(&master, "replication").contains("role:slave")
        });
        load.until_more("work after the old master came back", 20);
    }
    assert_eq!(master_port(&sentinels[1]), Some(replica.port));
    load.stop();
}

#[test]
fn a_killed_master_is_left_at_the_switch() {
    follow_a_failed_master(true);
}

#[test]
fn a_frozen_master_is_left_at_the_switch_with_the_commands_waiting_on_it() {
    follow_a_failed_master(false);
}

#[test]
fn a_client_that_cannot_hear_a_majority_of_its_sentinels_grants_nothing_until_it_does() {
    // down-after-milliseconds 2000: a listener hangs up on a sentinel
    // silent for 1 s (see src/net/sentinel.rs).
    let (master, _replica, mut sentinels) = deployment(None);
    let c = Client::builder(&url(&sentinels))
        .connect_timeout(S)
        .command_timeout(2 * S)
        .build()
        .unwrap();
    lock_once(&c, "warm");
    // One of three gone: two are a majority, locks go on.
    sentinels[0].kill();
    lock_once(&c, "two of three");
    // A second one frozen, as a partition leaves it: its connections stay
    // open and nothing answers. Once the client has hung up on it (the
    // kernel shows the connection closed by the client), it hears one of
    // three, and refuses: its master may have been cut off beside it while
    // the others promote a replica.
    wait_until("a listener on the second sentinel", 20 * S, || {
        listeners(&sentinels[1]).len() == 1
    });
    let listening = listeners(&sentinels[1]);
    sentinels[1].pause();
    wait_until(
        "the listener to hang up on the frozen sentinel",
        60 * S,
        || listener_hung_up(sentinels[1].port, &listening),
    );
    let before = lock_calls(&master);
    let e = c.acquire("refused", 10 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    let text = e.to_string();
    assert!(text.contains("hears 1 of the 3"), "{text}");
    assert!(
        text.contains(&format!("master 127.0.0.1:{}", master.port)),
        "{text}"
    );
    assert!(text.contains("command timeout"), "{text}");
    assert_eq!(lock_calls(&master), before, "nothing reached the master");
    // A wait rides it out: granted once the sentinel answers again.
    let waiting = {
        let c = c.clone();
        std::thread::spawn(move || c.acquire("refused", 10 * S, Wait::Timeout(60 * S)))
    };
    sentinels[1].resume();
    let lock = waiting
        .join()
        .unwrap()
        .expect("granted once a majority is heard");
    lock.release().unwrap();
}

#[test]
fn only_sentinels_that_name_the_master_are_counted_as_heard() {
    // A URL whose second address is a sentinel that no longer monitors the
    // service (restarted from a configuration that lost it) and whose third
    // is a plain server (a typo, or a dead sentinel's port taken by another
    // server). Both take the listener's SUBSCRIBE, neither can name the
    // master, so neither vouches for it, and one sentinel of three is no
    // majority.
    let (master, replica, sentinels) = deployment(None);
    let _: () = sentinels[1]
        .query(redis::cmd("SENTINEL").arg("REMOVE").arg("mymaster"))
        .unwrap();
    let url = format!(
        "redis+sentinel://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}/mymaster",
        sentinels[0].port, sentinels[1].port, replica.port
    );
    let c = Client::builder(&url)
        .connect_timeout(S)
        .command_timeout(3 * S)
        .build()
        .unwrap();
    // The first call starts the listeners; each subscribes on its server
    // and asks it the master, which the plain server refuses (and the
    // sentinel answers with "no such master": its INFO has no error
    // counts, the three seconds this call and the next wait for a
    // majority cover it).
    let _ = c.acquire("vouched", 10 * S, Wait::TryOnce);
    wait_until("the plain server asked the master", 20 * S, || {
        info(&replica, "errorstats").contains("errorstat_ERR:count=")
    });
    let before = lock_calls(&master);
    let e = c.acquire("vouched", 10 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    assert!(e.to_string().contains("hears 1 of the 3"), "{e}");
    assert_eq!(lock_calls(&master), before, "nothing reached the master");
    // The plain server is tried again at the listener's growing pause (2 s
    // at most by now), not at once: each try is two connections (the
    // subscription and the question). At once would be one every 100 ms.
    let mut raw = replica.raw();
    let mut connections = || info_field(&mut raw, "stats", "total_connections_received");
    let first = connections();
    std::thread::sleep(4 * S);
    let tried = connections() - first;
    assert!(tried <= 8, "{tried} connections to the plain server in 4 s");
}

/// The id and the client-side port of each of `sentinel`'s clients
/// subscribed to the four channels a client's listener subscribes to.
fn listeners(sentinel: &Server) -> Vec<(String, u16)> {
    let list: String = sentinel
        .query(redis::cmd("CLIENT").arg("LIST"))
        .unwrap_or_default();
    list.lines()
        .filter(|l| l.split(' ').any(|f| f == "sub=4"))
        .filter_map(|l| {
            let id = l.split(' ').find_map(|f| f.strip_prefix("id="))?;
            let addr = l.split(' ').find_map(|f| f.strip_prefix("addr="))?;
            let port = addr.rsplit(':').next()?.parse().ok()?;
            Some((id.to_string(), port))
        })
        .collect()
}

/// Whether one of `listeners`' connections to `port` was closed by the
/// client while the server has not closed it (CLOSE-WAIT, in the kernel's
/// table: a stopped server's too). Only those: other connections the
/// stopped server had not finished closing (a killed sentinel's links to
/// it) say nothing about the listener.
fn listener_hung_up(port: u16, listeners: &[(String, u16)]) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X}");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3
            && f[1].ends_with(&local)
            && f[3] == "08"
            && listeners
                .iter()
                .any(|(_, p)| f[2].ends_with(&format!(":{p:04X}")))
    })
}

#[test]
fn a_listener_that_hears_nothing_from_its_sentinel_hangs_up_and_listens_again() {
    // down-after-milliseconds 2000: a PING every 500 ms, silence allowed
    // for 1 s (see src/net/sentinel.rs).
    let (_master, _replica, mut sentinels) = deployment(None);
    let c = client(&sentinels);
    lock_once(&c, "warm");
    wait_until("a listener on every sentinel", 20 * S, || {
        sentinels.iter().all(|s| listeners(s).len() == 1)
    });
    let before: Vec<Vec<(String, u16)>> = sentinels.iter().map(listeners).collect();
    // Frozen sentinels keep their connections open and answer nothing, as
    // sentinels cut off by a partition do: without its PINGs, a listener
    // would wait on them for ever, and count them as heard.
    for s in &mut sentinels {
        s.pause();
    }
    wait_until(
        "every listener to hang up on its frozen sentinel",
        60 * S,
        || {
            sentinels
                .iter()
                .zip(&before)
                .all(|(s, old)| listener_hung_up(s.port, old))
        },
    );
    for s in &mut sentinels {
        s.resume();
    }
    wait_until("a new listener on every sentinel", 60 * S, || {
        sentinels.iter().zip(&before).all(|(s, old)| {
            let now = listeners(s);
            now.len() == 1 && !old.contains(&now[0])
        })
    });
    lock_once(&c, "after");
}

fn role_is_master(srv: &Server) -> bool {
    info(srv, "replication").contains("role:master")
}

/// A cluster of 3 masters with a replica each; a client per role; the
/// master owning `key`'s slot and its replica.
fn cluster_for(key: &str) -> (Vec<Server>, usize, usize) {
    let servers = start_cluster_with_replicas(3, 1);
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut servers[0].raw())
        .unwrap();
    let master = owner(&servers, slot);
    let replica = replica_of(&servers, master);
    (servers, master, replica)
}

fn cluster_client(servers: &[Server]) -> Client {
    Client::builder(&cluster_url(servers))
        .connect_timeout(10 * S)
        .command_timeout(30 * S)
        .build()
        .unwrap()
}

#[test]
fn a_cluster_failover_moves_the_waiters_subscriber_and_keeps_the_queue_order() {
    let (servers, master, replica) = cluster_for("job");
    let holder = cluster_client(&servers);
    let order = QueueOrder::start(&holder, cluster_client(&servers), cluster_client(&servers));
    let channels = waiter_channels(&servers[master]);
    assert_eq!(channels.len(), 1);
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut servers[replica].raw())
        .unwrap();
    wait_until("the replica's promotion", 30 * S, || {
        role_is_master(&servers[replica])
    });
    // The channel moves under the same name: the queue entry stays valid.
    wait_until("the waiters' subscriber on the new master", 10 * S, || {
        waiter_channels(&servers[replica]) == channels
    });
    order.check();
}

#[test]
fn a_short_wait_on_a_killed_cluster_master_ends_at_its_deadline_as_unavailability() {
    // A 10 s command timeout: a wait that ran until its connection
    // retries gave up (the old behaviour) would take that long.
    let (mut servers, master, replica) = cluster_for("job");
    let c = Client::builder(&cluster_url(&servers))
        .command_timeout(10 * S)
        .build()
        .unwrap();
    lock_once(&c, "job");
    servers[master].kill();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for i in 0..4 {
        let opts = AcquireOptions::new(10 * S).wait(Wait::Timeout(S / 10));
        // The blocking API, then the async one.
        let (r, took) = common::timed(|| match i % 2 {
            0 => c.acquire_with("job", opts),
            _ => rt.block_on(c.acquire_with_async("job", opts)),
        });
        let e = r.map(|_| ()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Server, "{e}");
        assert!(e.to_string().contains("may take its place"), "{e}");
        assert!(took < 5 * S, "a 100 ms wait took {took:?}");
    }
    wait_until("the replica's promotion", 60 * S, || {
        role_is_master(&servers[replica])
    });
    c.acquire_with(
        "job",
        AcquireOptions::new(10 * S).wait(Wait::Timeout(30 * S)),
    )
    .unwrap()
    .release()
    .unwrap();
}

#[test]
fn cluster_waiters_ride_out_a_killed_master_until_its_replica_takes_over() {
    let (mut servers, master, replica) = cluster_for("job");
    let holder = cluster_client(&servers);
    let waiting = cluster_client(&servers);
    // A short TTL: the holder's lock, replicated, expires on the new master.
    let held = holder
        .acquire_with("job", AcquireOptions::new(2 * S).fenced(true))
        .unwrap();
    let held_fence = held.fence().unwrap();
    held.forget();
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let waiting = waiting.clone();
            let opts = AcquireOptions::new(10 * S)
                .fenced(true)
                .wait(Wait::Timeout(60 * S));
            std::thread::spawn(move || {
                let lock = waiting.acquire_with("job", opts)?;
                let fence = lock.fence()?;
                lock.release()?;
                Ok::<u64, redislock::Error>(fence)
            })
        })
        .collect();
    wait_until("the waiters to queue", 10 * S, || {
        waiting.stats().waiters_now == 4
    });
    let mut raw = servers[master].raw();
    let _: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query(&mut raw)
        .unwrap();
    servers[master].kill();
    wait_until("the replica's promotion", 60 * S, || {
        role_is_master(&servers[replica])
    });
    for w in waiters {
        let fence = w
            .join()
            .unwrap()
            .expect("a waiter failed while the cluster failed over");
        assert!(fence > held_fence);
    }
    assert!(
        waiting.stats().connection_errors > 0,
        "the waiters saw the dead node"
    );
}

#[test]
fn wait_replicas_fails_fast_naming_the_cause_while_the_new_master_has_no_replica() {
    let (master, replica, sentinels) = deployment(None);
    let c = Client::builder(&format!(
        "{}?wait_replicas=1&wait_timeout=100ms",
        url(&sentinels)
    ))
    .connect_timeout(10 * S)
    .command_timeout(30 * S)
    .build()
    .unwrap();
    acknowledged(&c).release().unwrap();
    let mut watch = SwitchWatch::open(&sentinels[0]);
    fail_over(&sentinels[0]);
    assert_eq!(watch.next(), replica.port);
    // The new master has no replica until Sentinel converts the old one.
    let connected = || info(&replica, "replication").contains("state=online");
    if !connected() {
        let e = c.acquire("job", 10 * S, Wait::TryOnce).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
        let text = e.to_string();
        assert!(text.contains("0 replica(s) connected"), "{text}");
        // From then on it fails at once, writing nothing, while that lasts.
        let writes = lock_calls(&replica);
        if !connected() {
            let e = c.acquire("job", 10 * S, Wait::TryOnce).unwrap_err();
            assert!(e.to_string().contains("no lock was taken"), "{e}");
            assert_eq!(lock_calls(&replica), writes, "a lock was written meanwhile");
        }
    }
    wait_until("the old master to follow the new one", 60 * S, connected);
    let lock = acknowledged(&c);
    wait_until("the lock on the old master, now a replica", 10 * S, || {
        let now: Option<Vec<u8>> = master
            .query(redis::cmd("GET").arg("job"))
            .unwrap_or_default();
        now.as_deref() == Some(lock.token())
    });
    lock.release().unwrap();
}

/// "job", taken with `wait_replicas`: a replica just in sync may take
/// longer than wait_timeout (100 ms) to acknowledge on a busy machine, and
/// the acquire fails with NoQuorum until it does.
fn acknowledged(c: &Client) -> redislock::Lock {
    let mut taken = None;
    wait_until("an acquisition the replica acknowledges", 60 * S, || {
        match c.acquire("job", 10 * S, Wait::TryOnce) {
            Ok(lock) => taken = Some(lock),
            Err(e) => assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}"),
        }
        taken.is_some()
    });
    taken.unwrap()
}
