//! Waiters' wake-ups: one subscriber connection per server node for all the
//! waiters of a client (its threads, its async tasks, its C callers).
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
//! Who reads the connection (leader and followers): a waiting thread that
//! finds nobody reading reads the socket itself, so that the message that
//! hands it the lock wakes it straight from the kernel, with no second
//! thread to wake on the way. Messages for others go to their slots. The
//! other waiting threads queue for their turn, oldest first (the oldest is
//! the likeliest next in the lock's queue), and the reader passes the turn
//! on when its own message came or its wait ended. Async tasks cannot
//! block on a socket: while any waits, and no thread reads, the channel's
//! background thread reads for them, unless the thread the tasks run on
//! has an event loop of its own (`local`: Node's), which then watches the
//! socket and reads it there, so that the message wakes that thread
//! straight from the kernel too. The background thread also runs the client's
//! tick about once a second and, when nobody reads, looks at the socket
//! then, so that a dead connection is noticed without a waiter.
//!
//! When the connection dies (the server restarted, or closed it), every
//! ticket on it reports [`Delivery::Lost`] and the next registration opens
//! a new channel. After `fork()` a child never touches its parent's
//! channels: their threads do not exist there, and their sockets are the
//! parent's.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::net::wire::{Closer, Push, Wire};
use crate::protocol;
use crate::sync::locked;

const TICK: Duration = Duration::from_secs(1);
/// How long the background thread reads for async tasks before it looks
/// whether a waiting thread should read instead.
const TASK_READ: Duration = Duration::from_millis(100);
/// How long the background thread looks at a socket nobody reads, at a
/// tick, for a closed connection (and messages left there).
const PROBE: Duration = Duration::from_millis(1);

/// How long a reader reads.
#[derive(Clone, Copy)]
enum Reading {
    /// Until then, waiting for messages.
    Until(Instant),
    /// What the socket holds now, never waiting.
    Now,
}

/// What a waiter was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// The lock was handed over with this fencing number.
    Handed(u64),
    /// The subscriber connection died; the reason, as the I/O layer said.
    Lost(String),
    /// The subscriber moved to another server (a failover): until it was
    /// there, a release there counted nobody on it and may have passed the
    /// waiter over, so the waiter looks at the queue again at once.
    Moved,
}

thread_local! {
    /// Set when a release on this thread handed its lock to a thread of
    /// this process that slept waiting for it (see [`take_woke_here`]).
    static WOKE_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a release on this thread handed its lock to a sleeping thread of
/// this process since the last ask. A binding whose threads take turns on a
/// global lock (Python's) lets that thread run first.
pub fn take_woke_here() -> bool {
    WOKE_HERE.with(|w| w.replace(false))
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
    /// Set for a waiting thread when it may read the connection.
    turn: bool,
    /// Whether a thread sleeps on `wake`: only then is it notified (a
    /// notification is a system call, and the thread that reads usually
    /// delivers to its own slot).
    asleep: bool,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: Mutex::new(SlotState {
                came: None,
                task: None,
                turn: false,
                asleep: false,
            }),
            wake: Condvar::new(),
        }
    }

    fn came(&self) -> Option<Delivery> {
        locked(&self.state).came.clone()
    }

    /// Deliver `d` unless something came already: whether a thread slept
    /// waiting for it (and was woken).
    fn deliver(&self, d: Delivery) -> bool {
        let (task, asleep) = {
            let mut st = locked(&self.state);
            if st.came.is_some() {
                return false;
            }
            st.came = Some(d);
            (st.task.take(), st.asleep)
        };
        if asleep {
            self.wake.notify_all();
        }
        if let Some(w) = task {
            w.wake();
        }
        asleep
    }

    /// Give a queued thread the turn to read, unless its wait is over.
    fn give_turn(&self) -> bool {
        let mut st = locked(&self.state);
        if st.came.is_some() {
            return false;
        }
        st.turn = true;
        let asleep = st.asleep;
        drop(st);
        if asleep {
            self.wake.notify_all();
        }
        true
    }
}

/// Held by a loop's watcher of a channel: when the loop stops watching
/// (for whatever reason), the background thread reads for the tasks again.
#[cfg(feature = "tokio")]
struct Unwatched(std::sync::Weak<Channel>);

#[cfg(feature = "tokio")]
impl Drop for Unwatched {
    fn drop(&mut self) {
        if let Some(ch) = self.0.upgrade() {
            let w = locked(&ch.waiters);
            ch.watched.store(false, Ordering::Release);
            if w.tasks > 0 {
                ch.idle.notify_one();
            }
        }
    }
}

