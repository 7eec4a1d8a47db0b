//! The client: one Redis server, its connection pool and its renewal
//! thread, and the operations that take and inspect locks.
//!
//! A [`Client`] is cheap to clone and safe to share between threads; clones
//! share the pool and the renewal thread. Opening a client validates the URL
//! but does not connect: a client made while Redis is down works once Redis
//! is up, and connection errors surface on the first operation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, IntoConnectionInfo, Value};

use crate::conn::{Endpoint, Pool, Target};
use crate::error::{show_key, Error, Result};
use crate::lock::Lock;
use crate::protocol::{self, scripts, Attempt, LockKeys};
use crate::redlock;
use crate::renew::Renewer;
use crate::wait;

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
    /// One attempt; fail with [`Error::NotAcquired`] at once when held.
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
/// leaves the queue and the acquisition fails with [`Error::NotAcquired`]
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
}

/// What Redis says about a lock name right now ([`Client::inspect`]).
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

impl LockInfo {
    /// Parse the INSPECT script's reply.
    pub(crate) fn from_reply(v: &Value) -> Option<LockInfo> {
        let Value::Array(items) = v else { return None };
        let holder = match items.first()? {
            Value::BulkString(b) => Some(b.clone()),
            _ => None,
        };
        let int = |i: usize| match items.get(i) {
            Some(Value::Int(n)) => Some(*n),
            _ => None,
        };
        Some(LockInfo {
            ttl: holder
                .as_ref()
                .and_then(|_| u64::try_from(int(1)?).ok())
                .map(Duration::from_millis),
            holder,
            fence: int(2).and_then(|f| u64::try_from(f).ok()),
            waiters: int(3).and_then(|n| u64::try_from(n).ok()).unwrap_or(0),
        })
    }
}

/// Settings for [`Client`], made by [`Client::builder`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    urls: Vec<String>,
    connect_timeout: Option<Duration>,
    command_timeout: Option<Duration>,
    node_timeout: Option<Duration>,
    tls_root_cert: Option<Vec<u8>>,
}

