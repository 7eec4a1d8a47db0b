//! Redis Sentinel: the master of a service, found through its sentinels.
//!
//! `redis+sentinel://[user:password@]host:port[,host:port…]/service[?db=N]`,
//! or `rediss+sentinel://…` for TLS to the sentinels and to the master.
//! Every new connection asks the sentinels (in turn, each bounded by the
//! connect timeout) for the current master of `service` and connects there,
//! so that after a failover the pool's next connections go to the new
//! master. Pooled connections to a demoted master fail with READONLY (or an
//! I/O error if it died); the pool drops them and retries once on a fresh
//! connection (see `pool`). The URL's user, password and db apply to the
//! master; the sentinels are asked with their own credentials
//! (`sentinel_user`, `sentinel_password`), if any.
//!
//! Hazard, in plain words: Redis replicates asynchronously, so a failover
//! can lose a lock that the old master granted just before it died, and two
//! owners may then exist. The opt-in `?wait_replicas=N&wait_timeout=T`
//! makes an acquisition wait until N replicas have it (Redis `WAIT`), which
//! narrows that window but does not make Redis consistent.

use std::time::Duration;

use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::error::{Error, Result};
use crate::net::wire::{is_auth_error, server_message, Tls, Wire, UNTRUSTED_HINT};

/// How to find the master.
pub(crate) struct Sentinel {
    /// `host:port`, and how to connect (with the sentinels' credentials).
    pub(crate) sentinels: Vec<(String, ConnectionInfo)>,
    pub(crate) service: String,
    /// `redis://[user:password@]` (`rediss://…` for TLS) of the master's URL.
    pub(crate) auth: String,
    pub(crate) db: i64,
    /// For `rediss+sentinel://`: the sentinels and the master alike.
    pub(crate) tls: Option<Tls>,
}

impl Sentinel {
    /// `sentinels`: `host:port` and how to connect; `auth`:
    /// `redis://[user:password@]` (or `rediss://…`) for the master.
    pub(crate) fn new(
        sentinels: Vec<(String, ConnectionInfo)>,
        service: String,
        auth: String,
        db: i64,
        tls: Option<Tls>,
    ) -> Sentinel {
        Sentinel {
            sentinels,
            service,
            auth,
            db,
            tls,
        }
    }

    /// For messages: the sentinels and the service, no credentials.
    pub(crate) fn describe(&self) -> String {
        let list: Vec<&str> = self.sentinels.iter().map(|(a, _)| a.as_str()).collect();
        let tls = if self.tls.is_some() { " (TLS)" } else { "" };
        format!("sentinel {} service {}{tls}", list.join(","), self.service)
    }

    /// Ask the sentinels for the master now: where to connect to it, and
    /// its `host:port` for messages. When no sentinel names it and one
    /// refused our credentials, the error is that refusal (a
    /// [`Error::Server`] naming that sentinel).
    pub(crate) fn master(&self, timeout: Duration) -> Result<(ConnectionInfo, String)> {
        let mut reasons = Vec::new();
        let mut refused = None;
        for (addr, info) in &self.sentinels {
            let answer =
                Wire::connect(info, self.tls.as_ref(), timeout, timeout).and_then(|mut con| {
                    redis::cmd("SENTINEL")
                        .arg("get-master-addr-by-name")
                        .arg(&self.service)
                        .query::<Option<(String, u16)>>(&mut con)
                });
            match answer {
                Ok(Some((host, port))) => {
                    let url = format!("{}{host}:{port}/{}", self.auth, self.db);
                    let info = url
                        .as_str()
                        .into_connection_info()
                        .map_err(|e| Error::invalid(format!("master address from {addr}: {e}")))?;
                    return Ok((info, format!("{host}:{port}")));
                }
                Ok(None) => reasons.push(format!("{addr} does not know {}", self.service)),
                // Also "AUTH called without any password configured".
                Err(e)
                    if is_auth_error(&e) || e.detail().is_some_and(|d| d.starts_with("AUTH")) =>
                {
                    reasons.push(format!("{addr} refused our credentials"));
                    refused.get_or_insert((addr, server_message(&e)));
                }
                Err(e) => reasons.push(format!("{addr}: {}", e.detail().unwrap_or(&e.to_string()))),
            }
        }
        if let Some((addr, message)) = refused {
            return Err(Error::Server {
                addr: format!("sentinel {addr}"),
                message: format!(
                    "{message} (no sentinel named the master: {}; the sentinels' own user and \
                     password are the URL parameters sentinel_user and sentinel_password, the \
                     ones before the @ are the master's)",
                    reasons.join("; ")
                ),
            });
        }
        let untrusted = reasons.iter().any(|r| r.contains("certificate"));
        Err(Error::Connection {
            addr: self.describe(),
            reason: format!("no sentinel named the master ({})", reasons.join("; ")),
            hint: if untrusted {
                String::from(UNTRUSTED_HINT)
            } else {
                format!("connect timeout {timeout:?} per sentinel")
            },
        })
    }

    /// Each sentinel's answer to `SENTINEL CKQUORUM service`: whether the
    /// sentinels it knows could agree on a failover (its text), or why not
    /// (its error, or why it could not be asked).
    pub(crate) fn check_quorum(
        &self,
        timeout: Duration,
    ) -> Vec<(String, std::result::Result<String, String>)> {
        self.sentinels
            .iter()
            .map(|(addr, info)| {
                let answer = Wire::connect(info, self.tls.as_ref(), timeout, timeout)
                    .and_then(|mut con| {
                        redis::cmd("SENTINEL")
                            .arg("CKQUORUM")
                            .arg(&self.service)
                            .query::<String>(&mut con)
                    })
                    .map_err(|e| e.detail().map_or_else(|| e.to_string(), str::to_string));
                (addr.clone(), answer)
            })
            .collect()
    }

    /// `e`, from connecting to the master `master`, naming it.
    pub(crate) fn at_master(&self, e: Error, master: &str) -> Error {
        let here = format!("master {master} of {}", self.describe());
        match e {
            Error::Connection { reason, hint, .. } => Error::Connection {
                addr: here,
                reason,
                hint,
            },
            Error::Server { message, .. } => Error::Server {
                addr: here,
                message,
            },
            other => other,
        }
    }
}
