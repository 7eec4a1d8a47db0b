//! The async connections' bytes, read through the blocking transport's
//! framer (`resp`) before redis-rs's parser sees them, with the same rules
//! as `Wire`: only `$-1`/`*-1` are nil (redis-rs reads any negative length
//! as nil), and a reply when none is owed (a reply sent twice, a frame
//! nobody asked for) breaks the connection instead of being handed to the
//! next command. Every reply still goes to redis-rs unchanged; what breaks
//! the rules ends the connection with an I/O error whose text says what
//! came ([`is_protocol`]).

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisResult};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::abridged_bytes;
use crate::net::local::{local_loop, Local, LocalStream};
use crate::net::resp;
#[cfg(feature = "tls")]
use crate::net::wire::tls_for;
use crate::net::wire::{config_error, keepalive, Tls, NO_TLS};

/// How the error of a broken rule starts (see [`is_protocol`]).
const PROTOCOL: &str = "protocol error: the server sent";

/// A stream whose replies are counted against the commands written.
pub(crate) struct Strict<S> {
    inner: S,
    /// The part of a reply read so far.
    replies: Vec<u8>,
    /// The part of a command written so far.
    commands: Vec<u8>,
    /// Commands written and not answered yet.
    owed: usize,
    /// Why the connection broke, once it did.
    broken: Option<String>,
    /// A PING still to write before the first command (as `Wire` sends
    /// one): its PONG must be the first reply, and is not handed on, so
    /// that a frame the server sent unasked is never the first command's
    /// reply.
    ping: &'static [u8],
    /// The PONG is still to come.
    pong_owed: bool,
    /// The PING was answered with this error: if the server then closes
    /// the connection (`ERR max number of clients reached`, protected
    /// mode's `DENIED`), it says why.
    refusal: Option<String>,
}

/// The PING written before the first command.
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

impl<S> Strict<S> {
    pub(crate) fn new(inner: S) -> Strict<S> {
        Strict {
            inner,
            replies: Vec::new(),
            commands: Vec::new(),
            owed: 0,
            broken: None,
            ping: PING,
            pong_owed: true,
            refusal: None,
        }
    }

    /// Count the replies that `replies` now holds whole; the number of
    /// bytes at its start that are the PONG, not to be handed on.
    fn take_replies(&mut self) -> Result<usize, String> {
        let mut pong = 0;
        loop {
            match resp::frame(&self.replies) {
                Ok(Some(len)) if self.pong_owed => {
                    // PONG, or an error (NOAUTH, LOADING): the server's
                    // answer to the PING.
                    let first = self.replies[0];
                    if !(self.replies.starts_with(b"+PONG\r\n") || first == b'-') {
                        return Err(format!(
                            "{PROTOCOL} {} before any command was sent",
                            abridged_bytes(&self.replies)
                        ));
                    }
                    self.pong_owed = false;
                    if first == b'-' {
                        let text = String::from_utf8_lossy(&self.replies[1..len - 2]);
                        self.refusal = Some(text.into_owned());
                    }
                    self.replies.drain(..len);
                    pong = len;
                }
                Ok(Some(len)) => {
                    // A reply: the PING's error refused nothing.
                    self.refusal = None;
                    if self.owed == 0 {
                        return Err(format!(
                            "{PROTOCOL} {} when no reply was owed",
                            abridged_bytes(&self.replies)
                        ));
                    }
                    self.owed -= 1;
                    self.replies.drain(..len);
                }
                Ok(None) => return Ok(pong),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Count the commands that `commands` now holds whole.
    fn count_commands(&mut self) {
        while let Ok(Some(len)) = resp::frame(&self.commands) {
            self.owed += 1;
            self.commands.drain(..len);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Strict<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(why) = &this.broken {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, why.clone())));
            }
            let before = buf.filled().len();
            let read = ready!(Pin::new(&mut this.inner).poll_read(cx, buf));
            let now = buf.filled().len();
            let ended = match &read {
                Ok(()) => now == before,
                Err(e) => matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ),
            };
            if ended {
                // After refusing the connection: the server's words.
                if let Some(why) = this.refusal.take() {
                    // Not "refused" nor "dropped": their words would hide
                    // the server's.
                    return Poll::Ready(Err(io::Error::other(format!(
                        "the server refused the connection: {why}"
                    ))));
                }
            }
            read?;
            if now == before {
                return Poll::Ready(Ok(())); // the end of the stream
            }
            let waiting_for_pong = this.pong_owed;
            // While the PONG is awaited, what was read is held back here.
            let held = this.replies.len();
            this.replies.extend_from_slice(&buf.filled()[before..]);
            let pong = match this.take_replies() {
                Ok(pong) => pong,
                Err(why) => {
                    // What was read is never handed on.
                    buf.set_filled(before);
                    this.broken = Some(why);
                    continue;
                }
            };
            if !waiting_for_pong {
                return Poll::Ready(Ok(()));
            }
            // Until the PONG is whole nothing is handed on; then what
            // follows it.
            let after_pong = if this.pong_owed {
                now
            } else {
                before + (pong - held)
            };
            let filled = buf.filled_mut();
            filled.copy_within(after_pong..now, before);
            buf.set_filled(before + (now - after_pong));
            if buf.filled().len() > before {
                return Poll::Ready(Ok(()));
            }
            // Nothing to hand on yet: read on (the inner stream registers
            // the waker when it has nothing).
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Strict<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        while !this.ping.is_empty() {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, this.ping))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            this.ping = &this.ping[n..];
        }
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.commands.extend_from_slice(&buf[..n]);
        this.count_commands();
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Whether `e` is a connection broken by [`Strict`]'s rules.
pub(crate) fn is_protocol(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Io && e.to_string().contains(PROTOCOL)
}