impl ClientBuilder {
    /// Time to establish a connection (default 2 s; also `?connect_timeout=`
    /// in the URL).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = Some(d);
        self
    }

    /// Time to wait for one reply (default 2 s; also `?command_timeout=` in
    /// the URL).
    pub fn command_timeout(mut self, d: Duration) -> Self {
        self.command_timeout = Some(d);
        self
    }

    /// Trust this PEM certificate (a private CA) for `rediss://` besides the
    /// system's roots (also `?tls_ca_file=/path.pem` in the URL).
    pub fn tls_root_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_cert = Some(pem.into());
        self
    }

    /// Redlock only: the bound on each node's reply (default: a tenth of
    /// the lock's TTL, at least 5 ms, at most the command timeout).
    pub fn node_timeout(mut self, d: Duration) -> Self {
        self.node_timeout = Some(d);
        self
    }

    /// Validate everything and make the client. Does not connect.
    pub fn build(self) -> Result<Client> {
        if self.urls.is_empty() {
            return Err(Error::invalid("no URL given"));
        }
        if let Some(d) = self.node_timeout {
            if d.is_zero() || d > Duration::from_secs(3600) {
                return Err(Error::invalid(format!(
                    "node timeout must be between 1 ms and 1 hour, got {d:?}"
                )));
            }
        }
        let nodes = self
            .urls
            .iter()
            .map(|url| self.target(url).map(Pool::new))
            .collect::<Result<Vec<_>>>()?;
        Ok(Client {
            inner: Arc::new(Inner {
                nodes,
                node_timeout: self.node_timeout,
                renewer: Renewer::new(),
            }),
        })
    }

    fn target(&self, url: &str) -> Result<Target> {
        if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            return self.sentinel_target(rest);
        }
        if let Some(rest) = url.strip_prefix("redis+cluster://") {
            return self.cluster_target(rest);
        }
        if url.starts_with("rediss+sentinel://") || url.starts_with("rediss+cluster://") {
            return Err(Error::invalid(
                "TLS to Sentinel (rediss+sentinel://) is not supported yet",
            ));
        }
        let parsed = ParsedUrl::parse(url)?;
        let (connect_timeout, command_timeout) = self.timeouts(&parsed.options)?;
        let root_cert = match (&self.tls_root_cert, &parsed.options.tls_ca_file) {
            (Some(pem), _) => Some(pem.clone()),
            (None, Some(path)) => Some(
                std::fs::read(path)
                    .map_err(|e| Error::invalid(format!("cannot read tls_ca_file {path}: {e}")))?,
            ),
            (None, None) => None,
        };
        let info = parsed.url.as_str().into_connection_info().map_err(|e| {
            Error::invalid(format!(
                "{} ({})",
                url_help(),
                e.detail().unwrap_or(&e.to_string())
            ))
        })?;
        // No CLIENT SETINFO after connecting: it would cost every new
        // connection (every fresh PHP process) one more round trip.
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(settings);
        let addr = match info.addr() {
            ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
            ConnectionAddr::Unix(path) => path.display().to_string(),
            other => format!("{other:?}"),
        };
        let tls = match (info.addr(), root_cert) {
            (ConnectionAddr::TcpTls { insecure: true, .. }, _) => {
                return Err(Error::invalid(
                    "#insecure (TLS without checking the certificate) is not supported: \
                     give the server's CA with tls_ca_file instead",
                ))
            }
            #[cfg(feature = "tls")]
            (ConnectionAddr::TcpTls { .. }, pem) => Some(
                crate::wire::Tls::new(pem.as_deref())
                    .map_err(|e| Error::invalid(format!("TLS: {e}")))?,
            ),
            #[cfg(not(feature = "tls"))]
            (ConnectionAddr::TcpTls { .. }, _) => {
                return Err(Error::invalid(
                    "this build of redislock has no TLS support (the `tls` feature)",
                ))
            }
            (_, Some(_)) => {
                return Err(Error::invalid(
                    "a TLS root certificate was given for a URL that is not rediss://",
                ))
            }
            (_, None) => None,
        };
        Ok(Target {
            endpoint: Endpoint::Direct(info),
            wait_replicas: parsed.options.wait_replicas()?,
            addr,
            tls,
            connect_timeout,
            command_timeout,
        })
    }

    fn timeouts(&self, options: &UrlOptions) -> Result<(Duration, Duration)> {
        let connect_timeout = self
            .connect_timeout
            .or(options.connect_timeout)
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let command_timeout = self
            .command_timeout
            .or(options.command_timeout)
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        for (name, d) in [
            ("connect timeout", connect_timeout),
            ("command timeout", command_timeout),
        ] {
            if d.is_zero() || d > Duration::from_secs(3600) {
                return Err(Error::invalid(format!(
                    "{name} must be between 1 ms and 1 hour, got {d:?}"
                )));
            }
        }
        Ok((connect_timeout, command_timeout))
    }

    fn cluster_target(&self, rest: &str) -> Result<Target> {
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut options = UrlOptions::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            if !options.take(&k, &v)? {
                return Err(Error::invalid(format!(
                    "unknown parameter {k:?} in the Cluster URL"
                )));
            }
        }
        if options.wait_replicas()?.is_some() {
            return Err(Error::invalid(
                "wait_replicas is not supported with Cluster yet",
            ));
        }
        let cluster = crate::cluster::Cluster::parse(rest)?;
        let (connect_timeout, command_timeout) = self.timeouts(&options)?;
        Ok(Target {
            addr: cluster.describe(),
            endpoint: Endpoint::Cluster(std::sync::Arc::new(cluster)),
            wait_replicas: None,
            tls: None,
            connect_timeout,
            command_timeout,
        })
    }

    fn sentinel_target(&self, rest: &str) -> Result<Target> {
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut options = UrlOptions::default();
        let mut db = 0;
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "db" => {
                    db = v
                        .parse()
                        .map_err(|_| Error::invalid(format!("bad db {v:?} in the Sentinel URL")))?
                }
                _ => {
                    if !options.take(&k, &v)? {
                        return Err(Error::invalid(format!(
                            "unknown parameter {k:?} in the Sentinel URL"
                        )));
                    }
                }
            }
        }
        let sentinel = crate::sentinel::Sentinel::parse(rest, db)?;
        let (connect_timeout, command_timeout) = self.timeouts(&options)?;
        Ok(Target {
            addr: sentinel.describe(),
            endpoint: Endpoint::Sentinel(sentinel),
            wait_replicas: options.wait_replicas()?,
            tls: None,
            connect_timeout,
            command_timeout,
        })
    }
}

