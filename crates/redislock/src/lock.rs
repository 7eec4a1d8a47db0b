//! A held lock: its token and fencing number, extend, release, and the
//! guard behaviour (released on drop, inert in a forked child). It carries
//! out each operation through the deployment that granted it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "tokio")]
use crate::deploy::AsyncDeployment;
use crate::deploy::Deployment;
use crate::error::{show_key, Error, Result};
use crate::options::ttl_millis;
use crate::renew::{LockState, Renewer};
use crate::stats::Event;
use crate::sync::locked;

/// A lock held by this process.
///
/// Dropping it releases it (best effort; errors are ignored: call
/// [`Lock::release`] to see them). A `Lock` is `Send`: it may move between
/// threads but is meant to be used by one at a time. A `Lock` inherited by a
/// child process through `fork()` is inert there: dropping or releasing it in
/// the child never releases the parent's lock.
///
/// The same handle serves a plain lock, a semaphore's permits
/// ([`Client::acquire_semaphore`](crate::Client::acquire_semaphore)) and
/// either side of a read-write lock
/// ([`Client::acquire_read`](crate::Client::acquire_read)).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use redislock::{Client, Wait};
///
/// # let redis = redislock_tests::Server::start();
/// # let client = Client::open(redis.url())?;
/// let lock = client.acquire("invoice:42", Duration::from_secs(10), Wait::TryOnce)?;
///
/// // The fencing number: drawn on the first call (one round trip), then
/// // answered from memory. Pass it along with every write you make under
/// // the lock.
/// let fence = lock.fence()?;
/// assert_eq!(lock.fence_if_drawn(), Some(fence));
///
/// // Set the remaining time to 30 s (not add 30 s): one round trip.
/// lock.extend(Duration::from_secs(30))?;
/// assert_eq!(lock.ttl(), Duration::from_secs(30));
/// assert!(lock.owned()?);
///
/// // Dropping the handle releases the lock (errors are ignored) ...
/// drop(lock);
/// assert!(!client.is_locked("invoice:42")?);
///
/// // ... and the next holder's fencing number is larger.
/// let next = client.acquire("invoice:42", Duration::from_secs(10), Wait::TryOnce)?;
/// assert!(next.fence()? > fence);
/// next.release()?; // release() reports errors, such as NotOwner
/// # Ok::<(), redislock::Error>(())
/// ```
pub struct Lock {
    deployment: Arc<dyn Deployment>,
    /// Set when the async API took it: a drop inside a tokio runtime then
    /// releases on the runtime instead of blocking the task's thread.
    #[cfg(feature = "tokio")]
    async_ops: Option<Arc<dyn AsyncDeployment>>,
    renewer: Arc<Renewer>,
    state: Arc<LockState>,
    pid: u32,
    done: bool,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("key", &show_key(&self.state.keys.lock))
            .field("fence", &self.state.fence())
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl Lock {
    pub(crate) fn new(
        deployment: Arc<dyn Deployment>,
        renewer: Arc<Renewer>,
        state: LockState,
        #[cfg(feature = "tokio")] async_ops: Option<Arc<dyn AsyncDeployment>>,
    ) -> Lock {
        Lock {
            deployment,
            #[cfg(feature = "tokio")]
            async_ops,
            renewer,
            state: Arc::new(state),
            pid: crate::sync::pid(),
            done: false,
        }
    }

    /// The lock name, as given to the acquire (not the Redis key of a
    /// semaphore or read-write lock, which is derived from it).
    pub fn key(&self) -> &[u8] {
        &self.state.keys.lock
    }

    /// The owner's token: the exact value stored under the key.
    pub fn token(&self) -> &[u8] {
        &self.state.token
    }

    /// The fencing number: strictly greater than any number handed out
    /// before for this lock name to an earlier holder, below 2^53. Pass it
    /// to the resource you protect and have it reject writes with a smaller
    /// number than it has seen. It is at least the server's clock in
    /// microseconds, so it keeps growing when the counter is lost (see the
    /// hazards in `docs/deployments.md`).
    ///
    /// Drawn on the first call, atomically with a check that this handle
    /// still holds the lock (one round trip; later calls answer from
    /// memory), unless the lock was taken with
    /// [`AcquireOptions::fenced`](crate::AcquireOptions::fenced), which
    /// draws it in the acquire. Fails with [`Error::NotOwner`] (and marks
    /// the lock lost) when the lock expired or was taken over before the
    /// first call: a holder that no longer holds the lock gets no number.
    pub fn fence(&self) -> Result<u64> {
        if let Some(known) = self.fence_known() {
            return known;
        }
        let drawn = self.deployment.fence(&self.state.keys, &self.state.token)?;
        self.fence_drawn(drawn)
    }

    /// Before a draw: the fence drawn already, or `NotOwner` for a handle
    /// that can draw none (released, lost, or inherited through `fork()`);
    /// `None` when it is to be drawn.
    fn fence_known(&self) -> Option<Result<u64>> {
        match self.state.fence() {
            0 if !self.in_owner_process() || self.done || self.is_lost() => {
                Some(Err(self.not_owner()))
            }
            0 => None,
            known => Some(Ok(known)),
        }
    }

    /// After a draw: keep the number, or mark the lock lost when the draw
    /// found it held by another owner.
    fn fence_drawn(&self, drawn: Option<u64>) -> Result<u64> {
        match drawn {
            Some(f) => Ok(self.state.set_fence(f)),
            None => {
                self.lost("drawing its fence found it expired or held by another owner");
                Err(self.not_owner())
            }
        }
    }

    /// The fencing number if one was drawn already (by the acquire, a
    /// hand-off of an earlier version, or [`Lock::fence`]); never does I/O.
    pub fn fence_if_drawn(&self) -> Option<u64> {
        Some(self.state.fence()).filter(|&f| f != 0)
    }

    /// The TTL last set by acquire or extend (background renewal renews
    /// with it): the lock's lifetime from then, not the time it has left
    /// (no I/O; [`Client::inspect`](crate::Client::inspect) reads that).
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.state.ttl_ms.load(Ordering::Relaxed))
    }

    /// True once background renewal, an extend or a release found the lock
    /// gone (expired or taken over).
    pub fn is_lost(&self) -> bool {
        self.state.lost.load(Ordering::Acquire)
    }

    /// Run `f` once when the lock is found lost: by background renewal (on
    /// the client's renewal thread: keep `f` short, since the client's
    /// other locks wait for their renewal meanwhile), or by an extend or
    /// release of this handle (on the caller's thread, before it returns
    /// [`Error::NotOwner`]). If the lock is already lost, `f` runs now, on
    /// this thread. A second call replaces a callback that has not run. A
    /// panic in `f` is caught and logged; renewal goes on. Never called in
    /// a forked child for the parent's lock, nor for a lock whose release
    /// succeeded. When renewal and a release find the loss at about the
    /// same moment, `f` runs on the renewal thread and may still be running
    /// (or start) just after the release returned `NotOwner`.
    pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        if self.in_owner_process() {
            self.state.on_lost(Box::new(f));
        }
    }

    fn in_owner_process(&self) -> bool {
        self.pid == crate::sync::pid()
    }

    /// Set the remaining time to `ttl` (not added to it). Fails with
    /// [`Error::NotOwner`] (and marks the lock lost) when the lock expired or
    /// was taken over; the key is never re-created. One round trip (over
    /// Redlock, a majority of the nodes must still hold it within its
    /// validity). [`Error::InvalidArgument`] for a TTL outside 1 ms ..=
    /// [`MAX_TTL`](crate::MAX_TTL), before any I/O. In a forked child it
    /// fails with [`Error::NotOwner`] and sends nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use redislock::{Client, ErrorKind, Wait};
    ///
    /// # let redis = redislock_tests::Server::start();
    /// # let client = Client::open(redis.url())?;
    /// let lock = client.acquire("report", Duration::from_millis(50), Wait::TryOnce)?;
    /// std::thread::sleep(Duration::from_millis(100)); // its TTL runs out
    /// let err = lock.extend(Duration::from_secs(10)).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NotOwner);
    /// assert!(lock.is_lost());
    /// assert!(!client.is_locked("report")?); // not re-created
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        let ttl_ms = ttl_millis(ttl)?;
        if !self.in_owner_process() {
            return Err(self.not_owner());
        }
        let extended = self.deployment.extend(
            &self.state.keys,
            &self.state.token,
            self.state.fence(),
            ttl_ms,
        )?;
        self.extended(extended, ttl_ms)
    }

    /// Count an extend's outcome; a lock found gone is lost.
    fn extended(&self, extended: bool, ttl_ms: u64) -> Result<()> {
        let state = &self.state;
        if extended {
            state.stats.count(Event::ExtendOk);
            state.ttl_ms.store(ttl_ms, Ordering::Relaxed);
            return Ok(());
        }
        state.stats.count(Event::ExtendLost);
        self.lost("an extend found it expired or held by another owner");
        Err(self.not_owner())
    }

    /// Mark the lock lost (once), and run its callback.
    fn lost(&self, why: &str) {
        if self.state.set_lost() {
            tracing::debug!(
                lock = %show_key(&self.state.keys.lock),
                fence = self.state.fence(),
                "lost: {why}"
            );
            self.state.notify_lost();
        }
    }

    /// Count a release's outcome; a lock found gone is lost.
    fn released(&self, released: bool) -> Result<()> {
        if released {
            self.state.stats.count(Event::ReleaseOk);
            return Ok(());
        }
        self.state.stats.count(Event::ReleaseNotOwner);
        self.lost("the release found it expired or held by another owner");
        Err(self.not_owner())
    }

    /// Whether the key still holds this lock's token (one round trip).
    pub fn owned(&self) -> Result<bool> {
        let (keys, token) = (&self.state.keys, &self.state.token);
        if keys.shared() {
            // A semaphore's holder has a fence as long as it holds.
            return Ok(self.deployment.fence(keys, token)?.is_some());
        }
        self.deployment.is_owned_by(&keys.lock, token)
    }

    /// Renew this lock in the background at about a third of its TTL until
    /// it is released or dropped. When a renewal finds the lock gone,
    /// [`Lock::is_lost`] turns true and renewal stops.
    pub fn auto_renew(&self) {
        if self.in_owner_process() && !self.done {
            self.renewer.add(&self.deployment, &self.state);
        }
    }

    /// Release the lock (compare-and-delete, or hand-off to the longest
    /// waiter). Fails with [`Error::NotOwner`] when it expired or was taken
    /// over; the new holder's key is left alone. In a forked child this does
    /// nothing and succeeds: the parent still holds the lock.
    pub fn release(mut self) -> Result<()> {
        self.done = true;
        if !self.in_owner_process() {
            return Ok(());
        }
        self.stop_renewal();
        self.state.let_go(true);
        let released = self
            .deployment
            .release(&self.state.keys, &self.state.token)?;
        self.released(released)
    }

    /// Let go of the handle without releasing: the lock stays held on the
    /// server until it expires or is released by token
    /// ([`Client::release_token`](crate::Client::release_token)). Renewal stops. This is the request-id
    /// pattern, where acquire and release happen in different places. No
    /// I/O.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use redislock::{AcquireOptions, Client};
    ///
    /// # let redis = redislock_tests::Server::start();
    /// # let client = Client::open(redis.url())?;
    /// let opts = AcquireOptions::new(Duration::from_secs(60)).token("request-9");
    /// client.acquire_with("upload:9", opts)?.forget(); // still held
    /// assert!(client.is_owned_by("upload:9", "request-9")?);
    ///
    /// // Later, elsewhere (another request, another process, another
    /// // language): release by token.
    /// assert!(client.release_token("upload:9", "request-9")?);
    /// assert!(!client.release_token("upload:9", "request-9")?); // nothing left
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn forget(mut self) {
        self.done = true;
        if self.in_owner_process() {
            self.stop_renewal();
            self.state.let_go(false);
        }
    }

    fn stop_renewal(&self) {
        *locked(&self.state.renewing) = false;
    }

    fn not_owner(&self) -> Error {
        Error::NotOwner {
            key: show_key(&self.state.keys.lock),
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.done || !self.in_owner_process() {
            return;
        }
        self.stop_renewal();
        self.state.let_go(true);
        #[cfg(feature = "tokio")]
        if let (Some(ops), Ok(rt)) = (&self.async_ops, tokio::runtime::Handle::try_current()) {
            let (ops, state) = (ops.clone(), self.state.clone());
            rt.spawn(async move {
                let released = ops.release(&state.keys, &state.token).await;
                count_dropped(&state, released);
            });
            return;
        }
        let released = self.deployment.release(&self.state.keys, &self.state.token);
        count_dropped(&self.state, released);
    }
}

