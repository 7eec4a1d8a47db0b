//! The async API (feature `tokio`, on by default): the same operations,
//! errors and wire protocol as the blocking ones in `client`, for tasks on
//! a tokio runtime.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{check_key_token, prepare, Client};
use crate::deploy::AsyncDeployment;
use crate::error::Result;
use crate::lock::Lock;
use crate::options::{check_key, AcquireOptions, LockInfo, Wait};
use crate::protocol::{Kind, LockKeys};
use crate::stats::Event;

/// An acquisition whose future was dropped before it ended (a timeout, an
/// abort, a closed binding): counted as a wait that was interrupted.
struct Abandoned<'a> {
    client: &'a Client,
    started: Instant,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        self.client.count_abandoned(self.started);
    }
}

/// The async API (feature `tokio`, on by default): the same operations,
/// errors and wire protocol as the blocking ones, for tasks on a tokio
/// runtime. A waiting task holds no thread and no connection of its own:
/// commands share one multiplexed connection per client, and wake-ups come
/// through the client's subscriber connection, which threads and tasks
/// share.
impl Client {
    fn async_ops(&self) -> Arc<dyn AsyncDeployment> {
        self.inner
            .async_ops
            .get_or_init(|| self.inner.deployment.clone().to_async())
            .clone()
    }

    /// [`Client::acquire`] for async callers.
    pub async fn acquire_async(
        &self,
        key: impl AsRef<[u8]>,
        ttl: Duration,
        wait: Wait,
    ) -> Result<Lock> {
        self.acquire_with_async(key, AcquireOptions::new(ttl).wait(wait))
            .await
    }

    /// [`Client::acquire_with`] for async callers. Dropping the future
    /// (`tokio::time::timeout`, `select!`, an aborted task) cancels the
    /// wait: the waiter leaves the queue in the background, and a lock
    /// handed to it at that very moment is released, never left held by
    /// nobody. `opts.interrupt` is not consulted: cancel by dropping.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use redislock::{AcquireOptions, Client, Wait};
    ///
    /// # let redis = redislock_tests::Server::start();
    /// # let client = Client::open(redis.url())?;
    /// # let runtime = tokio::runtime::Runtime::new().unwrap();
    /// # runtime.block_on(async {
    /// let opts = AcquireOptions::new(Duration::from_secs(10)).wait(Wait::Forever);
    /// let lock = client.acquire_with_async("import", opts.clone()).await?;
    ///
    /// // A second acquisition waits; dropping its future (here by a
    /// // timeout) takes it out of the queue.
    /// let waiting = client.acquire_with_async("import", opts);
    /// assert!(tokio::time::timeout(Duration::from_millis(100), waiting).await.is_err());
    ///
    /// lock.release_async().await?;
    /// # Ok::<(), redislock::Error>(())
    /// # })?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub async fn acquire_with_async(
        &self,
        key: impl AsRef<[u8]>,
        opts: AcquireOptions,
    ) -> Result<Lock> {
        self.acquire_as_async(key.as_ref(), Kind::Lock, opts).await
    }

    #[doc(hidden)]
    pub async fn acquire_as_async(
        &self,
        key: &[u8],
        kind: Kind,
        opts: AcquireOptions,
    ) -> Result<Lock> {
        let (keys, token, ttl_ms) = prepare(key, kind, &opts)?;
        let ops = self.async_ops();
        let started = Instant::now();
        // Counted as an interrupted wait if this future is dropped first.
        let abandoned = Abandoned {
            client: self,
            started,
        };
        let acquire = ops.acquire(&keys, &token, ttl_ms, (opts.wait, opts.fenced), started);
        // A wait ends at its deadline, also while a server is unreachable.
        let grant = match opts.wait {
            Wait::Timeout(d) if !d.is_zero() => match started.checked_add(d) {
                Some(until) => crate::net::async_pool::waiting_until(until, acquire).await,
                None => acquire.await,
            },
            _ => acquire.await,
        };
        std::mem::forget(abandoned);
        self.count_acquire(&grant, kind, started);
        let fence = grant?.fence;
        let lock = self.held(keys, token, fence, ttl_ms, opts.auto_renew, Some(ops));
        if opts.fenced && fence == 0 {
            // As in the blocking acquire.
            lock.fence_async().await?;
        }
        Ok(lock)
    }

    /// [`Client::release_token`] for async callers.
    pub async fn release_token_async(
        &self,
        key: impl AsRef<[u8]>,
        token: impl AsRef<[u8]>,
    ) -> Result<bool> {
        let (key, token) = (key.as_ref(), token.as_ref());
        check_key_token(key, token)?;
        let r = self.async_ops().release(&LockKeys::new(key), token).await;
        self.count_by_token(r, Event::ReleaseOk, Event::ReleaseNotOwner)
    }

    /// [`Client::inspect`] for async callers.
    pub async fn inspect_async(&self, key: impl AsRef<[u8]>) -> Result<LockInfo> {
        let key = key.as_ref();
        check_key(key)?;
        self.async_ops().inspect(&LockKeys::new(key)).await
    }

    /// [`Client::is_locked`] for async callers.
    pub async fn is_locked_async(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        check_key(key)?;
        self.async_ops().is_locked(key).await
    }

    /// [`Client::is_owned_by`] for async callers.
    pub async fn is_owned_by_async(
        &self,
        key: impl AsRef<[u8]>,
        token: impl AsRef<[u8]>,
    ) -> Result<bool> {
        let (key, token) = (key.as_ref(), token.as_ref());
        check_key_token(key, token)?;
        self.async_ops().is_owned_by(key, token).await
    }
}
