//! One connection to one Redis server (TCP, TLS or a Unix socket), speaking
//! RESP2 with redis-rs's command types: what is read from the socket goes
//! into a buffer the connection keeps, and replies are taken from it as
//! soon as they are whole (see `resp`), one read per reply in the common
//! case and several replies per read for pipelines.
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

use redis::{Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, RedisResult, Value};

use crate::error::{abridged, abridged_bytes, protocol_error as protocol};
use crate::net::resp;

/// TLS settings shared by every connection of a client: the roots to trust.
#[derive(Clone)]
pub(crate) struct Tls {
    #[cfg(feature = "tls")]
    config: std::sync::Arc<rustls::ClientConfig>,
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
        })
    }
}

enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Timed>>),
}

impl Stream {
    fn set_timeouts(&mut self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => {
                let s = s.get_mut();
                s.deadline = None;
                s.set(read, write)
            }
        }
    }

    fn set_read_timeout(&mut self, read: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(read),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(read),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.get_mut().set(read, None),
        }
    }
}

impl Stream {
    /// Under TLS, bound every read and write on the socket by `deadline`:
    /// one read of decrypted bytes may take many reads of the socket (a
    /// record dribbled byte by byte), and the handshake many of both.
    fn set_deadline(&mut self, deadline: Instant) {
        #[cfg(feature = "tls")]
        if let Stream::Tls(s) = self {
            s.get_mut().deadline = Some(deadline);
        }
        let _ = deadline;
    }
}

/// The socket under a TLS session, whose every read and write ends by the
/// deadline set (see [`Stream::set_deadline`]).
#[cfg(feature = "tls")]
pub(crate) struct Timed {
    sock: TcpStream,
    deadline: Option<Instant>,
    /// The socket's timeouts as last set.
    read: Option<Duration>,
    write: Option<Duration>,
}

#[cfg(feature = "tls")]
impl Timed {
    fn new(sock: TcpStream) -> Timed {
        Timed {
            sock,
            deadline: None,
            read: None,
            write: None,
        }
    }

    /// Set the timeouts given (`None`: leave it).
    fn set(&mut self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        if let Some(r) = read {
            self.sock.set_read_timeout(Some(r))?;
            self.read = Some(r);
        }
        if let Some(w) = write {
            self.sock.set_write_timeout(Some(w))?;
            self.write = Some(w);
        }
        Ok(())
    }

    /// The time left before the deadline, once it is shorter than the
    /// timeout set (by more than a little: no system call when a reply
    /// comes at once). An error once it has passed.
    fn left(&self, set: Option<Duration>) -> io::Result<Option<Duration>> {
        let Some(deadline) = self.deadline else {
            return Ok(None);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let shorter = set.is_none_or(|set| left + Duration::from_millis(5) < set);
        Ok(shorter.then_some(left))
    }
}

#[cfg(feature = "tls")]
impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(left) = self.left(self.read)? {
            self.set(Some(left), None)?;
        }
        self.sock.read(buf)
    }
}

