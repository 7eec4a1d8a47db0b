//! `doctor`: what, in a server's setup, makes locks unsafe or slow, read
//! from the servers themselves, with what to change.
//!
//! Every server a client's locks may reach is asked (the server, Sentinel's
//! current master, every master of a cluster, every Redlock node), on fresh
//! connections outside the pool, and then one lock cycle is run through the
//! client as an application would. Only harmless commands are sent: `INFO`,
//! `CONFIG GET`, `CLUSTER INFO`, `PING`, three scripts that read nothing
//! (one asks the ACL about the commands redislock sends, running none), a
//! `PUBLISH` to a channel nobody listens to and a `SUBSCRIBE` and
//! `UNSUBSCRIBE` of it, and the acquire and release of a lock named
//! `redislock:doctor:<random>` (nothing stays behind: a refused release is
//! followed by a `DEL` of that key).
//!
//! Here: the report ([`Report`] of [`Finding`]s, each with a [`Severity`]),
//! and the order the checks run and their findings are collected in: each
//! server's ([`examine_server`]), what concerns a pool as a whole (a
//! cluster master out of reach, Sentinel's quorum), the Redlock
//! deployment's, then the lock cycle. The checks themselves are in one
//! module per family.

mod acl;
mod clock;
mod cluster;
mod cycle;
mod latency;
mod limits;
mod persistence;
mod pubsub;
mod redlock;
mod replication;
mod scripting;

use std::collections::HashMap;
use std::fmt;

use self::clock::{check_clock, check_replica_clocks};
use self::cluster::check_cluster;
use self::latency::check_latency;
use self::limits::{check_clients, check_memory};
use self::persistence::check_persistence;
use self::pubsub::check_pubsub;
use self::redlock::{redlock_clocks, redlock_size};
use self::replication::{check_replication, check_role, sentinel_quorum};
use self::scripting::check_scripting;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::net::pool::Pool;
use crate::net::target::Endpoint;
use crate::net::wire::{server_message, Wire};

/// How much a [`Finding`] matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Checked, and nothing to change.
    Ok = 0,
    /// Locks are safe as the server runs now, but slow, or unsafe after a
    /// failure that is rare but real (a restart, a failover), or the check
    /// could not be made.
    Warning = 1,
    /// Locks can have two owners in normal operation, fencing numbers can
    /// go backwards, or locks cannot be used at all.
    Unsafe = 2,
}

impl Severity {
    /// `ok`, `warning` or `unsafe`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Warning => "warning",
            Severity::Unsafe => "unsafe",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing [`Client::doctor`] checked on one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// Which check: `server`, `role`, `eviction`, `memory`, `scripting`,
    /// `time`, `acl`, `pubsub`, `persistence`, `replication`, `clients`,
    /// `cluster`, `sentinel`, `redlock`, `latency`, `clock`, `reach` or
    /// `lock-cycle`. Stable: match on it.
    pub check: &'static str,
    /// The server (`host:port` or socket path, never credentials), or the
    /// deployment for checks of the whole.
    pub server: String,
    /// What was found, and why it matters for a lock.
    pub message: String,
    /// What to change; empty when nothing needs to.
    pub fix: String,
}

/// What [`Client::doctor`] found: every check on every server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The deployment, as [`Client::addr`] names it.
    pub target: String,
    /// In the order checked: each server's, then the whole deployment's.
    pub findings: Vec<Finding>,
}

impl Report {
    /// The most serious finding's severity ([`Severity::Ok`] when none).
    pub fn worst(&self) -> Severity {
        self.findings
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Ok)
    }

    /// Whether nothing makes a lock unsafe (warnings allowed).
    pub fn is_safe(&self) -> bool {
        self.worst() < Severity::Unsafe
    }
}

