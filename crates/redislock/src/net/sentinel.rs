//! Redis Sentinel: the master of a service, found through its sentinels
//! and followed through failovers.
//!
//! `redis+sentinel://[user:password@]host:port[,host:port…]/service[?db=N]`,
//! or `rediss+sentinel://…` for TLS to the sentinels and to the master.
//! The URL's user, password and db apply to the master; the sentinels are
//! asked with their own credentials (`sentinel_user`, `sentinel_password`),
//! if any.
//!
//! Following a failover: in each process that uses the client, one thread
//! per sentinel listens to its `+failover-state-send-slaveof-noone`,
//! `+promoted-slave` and `+switch-master` (started with the client's first
//! connection). From the first, the leader's word that it is about to
//! promote a replica, the pools send the old master nothing (see
//! [`Sentinel::promoting`]) while the replica is asked `ROLE` every 10 ms,
//! and it is followed as soon as it answers as a master. When a sentinel announces
//! a new master for the service, the client adopts it at once, unless the
//! configuration's epoch says it is older than the one followed (a sentinel
//! that lags can never take a switch back): the connections to the old master are shut down, those in
//! the middle of a command too (the command goes to the new master), pooled
//! ones are never used again, and the waiters' subscriber moves to the new
//! master under the same channel (see `Pool`). While one sentinel at least
//! is listened to, new connections go to the master known without asking.
//! Each new connection asks the server its `ROLE`: one that answers as a
//! replica makes the client ask the sentinels again, as a READONLY reply
//! does. A listener PINGs its sentinel and hangs up on one that stays
//! silent (see [`heartbeat`]): a sentinel cut off by a partition is not
//! counted as listened to, and a client that cannot hear a majority of
//! the sentinels its URL lists grants nothing (see [`Sentinel::deaf`]).
//!
//! Hazard, in plain words: Redis replicates asynchronously, so a failover
//! can lose a lock that the old master granted just before it died, and two
//! owners may then exist. The opt-in `?wait_replicas=N&wait_timeout=T`
//! makes an acquisition wait until N replicas have it (Redis `WAIT`), which
//! narrows that window but does not make Redis consistent.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use redis::{ConnectionInfo, IntoConnectionInfo, Value};

use crate::error::{Error, Result};
use crate::net::wire::{is_auth_error, server_message, Closer, Push, Tls, Wire, UNTRUSTED_HINT};
use crate::sync::locked;

/// How often a listener looks whether its client is gone.
const LISTEN_CHECK: Duration = Duration::from_secs(1);
/// Redis's default `down-after-milliseconds`, for a sentinel that does not
/// tell its own (its ACL allows `get-master-addr-by-name` alone).
const DOWN_AFTER_DEFAULT: Duration = Duration::from_secs(30);
/// The bounds of a listener's PING period (see [`heartbeat`]).
const PING_MIN: Duration = Duration::from_millis(50);
const PING_MAX: Duration = Duration::from_secs(1);
/// The longest silence a listener allows its sentinel (see [`heartbeat`]).
const DEAF_MAX: Duration = Duration::from_secs(5);
/// The longest pause between two attempts to listen to a sentinel again.
const RELISTEN_MAX: Duration = Duration::from_secs(2);
/// How long, at most, commands wait for a promotion that the sentinels
/// announced: the leader says `+failover-state-send-slaveof-noone`, sends
/// the replica `SLAVEOF NO ONE` at its next timer tick (about 100 ms
/// later), and says `+promoted-slave` once the replica answers as a master
/// (it asks every second then).
const PROMOTION_HOLD: Duration = Duration::from_secs(2);

/// The events a listener subscribes to (see `Sentinel::on_event`).
const EVENTS: [&str; 4] = [
    "+switch-master",
    "+promoted-slave",
    "+failover-state-send-slaveof-noone",
    "-failover-abort-slave-timeout",
];

/// How to find the master, and the master followed.
pub(crate) struct Sentinel {
    /// `host:port`, and how to connect (with the sentinels' credentials).
    pub(crate) sentinels: Vec<(String, ConnectionInfo)>,
    pub(crate) service: String,
    /// `redis://[user:password@]` (`rediss://…` for TLS) of the master's URL.
    pub(crate) auth: String,
    pub(crate) db: i64,
    /// For `rediss+sentinel://`: the sentinels and the master alike.
    pub(crate) tls: Option<Tls>,
    follow: Follow,
}

