//! Connections: talking to Redis servers, and nothing of locks. [`wire`] is
//! one connection whose every wait rides out signals, reading replies that
//! [`resp`] delimits; [`pool`] lends them to threads and forgets a parent's
//! connections after `fork()`; [`hub`] shares one subscriber connection per
//! node among a client's waiters and hands each wake-up message to its
//! waiter; [`sentinel`] finds a service's master and [`cluster`] the node
//! serving a key's slot. Above it, the deployments decide what to send;
//! below it, only the protocol's script type and message layout.

#[cfg(feature = "tokio")]
pub(crate) mod async_pool;
pub(crate) mod cluster;
pub(crate) mod hub;
pub(crate) mod pool;
pub(crate) mod resp;
pub(crate) mod sentinel;
pub(crate) mod transport;
pub(crate) mod wire;