/// One subscribed connection and the waiters it serves.
pub(crate) struct Channel {
    /// 32 hex characters: the channel is `redislock:w:<id>`.
    id: String,
    pid: u32,
    waiters: Mutex<Waiters>,
    /// The background thread waits here for work.
    idle: Condvar,
    /// The current connection's (see [`Channel::replace`]).
    closer: Mutex<Closer>,
    /// The node it is filed under in the hub (`""`: the only server).
    node: Mutex<String>,
    /// Told, on a thread of its own, when the node says a slot left it.
    slot_left: Option<SlotHook>,
    /// Set from then until the channel has moved (or failed to): its
    /// waiters wait for it rather than queue again elsewhere.
    moving: AtomicBool,
    /// An event loop watches the connection and reads it for the tasks
    /// (see [`Channel::watch_here`]): the background thread does not.
    watched: AtomicBool,
    /// Which connection it is: one more each time it is replaced (a loop
    /// watches one connection, not its successor).
    generation: std::sync::atomic::AtomicU64,
}

/// Told that a cluster node (`host:port`) no longer serves a slot whose
/// waiters it had: a failover or a migration (see [`Hub::on_slot_left`]).
pub(crate) type SlotHook = Arc<dyn Fn(&str, u16) + Send + Sync>;

struct Waiters {
    by_nonce: HashMap<String, Arc<Slot>>,
    /// Set when the connection died: why.
    lost: Option<String>,
    /// The connection, while nobody reads it.
    wire: Option<Wire>,
    /// Threads waiting for their turn to read, oldest first.
    turns: VecDeque<Arc<Slot>>,
    /// Tickets that async tasks wait on.
    tasks: usize,
    /// The connection that replaces the one being read (see
    /// [`Channel::replace`]): whoever reads puts it in place when done.
    pending: Option<Wire>,
}

impl Channel {
    fn lost(&self) -> bool {
        locked(&self.waiters).lost.is_some()
    }

    /// Shut the connection down (in the process that opened it only: a
    /// child shares the socket with its parent). Whoever reads it then
    /// tells every waiter; if nobody does, this does.
    fn close(&self) {
        if crate::sync::pid() != self.pid {
            return;
        }
        locked(&self.closer).close();
        let unread = locked(&self.waiters).wire.take();
        if unread.is_some() {
            drop(unread);
            self.fail("the subscriber connection was closed".into());
        }
    }

    /// Go on over `new`, a connection subscribed to this channel on another
    /// server (the master after a failover): the waiters keep their
    /// registrations, so their queue entries stay valid. The old
    /// connection is shut down; a reader that holds it puts `new` in its
    /// place (see [`Channel::put_back`]).
    fn replace(&self, new: Wire) -> Result<()> {
        let closer = new
            .closer()
            .map_err(|e| Error::Internal(format!("cannot watch the subscriber connection: {e}")))?;
        let old = {
            let mut w = locked(&self.waiters);
            if let Some(reason) = &w.lost {
                return Err(Error::Internal(format!("the channel was lost: {reason}")));
            }
            for slot in w.by_nonce.values() {
                slot.deliver(Delivery::Moved);
            }
            let old = std::mem::replace(&mut *locked(&self.closer), closer);
            self.generation.fetch_add(1, Ordering::AcqRel);
            match w.wire.take() {
                // Nobody reads: swapped here.
                Some(unread) => {
                    drop(unread);
                    w.wire = Some(new);
                    self.pass_turn(&mut w);
                    None
                }
                None => {
                    w.pending = Some(new);
                    Some(old)
                }
            }
        };
        if let Some(old) = old {
            old.close();
        }
        Ok(())
    }

    /// If nobody reads the connection and it has something to read (its
    /// end, or messages), read that now.
    fn look_if_unread(self: &Arc<Self>) {
        let con = {
            let mut w = locked(&self.waiters);
            if w.wire.is_none() || !locked(&self.closer).readable() {
                return;
            }
            w.wire.take()
        };
        if let Some(mut con) = con {
            let read = self.pump(&mut con, Reading::Now, None, |_| false);
            self.put_back(con, read);
        }
    }

