//! [`ClientBuilder`]: a client's settings, validated when it is built.

use std::sync::Arc;
use std::time::Duration;

use super::{Client, Inner};
use crate::config::Settings;
use crate::error::Result;
use crate::renew::Renewer;
use crate::stats::Counters;

/// Settings for [`Client`], made by [`Client::builder`] (one server, a
/// Sentinel service or a Cluster) or [`Client::redlock`] (several
/// independent servers). Each setting the builder takes wins over the
/// same option in the URL; [`ClientBuilder::build`] validates them all and
/// makes the client without connecting.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use redislock::{Client, ErrorKind, Wait};
///
/// # let redis = redislock_tests::Server::start();
/// # let url = redis.url();
/// let client = Client::builder(url)
///     .connect_timeout(Duration::from_millis(500))
///     .command_timeout(Duration::from_secs(1))
///     .build()?;
/// let lock = client.acquire("reports", Duration::from_secs(10), Wait::TryOnce)?;
/// lock.release()?;
///
/// // Bad settings are refused by build(), before any I/O.
/// let err = Client::builder("redis://127.0.0.1:6379?connect_timeout=soon")
///     .build()
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    pub(super) urls: Vec<String>,
    pub(super) settings: Settings,
}

impl ClientBuilder {
    /// Time to establish a connection: TCP connect, TLS handshake, `AUTH`
    /// and `SELECT` together (default 2 s,
    /// [`DEFAULT_CONNECT_TIMEOUT`](crate::DEFAULT_CONNECT_TIMEOUT); also
    /// `?connect_timeout=` in the URL). When it runs out the operation fails
    /// with [`Error::Connection`](crate::Error::Connection).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.settings.connect_timeout = Some(d);
        self
    }

    /// Time to wait for one reply (default 2 s,
    /// [`DEFAULT_COMMAND_TIMEOUT`](crate::DEFAULT_COMMAND_TIMEOUT); also
    /// `?command_timeout=` in the URL). A wait for a held lock is not one
    /// reply: [`Wait`](crate::Wait) bounds that. When it runs out the operation fails with
    /// [`Error::Connection`](crate::Error::Connection) and the connection is
    /// closed.
    pub fn command_timeout(mut self, d: Duration) -> Self {
        self.settings.command_timeout = Some(d);
        self
    }

    /// Trust this PEM certificate (a private CA) instead of the system's
    /// roots for TLS: `rediss://`, `rediss+sentinel://` (the sentinels and
    /// the master) and `rediss+cluster://` (every node). Also
    /// `?tls_ca_file=/path.pem` in the URL.
    pub fn tls_root_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.settings.tls_root_cert = Some(pem.into());
        self
    }

    /// Redlock only: how long an operation waits for a node's reply before
    /// counting it as failed (default: a tenth of the lock's TTL, at least
    /// 10 ms, at most the command timeout; 1 s, at most the command timeout,
    /// for release and reads). The URLs' `?node_timeout=` says the same;
    /// this wins. [`ClientBuilder::build`] refuses one below 1 ms or above
    /// an hour.
    pub fn node_timeout(mut self, d: Duration) -> Self {
        self.settings.node_timeout = Some(d);
        self
    }

    /// Validate everything and make the client. Does not connect: a client
    /// made while Redis is down works once it is up, and connection errors
    /// surface on the first operation.
    ///
    /// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
    /// a URL that does not parse or has an unknown scheme, a bad option in
    /// it (`?connect_timeout=soon`), a zero timeout, a TLS root certificate
    /// that cannot be read or holds no PEM certificate, or no URL at all.
    pub fn build(self) -> Result<Client> {
        let stats = Arc::new(Counters::default());
        Ok(Client {
            inner: Arc::new(Inner {
                deployment: self.settings.deployment(&self.urls, &stats)?,
                stats,
                renewer: Arc::new(Renewer::new()),
                #[cfg(feature = "tokio")]
                async_ops: std::sync::OnceLock::new(),
            }),
        })
    }
}
