//! The public client: checks the caller's arguments, hands each operation
//! to the deployment (whichever it is, through one interface) and wraps an
//! acquisition in a [`Lock`]. Opening and URLs are in `config`; what is
//! sent, and where, is below in `deploy`.
//!
//! A [`Client`] is cheap to clone and safe to share between threads; clones
//! share the pool and the renewal thread. Opening a client validates the URL
//! but does not connect: a client made while Redis is down works once Redis
//! is up, and connection errors surface on the first operation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Settings;
#[cfg(feature = "tokio")]
use crate::deploy::AsyncDeployment;
use crate::deploy::{Deployment, Grant, Granted};
use crate::error::{show_key, Error, Result};
use crate::lock::Lock;
use crate::options::{check_key, check_token, ttl_millis, AcquireOptions, LockInfo, Wait};
use crate::protocol::{self, Kind, LockKeys};
use crate::renew::{LockState, Renewer};
use crate::stats::{Counters, Event, Stats};

#[cfg(feature = "tokio")]
mod asynchronous;
mod builder;
pub(crate) mod shared;

pub use builder::ClientBuilder;

struct Inner {
    /// One server, or the Redlock nodes.
    deployment: Arc<dyn Deployment>,
    /// What this client did (its pools count there too).
    stats: Arc<Counters>,
    renewer: Arc<Renewer>,
    /// The async operations, made on first use.
    #[cfg(feature = "tokio")]
    async_ops: std::sync::OnceLock<Arc<dyn AsyncDeployment>>,
}

/// A handle to a Redis deployment: one server, a Sentinel service, a
/// Cluster, or Redlock over independent servers ([`Client::redlock`]), all
/// behind the same operations. Clone it freely; it is `Send + Sync` and
/// every clone shares one connection pool, one renewal thread and one set of
/// [`Stats`].
///
/// Operations by lock name ([`Client::acquire`], [`Client::inspect`], the
/// `*_token` calls) each cost one round trip when nothing has to be waited
/// for; [`Client::acquire`] gives a [`Lock`] handle that releases on drop.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use redislock::{Client, ErrorKind, Wait};
///
/// # let redis = redislock_tests::Server::start();
/// # let url = redis.url();
/// // url: "redis://127.0.0.1:6379/0", "unix:///run/redis/redis.sock?db=0", ...
/// let client = Client::open(url)?; // validates the URL; connects on first use
/// let lock = client.acquire("jobs:nightly", Duration::from_secs(30), Wait::TryOnce)?;
/// assert!(client.is_locked("jobs:nightly")?);
///
/// // Any other owner (here a clone; the same from another process or
/// // language) finds it held: `Wait::TryOnce` fails at once.
/// let other = client.clone();
/// let err = other
///     .acquire("jobs:nightly", Duration::from_secs(30), Wait::TryOnce)
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::NotAcquired);
///
/// let info = client.inspect("jobs:nightly")?; // one round trip
/// assert_eq!(info.holder.as_deref(), Some(lock.token()));
///
/// lock.release()?;
/// assert!(!client.is_locked("jobs:nightly")?);
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.addr())
            .finish()
    }
}

impl Client {
    /// The servers, for `doctor`.
    pub(crate) fn deployment(&self) -> &Arc<dyn Deployment> {
        &self.inner.deployment
    }

    /// A client for `redis://[user:password@]host:port[/db]`,
    /// `rediss://…` (TLS), `unix:///path.sock[?db=N]`,
    /// `redis+sentinel://…/service` or `redis+cluster://…` (`rediss+…` for
    /// TLS), with the default
    /// timeouts (which `?connect_timeout=500ms&command_timeout=1s` in the URL
    /// change). Validates the URL; does not connect.
    ///
    /// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
    /// a URL it cannot use (see [`ClientBuilder::build`]); the message never
    /// shows the password.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// A builder for a client of `url` (any form [`Client::open`] takes)
    /// with non-default settings: timeouts, a private CA.
    pub fn builder(url: &str) -> ClientBuilder {
        Client::redlock([url])
    }