    /// Have this thread's event loop, if it has one, watch the connection
    /// and read it for the tasks (the background thread then does not):
    /// the message that hands a task its lock wakes this thread directly.
    /// A connection under TLS (whose socket brings records, not messages)
    /// stays the background thread's.
    #[cfg(feature = "tokio")]
    fn watch_here(self: &Arc<Self>) {
        use std::os::fd::BorrowedFd;
        if self.watched.load(Ordering::Acquire) || crate::sync::pid() != self.pid {
            return;
        }
        let Some(local) = crate::net::local::local_loop() else {
            return;
        };
        let (fd, generation) = {
            let w = locked(&self.waiters);
            let Some(fd) = w.wire.as_ref().and_then(Wire::poll_fd) else {
                return;
            };
            if w.lost.is_some() || self.watched.swap(true, Ordering::AcqRel) {
                return;
            }
            // SAFETY: the connection's open socket, which the mutex keeps
            // open while it is duplicated (F_DUPFD_CLOEXEC).
            let dup = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned();
            match dup {
                Ok(fd) => (fd, self.generation.load(Ordering::Acquire)),
                Err(e) => {
                    self.watched.store(false, Ordering::Release);
                    tracing::debug!(error = %e, "the subscriber stays the background thread's");
                    return;
                }
            }
        };
        let unwatched = Unwatched(Arc::downgrade(self));
        let watching = local.watch(
            fd,
            Box::new(move || match unwatched.0.upgrade() {
                Some(ch) => ch.read_ready(generation),
                None => crate::net::local::Watched::Done,
            }),
        );
        if let Err(e) = watching {
            tracing::debug!(error = %e, "the subscriber stays the background thread's");
        }
    }

    /// The watched socket is readable: read what it holds, unless someone
    /// else reads it now.
    #[cfg(feature = "tokio")]
    fn read_ready(self: &Arc<Self>, generation: u64) -> crate::net::local::Watched {
        use crate::net::local::Watched;
        let con = {
            let mut w = locked(&self.waiters);
            if w.lost.is_some() || self.generation.load(Ordering::Acquire) != generation {
                // Another connection (or none) now: the background thread
                // reads until a task has the loop watch the new one.
                self.watched.store(false, Ordering::Release);
                if w.tasks > 0 {
                    self.idle.notify_one();
                }
                return Watched::Done;
            }
            match w.wire.take() {
                Some(con) => con,
                None => return Watched::Busy,
            }
        };
        let mut con = con;
        let read = self.pump(&mut con, Reading::Now, None, |_| false);
        self.put_back(con, read);
        if self.lost() {
            self.watched.store(false, Ordering::Release);
            return Watched::Done;
        }
        Watched::More
    }

    /// `slot` left this channel's node (the node said so, or the slot map
    /// does): unless a move is under way, tell the hook, off the reader's
    /// thread (it reads the slot map, and moves this channel). Until it is
    /// done the waiters wait for the move rather than queue again.
    fn left(self: &Arc<Self>, slot: u16) {
        let Some(hook) = self.slot_left.clone() else {
            return;
        };
        if self.moving.swap(true, Ordering::AcqRel) {
            return;
        }
        let node = locked(&self.node).clone();
        let ch = self.clone();
        let started = crate::sync::spawn_quiet("redislock-slot", move || {
            hook(&node, slot);
            ch.moving.store(false, Ordering::Release);
        });
        if let Err(e) = started {
            self.moving.store(false, Ordering::Release);
            tracing::debug!(error = %e, "cannot follow a slot that left its node");
        }
    }

    /// The connection died: tell every waiter, and the background thread.
    fn fail(&self, reason: String) {
        let slots: Vec<Arc<Slot>> = {
            let mut w = locked(&self.waiters);
            w.lost = Some(reason.clone());
            w.turns.clear();
            w.by_nonce.values().cloned().collect()
        };
        self.idle.notify_all();
        for slot in slots {
            slot.deliver(Delivery::Lost(reason.clone()));
        }
    }