/// Count the release of a dropped handle. Nobody is told of a loss found
/// then (the handle is gone, and its callback with it).
fn count_dropped(state: &LockState, released: Result<bool>) {
    match released {
        Ok(true) => state.stats.count(Event::ReleaseOk),
        Ok(false) => state.stats.count(Event::ReleaseNotOwner),
        Err(_) => {}
    }
}

/// The async API (feature `tokio`): the same operations for tasks, on the
/// client's async connections whichever API took the lock.
#[cfg(feature = "tokio")]
impl Lock {
    fn async_ops(&self) -> Arc<dyn AsyncDeployment> {
        match &self.async_ops {
            Some(ops) => ops.clone(),
            None => self.deployment.clone().to_async(),
        }
    }

    /// [`Lock::release`] for async callers.
    pub async fn release_async(mut self) -> Result<()> {
        self.done = true;
        if !self.in_owner_process() {
            return Ok(());
        }
        self.stop_renewal();
        self.state.let_go(true);
        let ops = self.async_ops();
        let released = ops.release(&self.state.keys, &self.state.token).await?;
        self.released(released)
    }

    /// [`Lock::extend`] for async callers.
    pub async fn extend_async(&self, ttl: Duration) -> Result<()> {
        let ttl_ms = ttl_millis(ttl)?;
        if !self.in_owner_process() {
            return Err(self.not_owner());
        }
        let ops = self.async_ops();
        let state = &self.state;
        let extended = ops
            .extend(&state.keys, &state.token, state.fence(), ttl_ms)
            .await?;
        self.extended(extended, ttl_ms)
    }

    /// [`Lock::fence`] for async callers.
    pub async fn fence_async(&self) -> Result<u64> {
        if let Some(known) = self.fence_known() {
            return known;
        }
        let drawn = self
            .async_ops()
            .fence(&self.state.keys, &self.state.token)
            .await?;
        self.fence_drawn(drawn)
    }

    /// [`Lock::owned`] for async callers.
    pub async fn owned_async(&self) -> Result<bool> {
        let (keys, token) = (&self.state.keys, &self.state.token);
        if keys.shared() {
            return Ok(self.async_ops().fence(keys, token).await?.is_some());
        }
        self.async_ops().is_owned_by(&keys.lock, token).await
    }
}
