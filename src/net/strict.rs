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

use crate::net::resp;
use crate::net::wire::{abridged_bytes, Tls};

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
}

impl<S> Strict<S> {
    pub(crate) fn new(inner: S) -> Strict<S> {
        Strict {
            inner,
            replies: Vec::new(),
            commands: Vec::new(),
            owed: 0,
            broken: None,
        }
    }

    /// Count the replies that `replies` now holds whole.
    fn take_replies(&mut self) -> Result<(), String> {
        loop {
            match resp::frame(&self.replies) {
                Ok(Some(len)) => {
                    if self.owed == 0 {
                        return Err(format!(
                            "{PROTOCOL} {} when no reply was owed",
                            abridged_bytes(&self.replies)
                        ));
                    }
                    self.owed -= 1;
                    self.replies.drain(..len);
                }
                Ok(None) => return Ok(()),
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
        if let Some(why) = &this.broken {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, why.clone())));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let new = &buf.filled()[before..];
        if !new.is_empty() {
            this.replies.extend_from_slice(new);
            if let Err(why) = this.take_replies() {
                // What was read is never handed on.
                buf.set_filled(before);
                this.broken = Some(why.clone());
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, why)));
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Strict<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
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

/// A multiplexed connection to `info`'s server over a [`Strict`] stream,
/// handshake included, within `connect_timeout`.
pub(crate) async fn open(
    info: &ConnectionInfo,
    tls: Option<&Tls>,
    connect_timeout: Duration,
    config: AsyncConnectionConfig,
) -> RedisResult<MultiplexedConnection> {
    let opening = async {
        match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let s = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                s.set_nodelay(true)?;
                mux(info, s, config).await
            }
            #[cfg(feature = "tls")]
            ConnectionAddr::TcpTls { host, port, .. } => {
                let Some(tls) = tls else {
                    return Err(config_error("a rediss:// server needs TLS settings"));
                };
                let name = rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|_| config_error("the host name is not valid for TLS"))?;
                let s = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                s.set_nodelay(true)?;
                let connector = tokio_rustls::TlsConnector::from(tls.client_config());
                mux(info, connector.connect(name, s).await?, config).await
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                mux(info, tokio::net::UnixStream::connect(path).await?, config).await
            }
            _ => {
                let _ = tls;
                Err(config_error(
                    "this build of redislock has no TLS support (the `tls` feature)",
                ))
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
) -> RedisResult<MultiplexedConnection>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let strict = Strict::new(stream);
    let (con, driver) =
        MultiplexedConnection::new_with_config(info.redis_settings(), strict, config).await?;
    // It ends once every handle on the connection is dropped.
    tokio::spawn(driver);
    Ok(con)
}

fn config_error(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, what))
}