    /// Read messages into their waiters' slots until `until`, or until
    /// `mine` (the reading waiter's slot) got one, or `enough` says so
    /// after a message. `Err`: the connection died, and why.
    fn pump(
        self: &Arc<Self>,
        con: &mut Wire,
        until: Reading,
        mine: Option<&Arc<Slot>>,
        enough: impl Fn(&Waiters) -> bool,
    ) -> std::result::Result<(), String> {
        loop {
            let next = match until {
                Reading::Until(until) => con.next_push(until, false),
                Reading::Now => con.try_push(),
            };
            let payload = match next {
                Ok(Some(Push::Message { payload, .. })) => payload,
                // Unless this connection is being replaced already.
                Ok(Some(Push::Other { kind, channel })) => {
                    if kind == b"sunsubscribe" && locked(&self.waiters).pending.is_none() {
                        self.left(protocol::slot(&channel));
                    }
                    continue;
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(crate::net::wire::io_reason(&e)),
            };
            let Some((nonce, fence)) = protocol::split_handoff(&payload) else {
                continue;
            };
            // A message for a waiter that already left (it took the lock by
            // its own retry, or its CANCEL found the lock handed to it)
            // needs nothing.
            let slot = {
                let w = locked(&self.waiters);
                let slot = std::str::from_utf8(nonce)
                    .ok()
                    .and_then(|n| w.by_nonce.get(n).cloned());
                if slot.is_none() && enough(&w) {
                    return Ok(());
                }
                slot
            };
            let Some(slot) = slot else { continue };
            slot.deliver(Delivery::Handed(fence));
            if mine.is_some_and(|m| Arc::ptr_eq(m, &slot)) || enough(&locked(&self.waiters)) {
                return Ok(());
            }
        }
    }

    /// The reader is done with the connection: hand it back (or its
    /// replacement) and pass the turn on, or report it dead.
    fn put_back(&self, con: Wire, read: std::result::Result<(), String>) {
        {
            let mut w = locked(&self.waiters);
            if let Some(new) = w.pending.take() {
                drop(con);
                w.wire = Some(new);
                self.pass_turn(&mut w);
                return;
            }
        }
        match read {
            Ok(()) => {
                let mut w = locked(&self.waiters);
                w.wire = Some(con);
                self.pass_turn(&mut w);
            }
            Err(reason) => {
                drop(con);
                self.fail(reason);
            }
        }
    }

    /// Nobody reads: the oldest waiting thread reads next, or the
    /// background thread if tasks wait.
    fn pass_turn(&self, w: &mut Waiters) {
        if w.wire.is_none() {
            return;
        }
        while let Some(slot) = w.turns.pop_front() {
            if slot.give_turn() {
                return;
            }
        }
        if w.tasks > 0 && !self.watched.load(Ordering::Acquire) {
            self.idle.notify_one();
        }
    }

    /// A waiting thread is done waiting: out of the turn queue, and a turn
    /// given to it meanwhile goes to the next.
    fn leave_turns(&self, slot: &Arc<Slot>) {
        let mut w = locked(&self.waiters);
        w.turns.retain(|s| !Arc::ptr_eq(s, slot));
        let had = std::mem::take(&mut locked(&slot.state).turn);
        if had {
            self.pass_turn(&mut w);
        }
    }

    /// The background thread: read for async tasks while no thread does,
    /// run `tick` about once a second, and end with the connection.
    fn background(self: Arc<Channel>, tick: &(dyn Fn() + Send + Sync)) {
        let mut next_tick = Instant::now() + TICK;
        loop {
            let (con, until) = {
                let mut w = locked(&self.waiters);
                loop {
                    if w.lost.is_some() {
                        return;
                    }
                    let now = Instant::now();
                    if w.wire.is_some() && w.tasks > 0 && !self.watched.load(Ordering::Acquire) {
                        break (w.wire.take(), (now + TASK_READ).min(next_tick));
                    }
                    if now >= next_tick {
                        break (w.wire.take(), now + PROBE);
                    }
                    w = crate::sync::wait_timeout(&self.idle, w, next_tick - now).0;
                }
            };
            if let Some(mut con) = con {
                // Threads read for themselves: once one waits, stop.
                let read = self.pump(&mut con, Reading::Until(until), None, |w| {
                    !w.turns.is_empty()
                });
                self.put_back(con, read);
            }
            if Instant::now() >= next_tick {
                tick();
                next_tick = Instant::now() + TICK;
            }
        }
    }
}

/// A waiter's registration on a channel. Dropping it unregisters; drop it
/// only once the waiter is out of the lock's queue (or call `abandon`).
pub(crate) struct Ticket {
    channel: Arc<Channel>,
    nonce: String,
    slot: Arc<Slot>,
    /// Counted in the channel's `tasks`.
    task: AtomicBool,
}

impl Ticket {
    /// The channel id, for the queue entry.
    pub(crate) fn channel_id(&self) -> &str {
        &self.channel.id
    }

    /// The node its channel is on (`""`: the only server), unless the
    /// channel is moving to another (see [`Hub::relocate`]). What its node
    /// sent and nobody read yet is read first: a `sunsubscribe` there
    /// starts the move.
    pub(crate) fn node(&self) -> Option<String> {
        self.channel.look_if_unread();
        let node = locked(&self.channel.node).clone();
        (!self.channel.moving.load(Ordering::Acquire)).then_some(node)
    }

