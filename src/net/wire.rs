//! One connection to one Redis server (TCP, TLS or a Unix socket), speaking
//! RESP2 through redis-rs's parser and command types.
//!
//! It exists for one reason: every wait on its socket rides out signals.
//! A `recv` on a socket with a receive timeout fails with EINTR whenever a
//! signal handler runs, whatever `SA_RESTART` says, and after a SIGSTOP/
//! SIGCONT (signal(7)). redis-rs's own connection reports that as an I/O
//! error and skips the reply that was on its way, so a release that did
//! take effect would look failed. Here the read goes on where it stopped,
//! with the time it has left. It knows nothing of locks.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, ConnectionLike, RedisResult, Value};

/// TLS settings shared by every connection of a client: the roots to trust.
#[derive(Clone)]
pub(crate) struct Tls {
    #[cfg(feature = "tls")]
    config: std::sync::Arc<rustls::ClientConfig>,
    /// The private roots given, for the async connections (redis-rs builds
    /// their TLS settings itself).
    #[cfg(feature = "tls")]
    pub(crate) root_pem: Option<std::sync::Arc<Vec<u8>>>,
}

impl Tls {
    /// Trust `root_pem` (one or more PEM certificates) if given, else the
    /// system's roots (read once per process: a PHP request that makes a
    /// client must not parse them again).
    #[cfg(feature = "tls")]
    pub(crate) fn new(root_pem: Option<&[u8]>) -> Result<Tls, String> {
        static SYSTEM: std::sync::OnceLock<Result<Tls, String>> = std::sync::OnceLock::new();
        match root_pem {
            Some(pem) => Tls::build(Some(pem)),
            None => SYSTEM.get_or_init(|| Tls::build(None)).clone(),
        }
    }

    #[cfg(feature = "tls")]
    fn build(root_pem: Option<&[u8]>) -> Result<Tls, String> {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let mut roots = rustls::RootCertStore::empty();
        match root_pem {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| format!("the TLS root certificate: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("the TLS root certificate: {e}"))?;
                }
                if roots.is_empty() {
                    return Err("the TLS root certificate holds no PEM certificate".into());
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    // A system root rustls cannot use is skipped, as
                    // browsers do.
                    let _ = roots.add(cert);
                }
                if roots.is_empty() {
                    return Err(format!(
                        "no system root certificates found ({}); install ca-certificates \
                         or give tls_ca_file",
                        found
                            .errors
                            .first()
                            .map_or_else(|| "none".to_string(), |e| e.to_string())
                    ));
                }
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls {
            config: std::sync::Arc::new(config),
            root_pem: root_pem.map(|p| std::sync::Arc::new(p.to_vec())),
        })
    }
}

enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => {
                let s = s.get_ref();
                s.set_read_timeout(read).and(s.set_write_timeout(write))
            }
        }
    }

    fn set_read_timeout(&self, read: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(read),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(read),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.get_ref().set_read_timeout(read),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A second handle on a connection's socket, to shut it down from another
/// thread (which wakes a thread blocked reading it).
pub(crate) enum Closer {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Closer {
    pub(crate) fn close(&self) {
        let _ = match self {
            Closer::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            #[cfg(unix)]
            Closer::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

/// Reads that resume after EINTR until `deadline`, with the time left.
struct Patient<'a> {
    stream: &'a mut Stream,
    deadline: Instant,
    /// Set when the socket's receive timeout was shortened.
    shortened: &'a mut bool,
}

impl Read for Patient<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    let left = self.deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                    self.stream.set_read_timeout(Some(left))?;
                    *self.shortened = true;
                }
                r => return r,
            }
        }
    }
}

/// A connection to one server.
pub(crate) struct Wire {
    stream: Stream,
    parser: redis::Parser,
    db: i64,
    /// Bound on each send and on each reply.
    timeout: Duration,
    /// The socket's receive timeout is not `timeout` (see [`Patient`]).
    shortened: bool,
    /// False after an I/O error: a late reply would be taken for the next.
    open: bool,
}

