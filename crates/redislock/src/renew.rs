//! Background renewal: one thread per client, not per lock. It extends
//! through the client's deployment and shares each lock's state with its
//! `Lock` handle; it knows neither the client nor the handle.
//!
//! Each renewing lock is extended at about a third of its TTL. Locks that
//! fall due together are extended in one pipelined round trip. An extend
//! that finds the lock gone marks it lost and drops it from the set; an
//! extend that fails for lack of a connection is retried soon, until a
//! tenth of the TTL is left since the last successful extend was sent
//! (each extend bounded to end by then), and then the lock is marked lost
//! as well, before the server can have let it go. Release clears the lock's
//! `renewing` flag under the mutex the thread holds while extending, so no
//! extend is sent after a release. The thread holds only a weak reference to
//! the deployment and ends when the client and its locks are gone. After `fork()` the child has
//! no renewal thread and forgets the parent's set; it starts its own thread
//! for its own locks.
//!
//! A lock found lost runs its `on_lost` callback once, on the thread that
//! found it (the renewal thread for renewal), after every mutex here has
//! been let go: the callback may release, extend or take other locks.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::deploy::{Deployment, Extension};
use crate::error::show_key;
use crate::protocol::LockKeys;
use crate::stats::{Counters, Event, Gauge};
use crate::sync::locked;

/// What runs once when a lock is found lost.
pub(crate) type OnLost = Box<dyn FnOnce() + Send + 'static>;

/// A held lock as its `Lock` handle and the renewal thread share it.
pub(crate) struct LockState {
    pub(crate) keys: LockKeys,
    pub(crate) token: Vec<u8>,
    /// The fencing number; 0 until one is drawn (see [`LockState::fence`]).
    fence: AtomicU64,
    pub(crate) ttl_ms: AtomicU64,
    pub(crate) lost: AtomicBool,
    /// True while the renewal thread may extend this lock. The renewal
    /// thread holds this mutex while an extend is in flight, and release
    /// clears it first, so no extend is ever sent after a release.
    pub(crate) renewing: Mutex<bool>,
    /// The client's statistics.
    pub(crate) stats: Arc<Counters>,
    /// When it was acquired, for the held-time histogram.
    acquired: Instant,
    /// True while it counts in the statistics' `held_now`.
    counted: AtomicBool,
    on_lost: Mutex<Option<OnLost>>,
}

impl LockState {
    /// A lock just acquired: it counts as held from now.
    pub(crate) fn new(
        keys: LockKeys,
        token: Vec<u8>,
        fence: u64,
        ttl_ms: u64,
        stats: Arc<Counters>,
    ) -> LockState {
        stats.gauge(Gauge::Held, 1);
        if let Some(k) = keys.semaphore_permits() {
            stats.gauge(Gauge::Permits, k.into());
        }
        LockState {
            keys,
            token,
            fence: AtomicU64::new(fence),
            ttl_ms: AtomicU64::new(ttl_ms),
            lost: AtomicBool::new(false),
            renewing: Mutex::new(false),
            stats,
            acquired: Instant::now(),
            counted: AtomicBool::new(true),
            on_lost: Mutex::new(None),
        }
    }

    /// The fencing number if one was drawn, else 0.
    pub(crate) fn fence(&self) -> u64 {
        self.fence.load(Ordering::Acquire)
    }

    /// Keep the fence drawn for this holder (the first one drawn stays:
    /// two draws racing keep the same number for every reader).
    pub(crate) fn set_fence(&self, fence: u64) -> u64 {
        match self
            .fence
            .compare_exchange(0, fence, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => fence,
            Err(first) => first,
        }
    }

    /// The handle lets go of the lock (release, drop, lost): it no longer
    /// counts as held, and how long it was held is recorded once. A
    /// forgotten handle (`record` false) records no held time: the lock
    /// lives on without it.
    pub(crate) fn let_go(&self, record: bool) {
        if self.counted.swap(false, Ordering::AcqRel) {
            self.stats.gauge(Gauge::Held, -1);
            if let Some(k) = self.keys.semaphore_permits() {
                self.stats.gauge(Gauge::Permits, -i64::from(k));
            }
            if record && !cfg!(redislock_no_stats) {
                self.stats.held(self.acquired.elapsed());
            }
        }
    }

    /// Mark the lock lost (once): counted, no longer held. True the first
    /// time; the caller then runs [`LockState::notify_lost`], holding no
    /// mutex.
    pub(crate) fn set_lost(&self) -> bool {
        if self.lost.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.stats.count(Event::LockLost);
        self.let_go(true);
        true
    }