    /// Move the channel to the node that serves `slot` now (its node lost
    /// every slot: a replica took over), as a `sunsubscribe` would.
    pub(crate) fn follow(&self, slot: u16) {
        self.channel.left(slot);
    }

    pub(crate) fn nonce(&self) -> &str {
        &self.nonce
    }

    /// Block for at most `slice`; `None` when nothing came. The calling
    /// thread reads the connection itself when nobody does.
    pub(crate) fn wait(&self, slice: Duration) -> Option<Delivery> {
        let until = Instant::now() + slice;
        let ch = &self.channel;
        loop {
            let con = {
                let mut w = locked(&ch.waiters);
                if let Some(d) = self.slot.came() {
                    drop(w);
                    self.channel.leave_turns(&self.slot);
                    return Some(d);
                }
                let con = w.wire.take();
                if con.is_none() && !w.turns.iter().any(|s| Arc::ptr_eq(s, &self.slot)) {
                    w.turns.push_back(self.slot.clone());
                }
                con
            };
            if let Some(mut con) = con {
                let read = ch.pump(&mut con, Reading::Until(until), Some(&self.slot), |_| false);
                ch.put_back(con, read);
                if let Some(d) = self.slot.came() {
                    return Some(d);
                }
                if Instant::now() >= until {
                    return None;
                }
                continue;
            }
            // Another reads: wait for a message or for the turn.
            let mut st = locked(&self.slot.state);
            loop {
                if st.came.is_some() {
                    break;
                }
                if st.turn {
                    st.turn = false;
                    break;
                }
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    drop(st);
                    ch.leave_turns(&self.slot);
                    return None;
                }
                st.asleep = true;
                st = crate::sync::wait_timeout(&self.slot.wake, st, left).0;
                st.asleep = false;
            }
        }
    }