impl Wire {
    /// Connect to `info`'s server and authenticate, all within
    /// `connect_timeout`; later sends and replies are bounded by `timeout`.
    pub(crate) fn connect(
        info: &ConnectionInfo,
        tls: Option<&Tls>,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> RedisResult<Wire> {
        let deadline = Instant::now() + connect_timeout;
        let stream = match info.addr() {
            ConnectionAddr::Tcp(host, port) => Stream::Tcp(tcp(host, *port, deadline)?),
            #[cfg(feature = "tls")]
            ConnectionAddr::TcpTls { host, port, .. } => {
                let Some(tls) = tls else {
                    return Err(config_error("a rediss:// server needs TLS settings"));
                };
                let name = rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|_| config_error("the host name is not valid for TLS"))?;
                let session = rustls::ClientConnection::new(tls.config.clone(), name)
                    .map_err(|e| io::Error::other(e.to_string()))?;
                let sock = tcp(host, *port, deadline)?;
                Stream::Tls(Box::new(rustls::StreamOwned::new(session, sock)))
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => Stream::Unix(retry(|| UnixStream::connect(path))?),
            _ => {
                let _ = tls;
                return Err(config_error(
                    "this build of redislock has no TLS support (the `tls` feature)",
                ));
            }
        };
        let settings = info.redis_settings();
        let mut wire = Wire {
            stream,
            parser: redis::Parser::new(),
            db: settings.db(),
            timeout,
            shortened: false,
            open: true,
        };
        // The handshake (TLS, then AUTH and SELECT in one round trip) is
        // bounded by what is left of the connect timeout.
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut).into());
        }
        wire.stream.set_timeouts(Some(left), Some(left))?;
        let mut hello = redis::pipe();
        if let Some(password) = settings.password() {
            let auth = hello.cmd("AUTH");
            if let Some(user) = settings.username() {
                auth.arg(user);
            }
            auth.arg(password);
        }
        if wire.db != 0 {
            hello.cmd("SELECT").arg(wire.db);
        }
        let count = usize::from(settings.password().is_some()) + usize::from(wire.db != 0);
        if count > 0 {
            let replies = wire.exchange(&hello.get_packed_pipeline(), count, deadline)?;
            for reply in replies {
                reply.extract_error()?;
            }
        }
        wire.stream.set_timeouts(Some(timeout), Some(timeout))?;
        Ok(wire)
    }

    /// A handle that shuts this connection's socket down.
    pub(crate) fn closer(&self) -> io::Result<Closer> {
        Ok(match &self.stream {
            Stream::Tcp(s) => Closer::Tcp(s.try_clone()?),
            #[cfg(unix)]
            Stream::Unix(s) => Closer::Unix(s.try_clone()?),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Closer::Tcp(s.get_ref().try_clone()?),
        })
    }

    /// Bound each later send and reply by `timeout`.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> RedisResult<()> {
        self.timeout = timeout;
        self.stream.set_timeouts(Some(timeout), Some(timeout))?;
        self.shortened = false;
        Ok(())
    }

    /// Send `bytes`, then read `count` replies, the last by `deadline`.
    fn exchange(
        &mut self,
        bytes: &[u8],
        count: usize,
        deadline: Instant,
    ) -> RedisResult<Vec<Value>> {
        self.send(bytes)?;
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            replies.push(self.read_by(deadline)?);
        }
        Ok(replies)
    }

    /// Write all of `bytes` (std's `write_all` already resumes after EINTR).
    fn send(&mut self, bytes: &[u8]) -> RedisResult<()> {
        if !self.open {
            return Err(io::Error::from(io::ErrorKind::NotConnected).into());
        }
        if self.shortened {
            self.stream.set_read_timeout(Some(self.timeout))?;
            self.shortened = false;
        }
        let r = self.stream.write_all(bytes).and_then(|_| loop {
            match self.stream.flush() {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        });
        if r.is_err() {
            self.open = false;
        }
        Ok(r?)
    }

    /// One reply (or pushed message) by `deadline`.
    fn read_by(&mut self, deadline: Instant) -> RedisResult<Value> {
        let reader = Patient {
            stream: &mut self.stream,
            deadline,
            shortened: &mut self.shortened,
        };
        let r = self.parser.parse_value(reader);
        if r.is_err() {
            self.open = false;
        }
        r
    }

    /// SUBSCRIBE to `channel` and read the confirmation.
    pub(crate) fn subscribe(&mut self, channel: &str) -> RedisResult<()> {
        let cmd = redis::cmd("SUBSCRIBE").arg(channel).get_packed_command();
        let deadline = Instant::now() + self.timeout;
        let reply = self
            .exchange(&cmd, 1, deadline)?
            .remove(0)
            .extract_error()?;
        match reply {
            Value::Array(ref parts) if parts.len() == 3 => Ok(()),
            other => Err(redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected reply to SUBSCRIBE",
                format!("{other:?}"),
            ))),
        }
    }

    /// On a subscribed connection: the payload of the next message, or
    /// `Ok(None)` when none came by `deadline`. A signal does not end the
    /// wait unless `interruptible` (then `Ok(None)` at once, and the next
    /// call goes on reading where this one stopped).
    pub(crate) fn next_message(
        &mut self,
        deadline: Instant,
        interruptible: bool,
    ) -> RedisResult<Option<Vec<u8>>> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream.set_read_timeout(Some(left))?;
            self.shortened = true;
            let r = if interruptible {
                // No resuming here: the caller checks its interrupt first.
                self.parser.parse_value(&mut self.stream)
            } else {
                let reader = Patient {
                    stream: &mut self.stream,
                    deadline,
                    shortened: &mut self.shortened,
                };
                self.parser.parse_value(reader)
            };
            match r {
                Ok(Value::Array(mut parts)) if parts.len() == 3 => {
                    if let Value::BulkString(payload) = parts.remove(2) {
                        return Ok(Some(payload));
                    }
                }
                // Replies to anything else (there is nothing else) are skipped.
                Ok(_) => {}
                // The parser keeps what it had read: reading again resumes.
                Err(e) if is_timeout(&e) => return Ok(None),
                Err(e) if interruptible && is_interrupted(&e) => return Ok(None),
                Err(e) => {
                    self.open = false;
                    return Err(e);
                }
            }
        }
    }
}

