//! Waiters' wake-ups: one subscriber connection per server node for all the
//! waiters of a client (its threads, its async tasks, its C callers), read
//! by one thread that hands each message to the waiter it names.
//!
//! A [`Channel`] is a connection SUBSCRIBEd to `redislock:w:<id>`. A waiter
//! registers a nonce on it and gets a [`Ticket`] before it joins a lock's
//! queue, and drops the ticket only once it is out of the queue (it took the
//! lock, or its CANCEL ran). So while the connection is up, every message
//! the release script counts as received names a waiter that will act on
//! it. A waiter that cannot tell whether it left the queue (its CANCEL
//! failed) closes the channel with [`Ticket::abandon`]: from then on a
//! release counts nobody there and hands the lock to the next waiter.
//!
//! When the connection dies (the server restarted, or closed it), every
//! ticket on it reports [`Delivery::Lost`] and the next registration opens
//! a new channel. After `fork()` a child never touches its parent's
//! channels: their reader threads do not exist there, and their sockets are
//! the parent's.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::net::wire::{Closer, Wire};
use crate::protocol;
use crate::sync::locked;

const TICK: Duration = Duration::from_secs(1);

/// What a waiter was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// The lock was handed over with this fencing number.
    Handed(u64),
    /// The subscriber connection died; the reason, as the I/O layer said.
    Lost(String),
}

/// Where one waiter's message lands: a thread blocks on the condition
/// variable, a task leaves its waker.
struct Slot {
    state: Mutex<SlotState>,
    wake: Condvar,
}

struct SlotState {
    /// What came, once something did.
    came: Option<Delivery>,
    task: Option<Waker>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: Mutex::new(SlotState {
                came: None,
                task: None,
            }),
            wake: Condvar::new(),
        }
    }

    fn deliver(&self, d: Delivery) {
        let task = {
            let mut st = locked(&self.state);
            if st.came.is_some() {
                return;
            }
            st.came = Some(d);
            st.task.take()
        };
        self.wake.notify_all();
        if let Some(w) = task {
            w.wake();
        }
    }
}

/// One subscribed connection and the waiters it serves.
pub(crate) struct Channel {
    /// 32 hex characters: the channel is `redislock:w:<id>`.
    id: String,
    pid: u32,
    waiters: Mutex<Waiters>,
    closer: Closer,
}

struct Waiters {
    by_nonce: HashMap<String, Arc<Slot>>,
    /// Set when the connection died: why.
    lost: Option<String>,
}

impl Channel {
    fn lost(&self) -> bool {
        locked(&self.waiters).lost.is_some()
    }

    /// Shut the connection down (in the process that opened it only: a
    /// child shares the socket with its parent). The reader thread then
    /// tells every waiter.
    fn close(&self) {
        if crate::sync::pid() == self.pid {
            self.closer.close();
        }
    }

    /// The reader thread: dispatch messages until the connection dies,
    /// running `tick` about once a second.
    fn read(self: Arc<Channel>, mut con: Wire, tick: &(dyn Fn() + Send + Sync)) {
        let mut next_tick = Instant::now() + TICK;
        let reason = loop {
            match con.next_message(next_tick, false) {
                Ok(Some(payload)) => {
                    let Some((nonce, fence)) = protocol::split_handoff(&payload) else {
                        continue;
                    };
                    // A message for a waiter that already left (it took the
                    // lock by its own retry, or its CANCEL found the lock
                    // handed to it) needs nothing.
                    let slot = std::str::from_utf8(nonce)
                        .ok()
                        .and_then(|n| locked(&self.waiters).by_nonce.get(n).cloned());
                    if let Some(slot) = slot {
                        slot.deliver(Delivery::Handed(fence));
                    }
                }
                Ok(None) => {}
                Err(e) => break crate::net::wire::io_reason(&e),
            }
            if Instant::now() >= next_tick {
                tick();
                next_tick = Instant::now() + TICK;
            }
        };
        let slots: Vec<Arc<Slot>> = {
            let mut w = locked(&self.waiters);
            w.lost = Some(reason.clone());
            w.by_nonce.values().cloned().collect()
        };
        for slot in slots {
            slot.deliver(Delivery::Lost(reason.clone()));
        }
    }
}

/// A waiter's registration on a channel. Dropping it unregisters; drop it
/// only once the waiter is out of the lock's queue (or call `abandon`).
pub(crate) struct Ticket {
    channel: Arc<Channel>,
    nonce: String,
    slot: Arc<Slot>,
}

impl Ticket {
    /// The channel id, for the queue entry.
    pub(crate) fn channel_id(&self) -> &str {
        &self.channel.id
    }

    pub(crate) fn nonce(&self) -> &str {
        &self.nonce
    }