/// `s` handed to this thread's loop, if it has one.
fn adopted<S>(
    local: &Local,
    s: S,
    into_fd: impl FnOnce(S) -> io::Result<std::os::fd::OwnedFd>,
) -> io::Result<Result<Box<dyn LocalStream>, S>> {
    match local {
        Some(l) => Ok(Ok(l.adopt(into_fd(s)?)?)),
        None => Ok(Err(s)),
    }
}

/// A multiplexed connection to `info`'s server over a [`Strict`] stream,
/// handshake included, within `connect_timeout`.
pub(crate) async fn open(
    info: &ConnectionInfo,
    tls: Option<&Tls>,
    connect_timeout: Duration,
    config: AsyncConnectionConfig,
) -> RedisResult<MultiplexedConnection> {
    let local = local_loop();
    let tcp_fd = |s: tokio::net::TcpStream| Ok(s.into_std()?.into());
    let opening = async {
        match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let s = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                s.set_nodelay(true)?;
                keepalive(&s)?;
                match adopted(&local, s, tcp_fd)? {
                    Ok(s) => mux(info, s, config, &local).await,
                    Err(s) => mux(info, s, config, &local).await,
                }
            }
            #[cfg(feature = "tls")]
            ConnectionAddr::TcpTls { host, port, .. } => {
                let (tls, name) = tls_for(tls, host)?;
                let s = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                s.set_nodelay(true)?;
                keepalive(&s)?;
                let connector = tokio_rustls::TlsConnector::from(tls);
                match adopted(&local, s, tcp_fd)? {
                    Ok(s) => mux(info, connector.connect(name, s).await?, config, &local).await,
                    Err(s) => mux(info, connector.connect(name, s).await?, config, &local).await,
                }
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                let s = tokio::net::UnixStream::connect(path).await?;
                let unix_fd = |s: tokio::net::UnixStream| Ok(s.into_std()?.into());
                match adopted(&local, s, unix_fd)? {
                    Ok(s) => mux(info, s, config, &local).await,
                    Err(s) => mux(info, s, config, &local).await,
                }
            }
            _ => {
                let _ = tls;
                Err(config_error(NO_TLS))
            }
        }
    };
    match tokio::time::timeout(connect_timeout, opening).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::from(io::ErrorKind::TimedOut).into()),
    }
}

