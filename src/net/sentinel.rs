//! Redis Sentinel: the master of a service, found through its sentinels.
//!
//! `redis+sentinel://[user:password@]host:port[,host:port…]/service[?db=N]`.
//! Every new connection asks the sentinels (in turn, each bounded by the
//! connect timeout) for the current master of `service` and connects there,
//! so that after a failover the pool's next connections go to the new
//! master. Pooled connections to a demoted master fail with READONLY (or an
//! I/O error if it died); the pool drops them and retries once on a fresh
//! connection (see `pool`). Credentials and db apply to the master; the
//! sentinels are asked without credentials.
//!
//! Hazard, in plain words: Redis replicates asynchronously, so a failover
//! can lose a lock that the old master granted just before it died, and two
//! owners may then exist. The opt-in `?wait_replicas=N&wait_timeout=T`
//! makes an acquisition wait until N replicas have it (Redis `WAIT`), which
//! narrows that window but does not make Redis consistent.

use std::time::Duration;

use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::error::{Error, Result};
use crate::net::wire::Wire;

/// How to find the master.
pub(crate) struct Sentinel {
    pub(crate) sentinels: Vec<(String, ConnectionInfo)>,
    pub(crate) service: String,
    /// `redis://[user:password@]` of the master's URL.
    pub(crate) auth: String,
    pub(crate) db: i64,
}

impl Sentinel {
    /// `sentinels`: `host:port` and how to connect; `auth`:
    /// `redis://[user:password@]` for the master.
    pub(crate) fn new(
        sentinels: Vec<(String, ConnectionInfo)>,
        service: String,
        auth: String,
        db: i64,
    ) -> Sentinel {
        Sentinel {
            sentinels,
            service,
            auth,
            db,
        }
    }

    /// For messages: the sentinels and the service, no credentials.
    pub(crate) fn describe(&self) -> String {
        let list: Vec<&str> = self.sentinels.iter().map(|(a, _)| a.as_str()).collect();
        format!("sentinel {} service {}", list.join(","), self.service)
    }

    /// Ask the sentinels for the master now; where to connect to it.
    pub(crate) fn master(&self, timeout: Duration) -> Result<ConnectionInfo> {
        let mut reasons = Vec::new();
        for (addr, info) in &self.sentinels {
            let answer = Wire::connect(info, None, timeout, timeout).and_then(|mut con| {
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&self.service)
                    .query::<Option<(String, u16)>>(&mut con)
            });
            match answer {
                Ok(Some((host, port))) => {
                    let url = format!("{}{host}:{port}/{}", self.auth, self.db);
                    return url
                        .as_str()
                        .into_connection_info()
                        .map_err(|e| Error::invalid(format!("master address from {addr}: {e}")));
                }
                Ok(None) => reasons.push(format!("{addr} does not know {}", self.service)),
                Err(e) => reasons.push(format!("{addr}: {}", e.detail().unwrap_or(&e.to_string()))),
            }
        }
        Err(Error::Connection {
            addr: self.describe(),
            reason: format!("no sentinel named the master ({})", reasons.join("; ")),
            hint: format!("connect timeout {timeout:?} per sentinel"),
        })
    }
}
