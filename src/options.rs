//! The values callers pass and get back: limits and default timeouts, how
//! long to wait, options for one acquisition, what a lock looks like from
//! outside. Plain data; no I/O and nothing about Redis.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};

/// Longest lock name or token accepted (bytes). Lock names are short; a
/// longer one is a bug in the caller, refused before it reaches Redis.
pub const MAX_KEY_LEN: usize = 64 * 1024;
/// Longest TTL accepted: 30 days. Longer ones are almost certainly a unit
/// mistake (seconds passed as milliseconds).
pub const MAX_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default time to establish a connection (TCP, TLS, AUTH, SELECT).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Default time to wait for one reply.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an acquire may wait for a held lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// One attempt; fail with [`Error::NotAcquired`](crate::Error::NotAcquired) at once when held.
    TryOnce,
    /// Wait at most this long (zero is the same as `TryOnce`).
    Timeout(Duration),
    /// Wait until the lock is ours (or an error occurs).
    Forever,
}

/// A caller's way to end a wait early (a binding checking for Ctrl-C, a
/// shutdown flag). It is called between the slices of a wait, at least
/// every 100 ms, and at once when a signal interrupted the wait; when it
/// returns true the wait ends as if its deadline had passed: the waiter
/// leaves the queue and the acquisition fails with [`Error::NotAcquired`](crate::Error::NotAcquired)
/// (or keeps a lock handed to it in that very moment).
#[derive(Clone)]
pub struct Interrupt(Arc<dyn Fn() -> bool + Send + Sync>);

impl Interrupt {
    /// Wrap the check.
    pub fn new(check: impl Fn() -> bool + Send + Sync + 'static) -> Interrupt {
        Interrupt(Arc::new(check))
    }

    /// Whether the wait should end now.
    pub(crate) fn stop(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interrupt(..)")
    }
}

/// The longest slice of a wait that has an [`Interrupt`].
pub(crate) const INTERRUPT_SLICE: Duration = Duration::from_millis(100);

/// Options for one acquisition.
#[derive(Debug, Clone)]
pub struct AcquireOptions {
    /// How long the lock lives unless extended (at least 1 ms, at most
    /// [`MAX_TTL`]).
    pub ttl: Duration,
    /// How long to wait when it is held.
    pub wait: Wait,
    /// The caller's own token (e.g. a request id); `None` makes 128 random
    /// bits. Two owners must never use the same token.
    pub token: Option<Vec<u8>>,
    /// Renew in the background at about a third of the TTL until released.
    pub auto_renew: bool,
    /// Draw the fencing number in the acquire itself, so that reading it
    /// costs nothing more. Otherwise it is drawn on the holder's first
    /// request for it ([`Lock::fence`](crate::Lock::fence): one more round
    /// trip), and a holder that never asks costs the server what the
    /// hand-written `SET NX PX` helper costs.
    pub fenced: bool,
    /// Ends a wait early when it says so (see [`Interrupt`]).
    pub interrupt: Option<Interrupt>,
}

impl AcquireOptions {
    /// Options with this TTL, no wait, a random token and no renewal.
    pub fn new(ttl: Duration) -> AcquireOptions {
        AcquireOptions {
            ttl,
            wait: Wait::TryOnce,
            token: None,
            auto_renew: false,
            fenced: false,
            interrupt: None,
        }
    }

    /// End a wait early when `check` says so (see [`Interrupt`]).
    pub fn interrupt(mut self, check: Interrupt) -> Self {
        self.interrupt = Some(check);
        self
    }

    /// Set how long to wait.
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }

    /// Use the caller's token instead of a random one.
    pub fn token(mut self, token: impl Into<Vec<u8>>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Renew in the background.
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.auto_renew = on;
        self
    }

    /// Draw the fencing number in the acquire itself (see
    /// [`AcquireOptions::fenced`](AcquireOptions#structfield.fenced)).
    pub fn fenced(mut self, on: bool) -> Self {
        self.fenced = on;
        self
    }
}

/// What Redis says about a lock name right now ([`Client::inspect`](crate::Client::inspect)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The holder's token, when the lock is held.
    pub holder: Option<Vec<u8>>,
    /// How long the holder's lock still lives; `None` when free or when the
    /// key has no expiry.
    pub ttl: Option<Duration>,
    /// The current holder's fencing number; `None` when the lock is free or
    /// its holder did not get one from redislock (a plain `SET NX` client).
    pub fence: Option<u64>,
    /// How many waiters are queued for it (waiters of this library; the
    /// entries of a waiter that died count until they are cleaned).
    pub waiters: u64,
}

/// What Redis says about a semaphore or a read-write lock right now
/// ([`Client::inspect_semaphore`](crate::Client::inspect_semaphore),
/// [`Client::inspect_rw`](crate::Client::inspect_rw)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedInfo {
    /// The holders whose lease still runs, soonest expiry first (at most
    /// 100 of them).
    pub holders: Vec<Holder>,
    /// How many holders there are in all.
    pub holder_count: u64,
    /// How many waiters are queued.
    pub waiters: u64,
}

/// One holder of a semaphore or a read-write lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub token: Vec<u8>,
    /// How long its lease still runs.
    pub ttl: Duration,
    /// The permits it holds (1 for a reader or a writer).
    pub permits: u32,
    /// Whether it is a read-write lock's writer.
    pub writer: bool,
    pub fence: u64,
}

pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid("the lock name is empty"));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "the lock name is {} bytes long; at most {MAX_KEY_LEN} are accepted",
            key.len()
        )));
    }
    Ok(())
}

pub(crate) fn check_token(token: &[u8]) -> Result<()> {
    if token.is_empty() {
        return Err(Error::invalid(
            "the token is empty (pass none for a random one)",
        ));
    }
    if token.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "the token is {} bytes long; at most {MAX_KEY_LEN} are accepted",
            token.len()
        )));
    }
    Ok(())
}

/// A TTL in whole milliseconds, within 1 ms ..= [`MAX_TTL`].
pub(crate) fn ttl_millis(ttl: Duration) -> Result<u64> {
    if ttl > MAX_TTL {
        return Err(Error::invalid(format!(
            "TTL {ttl:?} is longer than the 30-day maximum (a unit mistake? TTLs are durations, C and PHP take milliseconds)"
        )));
    }
    let ms = ttl.as_millis() as u64;
    if ms == 0 {
        return Err(Error::invalid(format!(
            "TTL {ttl:?} is too short: a lock must live at least 1 ms"
        )));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_are_bounded() {
        assert!(ttl_millis(Duration::ZERO).is_err());
        assert!(ttl_millis(Duration::from_micros(999)).is_err());
        assert_eq!(ttl_millis(Duration::from_millis(1)).unwrap(), 1);
        assert!(ttl_millis(MAX_TTL + Duration::from_millis(1)).is_err());
    }
}
