//! Opening a client: URLs and builder settings, checked and turned into
//! connection targets and a deployment before any I/O. Never echoes a URL
//! (it may hold a password). Knows how servers are named, not what is sent
//! to them.

use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::deploy::{Deployment, Redlock, Single};
use crate::error::{Error, Result};
use crate::net::cluster::Cluster;
use crate::net::pool::{Endpoint, Pool, Target};
use crate::net::sentinel::Sentinel;
use crate::options::{DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT};

/// What a [`crate::ClientBuilder`] collected besides its URLs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) command_timeout: Option<Duration>,
    pub(crate) node_timeout: Option<Duration>,
    pub(crate) tls_root_cert: Option<Vec<u8>>,
}

impl Settings {
    /// The deployment `urls` name: one server, or Redlock over several.
    pub(crate) fn deployment(&self, urls: &[String]) -> Result<Arc<dyn Deployment>> {
        if urls.is_empty() {
            return Err(Error::invalid("no URL given"));
        }
        // Redlock's per-node timeout: the builder's, else the largest a URL
        // gives (`?node_timeout=`, for callers without a builder).
        let mut node_timeout = self.node_timeout;
        if node_timeout.is_none() {
            for url in urls {
                let query = url.split_once('?').map_or("", |(_, q)| q);
                for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
                    if k == "node_timeout" {
                        let d = parse_duration(&v).map_err(|_| {
                            Error::invalid(format!(
                                "bad node_timeout {v:?} in a URL: use a number with ms, s, m or h"
                            ))
                        })?;
                        node_timeout = Some(node_timeout.map_or(d, |t| t.max(d)));
                    }
                }
            }
        }
        if let Some(d) = node_timeout {
            if d.is_zero() || d > Duration::from_secs(3600) {
                return Err(Error::invalid(format!(
                    "node timeout must be between 1 ms and 1 hour, got {d:?}"
                )));
            }
        }
        let mut pools = urls
            .iter()
            .map(|url| self.target(url).map(Pool::new))
            .collect::<Result<Vec<_>>>()?;
        Ok(if pools.len() == 1 {
            Arc::new(Single::new(Arc::new(pools.remove(0))))
        } else {
            Arc::new(Redlock::new(pools, node_timeout))
        })
    }

    /// Where `url` (one server, Sentinel or Cluster) leads, and its timeouts.
    pub(crate) fn target(&self, url: &str) -> Result<Target> {
        if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            return self.sentinel_target(rest);
        }
        if let Some(rest) = url.strip_prefix("redis+cluster://") {
            return self.cluster_target(rest);
        }
        if url.starts_with("rediss+sentinel://") || url.starts_with("rediss+cluster://") {
            return Err(Error::invalid(
                "TLS to Sentinel (rediss+sentinel://) is not supported yet",
            ));
        }
        let parsed = ParsedUrl::parse(url)?;
        let (connect_timeout, command_timeout) = self.timeouts(&parsed.options)?;
        let root_cert = match (&self.tls_root_cert, &parsed.options.tls_ca_file) {
            (Some(pem), _) => Some(pem.clone()),
            (None, Some(path)) => Some(
                std::fs::read(path)
                    .map_err(|e| Error::invalid(format!("cannot read tls_ca_file {path}: {e}")))?,
            ),
            (None, None) => None,
        };
        let info = parsed.url.as_str().into_connection_info().map_err(|e| {
            Error::invalid(format!(
                "{} ({})",
                url_help(),
                e.detail().unwrap_or(&e.to_string())
            ))
        })?;
        // No CLIENT SETINFO after connecting: it would cost every new
        // connection (every fresh PHP process) one more round trip.
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(settings);
        let addr = match info.addr() {
            ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
            ConnectionAddr::Unix(path) => path.display().to_string(),
            other => format!("{other:?}"),
        };
        let tls = match (info.addr(), root_cert) {
            (ConnectionAddr::TcpTls { insecure: true, .. }, _) => {
                return Err(Error::invalid(
                    "#insecure (TLS without checking the certificate) is not supported: \
                     give the server's CA with tls_ca_file instead",
                ))
            }
            #[cfg(feature = "tls")]
            (ConnectionAddr::TcpTls { .. }, pem) => Some(
                crate::net::wire::Tls::new(pem.as_deref())
                    .map_err(|e| Error::invalid(format!("TLS: {e}")))?,
            ),
            #[cfg(not(feature = "tls"))]
            (ConnectionAddr::TcpTls { .. }, _) => {
                return Err(Error::invalid(
                    "this build of redislock has no TLS support (the `tls` feature)",
                ))
            }
            (_, Some(_)) => {
                return Err(Error::invalid(
                    "a TLS root certificate was given for a URL that is not rediss://",
                ))
            }
            (_, None) => None,
        };
        Ok(Target {
            endpoint: Endpoint::Direct(info),
            wait_replicas: parsed.options.wait_replicas()?,
            addr,
            tls,
            connect_timeout,
            command_timeout,
        })
    }

    fn timeouts(&self, options: &UrlOptions) -> Result<(Duration, Duration)> {
        let connect_timeout = self
            .connect_timeout
            .or(options.connect_timeout)
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let command_timeout = self
            .command_timeout
            .or(options.command_timeout)
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        for (name, d) in [
            ("connect timeout", connect_timeout),
            ("command timeout", command_timeout),
        ] {
            if d.is_zero() || d > Duration::from_secs(3600) {
                return Err(Error::invalid(format!(
                    "{name} must be between 1 ms and 1 hour, got {d:?}"
                )));
            }
        }
        Ok((connect_timeout, command_timeout))
    }

    fn cluster_target(&self, rest: &str) -> Result<Target> {
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut options = UrlOptions::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            if !options.take(&k, &v)? {
                return Err(Error::invalid(format!(
                    "unknown parameter {k:?} in the Cluster URL"
                )));
            }
        }
        if options.wait_replicas()?.is_some() {
            return Err(Error::invalid(
                "wait_replicas is not supported with Cluster yet",
            ));
        }
        let cluster = cluster(rest)?;
        let (connect_timeout, command_timeout) = self.timeouts(&options)?;
        Ok(Target {
            addr: cluster.describe(),
            endpoint: Endpoint::Cluster(std::sync::Arc::new(cluster)),
            wait_replicas: None,
            tls: None,
            connect_timeout,
            command_timeout,
        })
    }

    fn sentinel_target(&self, rest: &str) -> Result<Target> {
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut options = UrlOptions::default();
        let mut db = 0;
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "db" => {
                    db = v
                        .parse()
                        .map_err(|_| Error::invalid(format!("bad db {v:?} in the Sentinel URL")))?
                }
                _ => {
                    if !options.take(&k, &v)? {
                        return Err(Error::invalid(format!(
                            "unknown parameter {k:?} in the Sentinel URL"
                        )));
                    }
                }
            }
        }
        let sentinel = sentinel(rest, db)?;
        let (connect_timeout, command_timeout) = self.timeouts(&options)?;
        Ok(Target {
            addr: sentinel.describe(),
            endpoint: Endpoint::Sentinel(sentinel),
            wait_replicas: options.wait_replicas()?,
            tls: None,
            connect_timeout,
            command_timeout,
        })
    }
}

