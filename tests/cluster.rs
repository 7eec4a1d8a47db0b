//! Redis Cluster: three masters on free loopback ports, over plain TCP and
//! over TLS (one CA for every node). Lock, fence and queue keys share a
//! slot; commands follow MOVED and ASK; a waiter is woken on the node that
//! owns its lock's slot; a slot migrates under a held lock. With a replica
//! per master, `wait_replicas` waits on the master of the lock's slot.

mod common;

use std::thread;
use std::time::Duration;

use common::cluster::{is_replica, owner, replica_of};
use common::{
    cluster_url, shared_tls, start_cluster, start_cluster_with_replicas, start_tls_cluster,
    wait_until, Server,
};
use redislock::{Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

fn client(servers: &[Server]) -> Client {
    Client::open(&cluster_url(servers)).unwrap()
}

fn keyslot(srv: &Server, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut srv.raw())
        .unwrap()
}

fn dbsize(srv: &Server) -> i64 {
    redis::cmd("DBSIZE").query(&mut srv.raw()).unwrap()
}

/// Calls of `cmd` on all nodes since the last CONFIG RESETSTAT.
fn calls(servers: &[Server], cmd: &str) -> i64 {
    servers
        .iter()
        .map(|s| {
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut s.raw())
                .unwrap();
            info.lines()
                .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
                .and_then(|l| l.split("calls=").nth(1))
                .and_then(|v| v.split(',').next())
                .map_or(0, |v| v.parse().unwrap())
        })
        .sum()
}

/// CLUSTER SETSLOT `slot` NODE `id` on every master: the migration ends.
fn set_slot_node(servers: &[Server], slot: u16, id: &str) {
    for s in servers.iter().filter(|s| !is_replica(s)) {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("NODE")
            .arg(id)
            .query(&mut s.raw())
            .unwrap();
    }
}

/// `key` as a replica has it (READONLY: a replica answers for its master's
/// slots). A replica learns that its master took over a slot by gossip, a
/// moment after the masters: until then it answers MOVED, and is asked
/// again.
fn on_replica(replica: &Server, key: &str) -> Option<Vec<u8>> {
    let mut con = replica.raw();
    let _: () = redis::cmd("READONLY").query(&mut con).unwrap();
    let mut value = None;
    wait_until(
        &format!("replica {} to serve {key:?}", replica.port),
        10 * S,
        || match redis::cmd("GET").arg(key).query(&mut con) {
            Ok(v) => {
                value = Some(v);
                true
            }
            Err(e) if e.code() == Some("MOVED") => false,
            Err(e) => panic!("GET {key} on replica {}: {e}", replica.port),
        },
    );
    value.unwrap()
}

fn reset_stats(servers: &[Server]) {
    for s in servers {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut s.raw())
            .unwrap();
    }
}

/// Mark `slot` as moving from node `src` to node `dst` (index and id).
fn start_migration(servers: &[Server], slot: u16, src: (usize, &str), dst: (usize, &str)) {
    for (at, state, other) in [(dst.0, "IMPORTING", src.1), (src.0, "MIGRATING", dst.1)] {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(other)
            .query(&mut servers[at].raw())
            .unwrap();
    }
}

/// MIGRATE `keys` from `src` to `dst`.
fn move_keys(src: &Server, dst: &Server, keys: &[String]) {
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(dst.port)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(keys)
        .query(&mut src.raw())
        .unwrap();
}

fn node_id(srv: &Server) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut srv.raw())
        .unwrap()
}

/// Wait until `client` has `n` waiters queued: ENQUEUE found the lock held
/// and queued them, their subscriber is up.
fn until_waiters(client: &Client, n: u64) {
    wait_until("the waiter to queue", 10 * S, || {
        client.stats().waiters_now == n
    });
}