    /// Block for at most `slice`; `None` when nothing came.
    pub(crate) fn wait(&self, slice: Duration) -> Option<Delivery> {
        let until = Instant::now() + slice;
        let mut st = locked(&self.slot.state);
        loop {
            if let Some(d) = &st.came {
                return Some(d.clone());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            st = self
                .slot
                .wake
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// What came, or leave the task's waker for the reader to wake.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn poll_delivery(&self, cx: &mut Context<'_>) -> Poll<Delivery> {
        let mut st = locked(&self.slot.state);
        match &st.came {
            Some(d) => Poll::Ready(d.clone()),
            None => {
                match &mut st.task {
                    Some(w) => w.clone_from(cx.waker()),
                    None => st.task = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }

    /// Wait for the next message: the last one was not acted on (see the
    /// waiter's Cluster and Sentinel check).
    pub(crate) fn rearm(&self) {
        let mut st = locked(&self.slot.state);
        if let Some(Delivery::Handed(_)) = st.came {
            st.came = None;
        }
    }

    /// The waiter could not make sure it left the queue: close the channel,
    /// so that no release counts a message to it as received. The other
    /// waiters on it see [`Delivery::Lost`] and queue again.
    pub(crate) fn abandon(self) {
        self.channel.close();
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // In a forked child the parent's reader may have held this mutex
        // at the fork: leave the parent's channel alone.
        if crate::sync::pid() == self.channel.pid {
            locked(&self.channel.waiters).by_nonce.remove(&self.nonce);
        }
    }
}

/// The channels of one client, by node (`""`: the only server).
pub(crate) struct Hub {
    /// Run by each reader about once a second (the pool trims its idle
    /// connections).
    tick: Arc<dyn Fn() + Send + Sync>,
    channels: Mutex<(u32, HashMap<String, Arc<Channel>>)>,
    /// Held while a channel is opened, so that a thousand waiters arriving
    /// at once open one connection, not a thousand.
    opening: Mutex<()>,
}

impl Hub {
    pub(crate) fn new(tick: Box<dyn Fn() + Send + Sync>) -> Hub {
        Hub {
            tick: Arc::from(tick),
            channels: Mutex::new((crate::sync::pid(), HashMap::new())),
            opening: Mutex::new(()),
        }
    }

    /// The live channel to `node`, if any.
    fn live(&self, node: &str) -> Option<Arc<Channel>> {
        let mut c = locked(&self.channels);
        let pid = crate::sync::pid();
        if c.0 != pid {
            // A forked child: forget the parent's channels without closing
            // them (dropping one closes only this process's descriptor).
            c.0 = pid;
            c.1.clear();
        }
        c.1.get(node).filter(|ch| !ch.lost()).cloned()
    }

    /// Register a new waiter on the channel to `node`, opening one if there
    /// is none or it died: `open(node, channel)` connects to the node and
    /// subscribes to `channel`.
    pub(crate) fn register(
        &self,
        node: &str,
        open: impl FnOnce(&str, &str) -> Result<Wire>,
    ) -> Result<Ticket> {
        let channel = match self.live(node) {
            Some(ch) => ch,
            None => {
                let _opening = locked(&self.opening);
                match self.live(node) {
                    Some(ch) => ch,
                    None => {
                        let ch = Self::open(node, open, self.tick.clone())?;
                        locked(&self.channels)
                            .1
                            .insert(node.to_string(), ch.clone());
                        ch
                    }
                }
            }
        };
        Ok(Self::ticket(channel))
    }

    /// Register on the live channel to `node` if there is one, without
    /// ever blocking to open one.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register_live(&self, node: &str) -> Option<Ticket> {
        self.live(node).map(Self::ticket)
    }

    fn ticket(channel: Arc<Channel>) -> Ticket {
        let nonce = protocol::hex(&protocol::random_bytes::<8>());
        let slot = Arc::new(Slot::new());
        {
            let mut w = locked(&channel.waiters);
            w.by_nonce.insert(nonce.clone(), slot.clone());
            if let Some(reason) = &w.lost {
                // It died between the lookup and now.
                slot.deliver(Delivery::Lost(reason.clone()));
            }
        }
        Ticket {
            channel,
            nonce,
            slot,
        }
    }

    fn open(
        node: &str,
        open: impl FnOnce(&str, &str) -> Result<Wire>,
        tick: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Arc<Channel>> {
        let id = protocol::hex(&protocol::random_bytes::<16>());
        let con = open(node, &format!("{}{}", protocol::WAKE_CHANNEL_PREFIX, id))?;
        let closer = con
            .closer()
            .map_err(|e| Error::Internal(format!("cannot watch the subscriber connection: {e}")))?;
        let channel = Arc::new(Channel {
            id,
            pid: crate::sync::pid(),
            waiters: Mutex::new(Waiters {
                by_nonce: HashMap::new(),
                lost: None,
            }),
            closer,
        });
        let reader = channel.clone();
        crate::sync::spawn_quiet("redislock-wake", move || reader.read(con, &*tick))
            .map_err(|e| Error::Internal(format!("cannot start the wake-up thread: {e}")))?;
        Ok(channel)
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let c = locked(&self.channels);
        if c.0 == crate::sync::pid() {
            for ch in c.1.values() {
                ch.close();
            }
        }
    }
}