/// redislock's own URL parameters.
#[derive(Default)]
struct UrlOptions {
    connect_timeout: Option<Duration>,
    command_timeout: Option<Duration>,
    tls_ca_file: Option<String>,
    wait_replicas: Option<u32>,
    wait_timeout: Option<Duration>,
}

impl UrlOptions {
    /// Take `k=v` if it is one of ours.
    fn take(&mut self, k: &str, v: &str) -> Result<bool> {
        match k {
            "connect_timeout" => self.connect_timeout = Some(parse_duration(v)?),
            "command_timeout" => self.command_timeout = Some(parse_duration(v)?),
            "tls_ca_file" => self.tls_ca_file = Some(v.to_string()),
            "wait_replicas" => {
                self.wait_replicas = Some(v.parse().map_err(|_| {
                    Error::invalid(format!("wait_replicas must be a number, got {v:?}"))
                })?)
            }
            "wait_timeout" => self.wait_timeout = Some(parse_duration(v)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn wait_replicas(&self) -> Result<Option<(u32, Duration)>> {
        match (self.wait_replicas, self.wait_timeout) {
            (None | Some(0), None) => Ok(None),
            (None | Some(0), Some(_)) => Err(Error::invalid("wait_timeout needs wait_replicas")),
            (Some(n), t) => {
                let t = t.unwrap_or(Duration::from_millis(100));
                if t.is_zero() {
                    return Err(Error::invalid(
                        "wait_timeout must be at least 1 ms (0 would wait forever)",
                    ));
                }
                Ok(Some((n, t)))
            }
        }
    }
}

fn url_help() -> &'static str {
    "invalid Redis URL: expected redis://[user:password@]host:port[/db], \
     rediss://… (TLS) or unix:///path/to/redis.sock[?db=N]"
}

/// The URL minus redislock's own query parameters.
struct ParsedUrl {
    url: url::Url,
    options: UrlOptions,
}

impl ParsedUrl {
    fn parse(raw: &str) -> Result<ParsedUrl> {
        if raw.trim().is_empty() {
            return Err(Error::invalid(format!("empty URL; {}", url_help())));
        }
        // Never echo the URL itself: it may hold a password.
        let mut url =
            url::Url::parse(raw).map_err(|e| Error::invalid(format!("{} ({e})", url_help())))?;
        match url.scheme() {
            "redis" | "rediss" | "unix" | "redis+unix" => {}
            other => {
                return Err(Error::invalid(format!(
                    "unsupported URL scheme {other:?}; {}",
                    url_help()
                )))
            }
        }
        if matches!(url.scheme(), "redis" | "rediss") && url.host_str().is_none_or(str::is_empty) {
            return Err(Error::invalid(format!(
                "the URL has no host; {}",
                url_help()
            )));
        }
        let mut options = UrlOptions::default();
        let mut kept = Vec::new();
        for (k, v) in url.query_pairs() {
            if !options.take(&k, &v)? {
                kept.push((k.into_owned(), v.into_owned()));
            }
        }
        if kept.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(kept);
        }
        Ok(ParsedUrl { url, options })
    }
}

/// Parse a duration such as `250ms`, `2s`, `1.5s`, `5m`, `1h`; a bare number
/// is seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&t[..i], t[i..].trim()),
        None => (t, "s"),
    };
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(Error::invalid(format!(
                "bad duration {text:?}: use a number with ms, s, m or h"
            )))
        }
    };
    let value: f64 = num.parse().map_err(|_| {
        Error::invalid(format!(
            "bad duration {text:?}: use a number with ms, s, m or h"
        ))
    })?;
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| Error::invalid(format!("bad duration {text:?}: out of range")))
}

pub(crate) struct Inner {
    /// One server, or the Redlock nodes.
    pub(crate) nodes: Vec<Pool>,
    pub(crate) node_timeout: Option<Duration>,
    pub(crate) renewer: Renewer,
}