async fn mux<S>(
    info: &ConnectionInfo,
    stream: S,
    config: AsyncConnectionConfig,
    local: &Local,
) -> RedisResult<MultiplexedConnection>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let strict = Strict::new(stream);
    let (con, driver) =
        MultiplexedConnection::new_with_config(info.redis_settings(), strict, config).await?;
    // It ends once every handle on the connection is dropped.
    match local {
        Some(l) => l.spawn(Box::pin(driver)),
        None => drop(tokio::spawn(driver)),
    }
    Ok(con)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A server that first sends `unasked`, then answers PING with `pong`
    /// (in two pieces), CLIENT with +OK and GET with `get`.
    fn serve(unasked: &'static [u8], get: &'static [u8]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(unasked).unwrap();
            let mut got = Vec::new();
            let mut chunk = [0; 4096];
            loop {
                while let Ok(Some(len)) = resp::frame(&got) {
                    let cmd = String::from_utf8_lossy(&got[..len]).to_uppercase();
                    got.drain(..len);
                    if cmd.contains("PING") {
                        s.write_all(b"+PO").unwrap();
                        std::thread::sleep(Duration::from_millis(20));
                        s.write_all(b"NG\r\n").unwrap();
                    } else if cmd.contains("GET") {
                        s.write_all(get).unwrap();
                    } else {
                        s.write_all(b"+OK\r\n").unwrap();
                    }
                }
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&chunk[..n]),
                }
            }
        });
        url
    }

    /// GET, `n` times on one connection.
    fn gets(url: &str, n: usize) -> Vec<RedisResult<redis::Value>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let info = redis::IntoConnectionInfo::into_connection_info(url).unwrap();
            let config =
                AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(5)));
            let mut con = match open(&info, None, Duration::from_secs(5), config).await {
                Ok(con) => con,
                Err(e) => return vec![Err(e)],
            };
            let mut out = Vec::new();
            for _ in 0..n {
                out.push(redis::cmd("GET").arg("k").query_async(&mut con).await);
                // The duplicate's time to arrive.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            out
        })
    }

    fn get(url: &str) -> RedisResult<redis::Value> {
        gets(url, 1).remove(0)
    }

    #[test]
    fn the_pong_is_not_handed_on() {
        let url = serve(b"", b"$5\r\nother\r\n");
        assert_eq!(
            get(&url).unwrap(),
            redis::Value::BulkString(b"other".to_vec())
        );
    }

    #[test]
    fn a_frame_sent_unasked_is_never_a_reply() {
        let url = serve(b"$-1\r\n", b"$5\r\nother\r\n");
        let e = get(&url).unwrap_err();
        assert!(is_protocol(&e), "{e}");
        assert!(e.to_string().contains("before any command"), "{e}");
    }

    #[test]
    fn only_minus_one_is_nil() {
        let url = serve(b"", b"$-7\r\n");
        let e = get(&url).unwrap_err();
        assert!(is_protocol(&e), "{e}");
        let url = serve(b"", b"$-1\r\n");
        assert_eq!(get(&url).unwrap(), redis::Value::Nil);
    }

    #[test]
    fn a_refused_connection_is_named_by_the_server() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            // What Redis does at maxclients: an error, then the end.
            s.write_all(b"-ERR max number of clients reached\r\n")
                .unwrap();
            let mut chunk = [0; 4096];
            let _ = s.read(&mut chunk);
        });
        let e = get(&url).unwrap_err();
        assert!(
            e.to_string().contains("max number of clients reached"),
            "{e}"
        );
        assert!(!is_protocol(&e), "{e}");
    }

    #[test]
    fn a_reply_sent_twice_breaks_the_connection() {
        let url = serve(b"", b"$-1\r\n$-1\r\n");
        let replies = gets(&url, 2);
        // The first is read alone (and is the reply) or with the second
        // (then refused at once); the second is never another command's.
        match &replies[0] {
            Ok(v) => assert_eq!(*v, redis::Value::Nil),
            Err(e) => assert!(is_protocol(e), "{e}"),
        }
        assert!(replies[1].is_err(), "{replies:?}");
    }
}