    /// A builder for a Redlock client over independent servers (one URL
    /// gives a single-server client). See `docs/deployments.md` for the
    /// algorithm; fencing numbers are advisory there.
    ///
    /// Each operation runs on every node at once and returns as soon as
    /// the replies decide it: an acquisition holds once a majority
    /// (N/2 + 1) granted it within its validity, and fails with
    /// [`Error::NoQuorum`](crate::Error::NoQuorum) when too few nodes
    /// answer. Waiting is by retries (no queue, no hand-off).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use redislock::{Client, Wait};
    ///
    /// # use redislock_tests::Server;
    /// # let (a, b, c) = (Server::start(), Server::start(), Server::start());
    /// # let urls = [a.url(), b.url(), c.url()];
    /// // urls: ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"]
    /// let client = Client::redlock(urls).build()?;
    /// let lock = client.acquire("ledger", Duration::from_secs(10), Wait::TryOnce)?;
    /// assert!(client.is_locked("ledger")?); // a majority holds it
    /// lock.release()?; // on every node
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn redlock<I, S>(urls: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ClientBuilder {
            urls: urls.into_iter().map(|u| u.as_ref().to_string()).collect(),
            settings: Settings::default(),
        }
    }

    /// The server address for messages and logs, never with credentials:
    /// `host:port`, the socket path, or a description of a Sentinel,
    /// Cluster or Redlock deployment.
    pub fn addr(&self) -> String {
        self.inner.deployment.describe()
    }

    /// What this client (and every clone of it) did so far: acquisitions by
    /// outcome, releases, extends, renewals, hand-offs, connection errors,
    /// what it holds and waits for now, and how long it waited and held.
    /// Reading costs a few dozen atomic loads; recording is always on. A
    /// forked child starts from zero.
    pub fn stats(&self) -> Stats {
        self.inner.stats.read()
    }

    /// Count an acquisition's outcome and how long it took.
    fn count_acquire(&self, r: &Result<Grant>, kind: Kind, started: Instant) {
        if cfg!(redislock_no_stats) {
            return;
        }
        let stats = &self.inner.stats;
        stats.waited(started.elapsed());
        if r.is_ok() {
            stats.count(match kind {
                Kind::Lock => Event::AcquiredLock,
                Kind::Semaphore { .. } => Event::AcquiredSemaphore,
                Kind::Read => Event::AcquiredRead,
                Kind::Write => Event::AcquiredWrite,
            });
        }
        stats.count(match r {
            Ok(g) => match g.how {
                Granted::AtOnce => Event::AcquiredAtOnce,
                Granted::AfterWait => Event::AcquiredAfterWait,
                Granted::HandedOver => Event::AcquiredHandedOver,
            },
            Err(Error::NotAcquired { .. }) => Event::AcquireTimedOut,
            Err(_) => Event::AcquireError,
        });
    }

    /// Count an acquisition that its caller gave up before it ended (an
    /// async one whose future was dropped): as a wait interrupted.
    #[cfg(feature = "tokio")]
    fn count_abandoned(&self, started: Instant) {
        if cfg!(redislock_no_stats) {
            return;
        }
        let stats = &self.inner.stats;
        stats.waited(started.elapsed());
        stats.count(Event::AcquireTimedOut);
    }

    /// Count a release or extend by token.
    fn count_by_token(&self, r: Result<bool>, ok: Event, gone: Event) -> Result<bool> {
        match r {
            Ok(true) => self.inner.stats.count(ok),
            Ok(false) => self.inner.stats.count(gone),
            Err(_) => {}
        }
        r
    }

    /// Take the lock `key` with a random token: one round trip when it is
    /// free. See [`Client::acquire_with`].
    pub fn acquire(&self, key: impl AsRef<[u8]>, ttl: Duration, wait: Wait) -> Result<Lock> {
        self.acquire_with(key, AcquireOptions::new(ttl).wait(wait))
    }