/// Told of each master a client follows.
pub(crate) type SwitchHook = Box<dyn Fn(&Master) + Send + Sync>;

/// The master as this process knows it, and what depends on it.
#[derive(Default)]
struct Follow {
    known: Mutex<Known>,
    /// `known.master`'s generation, read without the lock.
    generation: AtomicU64,
    /// The sockets of the connections opened to each generation's master,
    /// shut down when it is left.
    leases: Mutex<Vec<(u64, Weak<Closer>)>>,
    /// Told of each new master (the pools move their subscribers).
    hooks: Mutex<Vec<SwitchHook>>,
    /// Whether `known.promoting` may be set, read without the lock.
    promoting: AtomicBool,
    /// `known.pid` (high 32 bits) and `known.listening` (low 32 bits),
    /// read without the lock (see [`Sentinel::deaf`]).
    heard: AtomicU64,
}

#[derive(Default)]
struct Known {
    /// The process whose listeners run (0: none started).
    pid: u32,
    master: Option<Master>,
    /// The epoch of the configuration that named it, when a sentinel said.
    epoch: Option<u64>,
    /// Sentinels listened to now.
    listening: usize,
    /// The connect timeout, for the listeners.
    timeout: Duration,
    /// The shortest `down-after-milliseconds` a sentinel gave for the
    /// service (see [`heartbeat`]).
    down_after: Option<Duration>,
    /// A promotion of a replica of `master` that the sentinels announced
    /// and did not finish yet.
    promoting: Option<Promoting>,
}

/// The sentinels are about to promote `replica` (`host:port`) in place of
/// the master of `generation`.
struct Promoting {
    generation: u64,
    replica: String,
    since: Instant,
}

/// A master this client followed.
#[derive(Clone)]
pub(crate) struct Master {
    pub(crate) info: ConnectionInfo,
    /// `host:port`, for messages.
    pub(crate) addr: String,
    /// 1 for the first master known, one more at each switch.
    pub(crate) generation: u64,
}

/// A connection's claim on its master: once the client follows another,
/// the connection's socket is shut down (a thread blocked on it wakes).
pub(crate) struct Lease {
    pub(crate) generation: u64,
    /// `None` when the socket could not be watched: then the pool only
    /// stops reusing the connection.
    _closer: Option<Arc<Closer>>,
}

