//! What a deployment needs of its connections, written once as async
//! methods so that one wait loop and one set of lock operations serve both
//! the blocking API and the async one. The blocking pool answers every
//! method at once on the calling thread (its futures never suspend, and
//! [`block_on`] runs them in one poll); the async pool awaits its
//! multiplexed connection and tokio's timers.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use redis::{Cmd, Pipeline, Value};

use crate::error::Result;
use crate::net::hub::{Delivery, Ticket};
use crate::net::target::Target;
use crate::protocol::Script;
use crate::stats::Counters;

/// A future run to its end without its caller (see [`Transport::detach`]).
pub(crate) type Detached = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The connections to one server (or one cluster, routed by key slot): a
/// cheap handle, cloned into work that outlives its caller.
pub(crate) trait Transport: Send + Sync + Clone + 'static {
    fn target(&self) -> &Target;

    /// The client's statistics.
    fn stats(&self) -> &Counters;

    /// What the server accepts (learnt from its replies).
    fn caps(&self) -> &crate::protocol::Caps;

    /// Lock names this client recently found held there.
    fn contended(&self) -> &crate::protocol::Contended;

    /// Whether a subscriber may receive messages PUBLISHed on another node
    /// (Cluster broadcasts them; a demoted Sentinel master gets them
    /// replicated).
    fn remote_publish(&self) -> bool;

    fn is_cluster(&self) -> bool;

    /// A release handed the lock to the waiter `nonce` on the subscriber
    /// channel `id`: if that waiter is of this process, tell it now.
    fn hand_here(&self, id: &str, nonce: &str) -> bool;

    /// Whether `ticket`'s subscriber sits on another node than the one
    /// serving `key`'s slot now (a cluster's slot moved): no release there
    /// counts that waiter.
    fn misplaced(&self, ticket: &Ticket, key: &[u8]) -> bool;

    /// Before a hand-off message that came through `ticket` is checked
    /// against the key (see
    /// [`Pool::before_confirming`](crate::net::pool::Pool::before_confirming)).
    fn before_confirming(&self, ticket: &Ticket) -> impl Future<Output = ()> + Send;

    /// Whether a server that cannot be reached may soon have a successor
    /// (see [`Pool::failover_possible`](crate::net::pool::Pool::failover_possible)):
    /// then a wait goes on through the outage, within its deadline.
    fn failover_possible(&self) -> impl Future<Output = bool> + Send;

    /// Run a script (EVALSHA, then EVAL after NOSCRIPT) on the node serving
    /// `keys[0]`. When it is sent again on a fresh connection after the
    /// first sending's connection died, it uses `retry_args` if given: the
    /// first run may have taken effect.
    fn script(
        &self,
        script: &'static Script,
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> impl Future<Output = Result<Value>> + Send;

    /// Like `script` without retry arguments, saying whether it was sent
    /// again after a broken connection (the first run may have taken
    /// effect).
    fn script_resent(
        &self,
        script: &'static Script,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> impl Future<Output = Result<(Value, bool)>> + Send;

    /// One command, routed by its first argument.
    fn query(&self, cmd: &Cmd) -> impl Future<Output = Result<Value>> + Send;

    /// One command given as its arguments, routed by the first one after
    /// the command's name, saying whether it was sent again after a broken
    /// connection (the first sending may have taken effect).
    /// The reply must be one `accepts` takes (else the connection is closed
    /// and the command fails with [`Error::Protocol`](crate::Error::Protocol)).
    fn query_resent(
        &self,
        args: &[&[u8]],
        accepts: crate::protocol::Accepts,
    ) -> impl Future<Output = Result<(Value, bool)>> + Send;

    /// Commands in one round trip, on the node of the first one's key.
    fn pipeline(&self, pipe: &Pipeline) -> impl Future<Output = Result<Vec<Value>>> + Send;

    /// Register a waiter on `key` with the client's subscriber connection
    /// to the node serving it.
    fn register_waiter(&self, key: &[u8]) -> impl Future<Output = Result<Ticket>> + Send;

    /// What came for `ticket` within `d`.
    fn wait(&self, ticket: &Ticket, d: Duration) -> impl Future<Output = Option<Delivery>> + Send;

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send;

    /// Run `f` to its end in the background: a waiting future dropped by
    /// its caller leaves the queue this way. The blocking transport runs it
    /// at once.
    fn detach(&self, f: Detached);
}

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Run a future of the blocking transport on this thread. It is ready at
/// the first poll (nothing in it suspends); should it ever not be, the
/// thread parks until woken.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let waker = Waker::noop();
    if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(waker)) {
        return v;
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