impl Inner {
    /// The server of a single-server client.
    pub(crate) fn pool(&self) -> &Pool {
        &self.nodes[0]
    }

    pub(crate) fn is_redlock(&self) -> bool {
        self.nodes.len() > 1
    }
}

/// A handle to one Redis server (the single-server deployment). Clone it
/// freely; it is `Send + Sync` and every clone shares one connection pool and
/// one renewal thread.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.addr())
            .finish()
    }
}

impl Client {
    /// A client for `redis://[user:password@]host:port[/db]`,
    /// `rediss://…` (TLS) or `unix:///path.sock[?db=N]`, with the default
    /// timeouts (which `?connect_timeout=500ms&command_timeout=1s` in the URL
    /// change). Validates the URL; does not connect.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// A builder for a client with non-default settings.
    pub fn builder(url: &str) -> ClientBuilder {
        Client::redlock([url])
    }

    /// A builder for a Redlock client over independent servers (one URL
    /// gives a single-server client). See the `redlock` module for the
    /// algorithm; fencing numbers are advisory there.
    pub fn redlock<I, S>(urls: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ClientBuilder {
            urls: urls.into_iter().map(|u| u.as_ref().to_string()).collect(),
            connect_timeout: None,
            command_timeout: None,
            node_timeout: None,
            tls_root_cert: None,
        }
    }

