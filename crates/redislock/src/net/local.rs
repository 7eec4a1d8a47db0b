//! An event loop other than tokio's that drives the async connections
//! opened on its thread: the Node.js addon's (its calls run on the
//! JavaScript thread, and a reply completes them there, without a hop to
//! the runtime's thread and back). The loop reports sockets' readiness and
//! polls the connections' drivers; the bytes, the framing rules, the
//! timeouts and everything above them stay the core's.
//!
//! A future that finds a loop on its thread is one that loop polls, always
//! on that thread: the loop never moves its futures to another.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

/// A connected socket whose readiness the loop reports.
pub trait LocalStream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<S: AsyncRead + AsyncWrite + Send + Unpin> LocalStream for S {}

/// What a watcher of a socket says after reading it (see [`LocalLoop::watch`]).
pub enum Watched {
    /// It read what was there: call again when the socket is readable.
    More,
    /// Someone else reads it now: call again soon.
    Busy,
    /// Done with it: stop watching and close the descriptor.
    Done,
}

/// The loop of this thread.
pub trait LocalLoop: Send + Sync {
    /// `fd`, a connected stream socket set non-blocking, read and written
    /// on this thread with its readiness from the loop.
    fn adopt(&self, fd: OwnedFd) -> io::Result<Box<dyn LocalStream>>;
    /// Run `driver` on this thread until it ends.
    fn spawn(&self, driver: Pin<Box<dyn Future<Output = ()> + Send>>);
    /// Run `on_readable` on this thread whenever `fd` (a descriptor of a
    /// socket someone else owns, duplicated for the loop, which closes it)
    /// is readable, until it says [`Watched::Done`]; `on_readable` is
    /// dropped when the loop stops watching, for whatever reason (it says
    /// so, the loop cannot watch the socket, the loop ends). `Err`: it
    /// cannot watch it at all.
    fn watch(&self, fd: OwnedFd, on_readable: Box<dyn FnMut() -> Watched + Send>)
        -> io::Result<()>;
}

/// How connections opened on a thread are driven when not by tokio.
pub type Local = Option<Arc<dyn LocalLoop>>;

thread_local! {
    static LOCAL: RefCell<Local> = const { RefCell::new(None) };
}

/// Connections opened on this thread from now on are driven by `local`
/// (None: by tokio's runtime again).
pub fn set_local_loop(local: Local) {
    LOCAL.with(|l| *l.borrow_mut() = local);
}

/// This thread's loop, if it has one.
pub fn local_loop() -> Local {
    LOCAL.try_with(|l| l.borrow().clone()).ok().flatten()
}