    /// Take the lock `key`. While it is held by another owner, wait as
    /// `opts.wait` says: a release by this library hands the lock straight
    /// to the longest waiter; releases by other clients and expiries are
    /// noticed by retries that never sleep past the holder's remaining TTL.
    ///
    /// Errors: [`Error::NotAcquired`](crate::Error::NotAcquired) when the wait ran out,
    /// [`Error::WrongType`](crate::Error::WrongType) when the key is not a lock (it is left alone),
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) before any I/O for bad arguments
    /// (an empty or over-long name or token, a TTL outside 1 ms ..=
    /// [`MAX_TTL`](crate::MAX_TTL)), [`Error::NoQuorum`](crate::Error::NoQuorum)
    /// over Redlock, and [`Error::Connection`](crate::Error::Connection) /
    /// [`Error::Server`](crate::Error::Server) / [`Error::Unavailable`](crate::Error::Unavailable).
    ///
    /// Costs one round trip when the lock is free (with
    /// [`AcquireOptions::fenced`](crate::AcquireOptions::fenced) too); a wait
    /// adds the retries and the wake-up, which come through the client's
    /// subscriber connection (shared by all its waiters).
    pub fn acquire_with(&self, key: impl AsRef<[u8]>, opts: AcquireOptions) -> Result<Lock> {
        self.acquire_as(key.as_ref(), Kind::Lock, opts)
    }

    /// The acquire of the name `key` locked as `kind` (the bindings').
    #[doc(hidden)]
    pub fn acquire_as(&self, key: &[u8], kind: Kind, opts: AcquireOptions) -> Result<Lock> {
        let (keys, token, fence, ttl_ms) = self.take_as(key, kind, &opts)?;
        let lock = self.held(keys, token, fence, ttl_ms, opts.auto_renew, None);
        if opts.fenced && fence == 0 {
            // Handed over: the hand-off carries no fence. Drawn now, as
            // promised (a failure drops the handle, which releases).
            lock.fence()?;
        }
        Ok(lock)
    }

    /// The acquire of [`Client::acquire_with`] without the handle: the
    /// names, the token, the fence (0 when none was drawn) and the TTL.
    /// The C API's acquire by token, which wants no handle, stops here.
    pub(crate) fn take(
        &self,
        key: &[u8],
        opts: &AcquireOptions,
    ) -> Result<(LockKeys, Vec<u8>, u64, u64)> {
        self.take_as(key, Kind::Lock, opts)
    }

    /// [`Client::take`] of the name `key` locked as `kind`.
    pub(crate) fn take_as(
        &self,
        key: &[u8],
        kind: Kind,
        opts: &AcquireOptions,
    ) -> Result<(LockKeys, Vec<u8>, u64, u64)> {
        let (keys, token, ttl_ms) = prepare(key, kind, opts)?;
        let started = Instant::now();
        let acquire = || {
            self.inner.deployment.acquire(
                &keys,
                &token,
                ttl_ms,
                (opts.wait, opts.fenced),
                opts.interrupt.as_ref(),
                started,
            )
        };
        // A wait ends at its deadline, also while a server is unreachable.
        let grant = match opts.wait {
            Wait::Timeout(d) if !d.is_zero() => match started.checked_add(d) {
                Some(until) => crate::net::pool::waiting_until(until, acquire),
                None => acquire(),
            },
            _ => acquire(),
        };
        self.count_acquire(&grant, kind, started);
        Ok((keys, token, grant?.fence, ttl_ms))
    }

    /// The handle of a lock just taken.
    fn held(
        &self,
        keys: LockKeys,
        token: Vec<u8>,
        fence: u64,
        ttl_ms: u64,
        auto_renew: bool,
        #[cfg(feature = "tokio")] async_ops: Option<Arc<dyn AsyncDeployment>>,
        #[cfg(not(feature = "tokio"))] _async_ops: Option<()>,
    ) -> Lock {
        let lock = Lock::new(
            self.inner.deployment.clone(),
            self.inner.renewer.clone(),
            LockState::new(keys, token, fence, ttl_ms, self.inner.stats.clone()),
            #[cfg(feature = "tokio")]
            async_ops,
        );
        if auto_renew {
            lock.auto_renew();
        }
        lock
    }

    /// Release the lock `key` if it still holds `token` (the request-id
    /// pattern: no handle needed). `Ok(false)` when it does not: it expired,
    /// or another owner holds it, and nothing was changed. One round trip; a
    /// waiter queued for the lock is handed it as by [`Lock::release`].
    /// See [`Lock::forget`] for an example.
    pub fn release_token(&self, key: impl AsRef<[u8]>, token: impl AsRef<[u8]>) -> Result<bool> {
        let (key, token) = (key.as_ref(), token.as_ref());
        check_key_token(key, token)?;
        let r = self.inner.deployment.release(&LockKeys::new(key), token);
        self.count_by_token(r, Event::ReleaseOk, Event::ReleaseNotOwner)
    }

    /// Take the lock `key` from whoever holds it: this library's holder, a
    /// foreign client's value, anything stored there as a string. The
    /// oldest live waiter is handed the lock at once, as by a release, so
    /// waiters do not sit out the broken holder's TTL; the fence counter is
    /// left alone, so the next holder's fence is still above the broken
    /// holder's. `Ok(true)` when a holder was removed, `Ok(false)` when
    /// nobody held it. The broken holder finds out at its next extend,
    /// renewal or release (lost, [`Error::NotOwner`]).
    ///
    /// This is the one path that removes a lock without its token: the
    /// operator's "unlock" of a lock whose owner is known to be gone
    /// (redis-objects' `clear`, Laravel's `forceRelease`). It breaks mutual
    /// exclusion if the owner is still working. Only the plain lock `key`,
    /// never a semaphore or read-write lock of that name. A key of another
    /// type is left alone ([`Error::WrongType`]). One round trip (Redlock:
    /// every node, waiting for each).
    pub fn force_release(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        check_key(key)?;
        let removed = self.inner.deployment.force_release(&LockKeys::new(key))?;
        if removed {
            tracing::warn!(lock = %show_key(key), "force-released: the holder's lock was removed");
        }
        Ok(removed)
    }

    /// The fencing number of the lock `key` held with `token` (no handle
    /// needed, as for [`Client::release_token`]): the one already drawn for
    /// this holder, or a new one drawn now, atomically with the check that
    /// `token` holds the lock. `Ok(None)` when it does not. One round trip.
    pub fn fence_token(
        &self,
        key: impl AsRef<[u8]>,
        token: impl AsRef<[u8]>,
    ) -> Result<Option<u64>> {
        let (key, token) = (key.as_ref(), token.as_ref());
        check_key_token(key, token)?;
        self.inner.deployment.fence(&LockKeys::new(key), token)
    }

    /// Set the remaining time of the lock `key` to `ttl` if it still holds
    /// `token` (no handle needed, as for [`Client::release_token`]).
    /// `Ok(false)` when it does not: an expired lock is never re-created.
    /// One round trip; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for a TTL outside 1 ms ..= [`MAX_TTL`](crate::MAX_TTL).
    pub fn extend_token(
        &self,
        key: impl AsRef<[u8]>,
        token: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<bool> {
        let (key, token) = (key.as_ref(), token.as_ref());
        check_key_token(key, token)?;
        let ttl_ms = ttl_millis(ttl)?;
        let r = self
            .inner
            .deployment
            .extend(&LockKeys::new(key), token, 0, ttl_ms);
        self.count_by_token(r, Event::ExtendOk, Event::ExtendLost)
    }

    /// The holder, its remaining TTL and fencing number, and the number of
    /// queued waiters of `key`, read atomically in one round trip (for
    /// status displays; it may be stale at once). Over Redlock: the holder
    /// a majority agrees on, the shortest TTL and the largest fence among
    /// the nodes that hold it, the most waiters seen on one node.
    pub fn inspect(&self, key: impl AsRef<[u8]>) -> Result<LockInfo> {
        let key = key.as_ref();
        check_key(key)?;
        self.inner.deployment.inspect(&LockKeys::new(key))
    }

    /// Whether anyone holds the lock `key` (the key exists): one round trip,
    /// and stale as soon as it returns. Never use it to decide to take the
    /// lock: [`Wait::TryOnce`] does that atomically.
    pub fn is_locked(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        check_key(key)?;
        self.inner.deployment.is_locked(key)
    }

    /// Whether the lock `key` is held with `token` right now (one round
    /// trip).
    pub fn is_owned_by(&self, key: impl AsRef<[u8]>, token: impl AsRef<[u8]>) -> Result<bool> {
        let (key, token) = (key.as_ref(), token.as_ref());
        check_key_token(key, token)?;
        self.inner.deployment.is_owned_by(key, token)
    }
}