#[cfg(feature = "tls")]
impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(left) = self.left(self.write)? {
            self.set(None, Some(left))?;
        }
        self.sock.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
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

    /// Whether the socket has something to read now (bytes, or its end),
    /// without reading or waiting.
    pub(crate) fn readable(&self) -> bool {
        use std::os::fd::AsRawFd;
        let fd = match self {
            Closer::Tcp(s) => s.as_raw_fd(),
            #[cfg(unix)]
            Closer::Unix(s) => s.as_raw_fd(),
        };
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one initialised pollfd for an open descriptor, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n > 0 && p.revents != 0
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

/// Bytes read from the server and not yet handed out as replies.
struct Inbox {
    /// Zeroed once when made (or grown): reads go straight into it.
    buf: Vec<u8>,
    /// The bytes not handed out yet are `buf[start..end]`.
    start: usize,
    end: usize,
}

/// The size of a connection's read buffer: replies to lock commands take
/// a few dozen bytes.
const INBOX: usize = 4096;
/// A buffer grown beyond this for a large reply goes back to [`INBOX`]
/// once empty.
const INBOX_KEEP: usize = 64 * 1024;

impl Inbox {
    fn new() -> Inbox {
        Inbox {
            buf: vec![0; INBOX],
            start: 0,
            end: 0,
        }
    }

    /// The next reply, if all of it was read.
    fn take(&mut self) -> RedisResult<Option<Value>> {
        let unread = &self.buf[self.start..self.end];
        let Some(len) = resp::frame(unread)? else {
            return Ok(None);
        };
        let value = resp::decode(&unread[..len]);
        self.start += len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > INBOX_KEEP {
                *self = Inbox::new();
            }
        }
        value.map(Some)
    }

    /// Where the next read goes: after the part of a reply read so far
    /// (moved to the front first), in a buffer grown when that part fills
    /// it.
    fn room(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into [`Inbox::room`].
    fn filled(&mut self, n: usize) {
        self.end += n;
    }
}

/// A connection to one server.
pub(crate) struct Wire {
    stream: Stream,
    inbox: Inbox,
    /// The command being sent, packed (kept for the next one).
    outbox: Vec<u8>,
    db: i64,
    /// Bound on each send and on each reply.
    timeout: Duration,
    /// The socket's receive timeout is not `timeout` (see [`Patient`]).
    shortened: bool,
    /// False after an I/O error: a late reply would be taken for the next.
    open: bool,
    /// Replies the server owes: commands sent and not answered yet. A
    /// reply when none is owed, or bytes after the last one owed, mean the
    /// connection is out of step (a reply sent twice, a frame nobody asked
    /// for): it is closed, never read on.
    owed: usize,
    /// The first command goes with a PING whose PONG must come first: a
    /// frame the server sent before being asked anything is then not taken
    /// for that command's reply. Set on a connection that had no handshake.
    fresh: bool,
    /// The PONG of the first command's PING is still to come.
    pong_owed: bool,
    /// The server answered that PING with an error: if it then closes the
    /// connection, this error (`ERR max number of clients reached`, a
    /// protected mode's `DENIED`) says why, not the end of the stream.
    refusal: Option<redis::RedisError>,
    /// Subscribed: the server sends messages unasked.
    subscribed: bool,
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
                let (config, name) = tls_for(tls, host)?;
                let session = rustls::ClientConnection::new(config, name)
                    .map_err(|e| io::Error::other(e.to_string()))?;
                let sock = tcp(host, *port, deadline)?;
                Stream::Tls(Box::new(rustls::StreamOwned::new(
                    session,
                    Timed::new(sock),
                )))
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => Stream::Unix(retry(|| UnixStream::connect(path))?),
            _ => {
                let _ = tls;
                return Err(config_error(NO_TLS));
            }
        };
        let settings = info.redis_settings();
        let mut wire = Wire::over(stream, settings.db(), timeout);
        // The handshake (TLS, then AUTH and SELECT in one round trip) is
        // bounded by what is left of the connect timeout.
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut).into());
        }
        wire.stream.set_timeouts(Some(left), Some(left))?;
        // The TLS handshake too, in the first send.
        wire.stream.set_deadline(deadline);
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
            // The handshake's replies come first: a frame the server sent
            // unasked is read in their place, and is not +OK.
            wire.fresh = false;
            let replies = wire.exchange(&hello.get_packed_pipeline(), 0, count, deadline)?;
            for reply in replies {
                match reply.extract_error()? {
                    Value::Okay => {}
                    other => {
                        wire.open = false;
                        return Err(protocol(format!(
                            "{} in answer to AUTH or SELECT",
                            abridged(&other)
                        )));
                    }
                }
            }
        }
        wire.stream.set_timeouts(Some(timeout), Some(timeout))?;
        Ok(wire)
    }

    fn over(stream: Stream, db: i64, timeout: Duration) -> Wire {
        Wire {
            stream,
            inbox: Inbox::new(),
            outbox: Vec::new(),
            db,
            timeout,
            shortened: false,
            open: true,
            owed: 0,
            fresh: true,
            pong_owed: false,
            refusal: None,
            subscribed: false,
        }
    }

    /// A handle that shuts this connection's socket down.
    pub(crate) fn closer(&self) -> io::Result<Closer> {
        Ok(match &self.stream {
            Stream::Tcp(s) => Closer::Tcp(s.try_clone()?),
            #[cfg(unix)]
            Stream::Unix(s) => Closer::Unix(s.try_clone()?),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Closer::Tcp(s.get_ref().sock.try_clone()?),
        })
    }

    /// Bound each later send and reply by `timeout`.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> RedisResult<()> {
        self.timeout = timeout;
        self.stream.set_timeouts(Some(timeout), Some(timeout))?;
        self.shortened = false;
        Ok(())
    }

    /// Send `bytes`, then read `skip + count` replies, the last by
    /// `deadline`, and return the last `count`.
    fn exchange(
        &mut self,
        bytes: &[u8],
        skip: usize,
        count: usize,
        deadline: Instant,
    ) -> RedisResult<Vec<Value>> {
        self.send(bytes, skip + count)?;
        for _ in 0..skip {
            self.read_by(deadline)?;
        }
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            replies.push(self.read_by(deadline)?);
        }
        Ok(replies)
    }

    /// Write all of `bytes`, `replies` commands (std's `write_all` already
    /// resumes after EINTR). A connection that owes no reply must have
    /// nothing to read: what is there was sent unasked (see [`Wire::owed`]).
    fn send(&mut self, bytes: &[u8], replies: usize) -> RedisResult<()> {
        self.send_looked(bytes, replies, true)
    }

    /// [`Wire::send`]; without `look`, the socket is known to have nothing
    /// to read (a `poll(2)` said so just before): only the bytes already
    /// read are looked at before the command is sent.
    fn send_looked(&mut self, bytes: &[u8], replies: usize, look: bool) -> RedisResult<()> {
        if !self.open {
            return Err(io::Error::from(io::ErrorKind::NotConnected).into());
        }
        if self.owed == 0 && !self.subscribed && (look || self.inbox.start != self.inbox.end) {
            if let Err(e) = self.check_quiet() {
                self.open = false;
                return Err(e);
            }
        }
        if self.shortened {
            self.stream.set_read_timeout(Some(self.timeout))?;
            self.shortened = false;
        }
        self.stream.set_deadline(Instant::now() + self.timeout);
        let r = if self.fresh {
            self.fresh = false;
            self.pong_owed = true;
            let mut both = Vec::with_capacity(PING.len() + bytes.len());
            both.extend_from_slice(PING);
            both.extend_from_slice(bytes);
            self.owed += 1;
            self.stream.write_all(&both)
        } else {
            self.stream.write_all(bytes)
        };
        let r = r.and_then(|_| loop {
            match self.stream.flush() {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        });
        self.owed += replies;
        if r.is_err() {
            self.open = false;
        }
        Ok(r?)
    }

    /// Before a command on a connection that owes no reply: nothing may be
    /// waiting to be read. A closed connection is a dropped one (the
    /// command is sent again on a fresh one); bytes are a protocol error,
    /// found before the command was sent.
    fn check_quiet(&mut self) -> RedisResult<()> {
        if self.inbox.start == self.inbox.end {
            // Under TLS what the socket holds is records (a session ticket
            // is one): only the replies already decrypted are looked at.
            let Some(fd) = self.poll_fd() else {
                return Ok(());
            };
            let room = self.inbox.room();
            // SAFETY: `room` is writable memory of `room.len()` bytes that
            // outlives the call; `fd` is this connection's open socket.
            let n =
                unsafe { libc::recv(fd, room.as_mut_ptr().cast(), room.len(), libc::MSG_DONTWAIT) };
            match n {
                0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
                n if n < 0 => return Ok(()),
                n => self.inbox.filled(n as usize),
            }
        }
        // Before anything was ever sent: a server that refuses a
        // connection says why in an error frame, then closes it.
        if self.fresh {
            if let Ok(Some(reply @ Value::ServerError(_))) = self.inbox.take() {
                return Err(reply.extract_error().unwrap_err());
            }
        }
        let unread = &self.inbox.buf[self.inbox.start..self.inbox.end];
        Err(protocol(format!("{} {STALE}", abridged_bytes(unread))))
    }

    /// The next reply in the inbox, if all of it was read, counted against
    /// what the server owes (see [`Wire::owed`]).
    fn take(&mut self) -> RedisResult<Option<Value>> {
        loop {
            let Some(reply) = self.inbox.take()? else {
                return Ok(None);
            };
            if self.pong_owed {
                self.pong_owed = false;
                self.owed = self.owed.saturating_sub(1);
                // An error reply (LOADING, NOAUTH, …) is the server's answer
                // to the PING: the command gets its own. (A frame sent
                // unasked that was one is harmless: the PONG, taken for the
                // command's reply, is not a reply any command accepts.)
                if matches!(&reply, Value::SimpleString(s) if s == "PONG") {
                    continue;
                }
                if let Value::ServerError(_) = reply {
                    self.refusal = reply.extract_error().err();
                    continue;
                }
                return Err(protocol(format!(
                    "{} before any command was sent",
                    abridged(&reply)
                )));
            }
            // The first command's reply came: the PING's error was no
            // refusal of the connection.
            self.refusal = None;
            if self.subscribed {
                return Ok(Some(reply));
            }
            if self.owed == 0 {
                return Err(protocol(format!(
                    "{} when no reply was owed",
                    abridged(&reply)
                )));
            }
            self.owed -= 1;
            if self.owed == 0 && self.inbox.start != self.inbox.end {
                let extra = &self.inbox.buf[self.inbox.start..self.inbox.end];
                return Err(protocol(format!(
                    "{} after the reply {}",
                    abridged_bytes(extra),
                    abridged(&reply)
                )));
            }
            return Ok(Some(reply));
        }
    }

    /// One reply (or pushed message) by `deadline`.
    fn read_by(&mut self, deadline: Instant) -> RedisResult<Value> {
        let r = self.read(deadline, true);
        if r.is_err() {
            self.open = false;
        }
        r
    }

    /// The next reply: one already read, else what the socket brings, all
    /// of it by `deadline` however the server dribbles it (each read after
    /// the first is bounded by the time left). Reads resume after a signal
    /// if `patient` (see [`Patient`]); otherwise a signal ends the read
    /// (EINTR). Bytes read stay in the inbox whatever happens, so that
    /// after a timeout or a signal the next call goes on where this one
    /// stopped.
    fn read(&mut self, deadline: Instant, patient: bool) -> RedisResult<Value> {
        let mut first = true;
        self.stream.set_deadline(deadline);
        loop {
            if let Some(reply) = self.take()? {
                return Ok(reply);
            }
            if !first {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::from(io::ErrorKind::TimedOut).into());
                }
                self.stream.set_read_timeout(Some(left))?;
                self.shortened = true;
            }
            first = false;
            let room = self.inbox.room();
            let n = if patient {
                Patient {
                    stream: &mut self.stream,
                    deadline,
                    shortened: &mut self.shortened,
                }
                .read(room)
            } else {
                self.stream.read(room)
            };
            let n = match (n, self.refusal.take()) {
                (Ok(n), refusal) => {
                    self.refusal = refusal;
                    n
                }
                // Reset after refusing the connection: the refusal says why.
                (Err(e), Some(refusal))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::BrokenPipe
                    ) =>
                {
                    return Err(refusal)
                }
                (Err(e), _) => return Err(e.into()),
            };
            if n == 0 {
                // The server closed the connection: after refusing it with
                // an error, that error.
                if let Some(e) = self.refusal.take() {
                    return Err(e);
                }
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
            self.inbox.filled(n);
        }
    }

    /// The socket to poll for this connection's replies: none under TLS,
    /// where what the socket brings is records, not replies.
    pub(crate) fn poll_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        match &self.stream {
            Stream::Tcp(s) => Some(s.as_raw_fd()),
            #[cfg(unix)]
            Stream::Unix(s) => Some(s.as_raw_fd()),
            #[cfg(feature = "tls")]
            Stream::Tls(_) => None,
        }
    }

    /// Never use the connection again (a reply that came for another
    /// command, or a part of one, would be taken for the next): it is
    /// closed when dropped, and pools refuse it.
    pub(crate) fn discard(&mut self) {
        self.open = false;
    }

    /// Send a packed command without reading its reply: the caller reads
    /// it later with [`Wire::try_reply`] or [`Wire::reply_by`].
    pub(crate) fn send_command(&mut self, packed: &[u8]) -> RedisResult<()> {
        self.send(packed, 1)
    }

    /// [`Wire::send_command`] on a connection whose socket a `poll(2)`
    /// found with nothing to read just before (`readable` false), or with
    /// something (then it is read first, as ever).
    pub(crate) fn send_command_polled(&mut self, packed: &[u8], readable: bool) -> RedisResult<()> {
        self.send_looked(packed, 1, readable)
    }

    /// The next reply if the bytes that came make one, reading only what
    /// the socket holds now: never waits (a connection with a
    /// [`Wire::poll_fd`]).
    pub(crate) fn try_reply(&mut self) -> RedisResult<Option<Value>> {
        let r = self.try_reply_inner();
        if r.is_err() {
            self.open = false;
        }
        r
    }

    fn try_reply_inner(&mut self) -> RedisResult<Option<Value>> {
        if !self.open {
            return Err(io::Error::from(io::ErrorKind::NotConnected).into());
        }
        if let Some(reply) = self.take()? {
            return Ok(Some(reply));
        }
        let Some(fd) = self.poll_fd() else {
            return Ok(None);
        };
        let room = self.inbox.room();
        // SAFETY: `room` is writable memory of `room.len()` bytes that
        // outlives the call; `fd` is this connection's open socket.
        let n = unsafe { libc::recv(fd, room.as_mut_ptr().cast(), room.len(), libc::MSG_DONTWAIT) };
        match n {
            0 => Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                    _ => Err(e.into()),
                }
            }
            n => {
                self.inbox.filled(n as usize);
                self.take()
            }
        }
    }

    /// The next reply, waited for until `deadline` (past the connection's
    /// own timeout if need be).
    pub(crate) fn reply_by(&mut self, deadline: Instant) -> RedisResult<Value> {
        if !self.open {
            return Err(io::Error::from(io::ErrorKind::NotConnected).into());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.open = false;
            return Err(io::Error::from(io::ErrorKind::TimedOut).into());
        }
        // The next send puts the connection's own timeout back.
        self.stream.set_read_timeout(Some(left))?;
        self.shortened = true;
        self.read_by(deadline)
    }

    /// The next reply if it comes by `by`, else `None`; then the connection
    /// stays usable (what came stays in the inbox, and the reply may still
    /// come).
    pub(crate) fn reply_if_by(&mut self, by: Instant) -> RedisResult<Option<Value>> {
        let left = by.saturating_duration_since(Instant::now());
        self.stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        self.shortened = true;
        match self.read(by, true) {
            Ok(v) => Ok(Some(v)),
            Err(e) if is_timeout(&e) => Ok(None),
            Err(e) => {
                self.open = false;
                Err(e)
            }
        }
    }

    /// On a subscribed connection: send PING, whose reply comes among the
    /// pushes (see [`push_of`]), to learn that the server still hears us.
    pub(crate) fn ping_subscribed(&mut self) -> RedisResult<()> {
        debug_assert!(self.subscribed);
        self.send(PING, 0)
    }

    /// SUBSCRIBE to `channel` and read the confirmation.
    pub(crate) fn subscribe(&mut self, channel: &str) -> RedisResult<()> {
        self.subscribe_as("SUBSCRIBE", channel)
    }

    /// SSUBSCRIBE to the shard channel `channel` (Redis 7 and later) and
    /// read the confirmation.
    pub(crate) fn ssubscribe(&mut self, channel: &str) -> RedisResult<()> {
        self.subscribe_as("SSUBSCRIBE", channel)
    }

    fn subscribe_as(&mut self, command: &str, channel: &str) -> RedisResult<()> {
        let cmd = redis::cmd(command).arg(channel).get_packed_command();
        let deadline = Instant::now() + self.timeout;
        // Messages may follow the confirmation at once.
        self.subscribed = true;
        self.send(&cmd, 1)?;
        let reply = self.read_by(deadline)?.extract_error()?;
        match reply {
            Value::Array(ref parts) if parts.len() == 3 => Ok(()),
            other => Err(redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected reply to a subscription",
                format!("{other:?}"),
            ))),
        }
    }

    /// On a subscribed connection: the payload of the next message, or
    /// `Ok(None)` when none came by `deadline`. A signal does not end the
    /// wait unless `interruptible` (then `Ok(None)` at once, and the next
    /// call goes on reading where this one stopped).
    #[cfg(test)]
    pub(crate) fn next_message(
        &mut self,
        deadline: Instant,
        interruptible: bool,
    ) -> RedisResult<Option<Vec<u8>>> {
        loop {
            match self.next_push(deadline, interruptible)? {
                Some(Push::Message { payload, .. }) => return Ok(Some(payload)),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    /// On a subscribed connection: the next message, or what the server
    /// says of a subscription (`Ok(None)` when nothing came by `deadline`;
    /// `interruptible` as for [`Wire::next_message`]).
    pub(crate) fn next_push(
        &mut self,
        deadline: Instant,
        interruptible: bool,
    ) -> RedisResult<Option<Push>> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let r = match self.take() {
                Ok(Some(reply)) => Ok(reply),
                Ok(None) => {
                    self.stream.set_read_timeout(Some(left))?;
                    self.shortened = true;
                    // Uninterruptible reads resume after a signal; the
                    // others return, for the caller to check its interrupt.
                    self.read(deadline, !interruptible)
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(reply) => {
                    // Replies to anything else (there is nothing else) are skipped.
                    if let Some(push) = push_of(reply) {
                        return Ok(Some(push));
                    }
                }
                // The inbox keeps what was read: reading again resumes.
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

impl Wire {
    /// [`Wire::next_push`] from what the socket holds now, never waiting
    /// (a connection with a [`Wire::poll_fd`]): `Ok(None)` when no whole
    /// push is there (a part of one stays for the next call).
    pub(crate) fn try_push(&mut self) -> RedisResult<Option<Push>> {
        loop {
            match self.try_reply()? {
                Some(reply) => {
                    if let Some(push) = push_of(reply) {
                        return Ok(Some(push));
                    }
                }
                None => return Ok(None),
            }
        }
    }
}

/// The push a subscribed connection's frame is, if it is one (the reply
/// to a PING there, `pong` and its argument, is one of `Push::Other`).
fn push_of(reply: Value) -> Option<Push> {
    let Value::Array(parts) = reply else {
        return None;
    };
    if let [Value::BulkString(kind), Value::BulkString(data)] = &parts[..] {
        if kind.as_slice() == b"pong" {
            return Some(Push::Other {
                kind: kind.clone(),
                channel: data.clone(),
            });
        }
    }
    if parts.len() != 3 {
        return None;
    }
    let mut parts = parts.into_iter();
    let (kind, channel, last) = (parts.next(), parts.next(), parts.next());
    let (Some(Value::BulkString(kind)), Some(Value::BulkString(channel))) = (kind, channel) else {
        return None;
    };
    Some(match (kind.as_slice(), last) {
        (b"message", Some(Value::BulkString(payload))) => Push::Message { channel, payload },
        _ => Push::Other { kind, channel },
    })
}

/// What a subscribed connection receives.
#[derive(Debug)]
pub(crate) enum Push {
    /// A message PUBLISHed on `channel`.
    Message { channel: Vec<u8>, payload: Vec<u8> },
    /// Anything else: `subscribe`, `sunsubscribe` (a shard channel's slot
    /// left the server) and the like, for `channel`.
    Other { kind: Vec<u8>, channel: Vec<u8> },
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

/// What went wrong on a connection, in words.
pub(crate) fn io_reason(e: &redis::RedisError) -> String {
    if e.is_connection_refusal() {
        return String::from("connection refused");
    }
    if e.is_connection_dropped() {
        return String::from("the connection was closed");
    }
    server_message(e)
}

fn is_timeout(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.to_string().contains("timed out")
}

impl ConnectionLike for Wire {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let deadline = Instant::now() + self.timeout;
        self.send(cmd, 1)?;
        self.read_by(deadline)
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        let deadline = Instant::now() + self.timeout;
        let mut packed = std::mem::take(&mut self.outbox);
        packed.clear();
        cmd.write_packed_command(&mut packed);
        let sent = self.send(&packed, 1);
        if packed.capacity() <= INBOX_KEEP {
            self.outbox = packed;
        }
        sent?;
        self.read_by(deadline)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let deadline = Instant::now() + self.timeout;
        self.exchange(cmd, offset, count, deadline)
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
                keepalive(&s)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// TCP keepalive on every connection: an idle connection to a server that
/// vanished (a partition, a host gone without a FIN) fails after about
/// `KEEPALIVE_IDLE` + `KEEPALIVE_COUNT` × `KEEPALIVE_INTERVAL` (8 s) instead
/// of the kernel's two hours, so that a pooled connection or a subscriber
/// (the waiters', a sentinel listener) is not trusted long after the
/// server stopped hearing it.
const KEEPALIVE_IDLE: libc::c_int = 5;
const KEEPALIVE_INTERVAL: libc::c_int = 1;
const KEEPALIVE_COUNT: libc::c_int = 3;

pub(crate) fn keepalive(s: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    let set = |level: libc::c_int, name: libc::c_int, value: libc::c_int| -> io::Result<()> {
        // SAFETY: `value` is a c_int that outlives the call, and its size is
        // the length given; the descriptor is this open socket's.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, KEEPALIVE_IDLE)?;
        set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, KEEPALIVE_INTERVAL)?;
        set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, KEEPALIVE_COUNT)?;
    }
    Ok(())
}

/// The PING sent with a connection's first command (see [`Wire::fresh`]).
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// How a protocol error found before a command was sent ends: the command
/// had no effect, and goes again on a fresh connection (see [`is_stale`]).
const STALE: &str = "waiting on a connection that owed no reply (found before sending a command)";

/// A protocol error found before the command was sent (see [`STALE`]).
pub(crate) fn is_stale(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Parse && e.detail().is_some_and(|d| d.ends_with(STALE))
}

/// What a rediss:// URL gets from a build without the `tls` feature.
pub(crate) const NO_TLS: &str = "this build of redislock has no TLS support (the `tls` feature)";

/// The TLS settings and the server name to check for `host`.
#[cfg(feature = "tls")]
pub(crate) fn tls_for(
    tls: Option<&Tls>,
    host: &str,
) -> RedisResult<(
    std::sync::Arc<rustls::ClientConfig>,
    rustls::pki_types::ServerName<'static>,
)> {
    let Some(tls) = tls else {
        return Err(config_error("a rediss:// server needs TLS settings"));
    };
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|_| config_error("the host name is not valid for TLS"))?;
    Ok((tls.config.clone(), name))
}

pub(crate) fn config_error(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, what))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::thread;

    /// A connection whose server is the returned socket, past its first
    /// command (see [`Wire::fresh`]).
    fn pair() -> (Wire, UnixStream) {
        let (wire, theirs) = fresh_pair();
        let mut wire = wire;
        wire.fresh = false;
        (wire, theirs)
    }

    /// A connection that has sent nothing yet.
    fn fresh_pair() -> (Wire, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut wire = Wire::over(Stream::Unix(ours), 0, Duration::from_secs(5));
        wire.set_timeout(Duration::from_secs(5)).unwrap();
        (wire, theirs)
    }

    /// Read one command of `len` bytes, then send `pieces` one by one.
    fn answer(mut server: UnixStream, len: usize, pieces: Vec<&'static [u8]>) -> UnixStream {
        let mut cmd = vec![0; len];
        server.read_exact(&mut cmd).unwrap();
        for p in pieces {
            server.write_all(p).unwrap();
            thread::sleep(Duration::from_millis(5));
        }
        server
    }

    fn packed(cmd: &mut redis::Cmd) -> Vec<u8> {
        cmd.get_packed_command()
    }

    #[test]
    fn a_reply_split_across_reads_comes_whole() {
        let (mut wire, server) = pair();
        let cmd = packed(redis::cmd("GET").arg("k"));
        let len = cmd.len();
        let t = thread::spawn(move || answer(server, len, vec![b"$6\r", b"\na\r\nb", b"\r\n\r\n"]));
        let v = wire.req_packed_command(&cmd).unwrap();
        assert_eq!(v, Value::BulkString(b"a\r\nb\r\n".to_vec()));
        t.join().unwrap();
        assert!(wire.is_open());
    }

    #[test]
    fn replies_read_together_are_handed_out_in_turn() {
        let (mut wire, server) = pair();
        let mut pipe = redis::pipe();
        pipe.cmd("MULTI").cmd("INCR").arg("k").cmd("EXEC");
        let cmd = pipe.get_packed_pipeline();
        let len = cmd.len();
        // Three replies, and the start of a fourth, in one read.
        let t = thread::spawn(move || {
            answer(
                server,
                len,
                vec![b"+OK\r\n+QUEUED\r\n*1\r\n:1\r\n:4", b"2\r\n"],
            )
        });
        // The start of a fourth that nobody asked for: the connection is
        // out of step. (The second write may come in the same read: then
        // the whole fourth reply is shown, ":42\r\n".)
        let e = wire.req_packed_commands(&cmd, 2, 1).unwrap_err();
        assert_eq!(e.kind(), redis::ErrorKind::Parse, "{e}");
        let shown = e.to_string();
        assert!(
            shown.contains(r#"":4" after the reply"#)
                || shown.contains(r#"":42\r\n" after the reply"#),
            "{e}"
        );
        assert!(!wire.is_open());
        t.join().unwrap();
    }

    #[test]
    fn a_pipeline_s_replies_are_handed_out_in_turn() {
        let (mut wire, server) = pair();
        let mut pipe = redis::pipe();
        pipe.cmd("MULTI").cmd("INCR").arg("k").cmd("EXEC");
        let cmd = pipe.get_packed_pipeline();
        let len = cmd.len();
        let t = thread::spawn(move || {
            answer(server, len, vec![b"+OK\r\n+QUEUED\r\n*1\r", b"\n:1\r\n"])
        });
        let v = wire.req_packed_commands(&cmd, 2, 1).unwrap();
        assert_eq!(v, vec![Value::Array(vec![Value::Int(1)])]);
        assert!(wire.is_open());
        t.join().unwrap();
    }

    #[test]
    fn a_reply_sent_twice_is_never_read_by_the_next_command() {
        // In one read: the reply is refused with what follows it.
        let (mut wire, server) = pair();
        let cmd = packed(redis::cmd("SET").arg("k").arg("t").arg("NX").arg("GET"));
        let len = cmd.len();
        let t = thread::spawn(move || answer(server, len, vec![b"$-1\r\n$-1\r\n"]));
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(e.to_string().contains("after the reply"), "{e}");
        assert!(!wire.is_open());
        t.join().unwrap();

        // Arriving after the reply was read: found before the next command
        // is sent, which is then never sent on that connection.
        let (mut wire, server) = pair();
        let t = thread::spawn(move || {
            let mut s = answer(server, len, vec![b"$-1\r\n"]);
            thread::sleep(Duration::from_millis(50));
            s.write_all(b"$-1\r\n").unwrap();
            s
        });
        assert_eq!(wire.req_packed_command(&cmd).unwrap(), Value::Nil);
        let mut server = t.join().unwrap();
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(is_stale(&e), "{e}");
        assert!(e.to_string().contains(r#""$-1\r\n""#), "{e}");
        assert!(!wire.is_open());
        server.set_nonblocking(true).unwrap();
        let mut got = [0; 64];
        assert!(
            server.read(&mut got).is_err(),
            "the second command was sent"
        );
    }

    #[test]
    fn a_frame_before_the_first_command_is_never_its_reply() {
        let (mut wire, mut server) = fresh_pair();
        server.write_all(b"$-1\r\n").unwrap();
        let cmd = packed(redis::cmd("SET").arg("k").arg("t").arg("NX").arg("GET"));
        // Already there when the command is to be sent: it is not sent.
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(is_stale(&e), "{e}");
        assert!(!wire.is_open());

        // Arriving after the command left: its PING's PONG must come
        // first.
        let (mut wire, server) = fresh_pair();
        let len = PING.len() + cmd.len();
        let t =
            thread::spawn(move || answer(server, len, vec![b"$-1\r\n+PONG\r\n$5\r\nother\r\n"]));
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(e.to_string().contains("before any command"), "{e}");
        t.join().unwrap();

        // A server that answers in turn: the PONG is not the reply.
        let (mut wire, server) = fresh_pair();
        let t = thread::spawn(move || answer(server, len, vec![b"+PONG\r\n$5", b"\r\nother\r\n"]));
        let v = wire.req_packed_command(&cmd).unwrap();
        assert_eq!(v, Value::BulkString(b"other".to_vec()));
        assert!(wire.is_open());
        t.join().unwrap();
    }

    /// A CA and a server certificate for 127.0.0.1 (openssl), as PEM:
    /// (CA, server certificate, server key).
    #[cfg(feature = "tls")]
    fn certs() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        run(&[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.crt", "-days", "2"],
            &[
                "-subj",
                "/CN=ca",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
            ],
        ]
        .concat());
        run(&[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "s.key",
                "-out",
                "s.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat());
        std::fs::write(dir.path().join("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            "s.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "s.crt",
            "-days",
            "2",
            "-extfile",
            "ext",
        ]);
        let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
        (read("ca.crt"), read("s.crt"), read("s.key"))
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_tls_record_dribbled_byte_by_byte_ends_at_the_command_timeout() {
        use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
        let (ca, cert, key) = certs();
        let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(&cert).unwrap()],
            PrivateKeyDer::from_pem_slice(&key).unwrap(),
        )
        .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let server = thread::spawn(move || {
            let (mut sock, _) = listener.accept().unwrap();
            let mut tls = rustls::ServerConnection::new(std::sync::Arc::new(config)).unwrap();
            // The handshake, then the command (with its PING).
            let mut got = Vec::new();
            while got.len() <= PING.len() || !matches!(resp::frame(&got[PING.len()..]), Ok(Some(_)))
            {
                tls.complete_io(&mut sock).unwrap();
                let mut chunk = [0; 1024];
                match tls.reader().read(&mut chunk) {
                    Ok(n) => got.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
            // The PONG and the reply in one record, sent a byte at a time.
            tls.writer()
                .write_all(b"+PONG\r\n$20\r\n01234567890123456789\r\n")
                .unwrap();
            let mut record = Vec::new();
            tls.write_tls(&mut record).unwrap();
            for b in record {
                if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                if sock.write_all(&[b]).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
        let tls = Tls::new(Some(&ca)).unwrap();
        let info =
            redis::IntoConnectionInfo::into_connection_info(format!("rediss://127.0.0.1:{port}/"))
                .unwrap();
        let mut wire = Wire::connect(
            &info,
            Some(&tls),
            Duration::from_secs(5),
            Duration::from_millis(300),
        )
        .unwrap();
        let started = Instant::now();
        let e = wire
            .req_packed_command(&packed(redis::cmd("GET").arg("k")))
            .unwrap_err();
        let took = started.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(e.is_timeout() || e.to_string().contains("timed out"), "{e}");
        // The record (about 60 bytes) takes over a second to come whole:
        // each read is quick, the whole is not.
        assert!(took < Duration::from_millis(1000), "{took:?}");
        drop(wire);
        server.join().unwrap();
    }

    #[test]
    fn a_dribbled_reply_ends_at_the_command_timeout() {
        let (mut wire, server) = pair();
        wire.set_timeout(Duration::from_millis(300)).unwrap();
        let cmd = packed(redis::cmd("GET").arg("k"));
        let len = cmd.len();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let t = thread::spawn(move || {
            let mut server = answer(server, len, vec![]);
            for b in b"$20\r\n01234567890123456789\r\n" {
                if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let _ = server.write_all(&[*b]);
                thread::sleep(Duration::from_millis(100));
            }
        });
        let started = Instant::now();
        let e = wire.req_packed_command(&cmd).unwrap_err();
        let took = started.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(e.is_timeout() || e.to_string().contains("timed out"), "{e}");
        // 27 bytes at 100 ms would take 2.7 s: each read on its own is
        // well within the timeout; the whole is not.
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert!(!wire.is_open());
        t.join().unwrap();
    }

    #[test]
    fn a_large_reply_grows_the_inbox_for_a_while() {
        let (mut wire, server) = pair();
        let cmd = packed(redis::cmd("GET").arg("big"));
        let len = cmd.len();
        let body: &'static [u8] = Box::leak(vec![b'x'; 300_000].into_boxed_slice());
        let t = thread::spawn(move || answer(server, len, vec![b"$300000\r\n", body, b"\r\n"]));
        match wire.req_packed_command(&cmd).unwrap() {
            Value::BulkString(b) => assert_eq!(b, body),
            other => panic!("{other:?}"),
        }
        t.join().unwrap();
        assert_eq!(wire.inbox.buf.len(), INBOX);
    }

    #[test]
    fn a_closed_connection_is_a_dropped_connection() {
        let (mut wire, server) = pair();
        let cmd = packed(&mut redis::cmd("PING"));
        let len = cmd.len();
        let t = thread::spawn(move || drop(answer(server, len, vec![b"+PO"])));
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(e.is_connection_dropped(), "{e}");
        assert!(!wire.is_open());
        t.join().unwrap();
    }

    #[test]
    fn garbage_closes_the_connection() {
        let (mut wire, server) = pair();
        let cmd = packed(&mut redis::cmd("PING"));
        let len = cmd.len();
        let t = thread::spawn(move || answer(server, len, vec![b"HTTP/1.1 400\r\n"]));
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert_eq!(e.kind(), redis::ErrorKind::Parse, "{e}");
        assert!(!wire.is_open());
        t.join().unwrap();
    }

    #[test]
    fn server_errors_keep_the_connection() {
        let (mut wire, server) = pair();
        let cmd = packed(redis::cmd("EVALSHA").arg("0").arg(0));
        let len = cmd.len();
        let t =
            thread::spawn(move || answer(server, len, vec![b"-NOSCRIPT No matching script.\r\n"]));
        let e = wire
            .req_packed_command(&cmd)
            .unwrap()
            .extract_error()
            .unwrap_err();
        assert_eq!(
            e.kind(),
            redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
        );
        assert!(wire.is_open());
        t.join().unwrap();
    }

    #[test]
    fn a_reply_late_for_its_first_deadline_is_read_whole_on_the_same_connection() {
        let (mut wire, mut server) = pair();
        wire.send_command(&packed(redis::cmd("GET").arg("k")))
            .unwrap();
        server.write_all(b"$5\r\nhe").unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(wire.reply_if_by(soon).unwrap(), None);
        assert!(wire.is_open(), "a late reply leaves the connection usable");
        server.write_all(b"llo\r\n").unwrap();
        let later = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            wire.reply_if_by(later).unwrap(),
            Some(Value::BulkString(b"hello".to_vec()))
        );
        drop(server);
        assert!(wire.reply_if_by(later).is_err());
        assert!(!wire.is_open());
    }

    #[test]
    fn a_message_cut_by_the_deadline_is_read_whole_next_time() {
        let (mut wire, mut server) = pair();
        wire.subscribed = true;
        server
            .write_all(b"*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$5\r\nhe")
            .unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(wire.next_message(soon, false).unwrap(), None);
        server
            .write_all(b"llo\r\n*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$1\r\n2\r\n")
            .unwrap();
        let later = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            wire.next_message(later, false).unwrap(),
            Some(b"hello".to_vec())
        );
        // The second came in the same read: the inbox has it.
        assert!(wire.inbox.end > 0);
        assert_eq!(wire.next_message(later, true).unwrap(), Some(b"2".to_vec()));
        assert!(wire.is_open());
    }

    /// Every TCP connection has keepalive on, with the short timers above.
    #[test]
    fn tcp_connections_keep_alive() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let info =
            redis::IntoConnectionInfo::into_connection_info(format!("redis://127.0.0.1:{port}"))
                .unwrap();
        let wire =
            Wire::connect(&info, None, Duration::from_secs(5), Duration::from_secs(5)).unwrap();
        let fd = wire.poll_fd().unwrap();
        let get = |level: libc::c_int, name: libc::c_int| {
            let mut value: libc::c_int = -1;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: `value` and `len` are writable and outlive the call.
            let r = unsafe {
                libc::getsockopt(
                    fd,
                    level,
                    name,
                    (&mut value as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            assert_eq!(r, 0, "{}", io::Error::last_os_error());
            value
        };
        assert_eq!(get(libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), KEEPALIVE_IDLE);
        assert_eq!(
            get(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
            KEEPALIVE_INTERVAL
        );
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPCNT), KEEPALIVE_COUNT);
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_NODELAY), 1);
        drop(listener);
    }
}