/// A sentinel's answer.
struct Found {
    host: String,
    port: u16,
    /// `None` when the sentinel would not tell (its ACL allows
    /// `get-master-addr-by-name` alone).
    epoch: Option<u64>,
    /// Its `down-after-milliseconds` for the service, when it told.
    down_after: Option<Duration>,
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
            follow: Follow::default(),
        }
    }

    /// For messages: the sentinels and the service, no credentials.
    pub(crate) fn describe(&self) -> String {
        let list: Vec<&str> = self.sentinels.iter().map(|(a, _)| a.as_str()).collect();
        let tls = if self.tls.is_some() { " (TLS)" } else { "" };
        format!("sentinel {} service {}{tls}", list.join(","), self.service)
    }

    /// Ask the sentinels for the master now, outside what this client
    /// follows (`doctor`): where to connect to it, and its `host:port`.
    pub(crate) fn master(&self, timeout: Duration) -> Result<(ConnectionInfo, String)> {
        let found = self.ask(timeout)?;
        let addr = format!("{}:{}", found.host, found.port);
        Ok((self.info(&found)?, addr))
    }

    /// The master to connect to: the one followed while a sentinel is
    /// listened to, else the sentinels' answer now (the last master known
    /// when none answers). `demoted`: the generation of a master found to
    /// answer as a replica (ROLE, READONLY), which is never returned
    /// without asking the sentinels again.
    pub(crate) fn current(
        self: &Arc<Self>,
        timeout: Duration,
        demoted: Option<u64>,
    ) -> Result<Master> {
        {
            let mut k = locked(&self.follow.known);
            self.listen(&mut k, timeout);
            if let Some(m) = &k.master {
                if k.listening > 0 && demoted != Some(m.generation) {
                    return Ok(m.clone());
                }
            }
        }
        match self.ask(timeout) {
            Ok(found) => self.adopt(found, "asked"),
            Err(e) => {
                let k = locked(&self.follow.known);
                match &k.master {
                    Some(m) if demoted != Some(m.generation) => {
                        tracing::debug!(
                            service = %self.service,
                            master = %m.addr,
                            error = %e,
                            "no sentinel answered: keeping the last master known"
                        );
                        Ok(m.clone())
                    }
                    _ => Err(e),
                }
            }
        }
    }

    /// Whether a sentinel is listened to in this process: then a master
    /// that cannot be reached may be replaced, and the client will hear it.
    pub(crate) fn listened_to(&self) -> bool {
        let k = locked(&self.follow.known);
        k.pid == crate::sync::pid() && k.listening > 0
    }

    /// The `host:port` of the master followed now, if any.
    pub(crate) fn followed(&self) -> Option<String> {
        locked(&self.follow.known)
            .master
            .as_ref()
            .map(|m| m.addr.clone())
    }

    /// The generation of the master followed now (0: none yet).
    pub(crate) fn generation(&self) -> u64 {
        self.follow.generation.load(Ordering::Acquire)
    }

    /// While the sentinels promote a replica of the master followed (they
    /// announced it, and neither finished nor gave up): the old master's
    /// address and the replica's. What the old master would write from now
    /// on would be lost, and a lock it granted would not exist on the new
    /// master, so the pools send nothing meanwhile (for `PROMOTION_HOLD` at
    /// most). Without the lock in the common case.
    pub(crate) fn promoting(&self) -> Option<(String, String)> {
        if !self.follow.promoting.load(Ordering::Acquire) {
            return None;
        }
        let mut k = locked(&self.follow.known);
        let (generation, pid) = (self.generation(), crate::sync::pid());
        match (&k.promoting, &k.master) {
            (Some(p), Some(m))
                if p.generation == generation
                    && k.pid == pid
                    && p.since.elapsed() < PROMOTION_HOLD =>
            {
                Some((m.addr.clone(), p.replica.clone()))
            }
            _ => {
                k.promoting = None;
                self.follow.promoting.store(false, Ordering::Release);
                None
            }
        }
    }

    /// Call `hook` with each master this client follows from now on.
    pub(crate) fn on_switch(&self, hook: SwitchHook) {
        locked(&self.follow.hooks).push(hook);
    }

    /// Claim `wire`, a connection to the master of `generation`: its socket
    /// is shut down once the client follows another (at once if it already
    /// does).
    pub(crate) fn lease(&self, wire: &Wire, generation: u64) -> Lease {
        let closer = wire.closer().ok().map(Arc::new);
        if let Some(closer) = &closer {
            let mut leases = locked(&self.follow.leases);
            leases.retain(|(_, w)| w.strong_count() > 0);
            leases.push((generation, Arc::downgrade(closer)));
        }
        if self.generation() != generation {
            if let Some(closer) = &closer {
                closer.close();
            }
        }
        Lease {
            generation,
            _closer: closer,
        }
    }

    /// Where to connect to the master `found` names.
    fn info(&self, found: &Found) -> Result<ConnectionInfo> {
        let url = format!("{}{}:{}/{}", self.auth, found.host, found.port, self.db);
        url.as_str()
            .into_connection_info()
            .map_err(|e| Error::invalid(format!("master address from the sentinels: {e}")))
    }

    /// Follow the master `found` names, unless it is the one followed or
    /// its configuration is older than that one's. `how`: for the debug line.
    fn adopt(&self, found: Found, how: &str) -> Result<Master> {
        let addr = format!("{}:{}", found.host, found.port);
        let info = self.info(&found)?;
        let mut k = locked(&self.follow.known);
        if let Some(d) = found.down_after {
            k.down_after = Some(k.down_after.map_or(d, |known| known.min(d)));
        }
        if let Some(m) = k.master.clone() {
            let older = matches!((found.epoch, k.epoch), (Some(new), Some(old)) if new < old);
            if m.addr == addr && found.epoch > k.epoch {
                k.epoch = found.epoch;
            }
            if m.addr == addr || older {
                return Ok(m);
            }
        }
        let generation = k.master.as_ref().map_or(1, |m| m.generation + 1);
        let master = Master {
            info,
            addr,
            generation,
        };
        let old = k.master.replace(master.clone());
        k.epoch = found.epoch;
        k.promoting = None;
        self.follow.generation.store(generation, Ordering::Release);
        drop(k);
        if let Some(old) = old {
            tracing::debug!(
                service = %self.service,
                from = %old.addr,
                to = %master.addr,
                epoch = found.epoch,
                how,
                "following the failover to the new master"
            );
            self.shut_before(generation);
            for hook in locked(&self.follow.hooks).iter() {
                hook(&master);
            }
        }
        Ok(master)
    }

    /// Shut down every connection to a master before `generation`.
    fn shut_before(&self, generation: u64) {
        let old: Vec<Arc<Closer>> = {
            let mut leases = locked(&self.follow.leases);
            let old = leases
                .iter()
                .filter(|(g, _)| *g < generation)
                .filter_map(|(_, w)| w.upgrade())
                .collect();
            leases.retain(|(g, w)| *g >= generation && w.strong_count() > 0);
            old
        };
        for closer in old {
            closer.close();
        }
    }

    /// Start this process's listeners, one thread per sentinel, unless they
    /// run (a forked child starts its own).
    fn listen(self: &Arc<Self>, k: &mut Known, timeout: Duration) {
        let pid = crate::sync::pid();
        k.timeout = timeout;
        if k.pid == pid {
            return;
        }
        k.pid = pid;
        k.listening = 0;
        self.follow
            .heard
            .store(u64::from(pid) << 32, Ordering::Release);
        for i in 0..self.sentinels.len() {
            let weak = Arc::downgrade(self);
            let started =
                crate::sync::spawn_quiet("redislock-sentinel", move || listener(&weak, i, pid));
            if let Err(e) = started {
                tracing::debug!(error = %e, "cannot start a sentinel listener: asking at each connection");
            }
        }
    }

    /// One sentinel listened to more (`+1`) or less (`-1`), by a listener
    /// of process `pid`.
    fn listening(&self, more: bool, pid: u32) {
        let mut k = locked(&self.follow.known);
        if k.pid != pid {
            return;
        }
        let before = k.listening;
        if more {
            k.listening += 1;
        } else {
            k.listening = k.listening.saturating_sub(1);
        }
        let heard = k.listening.min(u32::MAX as usize) as u64;
        self.follow
            .heard
            .store((u64::from(pid) << 32) | heard, Ordering::Release);
        let need = self.majority();
        if before >= need && k.listening < need {
            tracing::debug!(
                service = %self.service,
                master = k.master.as_ref().map(|m| m.addr.as_str()),
                heard = k.listening,
                of = self.sentinels.len(),
                "a majority of the sentinels is no longer heard: commands wait for them (fail \
                 closed)"
            );
        }
    }

    /// How many sentinels make a majority of those the URL lists.
    fn majority(&self) -> usize {
        self.sentinels.len() / 2 + 1
    }

    /// Whether this process cannot hear a majority of the sentinels the URL
    /// lists (their listeners connected, each asked the master on its
    /// connection and heard within its silence limit, see [`heartbeat`]):
    /// then how many it hears, of how many. Starts the listeners if they
    /// do not run (`timeout`: to connect). Without the lock while a
    /// majority is heard.
    ///
    /// A client that cannot hear a majority fails closed: the pools send
    /// nothing (see `Pool::hold`), since its master may be cut off beside
    /// it while the sentinels promote another (a split brain), and a lock
    /// granted there would not exist on the new master. The listeners hang
    /// up within half of the sentinels' `down-after-milliseconds`, before
    /// they can start a failover.
    pub(crate) fn deaf(self: &Arc<Self>, timeout: Duration) -> Option<(usize, usize)> {
        let need = self.majority();
        let heard = self.follow.heard.load(Ordering::Acquire);
        if (heard >> 32) as u32 == crate::sync::pid() && (heard & 0xffff_ffff) as usize >= need {
            return None;
        }
        let mut k = locked(&self.follow.known);
        self.listen(&mut k, timeout);
        (k.listening < need).then_some((k.listening, self.sentinels.len()))
    }

    /// The error state of [`Sentinel::deaf`], in words.
    pub(crate) fn deaf_state(&self, (heard, total): (usize, usize)) -> (String, String) {
        let master = self
            .followed()
            .unwrap_or_else(|| String::from("(none known yet)"));
        (
            format!("master {master} of {}", self.describe()),
            format!(
                "not vouched for by its sentinels: this client hears {heard} of the {total} the \
                 URL lists, and needs {} to know which server is the master (a partition may \
                 have cut it off beside an old master), so it grants nothing meanwhile",
                self.majority()
            ),
        )
    }

    /// Ask the sentinels in turn (each bounded by `timeout`) for the master.
    /// When no sentinel names it and one refused our credentials, the error
    /// is that refusal (a [`Error::Server`] naming that sentinel).
    fn ask(&self, timeout: Duration) -> Result<Found> {
        let mut reasons = Vec::new();
        let mut refused = None;
        for (i, (addr, _)) in self.sentinels.iter().enumerate() {
            match self.ask_one(i, timeout) {
                Ok(Some(found)) => return Ok(found),
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

    /// Sentinel `i`'s master for the service, with the configuration's
    /// epoch (`SENTINEL MASTER`), or without it where its ACL allows only
    /// `SENTINEL get-master-addr-by-name`. `None`: it does not know the
    /// service.
    fn ask_one(&self, i: usize, timeout: Duration) -> redis::RedisResult<Option<Found>> {
        let info = &self.sentinels[i].1;
        let mut con = Wire::connect(info, self.tls.as_ref(), timeout, timeout)?;
        self.ask_on(&mut con)
    }

    /// [`Sentinel::ask_one`] on a connection to that sentinel.
    fn ask_on(&self, con: &mut Wire) -> redis::RedisResult<Option<Found>> {
        let fields = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.service)
            .query::<Value>(con);
        match fields {
            Ok(v) => Ok(parse_master(v)),
            Err(e) if e.detail().is_some_and(|d| d.contains("No such master")) => Ok(None),
            Err(e) if e.code() == Some("NOPERM") => {
                let addr = redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&self.service)
                    .query::<Option<(String, u16)>>(con)?;
                Ok(addr.map(|(host, port)| Found {
                    host,
                    port,
                    epoch: None,
                    down_after: None,
                }))
            }
            Err(e) => Err(e),
        }
    }

    /// A listener's answer from a sentinel, as a reason to count it as
    /// heard: only a sentinel that names the service's master vouches for
    /// it. A server that takes SUBSCRIBE but is no sentinel (a wrong
    /// address, a dead sentinel's port taken by another server) or a
    /// sentinel that does not monitor the service is an error here, and
    /// is not counted toward the majority.
    fn vouches(&self, answer: redis::RedisResult<Option<Found>>) -> redis::RedisResult<Found> {
        answer?.ok_or_else(|| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a sentinel that does not monitor the service",
                self.service.clone(),
            ))
        })
    }

    /// An event from sentinel `i`.
    ///
    /// `+failover-state-send-slaveof-noone` (from the sentinel that leads a
    /// failover, just before it promotes the replica it chose: `slave
    /// <host:port> <host> <port> @ <service> <old host> <old port>`) holds
    /// the commands for the master followed until the promotion is
    /// followed (see [`Sentinel::promoting`]); `-failover-abort-slave-timeout`
    /// (`master <service> <host> <port>`) ends that hold.
    ///
    /// `+promoted-slave` (from the leader, once the replica answers as a
    /// master; the same fields) is followed at once: from then on the old
    /// master's writes are lost. `+switch-master` (`<service> <old host>
    /// <old port> <new host> <new port>`, from every sentinel once it
    /// adopts the new configuration) is followed with the epoch that
    /// sentinel gives, so that a sentinel that lags behind a later failover
    /// is not followed back.
    fn on_event(&self, i: usize, channel: &[u8], payload: &[u8], timeout: Duration) {
        let text = String::from_utf8_lossy(payload);
        let parts: Vec<&str> = text.split(' ').collect();
        let (name, host, port) = match (channel, &parts[..]) {
            (b"+promoted-slave", ["slave", _, host, port, "@", name, _, _]) => {
                (*name, *host, *port)
            }
            (b"+switch-master", [name, _, _, host, port]) => (*name, *host, *port),
            (
                b"+failover-state-send-slaveof-noone",
                ["slave", _, host, port, "@", name, old_host, old_port],
            ) if *name == self.service => {
                if self.hold(&format!("{old_host}:{old_port}"), &format!("{host}:{port}")) {
                    if let Ok(port) = port.parse() {
                        self.watch_promotion(host, port, timeout);
                    }
                }
                return;
            }
            (b"-failover-abort-slave-timeout", ["master", name, ..]) if *name == self.service => {
                locked(&self.follow.known).promoting = None;
                return;
            }
            _ => return,
        };
        let Ok(port) = port.parse() else { return };
        if name != self.service {
            return;
        }
        let promoted = Found {
            host: host.to_string(),
            port,
            // The new configuration's epoch is above the old one's.
            epoch: locked(&self.follow.known).epoch.map(|e| e + 1),
            down_after: None,
        };
        let found = match channel {
            b"+switch-master" => match self.ask_one(i, timeout) {
                Ok(Some(found)) => found,
                _ => promoted,
            },
            _ => promoted,
        };
        let how = String::from_utf8_lossy(channel);
        let _ = self.adopt(found, &how);
    }

    /// The sentinels are about to promote `replica` in place of `old`: if
    /// `old` is the master followed, hold its commands (see
    /// [`Sentinel::promoting`]) and say so.
    fn hold(&self, old: &str, replica: &str) -> bool {
        let mut k = locked(&self.follow.known);
        let Some(m) = &k.master else { return false };
        if m.addr != old {
            return false;
        }
        tracing::debug!(
            service = %self.service,
            master = old,
            replica,
            "the sentinels are promoting a replica: commands wait for the new master"
        );
        k.promoting = Some(Promoting {
            generation: m.generation,
            replica: replica.to_string(),
            since: Instant::now(),
        });
        self.follow.promoting.store(true, Ordering::Release);
        true
    }

    /// Ask the replica being promoted its `ROLE` every 10 ms while the
    /// commands are held, and follow it as soon as it answers as a master:
    /// the leader says `+promoted-slave` only at its next look, up to a
    /// second later. (Its promotion kills the replica's client connections,
    /// this one too: it connects again.)
    fn watch_promotion(&self, host: &str, port: u16, timeout: Duration) {
        let found = || Found {
            host: host.to_string(),
            port,
            epoch: locked(&self.follow.known).epoch.map(|e| e + 1),
            down_after: None,
        };
        let Ok(info) = self.info(&found()) else {
            return;
        };
        // A replica that does not answer at once is asked again: the hold
        // ends by itself, and this thread also reads the leader's events.
        let ask = timeout.min(Duration::from_millis(250));
        let mut wire = None;
        while self.promoting().is_some() {
            if wire.is_none() {
                wire = Wire::connect(&info, self.tls.as_ref(), ask, ask).ok();
            }
            if let Some(w) = wire.as_mut() {
                match redis::cmd("ROLE").query::<Value>(w) {
                    Ok(Value::Array(role)) => {
                        if matches!(role.first(), Some(Value::BulkString(r)) if r.as_slice() == b"master")
                        {
                            let _ = self.adopt(found(), "the promoted replica answers as master");
                            return;
                        }
                    }
                    Ok(_) => {}
                    // Not allowed ROLE: `+promoted-slave` will say.
                    Err(e)
                        if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm) =>
                    {
                        return
                    }
                    Err(_) => wire = None,
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
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

/// A listener: subscribe to sentinel `i`'s events and follow what it
/// announces, again after each lost connection, until the client is gone
/// (or this is a forked child: the thread is its parent's). A sentinel
/// whose ACL refuses SUBSCRIBE is asked the master at each PING period
/// instead (see [`poll`]).
fn listener(weak: &Weak<Sentinel>, i: usize, pid: u32) {
    let mut pause = Duration::from_millis(100);
    let mut said = false;
    loop {
        let (info, tls, timeout) = {
            let Some(s) = weak.upgrade() else { return };
            let k = locked(&s.follow.known);
            if k.pid != pid {
                return;
            }
            (s.sentinels[i].1.clone(), s.tls.clone(), k.timeout)
        };
        let mut refused = false;
        let subscribed = Wire::connect(&info, tls.as_ref(), timeout, timeout).and_then(|mut w| {
            for channel in EVENTS {
                w.subscribe(channel)
                    .inspect_err(|e| refused = e.code() == Some("NOPERM"))?;
            }
            Ok(w)
        });
        let lost = match subscribed {
            Ok(wire) => {
                let Some(s) = weak.upgrade() else { return };
                // Asked at once: a switch may have come while nobody
                // listened. Only a sentinel that names the master is heard;
                // an address that does not (see [`Sentinel::vouches`]) is
                // tried again at the growing pause, not at once.
                match s.vouches(s.ask_one(i, timeout)) {
                    Ok(found) => {
                        (pause, said) = (Duration::from_millis(100), false);
                        let beat = heard_again(&s, pid, found);
                        drop(s);
                        hear(weak, i, pid, wire, beat, timeout)
                    }
                    Err(e) => Some(e),
                }
            }
            Err(_) if refused => poll(weak, i, pid, &info, tls.as_ref(), timeout),
            Err(e) => Some(e),
        };
        let Some(lost) = lost else { return };
        if weak.strong_count() == 0 {
            return;
        }
        if !said {
            said = true;
            tracing::debug!(sentinel = i, error = %lost, "cannot hear a sentinel: trying again");
        }
        let until = Instant::now() + pause;
        while Instant::now() < until {
            if weak.strong_count() == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(50).min(pause));
        }
        pause = (pause * 2).min(RELISTEN_MAX);
    }
}

/// The sentinel `i` of `s` is heard from now on: it was just asked the
/// master (a switch may have come while nobody listened). The PING period
/// and the silence limit, from what the sentinels said.
fn heard_again(s: &Sentinel, pid: u32, found: Found) -> (Duration, Duration) {
    let _ = s.adopt(found, "a sentinel heard again");
    s.listening(true, pid);
    heartbeat(locked(&s.follow.known).down_after)
}

/// Listen on `wire`, subscribed to sentinel `i`'s events (the sentinel
/// just counted as heard, with its PING period and silence limit from
/// [`heartbeat`]), until it is lost (the error, and no longer counted) or
/// the client is gone (`None`). PINGs it, and hangs up on a longer
/// silence.
fn hear(
    weak: &Weak<Sentinel>,
    i: usize,
    pid: u32,
    mut wire: Wire,
    (ping_every, deaf_after): (Duration, Duration),
    timeout: Duration,
) -> Option<redis::RedisError> {
    let mut heard = Instant::now();
    let mut next_ping = heard + ping_every;
    let lost = loop {
        let now = Instant::now();
        if now >= heard + deaf_after {
            break silence(deaf_after);
        }
        if now >= next_ping {
            if let Err(e) = wire.ping_subscribed() {
                break e;
            }
            next_ping = now + ping_every;
        }
        let until = (now + LISTEN_CHECK).min(next_ping).min(heard + deaf_after);
        match wire.next_push(until, false) {
            Ok(Some(push)) => {
                heard = Instant::now();
                if let Push::Message { channel, payload } = push {
                    let s = weak.upgrade()?;
                    s.on_event(i, &channel, &payload, timeout);
                }
            }
            Ok(None) if weak.strong_count() == 0 => return None,
            Ok(None) => {}
            Err(e) => break e,
        }
    };
    let s = weak.upgrade()?;
    tracing::debug!(sentinel = %s.sentinels[i].0, error = %lost, "lost a sentinel's events: listening again");
    s.listening(false, pid);
    Some(lost)
}

/// For a sentinel whose ACL refuses SUBSCRIBE: ask it the master at each
/// PING period on one connection, and follow its answer, until a question
/// fails or goes unanswered longer than [`heartbeat`] allows (the error) or
/// the client is gone (`None`). A failover is then followed within a
/// period rather than at once.
fn poll(
    weak: &Weak<Sentinel>,
    i: usize,
    pid: u32,
    info: &ConnectionInfo,
    tls: Option<&Tls>,
    timeout: Duration,
) -> Option<redis::RedisError> {
    let mut wire = match Wire::connect(info, tls, timeout, timeout) {
        Ok(w) => w,
        Err(e) => return Some(e),
    };
    let (ping_every, deaf_after) = {
        let s = weak.upgrade()?;
        let found = match s.vouches(s.ask_on(&mut wire)) {
            Ok(found) => found,
            Err(e) => return Some(e),
        };
        tracing::debug!(sentinel = %s.sentinels[i].0, "SUBSCRIBE refused (ACL): asking the master at each period instead");
        heard_again(&s, pid, found)
    };
    wire.set_timeout(deaf_after).ok();
    let lost = loop {
        let until = Instant::now() + ping_every;
        while Instant::now() < until {
            if weak.strong_count() == 0 {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50).min(ping_every));
        }
        let s = weak.upgrade()?;
        match s.vouches(s.ask_on(&mut wire)) {
            Ok(found) => {
                let _ = s.adopt(found, "a sentinel asked");
            }
            Err(e) => break e,
        }
    };
    let s = weak.upgrade()?;
    tracing::debug!(sentinel = %s.sentinels[i].0, error = %lost, "lost a sentinel: asking again");
    s.listening(false, pid);
    Some(lost)
}

/// The error of a sentinel silent for `deaf_after`.
fn silence(deaf_after: Duration) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no reply to PING for {deaf_after:?}"),
    ))
}

