//! Redis Sentinel: the master of a service, found through its sentinels.
//!
//! `redis+sentinel://[user:password@]host:port[,host:port…]/service[?db=N]`.
//! Every new connection asks the sentinels (in turn, each bounded by the
//! connect timeout) for the current master of `service` and connects there,
//! so that after a failover the pool's next connections go to the new
//! master. Pooled connections to a demoted master fail with READONLY (or an
//! I/O error if it died); the pool drops them and retries once on a fresh
//! connection (see `conn`). Credentials and db apply to the master; the
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
use crate::wire::Wire;

/// `user:password@` (with the `@`, or empty) and the rest of a URL body.
pub(crate) fn split_auth(rest: &str) -> (&str, &str) {
    match rest.rfind('@') {
        Some(i) => (&rest[..=i], &rest[i + 1..]),
        None => ("", rest),
    }
}

/// `host:port[,host:port…]` of Sentinel and Cluster URLs; `help` explains
/// the expected form in errors.
pub(crate) fn host_list<'a>(list: &'a str, help: &str) -> Result<Vec<(&'a str, u16)>> {
    list.split(',')
        .map(|hp| match hp.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() => port
                .parse()
                .map(|port| (host, port))
                .map_err(|_| Error::invalid(format!("{help} (bad port in {hp:?})"))),
            _ => Err(Error::invalid(format!("{help} ({hp:?} is not host:port)"))),
        })
        .collect()
}

/// How to find the master.
pub(crate) struct Sentinel {
    sentinels: Vec<(String, ConnectionInfo)>,
    service: String,
    /// `redis://[user:password@]` of the master's URL.
    auth: String,
    db: i64,
}

fn url_help() -> &'static str {
    "invalid Sentinel URL: expected redis+sentinel://[user:password@]host:port[,host:port…]/service_name[?db=N]"
}

impl Sentinel {
    /// Parse everything after `redis+sentinel://` (query already removed).
    pub(crate) fn parse(rest: &str, db: i64) -> Result<Sentinel> {
        let (auth, rest) = split_auth(rest);
        let (hosts, service) = rest
            .split_once('/')
            .ok_or_else(|| Error::invalid(format!("{} (no service name)", url_help())))?;
        let service = service.trim_end_matches('/');
        if service.is_empty() || service.contains('/') {
            return Err(Error::invalid(format!("{} (no service name)", url_help())));
        }
        let mut sentinels = Vec::new();
        for (host, port) in host_list(hosts, url_help())? {
            let addr = format!("{host}:{port}");
            let info = format!("redis://{addr}")
                .as_str()
                .into_connection_info()
                .map_err(|_| Error::invalid(format!("{} (bad sentinel {addr:?})", url_help())))?;
            sentinels.push((addr, info));
        }
        Ok(Sentinel {
            sentinels,
            service: service.to_string(),
            auth: format!("redis://{auth}"),
            db,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let s = Sentinel::parse("u:pw@127.0.0.1:26379,127.0.0.1:26380/mymaster", 2).unwrap();
        assert_eq!(s.sentinels.len(), 2);
        assert_eq!(s.service, "mymaster");
        assert_eq!(s.auth, "redis://u:pw@");
        assert!(!s.describe().contains("pw"));
        for bad in [
            "127.0.0.1:1",
            "127.0.0.1:1/",
            "127.0.0.1/x",
            ":1/x",
            "127.0.0.1:99999/x",
        ] {
            assert!(Sentinel::parse(bad, 0).is_err(), "{bad}");
        }
    }
}