    /// The server address (never with credentials).
    pub fn addr(&self) -> String {
        let addrs: Vec<&str> = self
            .inner
            .nodes
            .iter()
            .map(|p| p.target.addr.as_str())
            .collect();
        if addrs.len() == 1 {
            addrs[0].to_string()
        } else {
            format!("Redlock over {}", addrs.join(", "))
        }
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
    /// Errors: [`Error::NotAcquired`] when the wait ran out,
    /// [`Error::WrongType`] when the key is not a lock (it is left alone),
    /// [`Error::InvalidArgument`] before any I/O for bad arguments, and
    /// [`Error::Connection`] / [`Error::Server`].
    pub fn acquire_with(&self, key: impl AsRef<[u8]>, opts: AcquireOptions) -> Result<Lock> {
        let key = key.as_ref();
        check_key(key)?;
        let ttl_ms = ttl_millis(opts.ttl)?;
        let token = match opts.token {
            Some(t) => {
                check_token(&t)?;
                t
            }
            None => protocol::new_token(),
        };
        let keys = LockKeys::new(key);
        let started = Instant::now();
        let fence = match opts.wait {
            _ if self.inner.is_redlock() => {
                let deadline = match opts.wait {
                    Wait::TryOnce => Some(started),
                    Wait::Timeout(d) => started.checked_add(d),
                    Wait::Forever => None,
                };
                let stop = opts.interrupt.as_ref();
                redlock::acquire(&self.inner, &keys, &token, ttl_ms, deadline, started, stop)?
            }
            Wait::TryOnce => self.try_once(&keys, &token, ttl_ms, started)?,
            Wait::Timeout(d) if d.is_zero() => self.try_once(&keys, &token, ttl_ms, started)?,
            Wait::Timeout(d) => wait::acquire(
                self,
                &keys,
                &token,
                ttl_ms,
                (started.checked_add(d), started),
                opts.interrupt.as_ref(),
            )?,
            Wait::Forever => wait::acquire(
                self,
                &keys,
                &token,
                ttl_ms,
                (None, started),
                opts.interrupt.as_ref(),
            )?,
        };
        if let (false, Some((n, t))) = (
            self.inner.is_redlock(),
            self.inner.pool().target.wait_replicas,
        ) {
            self.confirm_replicated(&keys, &token, fence, ttl_ms, n, t)?;
        }
        let lock = Lock::new(self.clone(), keys, token, fence, ttl_ms);
        if opts.auto_renew {
            lock.auto_renew();
        }
        Ok(lock)
    }

    /// `?wait_replicas=N`: rewrite the lock on our own connection (an
    /// extend, so that whatever path granted it, the write to wait for is
    /// ours) and WAIT for N replicas, in one round trip. Too few: release
    /// and fail with [`Error::NoQuorum`].
    fn confirm_replicated(
        &self,
        keys: &LockKeys,
        token: &[u8],
        fence: u64,
        ttl_ms: u64,
        n: u32,
        t: Duration,
    ) -> Result<()> {
        let (ms, fence) = (ttl_ms.to_string(), fence.to_string());
        let extend = scripts()
            .extend
            .eval(&keys.all(), &[token, ms.as_bytes(), fence.as_bytes()]);
        let wait_ms = t.as_millis().max(1) as u64;
        let (still, acked): (i64, i64) = self
            .inner
            .pool()
            .with(|con, _| {
                redis::pipe()
                    .add_command(extend.clone())
                    .cmd("WAIT")
                    .arg(n)
                    .arg(wait_ms)
                    .query(con)
            })
            .map_err(|e| self.with_key(e, &keys.lock))?;
        if still == 1 && acked >= i64::from(n) {
            return Ok(());
        }
        let _ = release(self, keys, token);
        Err(Error::NoQuorum {
            key: show_key(&keys.lock),
            detail: format!(
                "only {acked} of the {n} replicas asked for (wait_replicas) acknowledged the lock \
                 within {wait_ms} ms; it was released"
            ),
        })
    }

    fn try_once(
        &self,
        keys: &LockKeys,
        token: &[u8],
        ttl_ms: u64,
        started: Instant,
    ) -> Result<u64> {
        let ttl = ttl_ms.to_string();
        let reply = self.script(
            &scripts().acquire,
            &keys.lock,
            &keys.all(),
            &[token, ttl.as_bytes(), b"0"],
            Some(&[token, ttl.as_bytes(), b"1"]),
        )?;
        match protocol::parse_attempt(&reply) {
            Some(Attempt::Taken(fence)) => Ok(fence),
            Some(Attempt::Held { pttl, .. }) => Err(not_acquired(&keys.lock, pttl, started)),
            None => Err(unexpected(&reply)),
        }
    }

    /// Release the lock `key` if it still holds `token` (the request-id
    /// pattern: no handle needed). `Ok(false)` when it does not: it expired,
    /// or another owner holds it, and nothing was changed.
    pub fn release_token(&self, key: impl AsRef<[u8]>, token: impl AsRef<[u8]>) -> Result<bool> {
        let (key, token) = (key.as_ref(), token.as_ref());
        check_key(key)?;
        check_token(token)?;
        let keys = LockKeys::new(key);
        release(self, &keys, token)
    }

    /// The holder, its remaining TTL and fencing number, and the number of
    /// queued waiters of `key`, read atomically in one round trip (for
    /// status displays; it may be stale at once). Over Redlock: the holder
    /// a majority agrees on, the shortest TTL and the largest fence among
    /// the nodes that hold it, the most waiters seen on one node.
    pub fn inspect(&self, key: impl AsRef<[u8]>) -> Result<LockInfo> {
        let key = key.as_ref();
        check_key(key)?;
        let keys = LockKeys::new(key);
        if self.inner.is_redlock() {
            return redlock::inspect(&self.inner, &keys);
        }
        let reply = self.script(&scripts().inspect, key, &keys.all(), &[], None)?;
        LockInfo::from_reply(&reply).ok_or_else(|| unexpected(&reply))
    }

    /// Whether anyone holds the lock `key` (the key exists).
    pub fn is_locked(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        check_key(key)?;
        if self.inner.is_redlock() {
            return Ok(redlock::holder(&self.inner, key)?.is_some());
        }
        let n: i64 = self
            .inner
            .pool()
            .with(|con, _| redis::cmd("EXISTS").arg(key).query(con))?;
        Ok(n > 0)
    }

    /// Whether the lock `key` is held with `token` right now.
    pub fn is_owned_by(&self, key: impl AsRef<[u8]>, token: impl AsRef<[u8]>) -> Result<bool> {
        let (key, token) = (key.as_ref(), token.as_ref());
        check_key(key)?;
        check_token(token)?;
        if self.inner.is_redlock() {
            return redlock::is_owned_by(&self.inner, key, token);
        }
        let v: Value = self
            .inner
            .pool()
            .with(|con, _| redis::cmd("GET").arg(key).query(con))
            .map_err(|e| self.with_key(e, key))?;
        Ok(matches!(v, Value::BulkString(ref b) if b.as_slice() == token))
    }

    /// Name the key in a WrongType error, and what it holds (one more round
    /// trip, on this error path only).
    fn with_key(&self, e: Error, key: &[u8]) -> Error {
        match e {
            // The scripts' own errors about the companion keys.
            Error::WrongType { found, .. } if found.contains("the fence counter") => {
                Error::WrongType {
                    key: show_key(&LockKeys::new(key).counter),
                    found: String::from("non-integer"),
                }
            }
            Error::WrongType { found, .. } if found.contains("the waiter queue") => {
                Error::WrongType {
                    key: show_key(&LockKeys::new(key).queue),
                    found: String::from("non-list"),
                }
            }
            Error::WrongType { .. } => {
                let found = self
                    .inner
                    .pool()
                    .with(|con, _| redis::cmd("TYPE").arg(key).query::<String>(con))
                    .unwrap_or_else(|_| String::from("non-string"));
                Error::WrongType {
                    key: show_key(key),
                    found,
                }
            }
            other => other,
        }
    }

    /// Run a script with errors naming `key`.
    pub(crate) fn script(
        &self,
        script: &protocol::Script,
        key: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> Result<Value> {
        self.inner
            .pool()
            .script(script, keys, args, retry_args)
            .map_err(|e| self.with_key(e, key))
    }
}

/// Compare-and-delete (or hand off). `Ok(false)` when not the owner;
/// [`Error::Unconfirmed`] when it was not the owner on a second sending
/// whose first sending's reply was lost with its connection.
pub(crate) fn release(client: &Client, keys: &LockKeys, token: &[u8]) -> Result<bool> {
    if client.inner.is_redlock() {
        return redlock::release(&client.inner, keys, token);
    }
    let pool = client.inner.pool();
    let (reply, resent) = pool
        .script_resent(&scripts().release, &keys.all(), &[token])
        .map_err(|e| client.with_key(e, &keys.lock))?;
    match reply {
        Value::Int(0) if resent => Err(Error::Unconfirmed {
            key: show_key(&keys.lock),
            addr: pool.target.addr.clone(),
        }),
        Value::Int(0) => Ok(false),
        Value::Int(1 | 2) => Ok(true),
        other => Err(unexpected(&other)),
    }
}

/// Compare-and-PEXPIRE to `ttl_ms`, keeping the holder's `fence` beside
/// the lock. `Ok(false)` when not the owner.
pub(crate) fn extend(
    client: &Client,
    keys: &LockKeys,
    token: &[u8],
    fence: u64,
    ttl_ms: u64,
) -> Result<bool> {
    if client.inner.is_redlock() {
        return redlock::extend(&client.inner, keys, token, fence, ttl_ms);
    }
    let (ms, fence) = (ttl_ms.to_string(), fence.to_string());
    let reply = client.script(
        &scripts().extend,
        &keys.lock,
        &keys.all(),
        &[token, ms.as_bytes(), fence.as_bytes()],
        None,
    )?;
    match reply {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(unexpected(&other)),
    }
}

pub(crate) fn not_acquired(key: &[u8], pttl: i64, started: Instant) -> Error {
    Error::NotAcquired {
        key: show_key(key),
        holder_ttl: u64::try_from(pttl).ok().map(Duration::from_millis),
        waited: started.elapsed(),
    }
}

pub(crate) fn unexpected(v: &Value) -> Error {
    Error::Internal(format!("unexpected reply from a redislock script: {v:?}"))
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
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn url_options_are_taken_out() {
        let c = Client::open("redis://:pw@127.0.0.1:1/2?connect_timeout=150ms&command_timeout=3s")
            .unwrap();
        assert_eq!(
            c.inner.pool().target.connect_timeout,
            Duration::from_millis(150)
        );
        assert_eq!(
            c.inner.pool().target.command_timeout,
            Duration::from_secs(3)
        );
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

    #[test]
    fn ttls_are_bounded() {
        assert!(ttl_millis(Duration::ZERO).is_err());
        assert!(ttl_millis(Duration::from_micros(999)).is_err());
        assert_eq!(ttl_millis(Duration::from_millis(1)).unwrap(), 1);
        assert!(ttl_millis(MAX_TTL + Duration::from_millis(1)).is_err());
    }
}