/// A system call interrupted by a signal (EINTR). redis-rs keeps the
/// `io::Error` to itself; its text carries the OS error number.
pub(crate) fn is_interrupted(e: &redis::RedisError) -> bool {
    e.is_io_error()
        && e.to_string()
            .contains(&format!("(os error {})", libc::EINTR))
}

/// What to do about a certificate that is not trusted (the I/O error then
/// names the certificate).
pub(crate) const UNTRUSTED_HINT: &str =
    "the TLS certificate is not trusted: give its CA with tls_ca_file or the builder's \
     tls_root_cert";

/// A refusal of our credentials (or of a command for want of them).
pub(crate) fn is_auth_error(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
}

/// The error's text. redis-rs never puts the URL in its messages, so this
/// holds no credentials.
pub(crate) fn server_message(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

fn is_timeout(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.to_string().contains("timed out")
}

impl ConnectionLike for Wire {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let deadline = Instant::now() + self.timeout;
        Ok(self.exchange(cmd, 1, deadline)?.remove(0))
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let deadline = Instant::now() + self.timeout;
        let mut replies = self.exchange(cmd, offset + count, deadline)?;
        Ok(replies.split_off(offset))
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.open
    }
}

/// `f` again while a signal interrupts it.
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Connect to the first address of `host` that answers by `deadline`.
fn tcp(host: &str, port: u16, deadline: Instant) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host name has no address");
    for addr in retry(|| (host, port).to_socket_addrs())? {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        // std's connect_timeout polls again after EINTR.
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn config_error(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, what))
}
