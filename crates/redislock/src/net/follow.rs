//! Following a failover with the waiters' subscriber and checking a new
//! connection's master: the hooks a pool registers with its Sentinel
//! service and its cluster, so that the subscriber moves, under the same
//! channel, to the new master of its lock's slot; and the `ROLE` check.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ErrorKind as RedisKind, RedisResult, Value};

use crate::error::Error;
use crate::net::cluster::Cluster;
use crate::net::hub::{Hub, SlotHook};
use crate::net::sentinel::{Master, Sentinel};
use crate::net::target::Target;
use crate::net::wire::{io_reason, Wire};

/// Whether the server answers `ROLE` as a master (or will not say: a user
/// without the command is not told otherwise).
pub(crate) fn answers_as_master(wire: &mut Wire) -> RedisResult<bool> {
    role_is_master(redis::cmd("ROLE").query(wire))
}

/// Whether a reply to `ROLE` says master; a refusal does not say otherwise.
pub(crate) fn role_is_master(reply: RedisResult<Value>) -> RedisResult<bool> {
    match reply {
        Ok(Value::Array(items)) => Ok(!matches!(
            items.first(),
            Some(Value::BulkString(r)) if r.as_slice() != b"master"
        )),
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), RedisKind::Server(_)) || e.code().is_some() => Ok(true),
        Err(e) => Err(e),
    }
}

/// The server the sentinels name as `master` answers as a replica.
pub(crate) fn still_named(s: &Sentinel, master: &Master) -> Error {
    Error::Unavailable {
        addr: format!("master {} of {}", master.addr, s.describe()),
        state: String::from(
            "a replica (ROLE) while the sentinels still name it the master: a failover is \
             under way",
        ),
        waited: Duration::ZERO,
        hint: String::new(),
    }
}

/// A subscriber that could not be moved to `addr` (see the two hooks
/// below): why, for the debug line.
fn unreachable(addr: &str, e: &redis::RedisError, connect: Duration) -> Error {
    Error::Connection {
        addr: addr.to_string(),
        reason: io_reason(e),
        hint: format!("connect timeout {connect:?}"),
    }
}

/// Move the waiters' subscriber of `target`'s pools along with each master
/// the Sentinel service `s` switches to: the same channel on the new
/// master, so that the waiters keep their place in the queues.
pub(crate) fn follow_with_subscriber(s: &Arc<Sentinel>, hub: &Arc<Hub>, target: &Target) {
    let hub = Arc::downgrade(hub);
    let tls = target.tls.clone();
    let (connect, command) = (target.connect_timeout, target.command_timeout);
    s.on_switch(Box::new(move |master| {
        let Some(hub) = hub.upgrade() else { return };
        hub.relocate("", "", |channel| {
            let mut wire = Wire::connect(&master.info, tls.as_ref(), connect, command)
                .map_err(|e| unreachable(&master.addr, &e, connect))?;
            wire.subscribe(channel)
                .map_err(|e| unreachable(&master.addr, &e, connect))?;
            Ok(wire)
        });
    }));
}

/// SSUBSCRIBE the watch channel of `slot` (see `Pool::register_waiter`); a server
/// without sharded pub/sub (before Redis 7) has none, and its waiters
/// follow a moved slot by their retries alone.
pub(crate) fn watch_slot(con: &mut Wire, slot: u16) {
    if let Err(e) = con.ssubscribe(&crate::protocol::slot_watch(slot)) {
        tracing::debug!(slot, error = %e, "cannot watch the lock's slot (SSUBSCRIBE)");
    }
}

/// A cluster: when a node with waiters says that one of their slots left
/// it, find the slot's new owner (the nodes learn it within moments of a
/// failover) and move the waiters' channel, under the same name: to the
/// new owner when the old node serves nothing any more (a replica took it
/// over), or again to the same node with another slot watched when it
/// still serves some (a migration; the migrated slot's waiters notice
/// their misplacement themselves, see [`Pool::misplaced`](crate::net::pool::Pool::misplaced)).
pub(crate) fn follow_slots(cluster: &Arc<Cluster>, hub: &Arc<Hub>, target: &Target) {
    let weak = Arc::downgrade(hub);
    let map = cluster.clone();
    let cluster = Arc::downgrade(cluster);
    let (connect, command) = (target.connect_timeout, target.command_timeout);
    let follow: SlotHook = Arc::new(move |node: &str, slot: u16| {
        let Some(cluster) = cluster.upgrade() else {
            return;
        };
        let Some(hub) = weak.upgrade() else { return };
        let until = Instant::now() + command;
        let owner = loop {
            if cluster.answers(connect, command) {
                if let Some(owner) = cluster.owner(slot).filter(|o| o != node) {
                    break Some(owner);
                }
            }
            if Instant::now() >= until {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Nobody took it over within the command timeout: the channel
        // stays, and its waiters look again at their retries.
        let Some(owner) = owner else { return };
        let (to, watch) = match cluster.first_slot_of(node) {
            Some(kept) => (node.to_string(), kept),
            None => (owner, slot),
        };
        hub.relocate(node, &to, |channel| {
            let at = |e: redis::RedisError| unreachable(&to, &e, connect);
            let mut wire = cluster.connect(&to, connect, command).map_err(at)?;
            wire.subscribe(channel).map_err(at)?;
            watch_slot(&mut wire, watch);
            Ok(wire)
        });
    });
    hub.on_slot_left(follow.clone());
    // A command that found the node it waited for replaced (a frozen
    // master, see `Routed`): the node's subscriber may be frozen too.
    map.on_moved(follow);
}