#[test]
fn names_over_many_slots_hash_tags_and_fences() {
    let servers = start_cluster(3);
    let client = client(&servers);
    assert!(client.addr().starts_with("cluster "), "{}", client.addr());
    // 60 names spread over the nodes, all held at once.
    let locks: Vec<_> = (0..60)
        .map(|i| {
            client
                .acquire(format!("job:{i}"), 30 * S, Wait::TryOnce)
                .unwrap()
        })
        .collect();
    for s in &servers {
        assert!(dbsize(s) > 0, "no lock landed on node {}", s.port);
    }
    for l in &locks {
        assert!(l.owned().unwrap());
    }
    for l in locks {
        l.release().unwrap();
    }
    // Lock, fence and queue keys of one name share its slot, with or
    // without a hash tag, including names with a '}' and no tag.
    for name in ["plain", "{user1}:a", "{user1}:b", "odd}name"] {
        let lock = client.acquire(name, 30 * S, Wait::TryOnce).unwrap();
        let c2 = client.clone();
        let n = name.to_string();
        let waiter = thread::spawn(move || c2.acquire(n, 30 * S, Wait::Timeout(20 * S)).unwrap());
        until_waiters(&client, 1);
        reset_stats(&servers);
        let before = client.stats();
        lock.release().unwrap();
        let next = waiter.join().unwrap();
        // Handed over by the release script on the slot's node (PUBLISH
        // went out, and the key was set to the waiter's token in the same
        // script), not found by a retry.
        common::assert_one_hand_off(&client, &before, name);
        assert!(calls(&servers, "publish") >= 1, "{name}");
        next.release().unwrap();
    }
    assert_eq!(
        keyslot(&servers[0], "{user1}:a"),
        keyslot(&servers[0], "{user1}:b")
    );
    // Fences strictly increase per name, plain, hash-tagged or with a '}',
    // also when the slot's counter is lost (DEL on its node). Each name's
    // counter sits in the name's slot, and once released only counters
    // remain anywhere.
    for name in ["fenced", "{user1}:fenced", "odd}fenced"] {
        let slot = keyslot(&servers[0], name);
        let node = owner(&servers, slot);
        let mut last = 0;
        for i in 0..30 {
            if i == 15 {
                let counters: Vec<String> = redis::cmd("CLUSTER")
                    .arg("GETKEYSINSLOT")
                    .arg(slot)
                    .arg(100)
                    .query(&mut servers[node].raw())
                    .unwrap();
                let counters: Vec<&String> = counters
                    .iter()
                    .filter(|k| k.starts_with("redislock:fence:{"))
                    .collect();
                assert_eq!(counters.len(), 1, "{name}: {counters:?}");
                assert_eq!(keyslot(&servers[0], counters[0]), slot);
                let _: () = redis::cmd("DEL")
                    .arg(counters[0])
                    .query(&mut servers[node].raw())
                    .unwrap();
            }
            let l = client.acquire(name, 5 * S, Wait::TryOnce).unwrap();
            assert!(
                l.fence().unwrap() > last,
                "{name}: {} after {last}",
                l.fence().unwrap()
            );
            assert!(l.fence().unwrap() < 1 << 53);
            last = l.fence().unwrap();
            l.release().unwrap();
        }
    }
    for s in &servers {
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut s.raw()).unwrap();
        assert!(
            keys.iter().all(|k| k.starts_with("redislock:fence:{")),
            "left behind on node {}: {keys:?}",
            s.port
        );
    }
}

#[test]
fn a_slot_migrates_under_a_held_lock() {
    let servers = start_cluster(3);
    migrate_under_a_held_lock(&servers, &client(&servers));
}

/// A lock is held (and handed off) while its slot moves to another node:
/// ASK and MOVED are followed, the fence counter moves with the slot, and a
/// waiter subscribed where the slot used to be still gets the lock.
fn migrate_under_a_held_lock(servers: &[Server], client: &Client) {
    let name = "migrating";
    let slot = keyslot(&servers[0], name);
    // A hand-off before the move: the client now knows the slot's old node
    // and keeps a subscriber there.
    let first = client.acquire(name, 30 * S, Wait::TryOnce).unwrap();
    let c2 = client.clone();
    let waiter = thread::spawn(move || {
        c2.acquire("migrating", 30 * S, Wait::Timeout(20 * S))
            .unwrap()
    });
    until_waiters(client, 1);
    let before = client.stats();
    first.release().unwrap();
    waiter.join().unwrap().release().unwrap();
    common::assert_one_hand_off(client, &before, "before the move");
    let lock = client.acquire(name, 30 * S, Wait::TryOnce).unwrap();
    let first_fence = lock.fence().unwrap();
    let src = owner(servers, slot);
    let dst = (src + 1) % servers.len();
    let (src_id, dst_id) = (node_id(&servers[src]), node_id(&servers[dst]));
    start_migration(servers, slot, (src, &src_id), (dst, &dst_id));
    // Mid-migration (ASK for keys already moved): the lock is still ours.
    assert!(lock.owned().unwrap());
    let keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(&mut servers[src].raw())
        .unwrap();
    assert!(
        keys.len() >= 2,
        "lock and fence keys in slot {slot}: {keys:?}"
    );
    move_keys(&servers[src], &servers[dst], &keys);
    // Keys moved, slot still MIGRATING: the source answers ASK, followed.
    assert!(lock.owned().unwrap());
    set_slot_node(servers, slot, &dst_id);
    // After the move (MOVED followed): extend, release, acquire again.
    lock.extend(30 * S).unwrap();
    lock.release().unwrap();
    let again = client.acquire(name, 30 * S, Wait::TryOnce).unwrap();
    assert!(
        again.fence().unwrap() > first_fence,
        "the fence counter moved with the slot"
    );
    let on_dst: Option<Vec<u8>> = redis::cmd("GET")
        .arg(name)
        .query(&mut servers[dst].raw())
        .unwrap();
    assert_eq!(on_dst.as_deref(), Some(again.token()));
    // A waiter right after the move subscribes where the slot used to be:
    // the hand-off message still reaches it (cluster PUBLISH is broadcast)
    // although the lock went nowhere; it must check, not believe it.
    let c2 = client.clone();
    let waiter = thread::spawn(move || {
        c2.acquire("migrating", 30 * S, Wait::Timeout(20 * S))
            .unwrap()
    });
    until_waiters(client, 1);
    let before = client.stats();
    again.release().unwrap();
    // Owned for real: its release succeeds.
    waiter.join().unwrap().release().unwrap();
    common::assert_one_hand_off(client, &before, "after the move");
}

