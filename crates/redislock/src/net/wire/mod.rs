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
//!
//! Its rooms: `socket` (the stream under it: TCP, TLS or Unix, and a
//! handle that shuts it down), `tls` (the roots a client's connections
//! trust), `inbox` (the bytes read, handed out reply by reply through
//! `resp`'s framer), `timeouts` (how long each send, reply and wait may
//! take, signals or not), `owed` (the replies owed, counted against the
//! commands sent, so that none is handed to the wrong command) and `push`
//! (a subscribed connection's messages). This file is the connection that
//! puts them together: connect, send, read, and the words for what went
//! wrong.

mod inbox;
mod owed;
mod push;
mod socket;
mod timeouts;
mod tls;

pub(crate) use owed::is_stale;
pub(crate) use push::Push;
#[cfg(feature = "tokio")]
pub(crate) use socket::keepalive;
pub(crate) use socket::Closer;
#[cfg(feature = "tls")]
pub(crate) use tls::tls_for;
pub(crate) use tls::{config_error, Tls, NO_TLS};

use std::io::{self, Read, Write};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, RedisResult, Value};

use crate::error::{abridged, protocol_error as protocol};
use inbox::{Inbox, INBOX_KEEP};
use socket::{retry, tcp, Stream};
use timeouts::Patient;
#[cfg(feature = "tls")]
use timeouts::Timed;

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
        self.check_nothing_waits(look)?;
        self.restore_timeout()?;
        let packet = self.owe(bytes, replies);
        let r = self.stream.write_all(&packet).and_then(|_| loop {
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
                self.shorten(left)?;
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::thread;

    /// A connection whose server is the returned socket, past its first
    /// command (see [`Wire::fresh`]).
    pub(super) fn pair() -> (Wire, UnixStream) {
        let (wire, theirs) = fresh_pair();
        let mut wire = wire;
        wire.fresh = false;
        (wire, theirs)
    }

    /// A connection that has sent nothing yet.
    pub(super) fn fresh_pair() -> (Wire, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut wire = Wire::over(Stream::Unix(ours), 0, Duration::from_secs(5));
        wire.set_timeout(Duration::from_secs(5)).unwrap();
        (wire, theirs)
    }

    /// Read one command of `len` bytes, then send `pieces` one by one.
    pub(super) fn answer(
        mut server: UnixStream,
        len: usize,
        pieces: Vec<&'static [u8]>,
    ) -> UnixStream {
        let mut cmd = vec![0; len];
        server.read_exact(&mut cmd).unwrap();
        for p in pieces {
            server.write_all(p).unwrap();
            thread::sleep(Duration::from_millis(5));
        }
        server
    }

    pub(super) fn packed(cmd: &mut redis::Cmd) -> Vec<u8> {
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
}