    /// Run the `on_lost` callback if one is set and has not run. A panic in
    /// it is caught: it never stops the thread that found the loss.
    pub(crate) fn notify_lost(&self) {
        let callback = locked(&self.on_lost).take();
        if let Some(f) = callback {
            if catch_unwind(AssertUnwindSafe(f)).is_err() {
                tracing::error!(
                    lock = %show_key(&self.keys.lock),
                    "the on_lost callback panicked (ignored)"
                );
            }
        }
    }

    /// Set the callback for when the lock is found lost, replacing one set
    /// before. If it already is lost, `f` runs now, on this thread.
    pub(crate) fn on_lost(&self, f: OnLost) {
        *locked(&self.on_lost) = Some(f);
        if self.lost.load(Ordering::Acquire) {
            self.notify_lost();
        }
    }
}

/// Locks extended in one pipelined round trip at most.
const BATCH: usize = 512;
/// Locks due within this much of each other are extended together.
const SLACK: Duration = Duration::from_millis(20);
/// Retry delay after a failed extend.
const RETRY: Duration = Duration::from_millis(200);

struct Entry {
    lock: Arc<LockState>,
    due: Instant,
    /// When the server's key expires at the earliest, as of the last
    /// successful extend (its TTL from the moment it was sent).
    expires: Instant,
}

/// How long before its TTL runs out (by this host's clock, from the last
/// extend that succeeded) a lock that could not be extended is reported
/// lost: a tenth of the TTL. Each extend is bounded to end by then (see
/// [`crate::net::pool::within`]), also while the client fails closed, so
/// the holder hears it before another client can be granted the lock.
fn margin(lock: &LockState) -> Duration {
    Duration::from_millis(lock.ttl_ms.load(Ordering::Relaxed)) / 10
}

struct State {
    entries: Vec<Entry>,
    thread: bool,
    shutdown: bool,
}

struct Shared {
    /// The process it was made in.
    pid: u32,
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn new() -> Arc<Shared> {
        let pid = crate::sync::pid();
        Arc::new(Shared {
            pid,
            state: Mutex::new(State {
                entries: Vec::new(),
                thread: false,
                shutdown: false,
            }),
            wake: Condvar::new(),
        })
    }
}

pub(crate) struct Renewer {
    /// Replaced in a forked child, never locked there: the parent's renewal
    /// thread may have held its mutex at the fork (it takes it back on
    /// waking, outside the fork sections of [`crate::sync`]).
    shared: Mutex<Arc<Shared>>,
}

impl Renewer {
    pub(crate) fn new() -> Renewer {
        Renewer {
            shared: Mutex::new(Shared::new()),
        }
    }

    /// This process's part.
    fn shared(&self) -> Arc<Shared> {
        let mut s = locked(&self.shared);
        if s.pid != crate::sync::pid() {
            *s = Shared::new();
        }
        s.clone()
    }

    /// Start renewing `lock` (no-op when it already renews).
    pub(crate) fn add(&self, deployment: &Arc<dyn Deployment>, lock: &Arc<LockState>) {
        {
            // Lock order: never hold `renewing` while taking `state`.
            let mut renewing = locked(&lock.renewing);
            if *renewing || lock.lost.load(Ordering::Acquire) {
                return;
            }
            *renewing = true;
        }
        let shared = self.shared();
        let mut st = locked(&shared.state);
        let ttl = Duration::from_millis(lock.ttl_ms.load(Ordering::Relaxed));
        let now = Instant::now();
        st.entries.push(Entry {
            lock: lock.clone(),
            due: now + ttl / 3,
            expires: now + ttl,
        });
        if !st.thread {
            st.thread = true;
            let shared = shared.clone();
            let deployment = Arc::downgrade(deployment);
            let spawned =
                crate::sync::spawn_quiet("redislock-renew", move || run(shared, deployment));
            if spawned.is_err() {
                // Without a thread nothing renews: say so through `lost`
                // rather than pretend.
                st.thread = false;
                st.entries.pop();
                drop(st);
                if mark_lost(lock) {
                    tracing::debug!(
                        lock = %show_key(&lock.keys.lock),
                        "lost: no renewal thread could be started"
                    );
                    lock.notify_lost();
                }
                return;
            }
        }
        drop(st);
        shared.wake.notify_one();
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        let shared = locked(&self.shared).clone();
        if shared.pid == crate::sync::pid() {
            locked(&shared.state).shutdown = true;
            shared.wake.notify_one();
        }
    }
}

