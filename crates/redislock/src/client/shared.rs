//! Counting semaphores and read-write locks: the public face. Each takes
//! the path of the lock ([`Client::acquire_as`]) with a [`Kind`] of its
//! own, and gives the ordinary [`Lock`] handle; the scripts are in
//! `protocol::semaphore`.

use super::Client;
use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::options::{check_key, AcquireOptions, SharedInfo};
use crate::protocol::{self, Kind, LockKeys};

impl Client {
    /// Take `permits` of the counting semaphore `key`, which admits `limit`
    /// permits in all (this call's `limit`: each call is admitted by its
    /// own). Holders are served in arrival order: while anyone waits, a
    /// later caller queues behind it even when permits are free, and a
    /// waiter for several permits gets them as soon as they are free. Each
    /// holder has its own lease of `opts.ttl`, its own token and fence
    /// (always drawn), and is released, extended and renewed like a lock.
    /// A semaphore `key` never collides with the lock `key`.
    ///
    /// Errors as [`Client::acquire_with`]; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// also for a `limit` of 0 or above 1,000,000 and `permits` of 0 or
    /// above `limit`.
    ///
    /// Over Redlock, waiters retry (as for the lock: no queue, no FIFO),
    /// and a holder needs ⌊N·L/(L+1)⌋+1 of the N nodes for a `limit` L > 1
    /// (every node once L ≥ N − 1), a majority for L = 1: L + 1 holders
    /// on majorities need not share a node, and so could all be admitted.
    /// With fewer nodes answering, [`Error::NoQuorum`](crate::Error::NoQuorum).
    ///
    /// One round trip when the permits are free (the fence comes with it).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use redislock::{AcquireOptions, Client, ErrorKind};
    ///
    /// # let redis = redislock_tests::Server::start();
    /// # let client = Client::open(redis.url())?;
    /// // At most two exports at a time, one permit each (no wait: the
    /// // options' default is Wait::TryOnce).
    /// let opts = AcquireOptions::new(Duration::from_secs(30));
    /// let a = client.acquire_semaphore("exports", 2, 1, opts.clone())?;
    /// let b = client.acquire_semaphore("exports", 2, 1, opts.clone())?;
    /// let err = client
    ///     .acquire_semaphore("exports", 2, 1, opts.clone())
    ///     .unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NotAcquired);
    ///
    /// let info = client.inspect_semaphore("exports")?;
    /// assert_eq!(info.holder_count, 2);
    /// // Each holder has its own token, lease and fencing number.
    /// assert_ne!(a.fence_if_drawn(), b.fence_if_drawn());
    ///
    /// a.release()?; // gives its permit back
    /// let c = client.acquire_semaphore("exports", 2, 1, opts)?;
    /// # drop((b, c));
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn acquire_semaphore(
        &self,
        key: impl AsRef<[u8]>,
        limit: u32,
        permits: u32,
        opts: AcquireOptions,
    ) -> Result<Lock> {
        self.acquire_as(key.as_ref(), semaphore_kind(limit, permits)?, opts)
    }

