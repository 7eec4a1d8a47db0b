//! Connections: talking to Redis servers, and nothing of locks.
//!
//! [`resp`] delimits replies; [`wire`] is one connection whose every wait
//! rides out signals; [`sentinel`] finds a service's master
//! and [`cluster`] the node serving a key's slot; [`target`] says where a
//! client's connections go; `local` is an event loop other than tokio's
//! (Node's) that drives the async connections and reads the subscriber on
//! its own thread; [`hub`] shares one subscriber connection per
//! node among a client's waiters and hands each wake-up message to its
//! waiter; [`follow`] moves that subscriber along with a failover;
//! [`transport`] is what a deployment asks of its connections; [`retry`]
//! says when a command runs again; [`pool`] (blocking) and `async_pool` (tokio) answer it, lending
//! connections to threads and tasks and forgetting a parent's after
//! `fork()`; `strict` puts the async connections' bytes through [`resp`]
//! first. Each module uses only those named before it, so there is no
//! circle. Above this layer the deployments decide what to send; below it
//! there is only the protocol's script type and message layout.

#[cfg(feature = "tokio")]
pub(crate) mod async_pool;
pub(crate) mod cluster;
pub(crate) mod follow;
pub(crate) mod hub;
#[cfg(feature = "tokio")]
pub(crate) mod local;
pub(crate) mod pool;
pub(crate) mod resp;
pub(crate) mod retry;
pub(crate) mod sentinel;
#[cfg(feature = "tokio")]
pub(crate) mod strict;
pub(crate) mod target;
pub(crate) mod transport;
pub(crate) mod wire;