/// A listener's PING period and the longest silence it allows, from the
/// sentinels' `down-after-milliseconds` for the service (the time they
/// take to find a master down, and so the earliest a failover can start):
/// PING every quarter of it (50 ms to 1 s), and a sentinel that answers
/// nothing for half of it (5 s at most) is listened to again on a fresh
/// connection, whose first act is to ask it the master. A client cut off
/// from its sentinels thus stops counting them as listened to before they
/// can replace the master, and follows what they decided meanwhile as soon
/// as it reaches one again, whether or not their announcements survived.
fn heartbeat(down_after: Option<Duration>) -> (Duration, Duration) {
    let down_after = down_after.unwrap_or(DOWN_AFTER_DEFAULT);
    let ping = (down_after / 4).clamp(PING_MIN, PING_MAX);
    let deaf = (down_after / 2).min(DEAF_MAX).max(ping * 2);
    (ping, deaf)
}

/// The answer to `SENTINEL MASTER <service>`: field names and values in
/// turn (a map in RESP3).
fn parse_master(v: Value) -> Option<Found> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    };
    let pairs: Vec<(String, String)> = match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| Some((text(p.first()?)?, text(p.get(1)?)?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
            .collect(),
        _ => return None,
    };
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    Some(Found {
        host: field("ip")?.to_string(),
        port: field("port")?.parse().ok()?,
        epoch: field("config-epoch").and_then(|e| e.parse().ok()),
        down_after: field("down-after-milliseconds")
            .and_then(|d| d.parse().ok())
            .filter(|&ms: &u64| ms > 0)
            .map(Duration::from_millis),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_listener_pings_and_hangs_up_well_within_down_after() {
        // Redis's default, and a sentinel that would not tell: 30 s.
        assert_eq!(heartbeat(None), (1000 * MS, 5000 * MS));
        assert_eq!(heartbeat(Some(30_000 * MS)), (1000 * MS, 5000 * MS));
        assert_eq!(heartbeat(Some(2000 * MS)), (500 * MS, 1000 * MS));
        assert_eq!(heartbeat(Some(100 * MS)), (50 * MS, 100 * MS));
        // Absurdly short: still two PINGs before hanging up (below 100 ms,
        // the silence allowed is longer than down-after).
        assert_eq!(heartbeat(Some(MS)), (50 * MS, 100 * MS));
        for ms in [100, 200, 1_000, 5_000, 10_000, 60_000, 3_600_000] {
            let down_after = ms * MS;
            let (ping, deaf) = heartbeat(Some(down_after));
            assert!(
                ping * 2 <= deaf && deaf <= down_after,
                "{down_after:?}: {ping:?} {deaf:?}"
            );
        }
    }

    #[test]
    fn sentinel_master_gives_the_address_the_epoch_and_down_after() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let fields = ["name", "mymaster", "ip", "10.0.0.5", "port", "6380"];
        let mut v: Vec<Value> = fields.iter().map(|s| bulk(s)).collect();
        let found = parse_master(Value::Array(v.clone())).unwrap();
        assert_eq!((found.host.as_str(), found.port), ("10.0.0.5", 6380));
        assert_eq!((found.epoch, found.down_after), (None, None));
        for s in ["config-epoch", "7", "down-after-milliseconds", "1500"] {
            v.push(bulk(s));
        }
        let found = parse_master(Value::Array(v)).unwrap();
        assert_eq!((found.epoch, found.down_after), (Some(7), Some(1500 * MS)));
    }
}
