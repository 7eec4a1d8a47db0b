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

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use redis::{ConnectionLike, Value};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::net::pool::Pool;
use crate::net::target::Endpoint;
use crate::net::wire::{server_message, Wire};
use crate::options::{AcquireOptions, Wait};

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

/// A median round trip above this is reported as slow.
const SLOW_ROUND_TRIP: Duration = Duration::from_millis(10);

/// Connections in use, as a share of `maxclients`, above which the
/// headroom is reported as short.
const CLIENTS_SHARE: f64 = 0.8;

/// Memory in use, as a share of `maxmemory` under `noeviction`, above
/// which acquires are about to fail with OOM.
const MEMORY_SHARE: f64 = 0.9;

/// PINGs timed for the latency check.
const PINGS: usize = 5;
/// A server clock further than this from this host's is a warning (see
/// [`check_clock`]).
const CLOCK_SKEW: Duration = Duration::from_secs(1);

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

    /// Acquire and release a lock of a random name, as an application does.
    fn lock_cycle(&self) -> Finding {
        let mut name = b"redislock:doctor:".to_vec();
        name.extend_from_slice(&crate::random_token());
        let started = Instant::now();
        let mut opts = AcquireOptions::new(Duration::from_secs(10));
        opts.wait = Wait::TryOnce;
        // A lock taken whose release is refused (a user without EVALSHA)
        // would stay for its TTL: its key (a name only this call knows) is
        // deleted with a plain DEL.
        let mut left = String::new();
        let r = self.acquire_with(&name, opts).and_then(|l| {
            l.release().inspect_err(|_| {
                left = match self.delete_everywhere(&name) {
                    true => String::from(" (the lock's key was then deleted with DEL)"),
                    false => String::from(" (the lock's key expires within 10 s)"),
                };
            })
        });
        let server = self.addr();
        match r {
            Ok(()) => Finding {
                severity: Severity::Ok,
                check: "lock-cycle",
                server,
                message: format!(
                    "a lock was acquired and released in {} µs",
                    started.elapsed().as_micros()
                ),
                fix: String::new(),
            },
            Err(e) => Finding {
                severity: Severity::Unsafe,
                check: "lock-cycle",
                server,
                message: format!("a lock could not be acquired and released: {e}{left}"),
                fix: String::from(
                    "see the findings above; the user must be allowed SET, EVAL, EVALSHA and the \
                     keys redislock:* and the lock names (ACL ~…)",
                ),
            },
        }
    }
}

impl Client {
    /// `DEL key` on every server of the deployment; whether each took it.
    fn delete_everywhere(&self, key: &[u8]) -> bool {
        let mut all = true;
        for pool in self.deployment().pools() {
            let del = redis::cmd("DEL").arg(key).clone();
            all &= pool.with(|con, _| del.query::<Value>(con)).is_ok();
        }
        all
    }
}

