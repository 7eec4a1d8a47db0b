//! Where a client's connections go and how long they wait: what a
//! deployment is given to reach one server, a Sentinel service's master or
//! a cluster. Nothing here opens a connection.

use std::sync::Arc;
use std::time::Duration;

use redis::ConnectionInfo;

use crate::net::cluster::Cluster;
use crate::net::wire::Tls;

/// Where connections go.
pub(crate) enum Endpoint {
    /// One server.
    Direct(Box<ConnectionInfo>),
    /// The current master of a Sentinel service.
    Sentinel(Arc<crate::net::sentinel::Sentinel>),
    /// A Redis Cluster: commands are routed by key slot (see `cluster`);
    /// waiters subscribe on the node that owns their lock's slot, where the
    /// release script's PUBLISH is counted.
    Cluster(Arc<Cluster>),
}

/// How to reach the server and how long to wait for it.
pub(crate) struct Target {
    pub(crate) endpoint: Endpoint,
    /// Opt-in: after acquiring, wait until this many replicas have the lock
    /// (Redis WAIT), at most this long.
    pub(crate) wait_replicas: Option<(u32, Duration)>,
    /// `host:port` or the socket path: safe to print.
    pub(crate) addr: String,
    /// For `rediss://` URLs (also `rediss+sentinel://`, `rediss+cluster://`,
    /// whose endpoints hold the same settings).
    pub(crate) tls: Option<Tls>,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
}
