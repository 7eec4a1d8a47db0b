//! Connections: talking to Redis servers, and nothing of locks. [`wire`] is
//! one connection whose every wait rides out signals; [`pool`] lends them
//! to threads, keeps waiters' subscribers and forgets a parent's
//! connections after `fork()`; [`sentinel`] finds a service's master and
//! [`cluster`] the node serving a key's slot. Above it, the deployments
//! decide what to send; below it, only the protocol's script type.

pub(crate) mod cluster;
pub(crate) mod pool;
pub(crate) mod sentinel;
pub(crate) mod wire;