#[test]
fn a_dead_node_in_the_url_is_skipped_and_a_dead_cluster_is_a_connection_error() {
    let servers = start_cluster(3);
    let refusing = common::RefusingPort::new();
    let dead = refusing.port;
    let url = common::cluster_url(&servers).replace(
        "redis+cluster://",
        &format!("redis+cluster://127.0.0.1:{dead},"),
    );
    let client = Client::open(&url).unwrap();
    client
        .acquire("seeded", 5 * S, Wait::TryOnce)
        .unwrap()
        .release()
        .unwrap();
    let nobody = Client::open(&format!("redis+cluster://127.0.0.1:{dead}")).unwrap();
    let e = nobody.acquire("seeded", 5 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), redislock::ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains("refused"), "{e}");
}

/// `n` names held at once land on every node; a waiter on each of a few
/// names is handed the lock by the release script on the slot's node.
fn many_slots_and_hand_offs(servers: &[Server], client: &Client, n: usize) {
    let locks: Vec<_> = (0..n)
        .map(|i| {
            client
                .acquire(format!("job:{i}"), 30 * S, Wait::TryOnce)
                .unwrap()
        })
        .collect();
    for s in servers {
        assert!(dbsize(s) > 0, "no lock landed on node {}", s.port);
    }
    for l in locks {
        assert!(l.owned().unwrap());
        l.release().unwrap();
    }
    for name in ["plain", "{user1}:a", "odd}name"] {
        let lock = client.acquire(name, 30 * S, Wait::TryOnce).unwrap();
        let first = lock.fence().unwrap();
        let c2 = client.clone();
        let n = name.to_string();
        let waiter = thread::spawn(move || c2.acquire(n, 30 * S, Wait::Timeout(20 * S)).unwrap());
        until_waiters(client, 1);
        reset_stats(servers);
        let before = client.stats();
        lock.release().unwrap();
        let next = waiter.join().unwrap();
        common::assert_one_hand_off(client, &before, name);
        assert!(calls(servers, "publish") >= 1, "{name}: not handed off");
        assert!(next.fence().unwrap() > first, "{name}");
        next.release().unwrap();
    }
}