/// Check the key and token of a call by token.
fn check_key_token(key: &[u8], token: &[u8]) -> Result<()> {
    check_key(key)?;
    check_token(token)
}

/// Check the arguments of an acquisition: the keys, the token (given or
/// new) and the TTL in ms.
fn prepare(key: &[u8], kind: Kind, opts: &AcquireOptions) -> Result<(LockKeys, Vec<u8>, u64)> {
    check_key(key)?;
    let ttl_ms = ttl_millis(opts.ttl)?;
    let token = match &opts.token {
        Some(t) => {
            check_token(t)?;
            t.clone()
        }
        None => protocol::new_token(),
    };
    Ok((LockKeys::of(key, kind), token, ttl_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_never_shows_the_password() {
        let c = Client::open("redis://:pw@127.0.0.1:1/2?connect_timeout=150ms&command_timeout=3s")
            .unwrap();
        assert_eq!(c.addr(), "127.0.0.1:1");
        assert!(!format!("{c:?}").contains("pw"));
    }

    #[test]
    fn bad_urls_are_invalid_arguments_without_the_password() {
        for url in [
            "",
            "http://127.0.0.1:6390",
            "redis://",
            "not a url",
            "redis://u:secret@127.0.0.1:70000",
            "redis://u:secret@127.0.0.1:1/notadb",
            "redis://127.0.0.1:1?connect_timeout=forever",
            "redis://127.0.0.1:1?connect_timeout=0ms",
        ] {
            let e = Client::open(url).expect_err(url);
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{url}: {e}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }
}
