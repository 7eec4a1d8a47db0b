//! How long a connection waits. Each send and each reply is bounded by
//! the connection's timeout, set on the socket. A wait with a deadline
//! (the rest of a dribbled reply, a reply awaited longer or only so long,
//! a subscriber's next message) shortens the socket's receive timeout to
//! the time left, and the next send puts the connection's own back. A read
//! that a signal interrupts goes on with the time left ([`Patient`]);
//! under TLS, where one read of decrypted bytes may take many reads of the
//! socket, every read and write of the socket ends by the deadline
//! (`Timed`).

#[cfg(feature = "tls")]
use std::io::Write;
use std::io::{self, Read};
#[cfg(feature = "tls")]
use std::net::TcpStream;
use std::time::{Duration, Instant};

use redis::{RedisResult, Value};

use super::socket::Stream;
use super::Wire;

impl Stream {
    /// Set both of the socket's timeouts (under TLS, the deadline is
    /// dropped: the timeouts alone bound each read and write).
    pub(super) fn set_timeouts(
        &mut self,
        read: Option<Duration>,
        write: Option<Duration>,
    ) -> io::Result<()> {
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

    /// Set the socket's receive timeout.
    pub(super) fn set_read_timeout(&mut self, read: Option<Duration>) -> io::Result<()> {
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
    pub(super) fn set_deadline(&mut self, deadline: Instant) {
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
    pub(super) sock: TcpStream,
    deadline: Option<Instant>,
    /// The socket's timeouts as last set.
    read: Option<Duration>,
    write: Option<Duration>,
}

#[cfg(feature = "tls")]
impl Timed {
    pub(super) fn new(sock: TcpStream) -> Timed {
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

/// Reads that resume after EINTR until `deadline`, with the time left.
pub(super) struct Patient<'a> {
    pub(super) stream: &'a mut Stream,
    pub(super) deadline: Instant,
    /// Set when the socket's receive timeout was shortened.
    pub(super) shortened: &'a mut bool,
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

impl Wire {
    /// Bound each later send and reply by `timeout`.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> RedisResult<()> {
        self.timeout = timeout;
        self.stream.set_timeouts(Some(timeout), Some(timeout))?;
        self.shortened = false;
        Ok(())
    }

    /// Wait at most `left` on the socket's next reads; the next send puts
    /// the connection's own timeout back ([`Wire::restore_timeout`]).
    pub(super) fn shorten(&mut self, left: Duration) -> io::Result<()> {
        self.stream.set_read_timeout(Some(left))?;
        self.shortened = true;
        Ok(())
    }

    /// Before a send: the connection's own receive timeout back if a wait
    /// shortened it, and the send's deadline (under TLS) a timeout from now.
    pub(super) fn restore_timeout(&mut self) -> io::Result<()> {
        if self.shortened {
            self.stream.set_read_timeout(Some(self.timeout))?;
            self.shortened = false;
        }
        self.stream.set_deadline(Instant::now() + self.timeout);
        Ok(())
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
        self.shorten(left)?;
        self.read_by(deadline)
    }

    /// The next reply if it comes by `by`, else `None`; then the connection
    /// stays usable (what came stays in the inbox, and the reply may still
    /// come).
    pub(crate) fn reply_if_by(&mut self, by: Instant) -> RedisResult<Option<Value>> {
        let left = by.saturating_duration_since(Instant::now());
        self.shorten(left.max(Duration::from_millis(1)))?;
        match self.read(by, true) {
            Ok(v) => Ok(Some(v)),
            Err(e) if is_timeout(&e) => Ok(None),
            Err(e) => {
                self.open = false;
                Err(e)
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

/// A read or write that ran out of time (redis-rs's own word for it, or
/// the I/O error's).
pub(super) fn is_timeout(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.to_string().contains("timed out")
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    #[cfg(feature = "tls")]
    use crate::net::resp;
    #[cfg(feature = "tls")]
    use crate::net::wire::owed::PING;
    use crate::net::wire::tests::{answer, packed, pair};
    #[cfg(feature = "tls")]
    use crate::net::wire::Tls;
    use redis::ConnectionLike;
    use std::io::Write;
    use std::thread;

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
}