fn redlock_size(target: &str, n: usize) -> Finding {
    let tolerated = (n - 1) / 2;
    Finding {
        severity: if tolerated == 0 {
            Severity::Warning
        } else {
            Severity::Ok
        },
        check: "redlock",
        server: target.to_string(),
        message: format!(
            "{n} nodes, a majority of {} needed: {tolerated} may be down",
            n / 2 + 1
        ),
        fix: if tolerated == 0 {
            String::from("use at least 3 independent nodes (5 to survive two failures)")
        } else {
            String::new()
        },
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

fn sentinel_quorum(
    describe: &str,
    answers: Vec<(String, std::result::Result<String, String>)>,
) -> Finding {
    let total = answers.len();
    let good: Vec<&String> = answers
        .iter()
        .filter_map(|(_, a)| a.as_ref().ok())
        .collect();
    let bad: Vec<String> = answers
        .iter()
        .filter_map(|(addr, a)| a.as_ref().err().map(|e| format!("{addr}: {e}")))
        .collect();
    if bad.is_empty() {
        return Finding {
            severity: Severity::Ok,
            check: "sentinel",
            server: describe.to_string(),
            message: format!(
                "{total} of {total} sentinels can authorize a failover ({})",
                good.first().map_or("", |s| s.as_str())
            ),
            fix: String::new(),
        };
    }
    // Those that answered at all (NOQUORUM too): the client hears them.
    let heard = answers
        .iter()
        .filter(|(_, a)| {
            a.as_ref()
                .map_or_else(|e| e.starts_with("NOQUORUM"), |_| true)
        })
        .count();
    if heard < total / 2 + 1 {
        return Finding {
            severity: Severity::Unsafe,
            check: "sentinel",
            server: describe.to_string(),
            message: format!(
                "only {heard} of the {total} sentinels answer, and a client grants no lock \
                 while it cannot hear a majority of those its URL lists (it fails closed: a \
                 partition may have cut it off beside an old master); {}",
                bad.join("; ")
            ),
            fix: String::from(
                "bring the sentinels back, or reach them from here (firewall, ACL); list every \
                 sentinel of the service in the URL",
            ),
        };
    }
    Finding {
        severity: Severity::Warning,
        check: "sentinel",
        server: describe.to_string(),
        message: format!(
            "{} of {total} sentinels say a failover can be authorized; {}",
            good.len(),
            bad.join("; ")
        ),
        fix: String::from(
            "bring the sentinels back (SENTINEL CKQUORUM on each says what it misses); while \
             a failover cannot happen, a dead master stops every lock",
        ),
    }
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

fn check_role(info: &HashMap<String, String>, at: &At, out: &mut Vec<Finding>) {
    if info.get("role").map(String::as_str) != Some("slave") {
        return;
    }
    let master = format!(
        "{}:{}",
        info.get("master_host").map_or("?", String::as_str),
        info.get("master_port").map_or("?", String::as_str)
    );
    out.push(at(
        Severity::Unsafe,
        "role",
        format!(
            "this server is a replica of {master}: lock writes fail here (READONLY) or, with \
             replica-read-only no, are taken on a copy that the master overwrites, beside the \
             master's own lock"
        ),
        "point the URL at the master, or name the service with redis+sentinel://",
    ));
}

fn check_memory(info: &HashMap<String, String>, at: &At, out: &mut Vec<Finding>) {
    let policy = info
        .get("maxmemory_policy")
        .map_or("?", String::as_str)
        .to_string();
    let num = |k: &str| info.get(k).and_then(|v| v.parse::<u64>().ok());
    let maxmemory = num("maxmemory").unwrap_or(0);
    let human = info
        .get("maxmemory_human")
        .cloned()
        .unwrap_or_else(|| maxmemory.to_string());
    let evicted = num("evicted_keys").unwrap_or(0);
    let evicted = if evicted > 0 {
        format!(" (it has evicted {evicted} keys since it started)")
    } else {
        String::new()
    };
    let fix = "CONFIG SET maxmemory-policy noeviction and the same line in redis.conf; or keep \
               locks on a server of their own with noeviction";
    if policy == "noeviction" {
        let used = num("used_memory").unwrap_or(0);
        if maxmemory > 0 && used as f64 >= MEMORY_SHARE * maxmemory as f64 {
            out.push(at(
                Severity::Warning,
                "memory",
                format!(
                    "{used} of maxmemory {maxmemory} bytes in use: at the limit every acquire \
                     fails with OOM"
                ),
                "raise maxmemory, or free memory",
            ));
        }
        out.push(at(
            Severity::Ok,
            "eviction",
            String::from("maxmemory-policy noeviction: lock keys are never evicted"),
            "",
        ));
    } else if maxmemory > 0 {
        out.push(at(
            Severity::Unsafe,
            "eviction",
            format!(
                "maxmemory-policy {policy} with maxmemory {human}: under memory pressure Redis \
                 may evict a held lock's key (every lock key has a TTL, so volatile-* policies \
                 choose them too), and the next caller becomes a second owner{evicted}"
            ),
            fix,
        ));
    } else {
        out.push(at(
            Severity::Warning,
            "eviction",
            format!(
                "maxmemory-policy {policy}, but maxmemory is 0 (no limit), so nothing is \
                 evicted today; setting maxmemory later makes held locks evictable{evicted}"
            ),
            fix,
        ));
    }
}

/// The hash of a script, as EVALSHA takes it.
fn sha(src: &str) -> String {
    redis::Script::new(src).get_hash().to_string()
}

/// Whether `e` is a refusal by ACL: `NOPERM` outside scripts; inside one,
/// Redis 7.0 says `ERR … can't run this command` and Valkey `ERR ACL
/// failure in script`.
fn is_noperm(e: &redis::RedisError) -> bool {
    let text = server_message(e);
    e.code() == Some("NOPERM")
        || text.contains("NOPERM")
        || text.contains("ACL failure")
        || text.contains("executing the script can't")
}

fn check_scripting(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    const PROBE: &str = "return 1";
    // Both are asked, so that a finding names every one refused. EVALSHA
    // of a script the server does not hold (EVAL refused) answers
    // NOSCRIPT: allowed to run.
    let eval = redis::cmd("EVAL")
        .arg(PROBE)
        .arg(0)
        .query::<i64>(wire)
        .err();
    let evalsha = redis::cmd("EVALSHA")
        .arg(sha(PROBE))
        .arg(0)
        .query::<i64>(wire)
        .err()
        .filter(|e| e.kind() != redis::ErrorKind::Server(redis::ServerErrorKind::NoScript));
    let refused: Vec<(&str, redis::RedisError)> = [("EVAL", eval), ("EVALSHA", evalsha)]
        .into_iter()
        .filter_map(|(cmd, e)| e.map(|e| (cmd, e)))
        .collect();
    if !refused.is_empty() {
        let names: Vec<&str> = refused.iter().map(|(cmd, _)| *cmd).collect();
        let texts: Vec<String> = refused.iter().map(|(_, e)| server_message(e)).collect();
        let (why, fix) = if refused.iter().any(|(_, e)| is_noperm(e)) {
            let plus: Vec<String> = names
                .iter()
                .map(|n| format!("+{}", n.to_lowercase()))
                .collect();
            (
                "refused to this user by ACL",
                format!("ACL SETUSER <user> {} (or +@scripting)", plus.join(" ")),
            )
        } else if texts
            .iter()
            .any(|t| t.to_lowercase().contains("unknown command"))
        {
            (
                "renamed or disabled",
                String::from("remove rename-command EVAL and EVALSHA from redis.conf"),
            )
        } else {
            ("refused", String::from("see the server's message"))
        };
        let (verb, subject) = match names.as_slice() {
            [one] => ("is", one.to_string()),
            _ => ("are", names.join(" and ")),
        };
        out.push(at(
            Severity::Unsafe,
            "scripting",
            format!(
                "{subject} {verb} {why} ({}): every release, renewal and contended acquire runs \
                 a script, so they all fail",
                texts.join("; ")
            ),
            &fix,
        ));
        return;
    }
    out.push(at(
        Severity::Ok,
        "scripting",
        String::from("EVAL and EVALSHA run"),
        "",
    ));
    // What the fence scripts do: a refused TIME comes back as an error
    // table, and the fence falls back on the counter alone.
    const TIME: &str = "local t = redis.pcall('TIME') \
                        if t.err then return t.err end return 'ok'";
    match redis::cmd("EVAL").arg(TIME).arg(0).query::<String>(wire) {
        Ok(ok) if ok == "ok" => out.push(at(
            Severity::Ok,
            "time",
            String::from(
                "scripts can read TIME: fencing numbers keep the server's clock as a floor",
            ),
            "",
        )),
        r => {
            let why = match r {
                Ok(err) => err,
                Err(e) => server_message(&e),
            };
            out.push(at(
                Severity::Unsafe,
                "time",
                format!(
                    "TIME is refused in scripts ({why}): fencing numbers lose their floor, so \
                     when a restart, a failover or an eviction loses a fence counter they start \
                     again from 1 and go backwards"
                ),
                "remove rename-command TIME from redis.conf: scripts call it by its name",
            ));
        }
    }
    check_acl(wire, at, out);
}

/// Asks the server's ACL (`redis.acl_check_cmd`, Redis 7 and Valkey) about
/// each command in ARGV (its argument count, then its arguments), without
/// running any: the names of those refused, or false where the server
/// cannot tell.
const ACL_PROBE: &str = r#"
if not redis.acl_check_cmd then return false end
local refused, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local ok, allowed = pcall(redis.acl_check_cmd, unpack(ARGV, i + 1, i + n))
  if ok and not allowed then table.insert(refused, ARGV[i + 1]) end
  i = i + n + 1
end
return refused
"#;

/// The commands a lock, a semaphore and a waiter send (outside scripts
/// and inside them; PUBLISH and SUBSCRIBE are the `pubsub` check's), on
/// the keys of a lock and of a semaphore named `name`, as
/// [`ACL_PROBE`]'s ARGV.
fn acl_probe_args(name: &[u8]) -> Vec<Vec<u8>> {
    use crate::protocol::{Kind, LockKeys};
    let lock = LockKeys::new(name);
    let [k, meta, queue, counter] = lock.all();
    let sem = LockKeys::of(
        name,
        Kind::Semaphore {
            limit: 1,
            permits: 1,
        },
    );
    let [set, info, sem_queue, _] = sem.all();
    let x: &[u8] = b"x";
    let commands: [&[&[u8]]; 30] = [
        &[b"SET", k, x],
        &[b"GET", k],
        &[b"EXISTS", k],
        &[b"TYPE", k],
        &[b"PTTL", k],
        &[b"PEXPIRE", k, b"1"],
        &[b"DEL", k, meta],
        &[b"SET", meta, x],
        &[b"GET", meta],
        &[b"RPUSH", queue, x],
        &[b"LPOP", queue],
        &[b"LREM", queue, b"1", x],
        &[b"LPOS", queue, x],
        &[b"LLEN", queue],
        &[b"LINDEX", queue, b"0"],
        &[b"SET", counter, x],
        &[b"GET", counter],
        &[b"TIME"],
        &[b"ZADD", set, b"1", x],
        &[b"ZREM", set, x],
        &[b"ZRANGE", set, b"0", b"0"],
        &[b"ZRANGEBYSCORE", set, b"0", b"1"],
        &[b"ZREMRANGEBYSCORE", set, b"0", b"1"],
        &[b"ZSCORE", set, x],
        &[b"ZCOUNT", set, b"0", b"1"],
        &[b"HSET", info, x, x],
        &[b"HGET", info, x],
        &[b"HDEL", info, x],
        &[b"HGETALL", info],
        &[b"HVALS", info],
    ];
    let mut args = Vec::new();
    for c in commands {
        args.push(c.len().to_string().into_bytes());
        args.extend(c.iter().map(|a| a.to_vec()));
    }
    args.extend([b"2".to_vec(), b"EXISTS".to_vec(), sem_queue.to_vec()]);
    args
}

/// The commands redislock sends, asked of the server's ACL for this user
/// (Redis 7 and later, Valkey; nothing is said where the server cannot
/// tell). A command refused inside a script stops the script where it
/// stands: a release can fail half-way.
fn check_acl(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    let mut name = b"redislock:doctor:".to_vec();
    name.extend_from_slice(&crate::random_token());
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(ACL_PROBE).arg(0);
    for a in acl_probe_args(&name) {
        cmd.arg(a);
    }
    let refused = match cmd.query::<Option<Vec<String>>>(wire) {
        Ok(Some(refused)) => refused,
        // Older than Redis 7, or the probe itself refused: not known.
        Ok(None) | Err(_) => return,
    };
    let mut names: Vec<String> = Vec::new();
    for r in refused {
        let r = r.to_uppercase();
        if !names.contains(&r) {
            names.push(r);
        }
    }
    if names.is_empty() {
        out.push(at(
            Severity::Ok,
            "acl",
            String::from(
                "this user may run every command redislock sends (asked of the ACL for the keys \
                 of a lock named redislock:doctor:…)",
            ),
            "",
        ));
        return;
    }
    let plus: Vec<String> = names
        .iter()
        .map(|n| format!("+{}", n.to_lowercase()))
        .collect();
    out.push(at(
        Severity::Unsafe,
        "acl",
        format!(
            "this user may not run {} on the keys of a lock (ACL): locks, their releases, \
             renewals and waits fail where they need it, and a script refused one half-way \
             has already written what came before",
            names.join(", ")
        ),
        &format!(
            "ACL SETUSER <user> {} (and key patterns ~… that cover the lock names, their \
             {{name}}:… companions and redislock:*)",
            plus.join(" ")
        ),
    ));
}

fn check_pubsub(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    let mut channel = b"redislock:w:doctor-".to_vec();
    channel.extend_from_slice(&crate::random_token());
    let publish = redis::cmd("PUBLISH")
        .arg(&channel)
        .arg("")
        .query::<i64>(wire)
        .err();
    // A waiter's SUBSCRIBE, then UNSUBSCRIBE: the connection is a plain
    // one again.
    let subscribe = match redis::cmd("SUBSCRIBE").arg(&channel).query::<Value>(wire) {
        Ok(_) => redis::cmd("UNSUBSCRIBE")
            .arg(&channel)
            .query::<Value>(wire)
            .err(),
        Err(e) => Some(e),
    };
    let refused: Vec<(&str, redis::RedisError)> = [("PUBLISH", publish), ("SUBSCRIBE", subscribe)]
        .into_iter()
        .filter_map(|(cmd, e)| e.map(|e| (cmd, e)))
        .collect();
    if refused.is_empty() {
        out.push(at(
            Severity::Ok,
            "pubsub",
            String::from("the waiters' channels redislock:w:* can be used (PUBLISH, SUBSCRIBE)"),
            "",
        ));
        return;
    }
    let names: Vec<&str> = refused.iter().map(|(cmd, _)| *cmd).collect();
    let texts: Vec<String> = refused.iter().map(|(_, e)| server_message(e)).collect();
    let channels = texts.iter().any(|t| t.contains("channel"));
    let fix = if channels {
        String::from(
            "ACL SETUSER <user> &redislock:w:* (Redis 7 gives new users no channels: \
             acl-pubsub-default resetchannels)",
        )
    } else if refused.iter().any(|(_, e)| is_noperm(e)) {
        let plus: Vec<String> = names
            .iter()
            .map(|n| format!("+{}", n.to_lowercase()))
            .collect();
        format!("ACL SETUSER <user> {} &redislock:w:*", plus.join(" "))
    } else {
        String::from("allow PUBLISH and SUBSCRIBE (rename-command, ACL)")
    };
    let effect = match names.as_slice() {
        ["PUBLISH"] => "releases cannot hand a lock over (the release scripts publish)",
        ["SUBSCRIBE"] => "acquires cannot wait for a held lock",
        _ => "releases cannot hand a lock over and acquires cannot wait",
    };
    out.push(at(
        Severity::Unsafe,
        "pubsub",
        format!(
            "{} on a waiters' channel {} refused to this user ({}): {effect}",
            names.join(" and "),
            if names.len() == 1 { "is" } else { "are" },
            texts.join("; ")
        ),
        &fix,
    ));
}

fn check_persistence(
    info: &HashMap<String, String>,
    save: Option<String>,
    fsync: Option<String>,
    at: &At,
    out: &mut Vec<Finding>,
) {
    let aof = info.get("aof_enabled").map(String::as_str) == Some("1");
    let fix = "appendonly yes (appendfsync everysec or always); or keep a restarted server out \
               of use for longer than the longest lock TTL";
    let finding = match (aof, save.as_deref()) {
        (true, _) => {
            let fsync = fsync.unwrap_or_else(|| String::from("?"));
            let kept = match fsync.as_str() {
                "always" => "every lock",
                "everysec" => "every lock but those of the last second",
                _ => "the locks the operating system had written out",
            };
            at(
                Severity::Ok,
                "persistence",
                format!("appendonly yes, appendfsync {fsync}: a restart keeps {kept}"),
                "",
            )
        }
        (false, Some("")) => at(
            Severity::Warning,
            "persistence",
            String::from(
                "persistence is off (no save, no appendonly): a restart forgets every held \
                 lock, and until their TTLs run out each can get a second owner",
            ),
            fix,
        ),
        (false, Some(save)) => at(
            Severity::Warning,
            "persistence",
            format!(
                "RDB snapshots only (save {save}): a restart forgets the locks taken since the \
                 last snapshot, and until their TTLs run out each can get a second owner"
            ),
            fix,
        ),
        (false, None) => at(
            Severity::Warning,
            "persistence",
            String::from(
                "appendonly is off and CONFIG GET save is refused: a restart forgets at least \
                 the locks taken since the last snapshot",
            ),
            fix,
        ),
    };
    out.push(finding);
}

fn check_replication(
    replicas: u64,
    min_replicas: Option<u64>,
    wait_replicas: Option<u32>,
    at: &At,
    out: &mut Vec<Finding>,
) {
    if replicas == 0 {
        return;
    }
    let finding = match (min_replicas, wait_replicas) {
        (Some(m), _) if m > 0 => at(
            Severity::Ok,
            "replication",
            format!("{replicas} replica(s), min-replicas-to-write {m}"),
            "",
        ),
        (_, Some(n)) => at(
            Severity::Ok,
            "replication",
            format!("{replicas} replica(s); this client waits for {n} of them (wait_replicas)"),
            "",
        ),
        (m, None) => at(
            Severity::Warning,
            "replication",
            format!(
                "{replicas} replica(s) and min-replicas-to-write {}: replication is \
                 asynchronous, so a failover to a replica that had not yet received a lock \
                 loses it, and the lock can get a second owner",
                m.map_or_else(
                    || String::from("unknown (CONFIG GET refused)"),
                    |m| m.to_string()
                )
            ),
            "CONFIG SET min-replicas-to-write 1 and min-replicas-max-lag 10 (and in \
             redis.conf), or add ?wait_replicas=1&wait_timeout=100ms to the client's URL",
        ),
    };
    out.push(finding);
}

fn check_clients(
    connected: Option<u64>,
    max: Option<u64>,
    rejected: Option<u64>,
    at: &At,
    out: &mut Vec<Finding>,
) {
    let fix = "raise maxclients (and the open-files limit of redis-server), or use fewer \
               connections";
    let (Some(connected), Some(max)) = (connected, max) else {
        return;
    };
    if max > 0 && connected as f64 >= CLIENTS_SHARE * max as f64 {
        out.push(at(
            Severity::Warning,
            "clients",
            format!(
                "{connected} of maxclients {max} connections in use: every process holds a few \
                 (its pool, and a subscriber while it waits), and at the limit new ones are \
                 refused and acquires fail"
            ),
            fix,
        ));
    } else if let Some(r) = rejected.filter(|r| *r > 0) {
        out.push(at(
            Severity::Warning,
            "clients",
            format!(
                "{connected} of maxclients {max} connections in use, but {r} were refused \
                 (maxclients reached) since the server started"
            ),
            fix,
        ));
    } else {
        out.push(at(
            Severity::Ok,
            "clients",
            format!("{connected} of maxclients {max} connections in use"),
            "",
        ));
    }
}

fn check_cluster(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    let info = match redis::cmd("CLUSTER").arg("INFO").query::<String>(wire) {
        Ok(text) => parse_info(&text),
        Err(e) => {
            out.push(at(
                Severity::Warning,
                "cluster",
                format!("CLUSTER INFO is refused ({})", server_message(&e)),
                "run doctor as a user allowed CLUSTER INFO",
            ));
            return;
        }
    };
    let get = |k: &str| info.get(k).map_or("?", String::as_str);
    let counts = format!(
        "{} slots assigned, {} ok, {} failing, {} nodes",
        get("cluster_slots_assigned"),
        get("cluster_slots_ok"),
        get("cluster_slots_fail"),
        get("cluster_known_nodes"),
    );
    if get("cluster_state") != "ok" {
        out.push(at(
            Severity::Unsafe,
            "cluster",
            format!(
                "cluster_state:{} as this node sees it ({counts}): it refuses commands, so \
                 locks here fail",
                get("cluster_state")
            ),
            "CLUSTER NODES shows which masters failed: bring them back or fail over to their \
             replicas, and cover every slot",
        ));
    } else if get("cluster_slots_assigned") != "16384" {
        out.push(at(
            Severity::Warning,
            "cluster",
            format!("cluster_state:ok, but not every slot is served ({counts})"),
            "assign every slot (cluster-require-full-coverage no hides this)",
        ));
    } else {
        out.push(at(
            Severity::Ok,
            "cluster",
            format!("cluster_state:ok ({counts})"),
            "",
        ));
    }
}

/// `TIME` against this host's clock, read before and after: the offset
/// (µs, positive when the server is ahead), within half the round trip.
/// Expiry is counted by the server's clock, so an offset alone breaks
/// nothing; but a clock that far off is not synchronised, and such clocks
/// jump when they are corrected: forward, a server expires its locks early;
/// back, a new master after a failover hands out smaller fences.
fn check_clock(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) -> Option<i64> {
    let (offset, within) = clock_offset(wire)?;
    let text = clock_text(offset, within);
    if offset.unsigned_abs() > CLOCK_SKEW.as_micros() as u64 {
        out.push(at(
            Severity::Warning,
            "clock",
            format!(
                "{text}: a clock that far off is not synchronised, and jumps when it is \
                 corrected; forward, the server expires locks before their TTL (it counts them \
                 by its clock); back, fences drawn after a failover to it can be smaller"
            ),
            "synchronise the server's clock (chrony, systemd-timesyncd or ntpd), and this host's",
        ));
    } else {
        out.push(at(Severity::Ok, "clock", text, ""));
    }
    Some(offset)
}

/// The server's `TIME` less this host's clock (µs, positive when the
/// server is ahead), and within how much (half the round trip).
fn clock_offset(wire: &mut Wire) -> Option<(i64, i64)> {
    let epoch_us = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64)
    };
    let before = std::time::SystemTime::now();
    let reply = redis::cmd("TIME").query::<(i64, i64)>(wire);
    let after = std::time::SystemTime::now();
    let (secs, micros) = reply.ok()?;
    let (before, after) = (epoch_us(before), epoch_us(after));
    Some((
        secs * 1_000_000 + micros - (before + after) / 2,
        (after - before) / 2,
    ))
}

/// The clocks of a master's replicas (its INFO's `slaveN` lines) against
/// its own (`master_us`: its offset from this host's). A failover hands
/// the locks to a replica with their expiry times as absolute instants of
/// the master's clock: a replica ahead expires them early (a second owner
/// while the first still works), one behind keeps them longer and, when
/// the fence counter had not reached it, draws smaller fences.
fn check_replica_clocks(
    info: &HashMap<String, String>,
    master_us: i64,
    master: &str,
    pool: &Pool,
    out: &mut Vec<Finding>,
) {
    let replicas = (0..)
        .map_while(|i| info.get(&format!("slave{i}")))
        .filter_map(|line| {
            let field = |k: &str| {
                line.split(',')
                    .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            };
            Some((
                field("ip")?.to_string(),
                field("port")?.parse::<u16>().ok()?,
            ))
        });
    for (host, port) in replicas {
        let server = format!("{host}:{port} (replica of {master})");
        let finding = |severity, message: String, fix: &str| Finding {
            severity,
            check: "clock",
            server: server.clone(),
            message,
            fix: fix.to_string(),
        };
        let offset = pool
            .inspection_connection_to(&host, port)
            .map_err(|e| e.to_string())
            .and_then(|mut wire| clock_offset(&mut wire).ok_or_else(|| "TIME refused".into()));
        let (offset, within) = match offset {
            Ok(o) => o,
            Err(e) => {
                out.push(finding(
                    Severity::Warning,
                    format!("the replica's clock could not be read ({e})"),
                    "run doctor where the replicas can be reached, as a user allowed TIME",
                ));
                continue;
            }
        };
        let apart = offset - master_us;
        let text = format!(
            "clock {:.3} s {} its master's (± {:.1} ms)",
            apart.unsigned_abs() as f64 / 1e6,
            if apart >= 0 { "ahead of" } else { "behind" },
            within as f64 / 1e3
        );
        if apart.unsigned_abs() <= CLOCK_SKEW.as_micros() as u64 {
            out.push(finding(Severity::Ok, text, ""));
        } else if apart > 0 {
            out.push(finding(
                Severity::Warning,
                format!(
                    "{text}: after a failover to it, every lock taken before expires that much \
                     early (expiry is an instant of the master's clock, counted by the \
                     replica's): a second owner while the first still works"
                ),
                "synchronise the replica's clock with its master's (chrony, \
                 systemd-timesyncd or ntpd)",
            ));
        } else {
            out.push(finding(
                Severity::Warning,
                format!(
                    "{text}: after a failover to it, locks taken before last that much longer, \
                     and fences it draws can fall below those handed out already when the \
                     fence counter had not reached it"
                ),
                "synchronise the replica's clock with its master's (chrony, \
                 systemd-timesyncd or ntpd)",
            ));
        }
    }
}

/// "clock 90.000 s ahead of this host's (± 0.1 ms)".
fn clock_text(offset_us: i64, within_us: i64) -> String {
    let side = if offset_us >= 0 { "ahead of" } else { "behind" };
    format!(
        "clock {:.3} s {side} this host's (± {:.1} ms)",
        offset_us.unsigned_abs() as f64 / 1e6,
        within_us as f64 / 1e3
    )
}

/// The Redlock nodes' clocks against each other (`offsets`: each node's
/// from this host's, µs): a warning when two differ by more than
/// [`CLOCK_SKEW`].
fn redlock_clocks(target: &str, offsets: &[(String, i64)]) -> Option<Finding> {
    let min = offsets.iter().min_by_key(|(_, o)| *o)?;
    let max = offsets.iter().max_by_key(|(_, o)| *o)?;
    let spread = max.1 - min.1;
    (spread.unsigned_abs() > CLOCK_SKEW.as_micros() as u64).then(|| Finding {
        severity: Severity::Warning,
        check: "clock",
        server: target.to_string(),
        message: format!(
            "the nodes' clocks differ by {:.3} s ({} ahead of {}): Redlock allows for clock \
             drift of 1% of the TTL and 2 ms, and unsynchronised clocks jump when corrected; \
             a node whose clock jumps forward frees a lock early, and with a majority that has \
             it, a second owner can be granted",
            spread as f64 / 1e6,
            max.0,
            min.0
        ),
        fix: String::from("synchronise every node's clock (chrony, systemd-timesyncd or ntpd)"),
    })
}

fn check_latency(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    let mut times = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let t = Instant::now();
        match wire.req_command(&redis::cmd("PING")) {
            Ok(Value::SimpleString(_)) | Ok(Value::Okay) => times.push(t.elapsed()),
            _ => break,
        }
    }
    if times.is_empty() {
        out.push(at(
            Severity::Warning,
            "latency",
            String::from("PING got no answer: the round trip was not measured"),
            "",
        ));
        return;
    }
    times.sort();
    let median = times[times.len() / 2];
    let max = times[times.len() - 1];
    let text = format!(
        "round trip {} µs (median of {}, at most {} µs)",
        median.as_micros(),
        times.len(),
        max.as_micros()
    );
    if median > SLOW_ROUND_TRIP {
        out.push(at(
            Severity::Warning,
            "latency",
            format!(
                "{text}: a lock cycle costs 2 round trips and a hand-off 2 to 3, so waits and \
                 renewals take that long, and short TTLs leave little margin"
            ),
            "run clients close to the server, and use TTLs far above the round trip",
        ));
    } else {
        out.push(at(Severity::Ok, "latency", text, ""));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(severity: Severity, check: &'static str, message: String, fix: &str) -> Finding {
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
    fn replication_needs_min_replicas_or_wait_replicas() {
        let mut out = Vec::new();
        check_replication(1, Some(0), None, &at, &mut out);
        check_replication(1, Some(1), None, &at, &mut out);
        check_replication(1, Some(0), Some(1), &at, &mut out);
        check_replication(0, Some(0), None, &at, &mut out);
        let s: Vec<Severity> = out.iter().map(|f| f.severity).collect();
        assert_eq!(s, [Severity::Warning, Severity::Ok, Severity::Ok]);
    }

    #[test]
    fn clients_headroom() {
        let mut out = Vec::new();
        check_clients(Some(8), Some(10), Some(0), &at, &mut out);
        check_clients(Some(2), Some(10), Some(3), &at, &mut out);
        check_clients(Some(2), Some(10), Some(0), &at, &mut out);
        let s: Vec<Severity> = out.iter().map(|f| f.severity).collect();
        assert_eq!(s, [Severity::Warning, Severity::Warning, Severity::Ok]);
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

    #[test]
    fn the_acl_probe_arguments_are_counted_commands() {
        let args = acl_probe_args(b"jobs");
        let (mut i, mut names) = (0, Vec::new());
        while i < args.len() {
            let n: usize = std::str::from_utf8(&args[i]).unwrap().parse().unwrap();
            assert!(n >= 1 && i + n < args.len(), "a count past the end at {i}");
            names.push(String::from_utf8(args[i + 1].clone()).unwrap());
            i += n + 1;
        }
        assert_eq!(i, args.len());
        for c in [
            "SET", "EXISTS", "LPOP", "RPUSH", "PEXPIRE", "TIME", "ZADD", "HVALS",
        ] {
            assert!(names.iter().any(|n| n == c), "{c} is not asked about");
        }
        assert!(args.iter().any(|a| a.as_slice() == b"{jobs}:queue"));
    }

    #[test]
    fn redlock_of_two_tolerates_nothing() {
        assert_eq!(redlock_size("r", 2).severity, Severity::Warning);
        assert_eq!(redlock_size("r", 3).severity, Severity::Ok);
    }
}