#[test]
fn tls_to_every_node_redirections_waiters_and_a_slot_migration() {
    let tls = shared_tls();
    let servers = start_tls_cluster(&tls, 3, 0);
    let url = cluster_url(&servers);
    assert!(url.starts_with("rediss+cluster://"), "{url}");
    // The CA from the URL.
    let client = Client::open(&format!("{url}?tls_ca_file={}", tls.ca.display())).unwrap();
    assert!(client.addr().contains("(TLS)"), "{}", client.addr());
    many_slots_and_hand_offs(&servers, &client, 60);
    // The CA from the builder; MOVED and ASK lead to TLS ports as well.
    let client = Client::builder(&url)
        .tls_root_cert(tls.ca_pem())
        .build()
        .unwrap();
    migrate_under_a_held_lock(&servers, &client);
    // Without the CA: a typed error naming the certificate.
    let untrusted = Client::builder(&url).connect_timeout(S).build().unwrap();
    let e = untrusted.acquire("job", 5 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains("certificate"), "{e}");
    // A plain Cluster URL reaches no plain node there.
    let plain = Client::builder(&url.replacen("rediss+", "redis+", 1))
        .connect_timeout(S)
        .command_timeout(S)
        .build()
        .unwrap();
    let e = plain.acquire("job", 5 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
}

#[test]
fn wait_replicas_waits_on_the_master_of_the_lock_slot() {
    let servers = start_cluster_with_replicas(3, 1);
    let url = cluster_url(&servers);
    // A replica that a busy machine keeps waiting a while still counts (the
    // command timeout bounds the WAIT too).
    let waiting = Client::open(&format!(
        "{url}?wait_replicas=1&wait_timeout=5s&command_timeout=10s"
    ))
    .unwrap();
    // Names on every master: the replica of each name's master has the
    // lock when the acquire returns.
    let mut masters = std::collections::HashSet::new();
    for i in 0..12 {
        let name = format!("job:{i}");
        let lock = waiting.acquire(&name, 30 * S, Wait::TryOnce).unwrap();
        let master = owner(&servers, keyslot(&servers[0], &name));
        masters.insert(master);
        let replica = replica_of(&servers, master);
        assert_eq!(
            on_replica(&servers[replica], &name).as_deref(),
            Some(lock.token()),
            "{name}: WAIT returned before the replica had it"
        );
        lock.release().unwrap();
    }
    assert_eq!(masters.len(), 3, "the names did not reach every master");

    // Two replicas asked for, one exists: NoQuorum, and nothing left.
    let greedy = Client::open(&format!("{url}?wait_replicas=2&wait_timeout=200ms")).unwrap();
    let e = greedy.acquire("job:0", 30 * S, Wait::TryOnce).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoQuorum, "{e}");
    assert!(e.to_string().contains("replicas"), "{e}");
    let master = owner(&servers, keyslot(&servers[0], "job:0"));
    let left: Option<Vec<u8>> = redis::cmd("GET")
        .arg("job:0")
        .query(&mut servers[master].raw())
        .unwrap();
    assert_eq!(left, None, "an unreplicated lock was left behind");

    // The slot moves to another master (the client's map still names the
    // old one): the acquire follows MOVED, and its WAIT runs on the new
    // owner, whose replica has the lock.
    let name = "moving";
    // A holder that draws a fence leaves the slot's counter behind: a key
    // to move with the slot.
    let first = waiting.acquire(name, 30 * S, Wait::TryOnce).unwrap();
    first.fence().unwrap();
    first.release().unwrap();
    let slot = keyslot(&servers[0], name);
    let src = owner(&servers, slot);
    let dst = (0..servers.len())
        .find(|&i| i != src && !is_replica(&servers[i]))
        .unwrap();
    let (src_id, dst_id) = (node_id(&servers[src]), node_id(&servers[dst]));
    start_migration(&servers, slot, (src, &src_id), (dst, &dst_id));
    let keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(&mut servers[src].raw())
        .unwrap();
    assert!(!keys.is_empty(), "the fence counter of slot {slot}");
    move_keys(&servers[src], &servers[dst], &keys);
    set_slot_node(&servers, slot, &dst_id);
    reset_stats(&servers);
    let lock = waiting.acquire(name, 30 * S, Wait::TryOnce).unwrap();
    let waits = |i: usize| calls(&servers[i..=i], "wait");
    assert_eq!(
        (waits(src), waits(dst)),
        (0, 1),
        "WAIT ran on the wrong node"
    );
    let dst_replica = replica_of(&servers, dst);
    assert_eq!(
        on_replica(&servers[dst_replica], name).as_deref(),
        Some(lock.token())
    );
    lock.release().unwrap();
}

#[test]
fn semaphores_and_read_write_locks_live_in_their_names_slots_and_hand_off_across_nodes() {
    let servers = start_cluster(3);
    let client = client(&servers);
    let opts = |wait| redislock::AcquireOptions::new(30 * S).wait(wait);
    // Names over the nodes; each name's keys in its slot (a script with
    // keys of two slots would be refused: CROSSSLOT).
    let held: Vec<_> = (0..30)
        .map(|i| {
            client
                .acquire_semaphore(format!("pool:{i}"), 2, 1, opts(Wait::TryOnce))
                .unwrap()
        })
        .collect();
    for i in 0..30 {
        let name = format!("pool:{i}");
        let slot = keyslot(&servers[0], &name);
        for suffix in [":sem", ":sem:info"] {
            assert_eq!(keyslot(&servers[0], &format!("{{{name}}}{suffix}")), slot);
        }
    }
    for l in held {
        l.release().unwrap();
    }
    // A writer waiting on the node of its slot is handed the lock by the
    // readers' release (PUBLISH reaches every node; the waiter checks).
    let reader = client.acquire_read("catalog", opts(Wait::TryOnce)).unwrap();
    let writer = {
        let client = client.clone();
        thread::spawn(move || {
            client
                .acquire_write("catalog", opts(Wait::Timeout(30 * S)))
                .unwrap()
        })
    };
    let node = owner(&servers, keyslot(&servers[0], "{catalog}:rw"));
    wait_until("the writer to queue", 10 * S, || {
        redis::cmd("LLEN")
            .arg("{catalog}:rw:queue")
            .query::<i64>(&mut servers[node].raw())
            .unwrap()
            == 1
    });
    reader.release().unwrap();
    let writer = writer.join().unwrap();
    assert!(writer.owned().unwrap());
    writer.release().unwrap();
    for s in &servers {
        let keys: Vec<String> = redis::cmd("KEYS").arg("{*").query(&mut s.raw()).unwrap();
        assert!(keys.is_empty(), "left on {}: {keys:?}", s.port);
    }
}
