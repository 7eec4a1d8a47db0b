//! Background renewal: one thread per client, not per lock.
//!
//! Each renewing lock is extended at about a third of its TTL. Locks that
//! fall due together are extended in one pipelined round trip. An extend
//! that finds the lock gone marks it lost and drops it from the set; an
//! extend that fails for lack of a connection is retried soon, until the
//! lock's TTL has certainly run out since the last successful extend, and
//! then the lock is marked lost as well. Release clears the lock's
//! `renewing` flag under the mutex the thread holds while extending, so no
//! extend is sent after a release. The thread holds only a weak reference to
//! the client and ends when the client is gone. After `fork()` the child has
//! no renewal thread and forgets the parent's set; it starts its own thread
//! for its own locks.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use std::sync::{Condvar, Mutex};

use crate::sync::locked;
use redis::Value;

use crate::client::{Client, Inner};
use crate::lock::LockState;
use crate::protocol::scripts;

/// Locks extended in one pipelined round trip at most.
const BATCH: usize = 512;
/// Locks due within this much of each other are extended together.
const SLACK: Duration = Duration::from_millis(20);
/// Retry delay after a failed extend.
const RETRY: Duration = Duration::from_millis(200);

struct Entry {
    lock: Arc<LockState>,
    due: Instant,
    /// When the server's key expires at the latest, as of the last
    /// successful extend.
    expires: Instant,
}

struct State {
    pid: u32,
    entries: Vec<Entry>,
    thread: bool,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

pub(crate) struct Renewer {
    shared: Arc<Shared>,
}

impl Renewer {
    pub(crate) fn new() -> Renewer {
        Renewer {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    pid: crate::sync::pid(),
                    entries: Vec::new(),
                    thread: false,
                    shutdown: false,
                }),
                wake: Condvar::new(),
            }),
        }
    }

    /// Start renewing `lock` (no-op when it already renews).
    pub(crate) fn add(&self, client: &Client, lock: &Arc<LockState>) {
        {
            // Lock order: never hold `renewing` while taking `state`.
            let mut renewing = locked(&lock.renewing);
            if *renewing || lock.lost.load(Ordering::Acquire) {
                return;
            }
            *renewing = true;
        }
        let mut st = locked(&self.shared.state);
        let pid = crate::sync::pid();
        if st.pid != pid {
            // A forked child: the parent's thread and locks are not ours.
            st.pid = pid;
            st.entries.clear();
            st.thread = false;
        }
        let ttl = Duration::from_millis(lock.ttl_ms.load(Ordering::Relaxed));
        let now = Instant::now();
        st.entries.push(Entry {
            lock: lock.clone(),
            due: now + ttl / 3,
            expires: now + ttl,
        });
        if !st.thread {
            st.thread = true;
            let shared = self.shared.clone();
            let inner = Arc::downgrade(&client.inner);
            let spawned = std::thread::Builder::new()
                .name("redislock-renew".into())
                .spawn(move || run(shared, inner));
            if spawned.is_err() {
                // Without a thread nothing renews: say so through `lost`
                // rather than pretend.
                st.thread = false;
                st.entries.pop();
                mark_lost(lock);
                return;
            }
        }
        drop(st);
        self.shared.wake.notify_one();
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        locked(&self.shared.state).shutdown = true;
        self.shared.wake.notify_one();
    }
}

fn run(shared: Arc<Shared>, inner: Weak<Inner>) {
    loop {
        let due: Vec<Arc<LockState>> = {
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
                        st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                    Some(t) if t > now + SLACK => {
                        st = shared
                            .wake
                            .wait_timeout(st, t - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    Some(_) => break,
                }
            }
            let horizon = Instant::now() + SLACK;
            st.entries
                .iter()
                .filter(|e| e.due <= horizon)
                .take(BATCH)
                .map(|e| e.lock.clone())
                .collect()
        };
        let Some(inner) = inner.upgrade() else {
            locked(&shared.state).thread = false;
            return;
        };
        let outcome = extend_batch(&inner, &due);
        drop(inner);
        let by_lock: std::collections::HashMap<*const LockState, Option<bool>> =
            due.iter().map(Arc::as_ptr).zip(outcome).collect();
        let now = Instant::now();
        let mut st = locked(&shared.state);
        for entry in st.entries.iter_mut() {
            let Some(&outcome) = by_lock.get(&Arc::as_ptr(&entry.lock)) else {
                continue;
            };
            let ttl = Duration::from_millis(entry.lock.ttl_ms.load(Ordering::Relaxed));
            match outcome {
                Some(true) => {
                    entry.due = now + ttl / 3;
                    entry.expires = now + ttl;
                }
                Some(false) => mark_lost(&entry.lock),
                None if now >= entry.expires => mark_lost(&entry.lock),
                None => entry.due = now + RETRY.min(ttl / 3),
            }
        }
        st.entries.retain(|e| !e.lock.lost.load(Ordering::Acquire));
    }
}

fn mark_lost(lock: &LockState) {
    lock.lost.store(true, Ordering::Release);
    *locked(&lock.renewing) = false;
}

/// Extend every lock in `due` that still renews, in one pipeline.
/// Per lock: `Some(true)` extended, `Some(false)` gone, `None` unknown
/// (connection error, or released meanwhile).
fn extend_batch(inner: &Inner, due: &[Arc<LockState>]) -> Vec<Option<bool>> {
    // Hold every lock's flag for the whole round trip (see module comment).
    let guards: Vec<_> = due.iter().map(|l| locked(&l.renewing)).collect();
    let live: Vec<usize> = (0..due.len()).filter(|&i| *guards[i]).collect();
    let mut out = vec![None; due.len()];
    if live.is_empty() {
        return out;
    }
    if inner.is_redlock() || inner.pool().is_cluster() {
        // Each lock on its own: it needs its own majority (Redlock), or
        // its own slot's node (Cluster).
        for &i in &live {
            let l = &due[i];
            let ttl = l.ttl_ms.load(Ordering::Relaxed);
            out[i] = if inner.is_redlock() {
                crate::redlock::extend(inner, &l.keys, &l.token, l.fence, ttl).ok()
            } else {
                let (ms, fence) = (ttl.to_string(), l.fence.to_string());
                match inner.pool().script(
                    &scripts().extend,
                    &l.keys.all(),
                    &[&l.token, ms.as_bytes(), fence.as_bytes()],
                    None,
                ) {
                    Ok(Value::Int(1)) => Some(true),
                    Ok(Value::Int(0)) => Some(false),
                    _ => None,
                }
            };
        }
        drop(guards);
        return out;
    }
    let extend = &scripts().extend;
    let mut pipe = redis::pipe();
    for &i in &live {
        let l = &due[i];
        let ttl = l.ttl_ms.load(Ordering::Relaxed).to_string();
        let fence = l.fence.to_string();
        pipe.add_command(extend.eval(&l.keys.all(), &[&l.token, ttl.as_bytes(), fence.as_bytes()]));
    }
    if let Ok(replies) = inner.pool().with(|con, _| pipe.query::<Vec<Value>>(con)) {
        for (&i, reply) in live.iter().zip(replies) {
            out[i] = match reply {
                Value::Int(1) => Some(true),
                Value::Int(0) => Some(false),
                _ => None,
            };
        }
    }
    drop(guards);
    out
}