    /// What came, or leave the task's waker for the reader to wake.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn poll_delivery(&self, cx: &mut Context<'_>) -> Poll<Delivery> {
        {
            let mut st = locked(&self.slot.state);
            if let Some(d) = &st.came {
                return Poll::Ready(d.clone());
            }
            match &mut st.task {
                Some(w) => w.clone_from(cx.waker()),
                None => st.task = Some(cx.waker().clone()),
            }
        }
        if !self.task.swap(true, Ordering::Relaxed) {
            #[cfg(feature = "tokio")]
            self.channel.watch_here();
            let mut w = locked(&self.channel.waiters);
            w.tasks += 1;
            if w.wire.is_some() && !self.channel.watched.load(Ordering::Acquire) {
                self.channel.idle.notify_one();
            }
        }
        Poll::Pending
    }

    /// Wait for the next message: the last one was not acted on (see the
    /// waiter's Cluster and Sentinel check).
    pub(crate) fn rearm(&self) {
        let mut st = locked(&self.slot.state);
        if let Some(Delivery::Handed(_) | Delivery::Moved) = st.came {
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
            let mut w = locked(&self.channel.waiters);
            w.by_nonce.remove(&self.nonce);
            if *self.task.get_mut() {
                w.tasks -= 1;
            }
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
    slot_left: std::sync::OnceLock<SlotHook>,
}

impl Hub {
    pub(crate) fn new(tick: Box<dyn Fn() + Send + Sync>) -> Hub {
        Hub {
            tick: Arc::from(tick),
            channels: Mutex::new((crate::sync::pid(), HashMap::new())),
            opening: Mutex::new(()),
            slot_left: std::sync::OnceLock::new(),
        }
    }

    /// Cluster: `hook(node, slot)` runs when a node with waiters says that
    /// `slot` left it (the `sunsubscribe` of the slot's watch channel that
    /// the subscriber SSUBSCRIBEd). Set once, before any channel opens.
    pub(crate) fn on_slot_left(&self, hook: SlotHook) {
        let _ = self.slot_left.set(hook);
    }

    /// The live channel to `node`, if any. One that nobody reads is looked
    /// at first: a connection the server closed meanwhile shows its end
    /// there, and a new waiter must not queue under a dead channel.
    fn live(&self, node: &str) -> Option<Arc<Channel>> {
        let ch = {
            let mut c = locked(&self.channels);
            let pid = crate::sync::pid();
            if c.0 != pid {
                // A forked child: forget the parent's channels without
                // closing them (dropping one closes only this process's
                // descriptor).
                c.0 = pid;
                c.1.clear();
            }
            c.1.get(node).cloned()?
        };
        ch.look_if_unread();
        (!ch.lost()).then_some(ch)
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
                        let ch = self.open(node, open)?;
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

    /// Whether a live channel to `node` is open.
    pub(crate) fn is_live(&self, node: &str) -> bool {
        self.live(node).is_some()
    }

    /// Register on the live channel to `node` if there is one, without
    /// ever blocking to open one.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register_live(&self, node: &str) -> Option<Ticket> {
        self.live(node).map(Self::ticket)
    }

    /// Move the live channel to `node` onto the connection `open(channel)`
    /// makes (subscribed to the same channel on another server), and file
    /// it under `to`: its waiters keep their place in the locks' queues.
    /// When that fails, or `to` has a channel already, the channel is
    /// closed instead and its waiters queue again.
    pub(crate) fn relocate(&self, node: &str, to: &str, open: impl FnOnce(&str) -> Result<Wire>) {
        let Some(ch) = self.live(node) else { return };
        let _opening = locked(&self.opening);
        let taken = node != to && self.live(to).is_some();
        let name = format!("{}{}", protocol::WAKE_CHANNEL_PREFIX, ch.id);
        let moved = if taken {
            Err(Error::Internal(format!("{to} has a subscriber already")))
        } else {
            open(&name).and_then(|wire| ch.replace(wire))
        };
        match moved {
            Ok(()) if node != to => {
                *locked(&ch.node) = to.to_string();
                let mut c = locked(&self.channels);
                c.1.remove(node);
                c.1.insert(to.to_string(), ch.clone());
            }
            Ok(()) => {}
            Err(e) => {
                tracing::debug!(error = %e, "the waiters' subscriber could not move: its waiters queue again");
                ch.close();
            }
        }
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
            task: AtomicBool::new(false),
        }
    }

    fn open(
        &self,
        node: &str,
        open: impl FnOnce(&str, &str) -> Result<Wire>,
    ) -> Result<Arc<Channel>> {
        let tick = self.tick.clone();
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
                wire: Some(con),
                turns: VecDeque::new(),
                tasks: 0,
                pending: None,
            }),
            idle: Condvar::new(),
            closer: Mutex::new(closer),
            node: Mutex::new(node.to_string()),
            slot_left: self.slot_left.get().cloned(),
            moving: AtomicBool::new(false),
            watched: AtomicBool::new(false),
            generation: std::sync::atomic::AtomicU64::new(0),
        });
        let reader = channel.clone();
        crate::sync::spawn_quiet("redislock-wake", move || reader.background(&*tick))
            .map_err(|e| Error::Internal(format!("cannot start the wake-up thread: {e}")))?;
        let mut all = locked(&CHANNELS);
        let here = of_this_process(&mut all);
        here.retain(|_, ch| ch.strong_count() > 0);
        here.insert(channel.id.clone(), Arc::downgrade(&channel));
        Ok(channel)
    }
}

/// Every subscriber channel of this process, of every client, by id: a
/// release by any client of the process wakes a waiter of another client
/// of the process directly (see [`hand_here`]).
static CHANNELS: Mutex<Option<(u32, ByID)>> = Mutex::new(None);

type ByID = HashMap<String, std::sync::Weak<Channel>>;

/// This process's part of [`CHANNELS`] (a forked child's starts empty).
fn of_this_process(all: &mut Option<(u32, ByID)>) -> &mut ByID {
    let pid = crate::sync::pid();
    if all.as_ref().is_none_or(|(p, _)| *p != pid) {
        *all = Some((pid, HashMap::new()));
    }
    &mut all.get_or_insert_with(|| (pid, HashMap::new())).1
}

/// A release by this process handed a lock to the waiter `nonce` on the
/// channel `id`: if that channel is this process's (of any client), deliver
/// the hand-off now, unless the waiter's copy of the message came first.
/// That copy comes anyway, and is then for a waiter that already has what
/// it says. Whether the channel is this process's.
pub(crate) fn hand_here(id: &str, nonce: &str) -> bool {
    let channel = {
        let mut all = locked(&CHANNELS);
        of_this_process(&mut all)
            .get(id)
            .and_then(std::sync::Weak::upgrade)
    };
    let Some(ch) = channel else { return false };
    // Gone: its copy of the message was read first, and woke it.
    let slot = locked(&ch.waiters).by_nonce.get(nonce).cloned();
    if slot.is_some_and(|slot| slot.deliver(Delivery::Handed(0))) {
        WOKE_HERE.with(|w| w.set(true));
    }
    true
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
