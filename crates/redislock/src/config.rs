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
use crate::net::pool::Pool;
use crate::net::sentinel::Sentinel;
use crate::net::target::{Endpoint, Target};
use crate::net::wire::Tls;
use crate::options::{DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT};
use crate::stats::Counters;

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
    pub(crate) fn deployment(
        &self,
        urls: &[String],
        stats: &Arc<Counters>,
    ) -> Result<Arc<dyn Deployment>> {
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
            .map(|url| self.target(url).map(|t| Pool::new(t, stats.clone())))
            .collect::<Result<Vec<_>>>()?;
        Ok(if pools.len() == 1 {
            Arc::new(Single::new(Arc::new(pools.remove(0))))
        } else {
            Arc::new(Redlock::new(pools, node_timeout))
        })
    }

    /// Where `url` (one server, Sentinel or Cluster) leads, and its timeouts.
    pub(crate) fn target(&self, url: &str) -> Result<Target> {
        if let Some((rest, tls)) = deployment_url(url, "sentinel") {
            return self.sentinel_target(rest, tls);
        }
        if let Some((rest, tls)) = deployment_url(url, "cluster") {
            return self.cluster_target(rest, tls);
        }
        let parsed = ParsedUrl::parse(url)?;
        let (connect_timeout, command_timeout) = self.timeouts(&parsed.options)?;
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
        let tls = match info.addr() {
            ConnectionAddr::TcpTls { insecure: true, .. } => return Err(insecure_refused()),
            ConnectionAddr::TcpTls { .. } => self.tls(true, &parsed.options)?,
            _ => self.tls(false, &parsed.options)?,
        };
        Ok(Target {
            endpoint: Endpoint::Direct(Box::new(info)),
            wait_replicas: parsed.options.wait_replicas()?,
            addr,
            tls,
            connect_timeout,
            command_timeout,
        })
    }

    /// The TLS settings of a TLS URL (`tls`): the builder's root
    /// certificate, else the URL's `tls_ca_file`, else the system's roots.
    /// `None` for a plain URL, which may then name no root certificate.
    fn tls(&self, tls: bool, options: &UrlOptions) -> Result<Option<Tls>> {
        let root_cert = match (&self.tls_root_cert, &options.tls_ca_file) {
            (Some(pem), _) => Some(pem.clone()),
            (None, Some(path)) => Some(
                std::fs::read(path)
                    .map_err(|e| Error::invalid(format!("cannot read tls_ca_file {path}: {e}")))?,
            ),
            (None, None) => None,
        };
        match (tls, root_cert) {
            (false, None) => Ok(None),
            (false, Some(_)) => Err(Error::invalid(
                "a TLS root certificate was given for a URL that is not TLS \
                 (rediss://, rediss+sentinel:// or rediss+cluster://)",
            )),
            #[cfg(feature = "tls")]
            (true, pem) => Tls::new(pem.as_deref())
                .map(Some)
                .map_err(|e| Error::invalid(format!("TLS: {e}"))),
            #[cfg(not(feature = "tls"))]
            (true, _) => Err(Error::invalid(
                "this build of redislock has no TLS support (the `tls` feature)",
            )),
        }
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

    fn cluster_target(&self, rest: &str, tls: bool) -> Result<Target> {
        let rest = without_fragment(rest)?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut options = UrlOptions::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            if !options.take(&k, &v)? {
                return Err(Error::invalid(format!(
                    "unknown parameter {k:?} in the Cluster URL"
                )));
            }
        }
        let tls = self.tls(tls, &options)?;
        let cluster = cluster(rest, tls.clone())?;
        let (connect_timeout, command_timeout) = self.timeouts(&options)?;
        Ok(Target {
            addr: cluster.describe(),
            endpoint: Endpoint::Cluster(std::sync::Arc::new(cluster)),
            wait_replicas: options.wait_replicas()?,
            tls,
            connect_timeout,
            command_timeout,
        })
    }

    fn sentinel_target(&self, rest: &str, tls: bool) -> Result<Target> {
        let rest = without_fragment(rest)?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut options = UrlOptions::default();
        let mut db = 0;
        let mut auth = SentinelAuth::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "db" => {
                    db = v
                        .parse()
                        .map_err(|_| Error::invalid(format!("bad db {v:?} in the Sentinel URL")))?
                }
                // Never echoed: they are credentials.
                "sentinel_user" => auth.user = Some(v.into_owned()),
                "sentinel_password" => auth.password = Some(v.into_owned()),
                _ => {
                    if !options.take(&k, &v)? {
                        return Err(Error::invalid(format!(
                            "unknown parameter {k:?} in the Sentinel URL"
                        )));
                    }
                }
            }
        }
        let tls = self.tls(tls, &options)?;
        let sentinel = sentinel(rest, db, tls.clone(), &auth)?;
        let (connect_timeout, command_timeout) = self.timeouts(&options)?;
        Ok(Target {
            addr: sentinel.describe(),
            endpoint: Endpoint::Sentinel(std::sync::Arc::new(sentinel)),
            wait_replicas: options.wait_replicas()?,
            tls,
            connect_timeout,
            command_timeout,
        })
    }
}