impl fmt::Display for Report {
    /// One line per finding (`severity check server: message`), each fix on
    /// the line after it, then a verdict.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "redislock doctor: {}", self.target)?;
        for x in &self.findings {
            let sev = x.severity.as_str();
            let sev = if x.severity == Severity::Unsafe {
                sev.to_uppercase()
            } else {
                sev.to_string()
            };
            writeln!(f, "{sev:<8}{:<12} {}: {}", x.check, x.server, x.message)?;
            if !x.fix.is_empty() {
                writeln!(f, "{:<20} fix: {}", "", x.fix)?;
            }
        }
        let count = |s| self.findings.iter().filter(|x| x.severity == s).count();
        let (bad, warn) = (count(Severity::Unsafe), count(Severity::Warning));
        if bad > 0 {
            write!(
                f,
                "verdict: UNSAFE: {bad} finding{} make{} locks unsafe, {warn} warning{}",
                plural(bad),
                if bad == 1 { "s" } else { "" },
                plural(warn)
            )
        } else {
            write!(f, "verdict: safe for locks, {warn} warning{}", plural(warn))
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl Client {
    /// Check every server this client's locks may reach for what would make
    /// a lock unsafe or slow, and run one lock cycle (see the module docs
    /// of `doctor` in the repository's `docs/doctor.md`): the eviction
    /// policy, scripting and `TIME` refused or renamed, a command redislock
    /// sends or `PUBLISH`/`SUBSCRIBE` refused by ACL (each named),
    /// persistence, replicas without `min-replicas-to-write`,
    /// `maxclients` headroom, cluster state, Sentinel quorum, and the round
    /// trip. Sends only harmless commands and leaves nothing on the server.
    ///
    /// `Ok` whatever was found (see [`Report::is_safe`]); an error only when
    /// no server could be asked: [`Error::Connection`] when the server (or
    /// every sentinel, or every cluster node) cannot be reached,
    /// [`Error::NoQuorum`] when a majority of Redlock nodes cannot, and
    /// [`Error::Server`] when the server refuses our credentials.
    pub fn doctor(&self) -> Result<Report> {
        let deployment = self.deployment();
        let pools = deployment.pools();
        let mut findings = Vec::new();
        let mut reached = 0;
        let mut first_error = None;
        let mut clocks = Vec::new();
        for pool in &pools {
            match examine_pool(pool, &mut findings, &mut clocks) {
                Ok(()) => reached += 1,
                Err(e) if pools.len() == 1 => return Err(e),
                Err(e) => {
                    findings.push(Finding {
                        severity: Severity::Warning,
                        check: "reach",
                        server: pool.target.addr.clone(),
                        message: format!(
                            "this Redlock node cannot be asked ({e}); acquires need a majority, \
                             so one more node down stops them"
                        ),
                        fix: String::from("bring the node back, or remove it from the list"),
                    });
                    first_error.get_or_insert(e);
                }
            }
        }
        if pools.len() > 1 {
            let needed = pools.len() / 2 + 1;
            if reached < needed {
                let detail = first_error.map_or_else(String::new, |e| format!(": {e}"));
                return Err(Error::NoQuorum {
                    key: String::from("(doctor)"),
                    detail: format!(
                        "only {reached} of the {} Redlock nodes could be asked, {needed} are \
                         needed{detail}",
                        pools.len()
                    ),
                });
            }
            findings.push(redlock_size(&deployment.describe(), pools.len()));
            findings.extend(redlock_clocks(&deployment.describe(), &clocks));
        }
        findings.push(self.lock_cycle());
        Ok(Report {
            target: deployment.describe(),
            findings,
        })
    }
}

/// Every server of one pool (one server, Sentinel's master, a cluster's
/// masters), then what concerns the pool as a whole. An error when nothing
/// of it could be asked.
fn examine_pool(
    pool: &Pool,
    out: &mut Vec<Finding>,
    clocks: &mut Vec<(String, i64)>,
) -> Result<()> {
    let servers = pool.inspection_connections()?;
    let only = servers.len() == 1;
    let mut asked = 0;
    let mut first_error = None;
    for (addr, wire) in servers {
        match wire {
            Ok(mut wire) => {
                asked += 1;
                if let Some(offset) = examine_server(&mut wire, &addr, pool, out) {
                    clocks.push((addr.clone(), offset));
                }
            }
            Err(e) if only => return Err(e),
            Err(e) => {
                out.push(Finding {
                    severity: Severity::Unsafe,
                    check: "reach",
                    server: addr,
                    message: format!(
                        "a cluster master cannot be reached ({e}): locks in its slots fail \
                         until a replica takes over"
                    ),
                    fix: String::from("check the node; CLUSTER NODES shows the cluster's view"),
                });
                first_error.get_or_insert(e);
            }
        }
    }
    if asked == 0 {
        if let Some(e) = first_error {
            return Err(e);
        }
    }
    if let Endpoint::Sentinel(s) = &pool.target.endpoint {
        out.push(sentinel_quorum(
            &s.describe(),
            s.check_quorum(pool.target.connect_timeout),
        ));
    }
    Ok(())
}

/// The checks on one server, each a finding.
/// The server's clock offset from this host's, in µs, when `TIME` told.
fn examine_server(wire: &mut Wire, addr: &str, pool: &Pool, out: &mut Vec<Finding>) -> Option<i64> {
    let at = |severity, check, message: String, fix: &str| Finding {
        severity,
        check,
        server: addr.to_string(),
        message,
        fix: fix.to_string(),
    };
    let info = match redis::cmd("INFO").query::<String>(wire) {
        Ok(text) => parse_info(&text),
        Err(e) => {
            out.push(at(
                Severity::Warning,
                "server",
                format!(
                    "INFO is refused ({}): the eviction, persistence, replication, clients and \
                     cluster checks were skipped",
                    server_message(&e)
                ),
                "run doctor as a user allowed INFO and CONFIG GET",
            ));
            HashMap::new()
        }
    };
    let config = |wire: &mut Wire, name: &str| -> Option<String> {
        let pairs: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(wire).ok()?;
        pairs.get(1).cloned()
    };
    let get = |k: &str| info.get(k).map(String::as_str);
    let num = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());

    if !info.is_empty() {
        let family = if get("server_name") == Some("valkey") {
            format!("Valkey {}", get("valkey_version").unwrap_or("?"))
        } else {
            format!("Redis {}", get("redis_version").unwrap_or("?"))
        };
        let mode = get("server_mode").or(get("redis_mode")).unwrap_or("?");
        out.push(at(Severity::Ok, "server", format!("{family}, {mode}"), ""));
        check_role(&info, &at, out);
        check_memory(&info, &at, out);
    }
    check_scripting(wire, &at, out);
    check_pubsub(wire, &at, out);
    if !info.is_empty() {
        // Only what the finding needs: one CONFIG GET on a plain server.
        let (save, fsync) = match get("aof_enabled") {
            Some("1") => (None, config(wire, "appendfsync")),
            _ => (config(wire, "save"), None),
        };
        check_persistence(&info, save, fsync, &at, out);
        let replicas = num("connected_slaves").unwrap_or(0);
        if get("role") == Some("master") && replicas > 0 {
            let min = config(wire, "min-replicas-to-write").and_then(|v| v.parse().ok());
            let waits = pool.target.wait_replicas.map(|(n, _)| n);
            check_replication(replicas, min, waits, &at, out);
        }
        let max =
            num("maxclients").or_else(|| config(wire, "maxclients").and_then(|v| v.parse().ok()));
        check_clients(
            num("connected_clients"),
            max,
            num("rejected_connections"),
            &at,
            out,
        );
        if get("cluster_enabled") == Some("1") {
            check_cluster(wire, &at, out);
        }
    }
    check_latency(wire, &at, out);
    let offset = check_clock(wire, &at, out);
    if let Some(master) = offset.filter(|_| get("role") == Some("master")) {
        check_replica_clocks(&info, master, addr, pool, out);
    }
    offset
}

type At<'a> = dyn Fn(Severity, &'static str, String, &str) -> Finding + 'a;

fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn at(
        severity: Severity,
        check: &'static str,
        message: String,
        fix: &str,
    ) -> Finding {
        Finding {
            severity,
            check,
            server: String::from("h:1"),
            message,
            fix: fix.to_string(),
        }
    }

    #[test]
    fn info_parses() {
        let info = parse_info("# Server\r\nredis_version:7.0.15\r\nrole:master\r\n\r\n");
        assert_eq!(info["redis_version"], "7.0.15");
        assert_eq!(info["role"], "master");
    }

    #[test]
    fn a_report_is_unsafe_when_one_finding_is() {
        let mut r = Report {
            target: String::from("h:1"),
            findings: vec![at(Severity::Warning, "latency", String::from("slow"), "x")],
        };
        assert!(r.is_safe());
        assert!(r
            .to_string()
            .ends_with("verdict: safe for locks, 1 warning"));
        r.findings
            .push(at(Severity::Unsafe, "eviction", String::from("lru"), "fix"));
        assert!(!r.is_safe());
        assert_eq!(r.worst(), Severity::Unsafe);
        let text = r.to_string();
        assert!(text.contains("UNSAFE  eviction     h:1: lru"), "{text}");
        assert!(text.contains("fix: fix"), "{text}");
        assert!(
            text.ends_with("1 finding makes locks unsafe, 1 warning"),
            "{text}"
        );
    }
}
