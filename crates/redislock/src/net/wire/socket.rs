//! The socket under a connection: TCP, TLS over TCP, or a Unix socket,
//! read and written as one stream; a second handle on it that shuts it
//! down from another thread and polls it without reading; and TCP
//! connections made by a deadline, with keepalive and without Nagle's
//! delay. How long each read and write may wait is `timeouts`'s.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::Instant;

#[cfg(feature = "tls")]
use super::timeouts::Timed;
use super::Wire;

/// A connection's socket.
pub(super) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Timed>>),
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

impl Wire {
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
}

/// `f` again while a signal interrupts it.
pub(super) fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Connect to the first address of `host` that answers by `deadline`.
pub(super) fn tcp(host: &str, port: u16, deadline: Instant) -> io::Result<TcpStream> {
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::time::Duration;

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