/// The body of a `redis+KIND://` or `rediss+KIND://` URL, and whether it
/// asks for TLS.
fn deployment_url<'a>(url: &'a str, kind: &str) -> Option<(&'a str, bool)> {
    let rest = url.strip_prefix("redis")?;
    let (tls, rest) = match rest.strip_prefix('s') {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let rest = rest
        .strip_prefix('+')?
        .strip_prefix(kind)?
        .strip_prefix("://")?;
    Some((rest, tls))
}

/// A Sentinel or Cluster URL body without a `#fragment`: they take none
/// (`#insecure` is refused as for one server).
fn without_fragment(rest: &str) -> Result<&str> {
    match rest.split_once('#') {
        None => Ok(rest),
        Some((_, "insecure")) => Err(insecure_refused()),
        // Never echoed: a '#' may be part of a password that was not
        // percent-encoded.
        Some(_) => Err(Error::invalid(
            "a Sentinel or Cluster URL takes no #fragment \
             (percent-encode a '#' in a user name or password as %23)",
        )),
    }
}

fn insecure_refused() -> Error {
    Error::invalid(
        "#insecure (TLS without checking the certificate) is not supported: \
         give the server's CA with tls_ca_file instead",
    )
}

/// The sentinels' own credentials (`sentinel_user`, `sentinel_password`).
#[derive(Default)]
struct SentinelAuth {
    user: Option<String>,
    password: Option<String>,
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

/// The part of a Sentinel URL after `redis+sentinel://` (or
/// `rediss+sentinel://`, with `tls`) and before any `?`.
fn sentinel(rest: &str, db: i64, tls: Option<Tls>, auth: &SentinelAuth) -> Result<Sentinel> {
    let help = "invalid Sentinel URL: expected \
                redis+sentinel://[user:password@]host:port[,host:port…]/service_name[?db=N] \
                (rediss+sentinel:// for TLS)";
    let scheme = if tls.is_some() { "rediss" } else { "redis" };
    let (master_auth, rest) = split_auth(rest);
    let (hosts, service) = rest
        .split_once('/')
        .ok_or_else(|| Error::invalid(format!("{help} (no service name)")))?;
    let service = service.trim_end_matches('/');
    if service.is_empty() || service.contains('/') {
        return Err(Error::invalid(format!("{help} (no service name)")));
    }
    let password = match (&auth.user, &auth.password) {
        (_, Some(p)) if p.is_empty() => {
            return Err(Error::invalid("sentinel_password is empty"));
        }
        (Some(_), None) => {
            return Err(Error::invalid(
                "sentinel_user needs sentinel_password (the sentinels' AUTH takes both)",
            ));
        }
        (_, password) => password.as_deref(),
    };
    let mut sentinels = Vec::new();
    for (host, port) in host_list(hosts, help)? {
        let addr = format!("{host}:{port}");
        let info: ConnectionInfo = format!("{scheme}://{addr}")
            .as_str()
            .into_connection_info()
            .map_err(|_| Error::invalid(format!("{help} (bad sentinel {addr:?})")))?;
        let mut settings = info.redis_settings().clone().set_skip_set_lib_name();
        if let Some(password) = password {
            settings = settings.set_password(password);
            if let Some(user) = auth.user.as_deref().filter(|u| !u.is_empty()) {
                settings = settings.set_username(user);
            }
        }
        sentinels.push((addr, info.set_redis_settings(settings)));
    }
    let master = format!("{scheme}://{master_auth}");
    // The master's URL is made from the sentinels' answer later: check its
    // credentials now.
    format!("{master}{}", sentinels[0].0)
        .as_str()
        .into_connection_info()
        .map_err(|e| {
            Error::invalid(format!("{help} ({})", e.detail().unwrap_or(&e.to_string())))
        })?;
    Ok(Sentinel::new(
        sentinels,
        service.to_string(),
        master,
        db,
        tls,
    ))
}

/// The part of a Cluster URL after `redis+cluster://` (or
/// `rediss+cluster://`, with `tls`) and before any `?`.
fn cluster(rest: &str, tls: Option<Tls>) -> Result<Cluster> {
    let help = "invalid Cluster URL: expected \
                redis+cluster://[user:password@]host:port[,host:port…] \
                (rediss+cluster:// for TLS)";
    let scheme = if tls.is_some() { "rediss" } else { "redis" };
    let (auth, hosts) = split_auth(rest);
    let seeds: Vec<String> = host_list(hosts.trim_end_matches('/'), help)?
        .into_iter()
        .map(|(host, port)| format!("{host}:{port}"))
        .collect();
    let auth = format!("{scheme}://{auth}");
    for node in &seeds {
        format!("{auth}{node}")
            .as_str()
            .into_connection_info()
            .map_err(|e| {
                Error::invalid(format!("{help} ({})", e.detail().unwrap_or(&e.to_string())))
            })?;
    }
    Ok(Cluster::new(auth, seeds, tls))
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
            // Sentinel URLs take these before asking here.
            "sentinel_user" | "sentinel_password" => {
                return Err(Error::invalid(format!(
                    "{k} is only for Sentinel URLs (redis+sentinel://, rediss+sentinel://)"
                )))
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
/// is seconds. The syntax of the URL options (`?connect_timeout=500ms`)
/// and of the command line.
///
/// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
/// anything else (a negative number, an unknown unit).
///
/// ```
/// use std::time::Duration;
/// use redislock::parse_duration;
///
/// assert_eq!(parse_duration("250ms")?, Duration::from_millis(250));
/// assert_eq!(parse_duration("1.5s")?, Duration::from_millis(1500));
/// assert_eq!(parse_duration("30")?, Duration::from_secs(30));
/// assert!(parse_duration("soon").is_err());
/// # Ok::<(), redislock::Error>(())
/// ```
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
            let e = Settings::default()
                .deployment(&urls, &Default::default())
                .err()
                .expect(bad);
            assert!(
                e.to_string().contains("node_timeout") || e.to_string().contains("node timeout"),
                "{e}"
            );
        }
    }

    #[test]
    fn sentinel_urls_parse() {
        let none = SentinelAuth::default();
        let s = sentinel(
            "u:pw@127.0.0.1:26379,127.0.0.1:26380/mymaster",
            2,
            None,
            &none,
        )
        .unwrap();
        assert_eq!(s.sentinels.len(), 2);
        assert_eq!(s.service, "mymaster");
        assert_eq!(s.auth, "redis://u:pw@");
        assert!(!s.describe().contains("pw"));
        // The sentinels are asked without the master's credentials.
        for (_, info) in &s.sentinels {
            assert_eq!(info.redis_settings().password(), None);
            assert_eq!(info.redis_settings().username(), None);
        }
        for bad in [
            "127.0.0.1:1",
            "127.0.0.1:1/",
            "127.0.0.1/x",
            ":1/x",
            "127.0.0.1:99999/x",
        ] {
            assert!(sentinel(bad, 0, None, &none).is_err(), "{bad}");
        }
    }

    /// The message of `url`'s error.
    fn refusal(settings: &Settings, url: &str) -> String {
        match settings.target(url) {
            Ok(_) => panic!("accepted: {url}"),
            Err(e) => {
                assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{url}: {e}");
                e.to_string()
            }
        }
    }

    #[test]
    fn tls_sentinel_and_cluster_urls_parse() {
        let t = Settings::default()
            .target("rediss+sentinel://u:pw@127.0.0.1:26379,127.0.0.1:26380/mymaster?db=3")
            .unwrap();
        assert!(t.tls.is_some());
        assert!(t.addr.contains("(TLS)"), "{}", t.addr);
        assert!(!t.addr.contains("pw"), "{}", t.addr);
        let Endpoint::Sentinel(s) = &t.endpoint else {
            panic!("not Sentinel")
        };
        // TLS to the sentinels and to the master, with the same settings.
        assert!(s.tls.is_some());
        assert_eq!(s.auth, "rediss://u:pw@");
        assert_eq!(s.db, 3);
        for (_, info) in &s.sentinels {
            assert!(matches!(
                info.addr(),
                ConnectionAddr::TcpTls {
                    insecure: false,
                    ..
                }
            ));
        }
        let t = Settings::default()
            .target("rediss+cluster://u:pw@127.0.0.1:7000,127.0.0.1:7001")
            .unwrap();
        assert!(t.tls.is_some());
        assert_eq!(t.addr, "cluster 127.0.0.1:7000,127.0.0.1:7001 (TLS)");
        // Plain ones stay plain.
        let t = Settings::default()
            .target("redis+cluster://127.0.0.1:7000")
            .unwrap();
        assert!(t.tls.is_none());
        assert_eq!(t.addr, "cluster 127.0.0.1:7000");
        let t = Settings::default()
            .target("redis+sentinel://127.0.0.1:1/m")
            .unwrap();
        assert!(t.tls.is_none());
    }

    #[test]
    fn tls_options_and_refusals_of_sentinel_and_cluster_urls() {
        let dir = tempfile::tempdir().unwrap();
        let not_pem = dir.path().join("ca.pem");
        std::fs::write(&not_pem, "no certificate here").unwrap();
        let ca = not_pem.display();
        let plain = Settings::default();
        for base in [
            "rediss+sentinel://127.0.0.1:1/m",
            "rediss+cluster://127.0.0.1:1",
        ] {
            // The CA file is read for TLS (here it holds no certificate).
            let e = refusal(&plain, &format!("{base}?tls_ca_file={ca}"));
            assert!(e.contains("no PEM certificate"), "{e}");
            let e = refusal(&plain, &format!("{base}?tls_ca_file=/nonexistent/ca.pem"));
            assert!(e.contains("cannot read tls_ca_file"), "{e}");
            // The builder's certificate too.
            let with_root = Settings {
                tls_root_cert: Some(b"not a PEM".to_vec()),
                ..Settings::default()
            };
            let e = refusal(&with_root, base);
            assert!(e.contains("TLS"), "{e}");
            // #insecure stays refused; any other fragment too, unechoed.
            let e = refusal(&plain, &format!("{base}#insecure"));
            assert!(e.contains("#insecure"), "{e}");
            let e = refusal(&plain, &format!("{base}#s3cret"));
            assert!(!e.contains("s3cret"), "{e}");
        }
        // A CA for a plain Sentinel or Cluster URL is a mistake.
        for base in [
            "redis+sentinel://127.0.0.1:1/m",
            "redis+cluster://127.0.0.1:1",
        ] {
            let e = refusal(&plain, &format!("{base}?tls_ca_file={ca}"));
            assert!(e.contains("not TLS"), "{e}");
            let e = refusal(&plain, &format!("{base}#insecure"));
            assert!(e.contains("#insecure"), "{e}");
        }
        for bad in [
            "redis+sentinels://127.0.0.1:1/m",
            "redisss+cluster://127.0.0.1:1",
            "rediss+cluster://",
            "rediss+sentinel://127.0.0.1:1",
        ] {
            refusal(&plain, bad);
        }
    }

    #[test]
    fn wait_replicas_is_taken_with_cluster() {
        let t = Settings::default()
            .target("rediss+cluster://127.0.0.1:7000?wait_replicas=1&wait_timeout=2s")
            .unwrap();
        assert_eq!(t.wait_replicas, Some((1, Duration::from_secs(2))));
        let t = Settings::default()
            .target("redis+cluster://127.0.0.1:7000?wait_replicas=2")
            .unwrap();
        assert_eq!(t.wait_replicas, Some((2, Duration::from_millis(100))));
        let e = refusal(
            &Settings::default(),
            "redis+cluster://127.0.0.1:7000?wait_timeout=2s",
        );
        assert!(e.contains("wait_timeout needs wait_replicas"), "{e}");
    }

    #[test]
    fn sentinel_credentials_are_the_sentinels_own_and_never_shown() {
        let url = "rediss+sentinel://app:masterpw@127.0.0.1:26379,127.0.0.1:26380/mymaster\
                   ?sentinel_user=watch%40er&sentinel_password=p%40ss%2Bw%26rd";
        let t = Settings::default().target(url).unwrap();
        let Endpoint::Sentinel(s) = &t.endpoint else {
            panic!("not Sentinel")
        };
        for (_, info) in &s.sentinels {
            assert_eq!(info.redis_settings().username(), Some("watch@er"));
            assert_eq!(info.redis_settings().password(), Some("p@ss+w&rd"));
        }
        // The userinfo is the master's.
        assert_eq!(s.auth, "rediss://app:masterpw@");
        for shown in [t.addr.clone(), s.describe()] {
            for secret in ["p@ss", "p%40ss", "masterpw", "watch"] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
        // A password alone: AUTH password.
        let t = Settings::default()
            .target("redis+sentinel://127.0.0.1:1/m?sentinel_password=only")
            .unwrap();
        let Endpoint::Sentinel(s) = &t.endpoint else {
            panic!("not Sentinel")
        };
        assert_eq!(s.sentinels[0].1.redis_settings().password(), Some("only"));
        assert_eq!(s.sentinels[0].1.redis_settings().username(), None);
        assert_eq!(s.auth, "redis://");
        // Refusals name no credential.
        let plain = Settings::default();
        for (url, says) in [
            (
                "redis+sentinel://127.0.0.1:1/m?sentinel_user=watcher",
                "sentinel_user needs sentinel_password",
            ),
            (
                "redis+sentinel://127.0.0.1:1/m?sentinel_user=watcher&sentinel_password=",
                "sentinel_password is empty",
            ),
            (
                "redis+sentinel://127.0.0.1:1/m?sentinel_password=s3cret&db=x",
                "bad db",
            ),
            (
                "redis+sentinel://127.0.0.1:1/m?sentinel_password=s3cret&nope=1",
                "unknown parameter",
            ),
            (
                "redis+sentinel://u:s3cret@127.0.0.1:x/m?sentinel_password=s3cret",
                "bad port",
            ),
            (
                "redis+sentinel://127.0.0.1:1?sentinel_password=s3cret",
                "no service name",
            ),
        ] {
            let e = refusal(&plain, url);
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains("s3cret") && !e.contains("watcher"), "{e}");
        }
        // Only Sentinel URLs take them.
        for url in [
            "redis+cluster://127.0.0.1:1?sentinel_password=s3cret",
            "redis://127.0.0.1:1?sentinel_password=s3cret",
            "rediss://127.0.0.1:1/0?sentinel_user=watcher",
        ] {
            let e = refusal(&plain, url);
            assert!(e.contains("only for Sentinel URLs"), "{e}");
            assert!(!e.contains("s3cret") && !e.contains("watcher"), "{e}");
        }
    }
}