fn run(shared: Arc<Shared>, deployment: Weak<dyn Deployment>) {
    loop {
        let due: Vec<(Arc<LockState>, Instant)> = {
            let mut st = locked(&shared.state);
            loop {
                if st.shutdown {
                    st.thread = false;
                    return;
                }
                st.entries.retain(|e| *locked(&e.lock.renewing));
                let now = Instant::now();
                let next = st.entries.iter().map(|e| e.due).min();
                match next {
                    None => {
                        st = crate::sync::wait(&shared.wake, st);
                    }
                    Some(t) if t > now + SLACK => {
                        st = crate::sync::wait_timeout(&shared.wake, st, t - now).0;
                    }
                    Some(_) => break,
                }
            }
            let horizon = Instant::now() + SLACK;
            st.entries
                .iter()
                .filter(|e| e.due <= horizon)
                .take(BATCH)
                .map(|e| (e.lock.clone(), e.expires - margin(&e.lock)))
                .collect()
        };
        // The extend must end while the earliest of these locks can still
        // be reported lost before its TTL runs out (see `margin`).
        let deadline = due.iter().map(|(_, d)| *d).min();
        let due: Vec<Arc<LockState>> = due.into_iter().map(|(l, _)| l).collect();
        let Some(deployment) = deployment.upgrade() else {
            locked(&shared.state).thread = false;
            return;
        };
        let sent = Instant::now();
        let outcome = match deadline {
            Some(d) => crate::net::pool::within(d, || extend_batch(deployment.as_ref(), &due)),
            None => extend_batch(deployment.as_ref(), &due),
        };
        drop(deployment);
        let by_lock: std::collections::HashMap<*const LockState, Option<bool>> =
            due.iter().map(Arc::as_ptr).zip(outcome).collect();
        let now = Instant::now();
        let mut lost = Vec::new();
        let mut st = locked(&shared.state);
        for entry in st.entries.iter_mut() {
            let Some(&outcome) = by_lock.get(&Arc::as_ptr(&entry.lock)) else {
                continue;
            };
            let ttl = Duration::from_millis(entry.lock.ttl_ms.load(Ordering::Relaxed));
            let why = match outcome {
                Some(true) => {
                    entry.lock.stats.count(Event::RenewalOk);
                    entry.due = now + ttl / 3;
                    // The server set the TTL after `sent`: not earlier.
                    entry.expires = sent + ttl;
                    continue;
                }
                Some(false) => "renewal found it expired or held by another owner",
                None if now + margin(&entry.lock) >= entry.expires => {
                    "renewal could not extend it before its TTL would run out"
                }
                None => {
                    entry.due = now + RETRY.min(ttl / 3);
                    continue;
                }
            };
            entry.lock.stats.count(Event::RenewalLost);
            if mark_lost(&entry.lock) {
                lost.push((entry.lock.clone(), why));
            }
        }
        st.entries.retain(|e| !e.lock.lost.load(Ordering::Acquire));
        drop(st);
        for (lock, why) in lost {
            tracing::debug!(lock = %show_key(&lock.keys.lock), fence = lock.fence(), "lost: {why}");
            lock.notify_lost();
        }
    }
}

/// Mark `lock` lost and stop renewing it; true the first time (the caller
/// then runs its callback, holding no mutex).
fn mark_lost(lock: &LockState) -> bool {
    let first = lock.set_lost();
    *locked(&lock.renewing) = false;
    first
}

/// Extend every lock in `due` that still renews, in one batch.
/// Per lock: `Some(true)` extended, `Some(false)` gone, `None` unknown
/// (connection error, or released meanwhile).
fn extend_batch(deployment: &dyn Deployment, due: &[Arc<LockState>]) -> Vec<Option<bool>> {
    // Hold every lock's flag for the whole round trip (see module comment).
    let guards: Vec<_> = due.iter().map(|l| locked(&l.renewing)).collect();
    let live: Vec<usize> = (0..due.len()).filter(|&i| *guards[i]).collect();
    let mut out = vec![None; due.len()];
    if live.is_empty() {
        return out;
    }
    let batch: Vec<Extension> = live
        .iter()
        .map(|&i| Extension {
            keys: &due[i].keys,
            token: &due[i].token,
            fence: due[i].fence(),
            ttl_ms: due[i].ttl_ms.load(Ordering::Relaxed),
        })
        .collect();
    for (&i, outcome) in live.iter().zip(deployment.extend_many(&batch)) {
        out[i] = outcome;
    }
    drop(guards);
    out
}
