//! Deployments: how each lock operation is carried out on the servers a
//! client names. [`Single`] is one server (reached directly, through
//! Sentinel, or as the Cluster node serving the lock's slot), with waiting by
//! hand-off; [`Redlock`] is a majority of N independent servers. Both offer
//! the operations of [`Deployment`], so nothing above this layer asks which
//! one it has. Callers hand in names, tokens and TTLs already checked; this
//! layer knows nothing of `Lock` handles or renewal.

#[cfg(feature = "tokio")]
use std::future::Future;
#[cfg(feature = "tokio")]
use std::pin::Pin;
#[cfg(feature = "tokio")]
use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::net::pool::Pool;
use crate::options::{Interrupt, LockInfo, SharedInfo, Wait};
use crate::protocol::LockKeys;

mod fanout;
mod redlock;
mod single;
mod wait;

pub(crate) use redlock::Redlock;
pub(crate) use single::Single;

/// How an acquisition got its lock, for the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Granted {
    /// Free at the first look.
    AtOnce,
    /// Seen held, then taken by a retry.
    AfterWait,
    /// Handed over by its releaser while waiting.
    HandedOver,
}

/// A lock just acquired: its fencing number (0: none drawn yet) and how
/// it came.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grant {
    pub(crate) fence: u64,
    pub(crate) how: Granted,
}

impl Grant {
    pub(crate) fn new(fence: u64, how: Granted) -> Grant {
        Grant { fence, how }
    }
}

/// One lock to extend, for [`Deployment::extend_many`].
pub(crate) struct Extension<'a> {
    pub(crate) keys: &'a LockKeys,
    pub(crate) token: &'a [u8],
    pub(crate) fence: u64,
    pub(crate) ttl_ms: u64,
}

/// The lock operations, the same for every deployment.
pub(crate) trait Deployment: Send + Sync {
    /// Where the servers are, for messages (never with credentials).
    fn describe(&self) -> String;

    /// The connection pools, one per server (Redlock: one per node), for
    /// inspecting the servers themselves (see `doctor`).
    fn pools(&self) -> Vec<&Pool>;

    /// Take the lock with `token` for `ttl_ms`, waiting as `wait` says
    /// (counted from `started`) unless `interrupt` ends the wait. The
    /// fencing number (0 when none was drawn: `fenced` draws it at once),
    /// and how the lock came.
    fn acquire(
        &self,
        keys: &LockKeys,
        token: &[u8],
        ttl_ms: u64,
        wait: (Wait, bool),
        interrupt: Option<&Interrupt>,
        started: Instant,
    ) -> Result<Grant>;

    /// Draw the fencing number of a lock held with `token` that has none
    /// yet. `Ok(None)` when `token` does not hold the lock.
    fn fence(&self, keys: &LockKeys, token: &[u8]) -> Result<Option<u64>>;

    /// Compare-and-delete (or hand off to the longest waiter). `Ok(false)`
    /// when `token` does not hold the lock.
    fn release(&self, keys: &LockKeys, token: &[u8]) -> Result<bool>;

    /// Take the lock from whoever holds it and hand it to the oldest live
    /// waiter (the operator's "unlock"): `Ok(true)` when a holder was
    /// removed. A key of another type is left alone (`WrongType`).
    fn force_release(&self, keys: &LockKeys) -> Result<bool>;

    /// Compare-and-PEXPIRE to `ttl_ms`, keeping the holder's `fence`.
    /// `Ok(false)` when `token` does not hold the lock.
    fn extend(&self, keys: &LockKeys, token: &[u8], fence: u64, ttl_ms: u64) -> Result<bool>;

    /// Extend each of `locks` (renewal): `Some(true)` extended,
    /// `Some(false)` no longer held, `None` unknown (an error).
    fn extend_many(&self, locks: &[Extension]) -> Vec<Option<bool>> {
        locks
            .iter()
            .map(|l| self.extend(l.keys, l.token, l.fence, l.ttl_ms).ok())
            .collect()
    }

    /// The holder, its TTL and fence, and the waiters, read at once.
    fn inspect(&self, keys: &LockKeys) -> Result<LockInfo>;

    /// The holders and waiters of a semaphore or read-write lock.
    fn inspect_shared(&self, keys: &LockKeys) -> Result<SharedInfo>;

    /// Whether anyone holds the lock `key`.
    fn is_locked(&self, key: &[u8]) -> Result<bool>;

    /// Whether the lock `key` is held with `token`.
    fn is_owned_by(&self, key: &[u8], token: &[u8]) -> Result<bool>;

    /// The same operations for async callers, on the same servers (and the
    /// same subscriber connections).
    #[cfg(feature = "tokio")]
    fn to_async(self: Arc<Self>) -> Arc<dyn AsyncDeployment>;
}

/// A boxed future of an async operation.
#[cfg(feature = "tokio")]
pub(crate) type Op<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// [`Deployment`]'s operations as futures (tokio). Waiting holds no
/// thread; a wait dropped by its caller leaves the queue in the background.
#[cfg(feature = "tokio")]
pub(crate) trait AsyncDeployment: Send + Sync {
    fn acquire<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a [u8],
        ttl_ms: u64,
        wait: (Wait, bool),
        started: Instant,
    ) -> Op<'a, Grant>;

    fn fence<'a>(&'a self, keys: &'a LockKeys, token: &'a [u8]) -> Op<'a, Option<u64>>;

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a [u8]) -> Op<'a, bool>;

    fn extend<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a [u8],
        fence: u64,
        ttl_ms: u64,
    ) -> Op<'a, bool>;

    fn inspect<'a>(&'a self, keys: &'a LockKeys) -> Op<'a, LockInfo>;

    fn is_locked<'a>(&'a self, key: &'a [u8]) -> Op<'a, bool>;

    fn is_owned_by<'a>(&'a self, key: &'a [u8], token: &'a [u8]) -> Op<'a, bool>;
}
