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
///
/// A waiter queues: a release by this library (in any language) hands the
/// lock straight to the longest waiter, and a lock that expires or is
/// released by another client is noticed by retries that never sleep past
/// the holder's remaining TTL. Over Redlock, waiting is by retries only.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use redislock::{Client, ErrorKind, Wait};
///
/// # let redis = redislock_tests::Server::start();
/// # let client = Client::open(redis.url())?;
/// let ttl = Duration::from_secs(10);
/// let held = client.acquire("batch", ttl, Wait::TryOnce)?;
///
/// // TryOnce: one attempt (one round trip), then NotAcquired.
/// let err = client.acquire("batch", ttl, Wait::TryOnce).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::NotAcquired);
///
/// // Timeout: queue for at most this long, then NotAcquired.
/// let wait = Wait::Timeout(Duration::from_millis(100));
/// let err = client.acquire("batch", ttl, wait).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::NotAcquired);
///
/// // Forever: until the lock is handed over (here by a release).
/// let waiter = {
///     let client = client.clone();
///     std::thread::spawn(move || client.acquire("batch", ttl, Wait::Forever))
/// };
/// std::thread::sleep(Duration::from_millis(50));
/// held.release()?;
/// let lock = waiter.join().unwrap()?;
/// lock.release()?;
/// # Ok::<(), redislock::Error>(())
/// ```
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
///
/// Only the blocking acquisitions consult it; an async one is cancelled by
/// dropping its future.
///
/// # Example
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use redislock::{AcquireOptions, Client, ErrorKind, Interrupt, Wait};
///
/// # let redis = redislock_tests::Server::start();
/// # let client = Client::open(redis.url())?;
/// let _held = client.acquire("nightly", Duration::from_secs(60), Wait::TryOnce)?;
///
/// let shutdown = Arc::new(AtomicBool::new(false));
/// let flag = shutdown.clone();
/// let opts = AcquireOptions::new(Duration::from_secs(60))
///     .wait(Wait::Forever)
///     .interrupt(Interrupt::new(move || flag.load(Ordering::Relaxed)));
/// std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_millis(50));
///     shutdown.store(true, Ordering::Relaxed);
/// });
/// // Ends within about 100 ms of the flag being set.
/// let err = client.acquire_with("nightly", opts).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::NotAcquired);
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Clone)]
pub struct Interrupt(Arc<dyn Fn() -> bool + Send + Sync>);

impl Interrupt {
    /// Wrap `check`, a cheap test (an atomic load, a signal flag) that
    /// returns true when the wait should end. It runs on the waiting thread,
    /// at least every 100 ms while it waits.
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

/// Options for one acquisition, for [`Client::acquire_with`](crate::Client::acquire_with),
/// the semaphores and the read-write locks. Start from
/// [`AcquireOptions::new`] and chain the setters; the fields are public too.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use redislock::{AcquireOptions, Client, Wait};
///
/// # let redis = redislock_tests::Server::start();
/// # let client = Client::open(redis.url())?;
/// let opts = AcquireOptions::new(Duration::from_secs(10))
///     .wait(Wait::Timeout(Duration::from_secs(5)))
///     .token("request-7f3a") // the caller's own token, e.g. a request id
///     .fenced(true) // the fencing number comes with the acquire
///     .auto_renew(true); // renewed about every 3.3 s until released
/// let lock = client.acquire_with("payments", opts)?;
/// assert_eq!(lock.token(), b"request-7f3a");
/// assert!(lock.fence_if_drawn().is_some()); // no further round trip
/// lock.release()?;
/// # Ok::<(), redislock::Error>(())
/// ```
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
    /// Options with this TTL, no wait ([`Wait::TryOnce`]), a random token,
    /// no renewal, and the fencing number drawn on demand. The TTL is
    /// checked by the acquire (1 ms ..= [`MAX_TTL`], in whole
    /// milliseconds), not here.
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

    /// Set how long to wait while the lock is held (see [`Wait`]).
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }

    /// Use the caller's token instead of a random one: any bytes, 1 to
    /// [`MAX_KEY_LEN`] of them (checked by the acquire, which refuses an
    /// empty one with [`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    /// It must be unique to this owner: whoever knows it can extend and
    /// release the lock ([`Client::release_token`](crate::Client::release_token)).
    pub fn token(mut self, token: impl Into<Vec<u8>>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Renew in the background (see
    /// [`AcquireOptions::auto_renew`](AcquireOptions#structfield.auto_renew)):
    /// the client's renewal thread extends the lock to its TTL at about a
    /// third of it (locks that fall due together share one pipelined round
    /// trip), until it is released, dropped
    /// or found lost ([`Lock::is_lost`](crate::Lock::is_lost),
    /// [`Lock::on_lost`](crate::Lock::on_lost)).
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
    /// The holder's token (as for a lock, the value it releases and extends
    /// with: [`Lock::token`](crate::Lock::token) of its handle).
    pub token: Vec<u8>,
    /// How long its lease still runs.
    pub ttl: Duration,
    /// The permits it holds (1 for a reader or a writer).
    pub permits: u32,
    /// Whether it is a read-write lock's writer.
    pub writer: bool,
    /// Its fencing number, drawn when it was admitted (every holder of a
    /// semaphore or a read-write lock has one): strictly greater than any
    /// number handed out before for this name.
    pub fence: u64,
}

/// Refuses an empty name or one longer than [`MAX_KEY_LEN`].
pub fn check_key(key: &[u8]) -> Result<()> {
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

/// Refuses an empty token or one longer than a name may be.
pub fn check_token(token: &[u8]) -> Result<()> {
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
pub fn ttl_millis(ttl: Duration) -> Result<u64> {
    if ttl > MAX_TTL {
        return Err(Error::invalid(format!(
            "TTL {ttl:?} is longer than the 30-day maximum (a unit mistake? TTLs are durations; C, PHP and Node.js take milliseconds)"
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