/// `user:password@` (with the `@`, or empty) and the rest of a URL body.
fn split_auth(rest: &str) -> (&str, &str) {
    match rest.rfind('@') {
        Some(i) => (&rest[..=i], &rest[i + 1..]),
        None => ("", rest),
    }
}

/// `host:port[,host:port…]` of Sentinel and Cluster URLs; `help` explains
/// the expected form in errors.
fn host_list<'a>(list: &'a str, help: &str) -> Result<Vec<(&'a str, u16)>> {
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

/// The part of a Sentinel URL after `redis+sentinel://` and before any `?`.
fn sentinel(rest: &str, db: i64) -> Result<Sentinel> {
    let help = "invalid Sentinel URL: expected \
                redis+sentinel://[user:password@]host:port[,host:port…]/service_name[?db=N]";
    let (auth, rest) = split_auth(rest);
    let (hosts, service) = rest
        .split_once('/')
        .ok_or_else(|| Error::invalid(format!("{help} (no service name)")))?;
    let service = service.trim_end_matches('/');
    if service.is_empty() || service.contains('/') {
        return Err(Error::invalid(format!("{help} (no service name)")));
    }
    let mut sentinels = Vec::new();
    for (host, port) in host_list(hosts, help)? {
        let addr = format!("{host}:{port}");
        let info: ConnectionInfo = format!("redis://{addr}")
            .as_str()
            .into_connection_info()
            .map_err(|_| Error::invalid(format!("{help} (bad sentinel {addr:?})")))?;
        sentinels.push((addr, info));
    }
    Ok(Sentinel::new(
        sentinels,
        service.to_string(),
        format!("redis://{auth}"),
        db,
    ))
}

/// The part of a Cluster URL after `redis+cluster://` and before any `?`.
fn cluster(rest: &str) -> Result<Cluster> {
    let help =
        "invalid Cluster URL: expected redis+cluster://[user:password@]host:port[,host:port…]";
    let (auth, hosts) = split_auth(rest);
    let seeds: Vec<String> = host_list(hosts.trim_end_matches('/'), help)?
        .into_iter()
        .map(|(host, port)| format!("{host}:{port}"))
        .collect();
    let auth = format!("redis://{auth}");
    for node in &seeds {
        format!("{auth}{node}")
            .as_str()
            .into_connection_info()
            .map_err(|e| {
                Error::invalid(format!("{help} ({})", e.detail().unwrap_or(&e.to_string())))
            })?;
    }
    Ok(Cluster::new(auth, seeds, None))
}

/// redislock's own URL parameters.
#[derive(Default)]
struct UrlOptions {
    connect_timeout: Option<Duration>,
    command_timeout: Option<Duration>,
    tls_ca_file: Option<String>,
    wait_replicas: Option<u32>,
    wait_timeout: Option<Duration>,
}

impl UrlOptions {
    /// Take `k=v` if it is one of ours.
    fn take(&mut self, k: &str, v: &str) -> Result<bool> {
        match k {
            "connect_timeout" => self.connect_timeout = Some(parse_duration(v)?),
            "command_timeout" => self.command_timeout = Some(parse_duration(v)?),
            "tls_ca_file" => self.tls_ca_file = Some(v.to_string()),
            "wait_replicas" => {
                self.wait_replicas = Some(v.parse().map_err(|_| {
                    Error::invalid(format!("wait_replicas must be a number, got {v:?}"))
                })?)
            }
            "wait_timeout" => self.wait_timeout = Some(parse_duration(v)?),
            // Read by `Settings::deployment` (Redlock only).
            "node_timeout" => {
                parse_duration(v)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn wait_replicas(&self) -> Result<Option<(u32, Duration)>> {
        match (self.wait_replicas, self.wait_timeout) {
            (None | Some(0), None) => Ok(None),
            (None | Some(0), Some(_)) => Err(Error::invalid("wait_timeout needs wait_replicas")),
            (Some(n), t) => {
                let t = t.unwrap_or(Duration::from_millis(100));
                if t.is_zero() {
                    return Err(Error::invalid(
                        "wait_timeout must be at least 1 ms (0 would wait forever)",
                    ));
                }
                Ok(Some((n, t)))
            }
        }
    }
}

fn url_help() -> &'static str {
    "invalid Redis URL: expected redis://[user:password@]host:port[/db], \
     rediss://… (TLS) or unix:///path/to/redis.sock[?db=N]"
}

/// The URL minus redislock's own query parameters.
struct ParsedUrl {
    url: url::Url,
    options: UrlOptions,
}

impl ParsedUrl {
    fn parse(raw: &str) -> Result<ParsedUrl> {
        if raw.trim().is_empty() {
            return Err(Error::invalid(format!("empty URL; {}", url_help())));
        }
        // Never echo the URL itself: it may hold a password.
        let mut url =
            url::Url::parse(raw).map_err(|e| Error::invalid(format!("{} ({e})", url_help())))?;
        match url.scheme() {
            "redis" | "rediss" | "unix" | "redis+unix" => {}
            other => {
                return Err(Error::invalid(format!(
                    "unsupported URL scheme {other:?}; {}",
                    url_help()
                )))
            }
        }
        if matches!(url.scheme(), "redis" | "rediss") && url.host_str().is_none_or(str::is_empty) {
            return Err(Error::invalid(format!(
                "the URL has no host; {}",
                url_help()
            )));
        }
        let mut options = UrlOptions::default();
        let mut kept = Vec::new();
        for (k, v) in url.query_pairs() {
            if !options.take(&k, &v)? {
                kept.push((k.into_owned(), v.into_owned()));
            }
        }
        if kept.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(kept);
        }
        Ok(ParsedUrl { url, options })
    }
}

/// Parse a duration such as `250ms`, `2s`, `1.5s`, `5m`, `1h`; a bare number
/// is seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&t[..i], t[i..].trim()),
        None => (t, "s"),
    };
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(Error::invalid(format!(
                "bad duration {text:?}: use a number with ms, s, m or h"
            )))
        }
    };
    let value: f64 = num.parse().map_err(|_| {
        Error::invalid(format!(
            "bad duration {text:?}: use a number with ms, s, m or h"
        ))
    })?;
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| Error::invalid(format!("bad duration {text:?}: out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn url_options_are_taken_out() {
        let t = Settings::default()
            .target("redis://:pw@127.0.0.1:1/2?connect_timeout=150ms&command_timeout=3s")
            .unwrap();
        assert_eq!(t.connect_timeout, Duration::from_millis(150));
        assert_eq!(t.command_timeout, Duration::from_secs(3));
        assert_eq!(t.addr, "127.0.0.1:1");
        assert!(!t.addr.contains("pw"));
    }

    #[test]
    fn bad_node_timeouts_in_urls_are_refused() {
        for bad in ["?node_timeout=0", "?node_timeout=2h", "?node_timeout=soon"] {
            let urls = vec![
                format!("redis://127.0.0.1:1{bad}"),
                "redis://127.0.0.1:2".to_string(),
            ];
            let e = Settings::default().deployment(&urls).err().expect(bad);
            assert!(
                e.to_string().contains("node_timeout") || e.to_string().contains("node timeout"),
                "{e}"
            );
        }
    }

    #[test]
    fn sentinel_urls_parse() {
        let s = sentinel("u:pw@127.0.0.1:26379,127.0.0.1:26380/mymaster", 2).unwrap();
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
            assert!(sentinel(bad, 0).is_err(), "{bad}");
        }
    }
}