    /// Take the read-write lock `key` shared: with any number of readers,
    /// while no writer holds it or waits for it (a queued writer stops new
    /// readers; the readers queued behind it enter together after it). As
    /// [`Client::acquire_semaphore`] otherwise: the handle is a [`Lock`]
    /// with its own lease and fencing number.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use redislock::{AcquireOptions, Client, ErrorKind, Wait};
    ///
    /// # let redis = redislock_tests::Server::start();
    /// # let client = Client::open(redis.url())?;
    /// let opts = AcquireOptions::new(Duration::from_secs(30));
    /// let r1 = client.acquire_read("config", opts.clone())?;
    /// let r2 = client.acquire_read("config", opts.clone())?; // readers share it
    /// let err = client.acquire_write("config", opts.clone()).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NotAcquired); // the writer excludes them
    /// assert_eq!(client.inspect_rw("config")?.holder_count, 2);
    ///
    /// r1.release()?;
    /// r2.release()?;
    /// let w = client.acquire_write("config", opts.wait(Wait::Timeout(Duration::from_secs(5))))?;
    /// assert!(client.inspect_rw("config")?.holders[0].writer);
    /// w.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn acquire_read(&self, key: impl AsRef<[u8]>, opts: AcquireOptions) -> Result<Lock> {
        self.acquire_as(key.as_ref(), Kind::Read, opts)
    }

    /// Take the read-write lock `key` exclusively: once no reader or writer
    /// holds it and nobody queued earlier waits. See [`Client::acquire_read`].
    pub fn acquire_write(&self, key: impl AsRef<[u8]>, opts: AcquireOptions) -> Result<Lock> {
        self.acquire_as(key.as_ref(), Kind::Write, opts)
    }

    /// Who holds permits of the semaphore `key` and how many wait, read in
    /// one round trip (for status displays; it may be stale at once). Holders
    /// whose lease ran out are not shown. See [`Client::acquire_semaphore`]
    /// for an example.
    pub fn inspect_semaphore(&self, key: impl AsRef<[u8]>) -> Result<SharedInfo> {
        let any = Kind::Semaphore {
            limit: 1,
            permits: 1,
        };
        self.inspect_as(key.as_ref(), any)
    }

    /// Who holds the read-write lock `key` (readers, or its writer) and
    /// how many wait, read in one round trip as
    /// [`Client::inspect_semaphore`]. See [`Client::acquire_read`] for an
    /// example.
    pub fn inspect_rw(&self, key: impl AsRef<[u8]>) -> Result<SharedInfo> {
        self.inspect_as(key.as_ref(), Kind::Read)
    }

    /// The holders and waiters of `key` as a name of `kind` (any semaphore
    /// or either side of a read-write lock: the keys are the same).
    fn inspect_as(&self, key: &[u8], kind: Kind) -> Result<SharedInfo> {
        check_key(key)?;
        self.inner
            .deployment
            .inspect_shared(&LockKeys::of(key, kind))
    }
}

/// The async forms (feature `tokio`), cancelled by dropping the future as
/// [`Client::acquire_with_async`].
#[cfg(feature = "tokio")]
impl Client {
    /// [`Client::acquire_semaphore`] for async callers (cancelled by
    /// dropping the future, as [`Client::acquire_with_async`]).
    pub async fn acquire_semaphore_async(
        &self,
        key: impl AsRef<[u8]>,
        limit: u32,
        permits: u32,
        opts: AcquireOptions,
    ) -> Result<Lock> {
        let kind = semaphore_kind(limit, permits)?;
        self.acquire_as_async(key.as_ref(), kind, opts).await
    }

    /// [`Client::acquire_read`] for async callers.
    pub async fn acquire_read_async(
        &self,
        key: impl AsRef<[u8]>,
        opts: AcquireOptions,
    ) -> Result<Lock> {
        self.acquire_as_async(key.as_ref(), Kind::Read, opts).await
    }

    /// [`Client::acquire_write`] for async callers.
    pub async fn acquire_write_async(
        &self,
        key: impl AsRef<[u8]>,
        opts: AcquireOptions,
    ) -> Result<Lock> {
        self.acquire_as_async(key.as_ref(), Kind::Write, opts).await
    }
}

/// The kind of a semaphore of `limit` permits taken `permits` at a time.
pub fn semaphore_kind(limit: u32, permits: u32) -> Result<Kind> {
    if limit == 0 || limit > protocol::MAX_LIMIT {
        return Err(Error::invalid(format!(
            "a semaphore's limit must be 1 to {}, not {limit}",
            protocol::MAX_LIMIT
        )));
    }
    if permits == 0 || permits > limit {
        return Err(Error::invalid(format!(
            "permits must be 1 to the limit ({limit}), not {permits}"
        )));
    }
    Ok(Kind::Semaphore { limit, permits })
}
