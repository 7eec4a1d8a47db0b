//! Connections to one Redis server (or one cluster, routed by slot):
//! opening them with timeouts, a pool that lets many threads work at once,
//! fork safety, and redis-rs errors turned into ours. It runs the scripts
//! it is given and never reads what they mean.
//!
//! Each operation takes a connection of its own from the pool (or opens
//! one), so a thread blocked in a wait never holds up another thread. The
//! pool remembers the process id it was filled in: in a child after
//! `fork()` the inherited connections are never used (they share sockets
//! with the parent) and fresh ones are opened. A connection that saw an I/O
//! error is dropped, not pooled. Waiters do not take a connection each:
//! they register with the client's [`Hub`], one subscriber connection per
//! server node.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionLike, ErrorKind as RedisKind, RedisResult, Value};

use crate::error::{Error, Result};
use crate::net::cluster::Routed;
use crate::net::hub::{Delivery, Hub, Ticket};
use crate::net::sentinel::{Lease, Master, Sentinel};
use crate::net::target::{Endpoint, Target};
use crate::net::transport::Transport;
use crate::net::wire::{io_reason, is_auth_error, server_message, Wire, UNTRUSTED_HINT};
use crate::protocol::Script;
use crate::stats::{Counters, Event};
use crate::sync::locked;

/// How old a slot map may be when a cluster hand-off is checked (see
/// [`Pool::before_confirming`]): under contention, one map read a second.
const HANDOFF_MAP_AGE: Duration = Duration::from_secs(1);

/// A command connection: to one server, to the master a Sentinel service
/// had when it was opened, or routed over a cluster.
pub(crate) enum Conn {
    Plain(Wire),
    Master(Wire, Lease),
    Cluster(Routed),
}

impl Conn {
    fn set_timeouts(&mut self, d: Duration) -> RedisResult<()> {
        match self {
            Conn::Plain(c) | Conn::Master(c, _) => c.set_timeout(d),
            Conn::Cluster(c) => c.set_timeout(d),
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match self {
            Conn::Plain(c) | Conn::Master(c, _) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Conn::Plain(c) | Conn::Master(c, _) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Conn::Plain(c) | Conn::Master(c, _) => c.req_command(cmd),
            Conn::Cluster(c) => c.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Plain(c) | Conn::Master(c, _) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }

    fn supports_pipelining(&self) -> bool {
        match self {
            Conn::Plain(c) | Conn::Master(c, _) => c.supports_pipelining(),
            Conn::Cluster(c) => c.supports_pipelining(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            Conn::Plain(c) | Conn::Master(c, _) => c.check_connection(),
            Conn::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            Conn::Plain(c) | Conn::Master(c, _) => c.is_open(),
            Conn::Cluster(c) => c.is_open(),
        }
    }
}

struct Idle {
    pid: u32,
    /// With when each was last put back; the most recently used last.
    cmd: Vec<(Conn, Instant)>,
}

impl Idle {
    /// Forget what a parent process left behind. Dropping a connection only
    /// closes this process's descriptor; the parent's socket stays open.
    fn check_pid(&mut self) {
        let pid = crate::sync::pid();
        if self.pid != pid {
            self.pid = pid;
            self.cmd.clear();
        }
    }

    /// Close the connections unused for [`IDLE_CLOSE`], beyond the
    /// [`KEEP_IDLE`] most recently used: a burst of threads leaves no
    /// connections behind on the server.
    fn trim(&mut self, now: Instant) {
        let old = self
            .cmd
            .iter()
            .take(self.cmd.len().saturating_sub(KEEP_IDLE))
            .take_while(|(_, used)| now.saturating_duration_since(*used) >= IDLE_CLOSE)
            .count();
        self.cmd.drain(..old);
    }
}

/// Most idle connections kept for reuse.
const MAX_IDLE: usize = 64;
/// Idle connections kept however long they were not used.
const KEEP_IDLE: usize = 2;
/// How long the others stay open unused.
const IDLE_CLOSE: Duration = Duration::from_secs(5);

/// The connection pool of one client.
pub(crate) struct Pool {
    pub(crate) target: Target,
    /// The client's statistics (connection errors and reconnects here).
    pub(crate) stats: Arc<Counters>,
    idle: Arc<Mutex<Idle>>,
    /// Waiters' subscriber connections.
    hub: Arc<Hub>,
    /// What the server accepts beyond Redis 6.2.
    pub(crate) caps: crate::protocol::Caps,
    pub(crate) contended: crate::protocol::Contended,
}

impl Pool {
    pub(crate) fn new(target: Target, stats: Arc<Counters>) -> Pool {
        let idle = Arc::new(Mutex::new(Idle {
            pid: crate::sync::pid(),
            cmd: Vec::new(),
        }));
        // While waiters wait, nothing takes or returns connections: the
        // subscriber's reader trims the idle ones once a second.
        let weak = Arc::downgrade(&idle);
        let trim = move || {
            if let Some(idle) = weak.upgrade() {
                let mut idle = locked(&idle);
                if idle.pid == crate::sync::pid() {
                    idle.trim(Instant::now());
                }
            }
        };
        let hub = Arc::new(Hub::new(Box::new(trim)));
        match &target.endpoint {
            Endpoint::Sentinel(s) => follow_with_subscriber(s, &hub, &target),
            Endpoint::Cluster(c) => follow_slots(c, &hub, &target),
            Endpoint::Direct(_) => {}
        }
        Pool {
            target,
            stats,
            idle,
            hub,
            caps: crate::protocol::Caps::default(),
            contended: crate::protocol::Contended::default(),
        }
    }

    /// Whether a subscriber may receive messages PUBLISHed on another node
    /// (Cluster broadcasts them; a demoted Sentinel master gets them
    /// replicated).
    pub(crate) fn remote_publish(&self) -> bool {
        !matches!(self.target.endpoint, Endpoint::Direct(_))
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.target.endpoint, Endpoint::Cluster { .. })
    }

    fn connect_within(&self, connect_timeout: Duration) -> Result<Conn> {
        let t = &self.target;
        Ok(match &t.endpoint {
            Endpoint::Cluster(cluster) => Conn::Cluster(
                Routed::connect(cluster.clone(), connect_timeout, t.command_timeout)
                    .map_err(|e| self.error(e, true))?,
            ),
            Endpoint::Sentinel(s) => {
                let (wire, lease) = self.master_connection(s, connect_timeout)?;
                Conn::Master(wire, lease)
            }
            Endpoint::Direct(_) => Conn::Plain(self.plain_connection(connect_timeout, None)?),
        })
    }

    /// A connection to the master a Sentinel service has now (see
    /// [`Sentinel::current`]), leased from the start: a switch while it
    /// waits for a frozen server ends the wait. A server that
    /// answers ROLE as a replica makes the client ask the sentinels again;
    /// if they still name it, a failover is under way: an
    /// [`Error::Unavailable`], asked again while the command timeout allows.
    fn master_connection(
        &self,
        s: &Arc<Sentinel>,
        connect_timeout: Duration,
    ) -> Result<(Wire, Lease)> {
        let t = &self.target;
        let mut demoted = None;
        loop {
            let master = s.current(connect_timeout, demoted).inspect_err(|e| {
                if matches!(e, Error::Connection { .. }) {
                    self.stats.count(Event::ConnectionError);
                }
            })?;
            if demoted == Some(master.generation) {
                return Err(still_named(s, &master));
            }
            let mut wire = Wire::connect(
                &master.info,
                t.tls.as_ref(),
                connect_timeout,
                t.command_timeout,
            )
            .map_err(|e| s.at_master(self.error(e, true), &master.addr))?;
            let lease = s.lease(&wire, master.generation);
            match answers_as_master(&mut wire) {
                Ok(true) => return Ok((wire, lease)),
                Ok(false) => demoted = Some(master.generation),
                Err(e) => return Err(s.at_master(self.error(e, true), &master.addr)),
            }
        }
    }

    /// A connection to one server: the server, Sentinel's master, or the
    /// cluster node `node`.
    fn plain_connection(&self, connect_timeout: Duration, node: Option<&str>) -> Result<Wire> {
        let t = &self.target;
        let info = match (&t.endpoint, node) {
            (Endpoint::Direct(info), _) => info.clone(),
            (Endpoint::Sentinel(s), _) => return Ok(self.master_connection(s, connect_timeout)?.0),
            (Endpoint::Cluster(cluster), Some(node)) => {
                return cluster
                    .connect(node, connect_timeout, t.command_timeout)
                    .map_err(|e| self.error(e, true))
            }
            (Endpoint::Cluster(_), None) => {
                return Err(Error::Internal("a cluster connection needs a node".into()))
            }
        };
        Wire::connect(&info, t.tls.as_ref(), connect_timeout, t.command_timeout)
            .map_err(|e| self.error(e, true))
    }

    /// Fresh connections, outside the pool and its statistics, to every
    /// server this pool's commands may reach, for inspection (`doctor`):
    /// the server, Sentinel's current master, or every master that a
    /// cluster node lists. Each with its `host:port` (or socket path), or
    /// why it could not be reached. An error when nobody could be asked:
    /// no sentinel named a master, no cluster node answered.
    pub(crate) fn inspection_connections(&self) -> Result<Vec<(String, Result<Wire>)>> {
        let t = &self.target;
        let (ct, timeout) = (t.connect_timeout, t.command_timeout);
        let at = |addr: &str, e: redis::RedisError| match self.translate(e, true) {
            Error::Connection { reason, hint, .. } => Error::Connection {
                addr: addr.to_string(),
                reason,
                hint,
            },
            Error::Server { message, .. } => Error::Server {
                addr: addr.to_string(),
                message,
            },
            other => other,
        };
        Ok(match &t.endpoint {
            Endpoint::Direct(info) => {
                let wire = Wire::connect(info, t.tls.as_ref(), ct, timeout);
                vec![(t.addr.clone(), wire.map_err(|e| at(&t.addr, e)))]
            }
            Endpoint::Sentinel(s) => {
                let (info, master) = s.master(ct)?;
                let wire = Wire::connect(&info, t.tls.as_ref(), ct, timeout);
                let wire = wire.map_err(|e| s.at_master(at(&master, e), &master));
                vec![(master, wire)]
            }
            Endpoint::Cluster(cluster) => cluster
                .masters(ct, timeout)
                .map_err(|e| at(&cluster.describe(), e))?
                .into_iter()
                .map(|node| {
                    let wire = cluster.connect(&node, ct, timeout);
                    let wire = wire.map_err(|e| at(&node, e));
                    (node, wire)
                })
                .collect(),
        })
    }

    /// The node (`host:port`) serving `key`'s slot, for a cluster; empty
    /// otherwise.
    fn node_for(&self, key: &[u8]) -> Result<String> {
        if !self.is_cluster() {
            return Ok(String::new());
        }
        self.with(|con, _| match con {
            Conn::Cluster(c) => c.node_for(key),
            Conn::Plain(_) | Conn::Master(..) => Ok(String::new()),
        })
    }

    fn take(&self) -> Option<Conn> {
        let mut idle = locked(&self.idle);
        idle.check_pid();
        while let Some((con, _)) = idle.cmd.pop() {
            if !self.superseded(&con) {
                return Some(con);
            }
        }
        None
    }

    /// Sentinel: the master and the replica that its sentinels are
    /// promoting now (see [`Sentinel::promoting`]); commands wait.
    pub(crate) fn promoting(&self) -> Option<(String, String)> {
        match &self.target.endpoint {
            Endpoint::Sentinel(s) => s.promoting(),
            _ => None,
        }
    }

    /// A connection to a Sentinel master that this client no longer
    /// follows: never used again.
    fn superseded(&self, con: &Conn) -> bool {
        match (con, &self.target.endpoint) {
            (Conn::Master(_, lease), Endpoint::Sentinel(s)) => lease.generation != s.generation(),
            _ => false,
        }
    }

    /// The most recently used idle connection, if it is one whose replies
    /// can be polled for (see [`Wire::poll_fd`]): never connects, never
    /// waits. Give it back with [`Pool::put_wire`] once its reply is read.
    pub(crate) fn take_pollable(&self) -> Option<Wire> {
        let mut idle = locked(&self.idle);
        idle.check_pid();
        match idle.cmd.last() {
            Some((Conn::Plain(w), _)) if w.poll_fd().is_some() => {}
            _ => return None,
        }
        match idle.cmd.pop() {
            Some((Conn::Plain(w), _)) => Some(w),
            _ => None,
        }
    }

    /// Pool a connection taken with [`Pool::take_pollable`] again (unless
    /// it saw an I/O error).
    pub(crate) fn put_wire(&self, w: Wire) {
        self.put(Conn::Plain(w));
    }

    fn put(&self, con: Conn) {
        let mut idle = locked(&self.idle);
        idle.check_pid();
        if con.is_open() && idle.cmd.len() < MAX_IDLE && !self.superseded(&con) {
            let now = Instant::now();
            idle.cmd.push((con, now));
            idle.trim(now);
        }
    }

    /// Run `f` on a pooled connection. When a reused connection turns out to
    /// be dead (the server restarted, or closed it as idle), `f` runs once
    /// more on a fresh connection; `retried` tells it which run it is. A
    /// server in a transient state (see [`transient_state`]) is asked again
    /// with backoff for up to the command timeout.
    pub(crate) fn with<T>(
        &self,
        f: impl FnMut(&mut Conn, bool) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let t = &self.target;
        self.run(t.connect_timeout, t.command_timeout, "command timeout", f)
    }

    /// Like [`Pool::with`], with every wait (connect, send, reply) bounded by
    /// `timeout` instead of the client's timeouts: Redlock's per-node limit.
    pub(crate) fn with_timeout<T>(
        &self,
        timeout: Duration,
        mut f: impl FnMut(&mut Conn, bool) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let normal = self.target.command_timeout;
        let connect = timeout.min(self.target.connect_timeout);
        self.run(connect, timeout, "node timeout", |con, retried| {
            con.set_timeouts(timeout)?;
            let r = f(con, retried)?;
            con.set_timeouts(normal)?;
            Ok(r)
        })
    }

    /// [`Pool::run_once`] again while the server answers with a transient
    /// state and `budget` allows, pausing 10 ms, then twice as long each
    /// time (at most 200 ms). When the budget runs out the error names the
    /// state and how long it lasted. Likewise while the server refuses
    /// connections and the deployment may give it a successor (see
    /// [`Pool::failover_possible`]): the command was never sent, and goes
    /// to the new master once there is one.
    fn run<T>(
        &self,
        connect_timeout: Duration,
        budget: Duration,
        budget_name: &'static str,
        mut f: impl FnMut(&mut Conn, bool) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut transient = Transient::new(budget, budget_name);
        let mut sent = false;
        loop {
            if let Some(held) = self.promoting() {
                std::thread::sleep(transient.held(held)?);
                continue;
            }
            match self.run_once(connect_timeout, sent, &mut f) {
                Ok(v) => return Ok(v),
                Err(Failed {
                    error: e @ Error::Unavailable { .. },
                    ..
                }) => std::thread::sleep(transient.pause(e)?),
                Err(Failed {
                    error,
                    refused: true,
                    sent: was_sent,
                }) => match transient.outage() {
                    Some(pause) if self.failover_possible() => {
                        sent = was_sent;
                        std::thread::sleep(pause);
                    }
                    _ => return Err(error),
                },
                Err(Failed { error, .. }) => return Err(error),
            }
        }
    }

    /// The pooled run with one retry on a fresh connection (see `with`).
    /// `sent`: an earlier run may have taken effect (`f` is told so).
    fn run_once<T>(
        &self,
        connect_timeout: Duration,
        sent: bool,
        mut f: impl FnMut(&mut Conn, bool) -> redis::RedisResult<T>,
    ) -> std::result::Result<T, Failed> {
        let (mut con, reused) = match self.take() {
            Some(c) => (c, true),
            None => (
                self.connect_within(connect_timeout)
                    .map_err(|error| Failed::refused(error, sent))?,
                false,
            ),
        };
        match f(&mut con, sent) {
            // Also a command cut short because the client followed a
            // failover meanwhile: it goes to the new master.
            Err(e)
                if (reused && is_dead_connection(&e))
                    || (self.superseded(&con) && !matches!(e.kind(), RedisKind::Server(_))) =>
            {
                drop(con);
                self.stats.count(Event::ConnectionError);
                self.stats.count(Event::Reconnect);
                let mut con = self
                    .connect_within(connect_timeout)
                    .map_err(|error| Failed::refused(error, true))?;
                let r = f(&mut con, true);
                self.finish(con, r, true)
            }
            r => self.finish(con, r, sent),
        }
    }

    /// Run a script with [`Pool::with_timeout`]'s bound.
    pub(crate) fn script_within(
        &self,
        timeout: Duration,
        script: &Script,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<Value> {
        let evalsha = script.evalsha_packed(keys, args);
        self.with_timeout(timeout, |con, _| {
            run_script(con, script, &evalsha, keys, args)
        })
    }

    /// `sent`: this run, or an earlier one, may have taken effect.
    fn finish<T>(
        &self,
        con: Conn,
        r: redis::RedisResult<T>,
        sent: bool,
    ) -> std::result::Result<T, Failed> {
        match r {
            Ok(v) => {
                self.put(con);
                Ok(v)
            }
            Err(e) => {
                // A server error leaves the connection usable; anything else
                // (timeouts above all: a late reply would desynchronise it)
                // does not.
                if matches!(e.kind(), RedisKind::Server(_) | RedisKind::Extension)
                    && !is_demoted(&e)
                {
                    self.put(con);
                }
                // A cluster node that refused the connection never got the
                // command; anything else may have run it.
                let refused = e.is_connection_refusal();
                Err(Failed {
                    error: self.error(e, false),
                    refused,
                    sent: sent || !refused,
                })
            }
        }
    }

    /// Whether a server that refuses connections may soon have a
    /// successor: a Sentinel service with a sentinel listened to, a cluster
    /// with a node that answers (whose slot map is then read again).
    pub(crate) fn failover_possible(&self) -> bool {
        match &self.target.endpoint {
            Endpoint::Direct(_) => false,
            Endpoint::Sentinel(s) => s.listened_to(),
            Endpoint::Cluster(c) => {
                c.answers(self.target.connect_timeout, self.target.command_timeout)
            }
        }
    }

    /// Run a script, EVALSHA first and EVAL after NOSCRIPT. When the run
    /// is repeated on a fresh connection (see [`Pool::with`]), it uses
    /// `retry_args` if given: the first run may have taken effect before
    /// its connection died, and the script must be told so.
    pub(crate) fn script(
        &self,
        script: &Script,
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> Result<Value> {
        let evalsha = script.evalsha_packed(keys, args);
        self.with(|con, retried| match (retried, retry_args) {
            (true, Some(again)) => run_script(
                con,
                script,
                &script.evalsha_packed(keys, again),
                keys,
                again,
            ),
            _ => run_script(con, script, &evalsha, keys, args),
        })
    }

    /// Run a script like [`Pool::script`] (no retry arguments) and say
    /// whether it was sent again on a fresh connection after the first
    /// sending's connection broke: then the first run may have taken effect.
    pub(crate) fn script_resent(
        &self,
        script: &Script,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<(Value, bool)> {
        let evalsha = script.evalsha_packed(keys, args);
        let mut resent = false;
        let v = self.with(|con, retried| {
            resent |= retried;
            run_script(con, script, &evalsha, keys, args)
        })?;
        Ok((v, resent))
    }

    /// Register a waiter on `key` with this client's subscriber connection
    /// to the server (in a cluster, to the node serving the key's slot),
    /// opening it if there is none.
    ///
    /// In a cluster the subscriber also SSUBSCRIBEs the watch channel of
    /// the key's slot (see [`protocol::slot_watch`](crate::protocol::slot_watch)),
    /// so that a failover or a migration that takes the slot away moves the
    /// channel at once (see `follow_slots`). A new channel is opened after
    /// reading the slot map again: the old one may have died with its node.
    pub(crate) fn register_waiter(&self, key: &[u8]) -> Result<Ticket> {
        let mut node = self.node_for(key)?;
        if let Endpoint::Cluster(cluster) = &self.target.endpoint {
            if !self.hub.is_live(&node)
                && cluster.answers(self.target.connect_timeout, self.target.command_timeout)
            {
                node = self.node_for(key)?;
            }
        }
        let slot = crate::protocol::slot(key);
        self.hub.register(&node, |node, channel| {
            let mut con = self.plain_connection(
                self.target.connect_timeout,
                Some(node).filter(|n| !n.is_empty()),
            )?;
            con.subscribe(channel).map_err(|e| self.error(e, false))?;
            if self.is_cluster() {
                watch_slot(&mut con, slot);
            }
            Ok(con)
        })
    }

    /// Whether `ticket`'s subscriber is on another node than the one the
    /// slot map gives for `key` (a cluster whose slot moved), where no
    /// release counts the waiter, which must queue again. Not while the
    /// channel moves; and a node that serves no slot any more (its replica
    /// took over) has its channel moved, its waiters keeping their place.
    /// Cluster: before a hand-off message that came through a waiter's
    /// subscriber on `node` is checked against the key, make sure the slot
    /// map is at most a second old, read from another node than that one: a frozen master,
    /// resumed, serves from its stale copy for a moment (a release given up
    /// there can hand the lock over), and the check must reach the slot's
    /// owner, not that node.
    pub(crate) fn before_confirming(&self, node: Option<&str>) {
        if let Endpoint::Cluster(c) = &self.target.endpoint {
            let t = &self.target;
            c.recent(HANDOFF_MAP_AGE, node, t.connect_timeout, t.command_timeout);
        }
    }

    pub(crate) fn misplaced(&self, ticket: &Ticket, key: &[u8]) -> bool {
        let Endpoint::Cluster(c) = &self.target.endpoint else {
            return false;
        };
        let slot = crate::protocol::slot(key);
        let (Some(owner), Some(node)) = (c.owner(slot), ticket.node()) else {
            return false;
        };
        if owner == node {
            return false;
        }
        if c.first_slot_of(&node).is_none() {
            ticket.follow(slot);
            return false;
        }
        true
    }

    /// Register a waiter on the live subscriber connection, if there is
    /// one and no routing is needed to find it (not a cluster): never
    /// blocks.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register_live_waiter(&self) -> Option<Ticket> {
        if self.is_cluster() {
            return None;
        }
        self.hub.register_live("")
    }

    /// Translate a redis-rs error into ours, never showing credentials.
    /// A connection error is counted in the client's statistics.
    pub(crate) fn error(&self, e: redis::RedisError, connecting: bool) -> Error {
        let e = self.translate(e, connecting);
        if matches!(e, Error::Connection { .. }) {
            self.stats.count(Event::ConnectionError);
        }
        e
    }

    fn translate(&self, e: redis::RedisError, connecting: bool) -> Error {
        let t = &self.target;
        if let Some(state) = transient_state(&e) {
            return Error::Unavailable {
                addr: t.addr.clone(),
                state: state.to_string(),
                waited: Duration::ZERO,
                hint: String::new(),
            };
        }
        if is_auth_error(&e) {
            // Sentinel: the sentinels' refusals are told apart by their own
            // error (see `Sentinel::master`); this one is the master's.
            let addr = match &t.endpoint {
                Endpoint::Sentinel(_) => format!("the master of {}", t.addr),
                _ => t.addr.clone(),
            };
            return Error::Server {
                addr,
                message: server_message(&e),
            };
        }
        match e.kind() {
            RedisKind::Io | RedisKind::Parse | RedisKind::RESP3NotSupported => {
                let reason = if e.is_timeout() {
                    String::from("timed out")
                } else {
                    io_reason(&e)
                };
                let hint = if reason.contains("certificate") {
                    String::from(UNTRUSTED_HINT)
                } else if connecting {
                    format!("connect timeout {:?}", t.connect_timeout)
                } else {
                    format!("command timeout {:?}", t.command_timeout)
                };
                Error::Connection {
                    addr: t.addr.clone(),
                    reason,
                    hint,
                }
            }
            RedisKind::InvalidClientConfig => {
                Error::invalid(format!("Redis URL: {}", server_message(&e)))
            }
            _ if e.code() == Some("WRONGTYPE") || e.to_string().contains("WRONGTYPE") => {
                Error::WrongType {
                    key: String::new(),
                    // The server's text, for `Client::with_key` to read.
                    found: server_message(&e),
                }
            }
            _ => Error::Server {
                addr: t.addr.clone(),
                message: server_message(&e),
            },
        }
    }
}

/// One command packed for the wire (see `protocol::pack`); an error reply
/// is an error, as `Cmd::query` makes it.
fn send_packed(con: &mut Conn, packed: &[u8]) -> redis::RedisResult<Value> {
    con.req_packed_command(packed)?.extract_error()
}

fn run_script(
    con: &mut Conn,
    script: &Script,
    evalsha: &[u8],
    keys: &[&[u8]],
    args: &[&[u8]],
) -> redis::RedisResult<Value> {
    match send_packed(con, evalsha) {
        Err(e) if e.kind() == RedisKind::Server(redis::ServerErrorKind::NoScript) => {
            script.eval(keys, args).query(con)
        }
        r => r,
    }
}

/// Why a run failed: the error, whether the connection was refused (the
/// command never left), and whether some sending may have taken effect.
pub(crate) struct Failed {
    pub(crate) error: Error,
    pub(crate) refused: bool,
    pub(crate) sent: bool,
}

impl Failed {
    /// Connecting failed: nothing was sent this time.
    pub(crate) fn refused(error: Error, sent: bool) -> Failed {
        Failed {
            refused: matches!(error, Error::Connection { .. }),
            error,
            sent,
        }
    }
}

/// The pauses while a server answers with a transient state (see
/// [`transient_state`]): 10 ms, then twice as long each time (at most
/// 200 ms), within `budget`.
pub(crate) struct Transient {
    started: Instant,
    pause: Duration,
    budget: Duration,
    budget_name: &'static str,
}

impl Transient {
    pub(crate) fn new(budget: Duration, budget_name: &'static str) -> Transient {
        Transient {
            started: Instant::now(),
            pause: Duration::from_millis(10),
            budget,
            budget_name,
        }
    }

    /// The pause before trying again while a server is unreachable, or
    /// `None` once the budget is spent.
    pub(crate) fn outage(&mut self) -> Option<Duration> {
        let left = self.budget.saturating_sub(self.started.elapsed());
        if left < self.pause {
            return None;
        }
        let p = self.pause;
        self.pause = (self.pause * 2).min(Duration::from_millis(200));
        Some(p)
    }

    /// The pause while the sentinels promote a replica (`held`: the master
    /// and the replica, see [`Pool::promoting`]): 2 ms at a time, so that
    /// the command follows the promotion at once; once the budget is spent,
    /// the error that says so.
    pub(crate) fn held(&self, (master, replica): (String, String)) -> Result<Duration> {
        let left = self.budget.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return Err(Error::Unavailable {
                addr: master,
                state: format!(
                    "being replaced by {replica}, which its sentinels are promoting (what it \
                     would write now would be lost)"
                ),
                waited: self.started.elapsed(),
                hint: format!("; the {} is {:?}", self.budget_name, self.budget),
            });
        }
        Ok(Duration::from_millis(2).min(left))
    }

    /// The pause before asking again after `e` (an `Unavailable`), or, once
    /// the budget is spent, the error naming the state and how long it
    /// lasted.
    pub(crate) fn pause(&mut self, e: Error) -> Result<Duration> {
        let Error::Unavailable { addr, state, .. } = e else {
            return Err(e);
        };
        let left = self.budget.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return Err(Error::Unavailable {
                addr,
                state,
                waited: self.started.elapsed(),
                hint: format!("; the {} is {:?}", self.budget_name, self.budget),
            });
        }
        let p = self.pause.min(left);
        self.pause = (self.pause * 2).min(Duration::from_millis(200));
        Ok(p)
    }
}

/// A connection that must be replaced, after which the command may be sent
/// again: dropped, or talking to a master that was demoted in a failover
/// (the command was refused, so it had no effect).
pub(crate) fn is_dead_connection(e: &redis::RedisError) -> bool {
    (e.is_connection_dropped() && !e.is_timeout()) || is_demoted(e)
}

/// The states in which a server refuses a command for a moment, so that
/// asking again shortly is right (the command had no effect), in words.
pub(crate) fn transient_state(e: &redis::RedisError) -> Option<&'static str> {
    Some(match e.code()? {
        "LOADING" => "loading its data set into memory (LOADING)",
        "BUSY" => "blocked by a slow script (BUSY)",
        "TRYAGAIN" => "moving the lock's keys between cluster nodes (TRYAGAIN)",
        "CLUSTERDOWN" => "part of a cluster that is down (CLUSTERDOWN)",
        "MASTERDOWN" => "a replica that lost its master (MASTERDOWN)",
        _ => return None,
    })
}

/// An error reply after which a command sent on its own (see
/// [`Pool::take_pollable`]) must be run again the way [`Pool::with`] runs
/// it: NOSCRIPT (EVAL follows), a transient state (asked again after a
/// pause) or a demoted master (a fresh connection finds the new one). The
/// command had no effect.
pub(crate) fn needs_rerun(e: &redis::RedisError) -> bool {
    e.kind() == RedisKind::Server(redis::ServerErrorKind::NoScript)
        || transient_state(e).is_some()
        || is_demoted(e)
}

pub(crate) fn is_demoted(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        RedisKind::Server(redis::ServerErrorKind::ReadOnly | redis::ServerErrorKind::MasterDown)
    )
}

/// Whether the server answers `ROLE` as a master (or will not say: a user
/// without the command is not told otherwise).
fn answers_as_master(wire: &mut Wire) -> RedisResult<bool> {
    role_is_master(redis::cmd("ROLE").query(wire))
}

/// Whether a reply to `ROLE` says master; a refusal does not say otherwise.
pub(crate) fn role_is_master(reply: RedisResult<Value>) -> RedisResult<bool> {
    match reply {
        Ok(Value::Array(items)) => Ok(!matches!(
            items.first(),
            Some(Value::BulkString(r)) if r.as_slice() != b"master"
        )),
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), RedisKind::Server(_)) || e.code().is_some() => Ok(true),
        Err(e) => Err(e),
    }
}

/// The server the sentinels name as `master` answers as a replica.
pub(crate) fn still_named(s: &Sentinel, master: &Master) -> Error {
    Error::Unavailable {
        addr: format!("master {} of {}", master.addr, s.describe()),
        state: String::from(
            "a replica (ROLE) while the sentinels still name it the master: a failover is \
             under way",
        ),
        waited: Duration::ZERO,
        hint: String::new(),
    }
}

/// Move the waiters' subscriber of `target`'s pools along with each master
/// the Sentinel service `s` switches to: the same channel on the new
/// master, so that the waiters keep their place in the queues.
fn follow_with_subscriber(s: &Arc<Sentinel>, hub: &Arc<Hub>, target: &Target) {
    let hub = Arc::downgrade(hub);
    let tls = target.tls.clone();
    let (connect, command) = (target.connect_timeout, target.command_timeout);
    s.on_switch(Box::new(move |master| {
        let Some(hub) = hub.upgrade() else { return };
        hub.relocate("", "", |channel| {
            let mut wire =
                Wire::connect(&master.info, tls.as_ref(), connect, command).map_err(|e| {
                    Error::Connection {
                        addr: master.addr.clone(),
                        reason: io_reason(&e),
                        hint: format!("connect timeout {connect:?}"),
                    }
                })?;
            wire.subscribe(channel).map_err(|e| Error::Connection {
                addr: master.addr.clone(),
                reason: io_reason(&e),
                hint: format!("command timeout {command:?}"),
            })?;
            Ok(wire)
        });
    }));
}

/// SSUBSCRIBE the watch channel of `slot` (see `register_waiter`); a server
/// without sharded pub/sub (before Redis 7) has none, and its waiters
/// follow a moved slot by their retries alone.
fn watch_slot(con: &mut Wire, slot: u16) {
    if let Err(e) = con.ssubscribe(&crate::protocol::slot_watch(slot)) {
        tracing::debug!(slot, error = %e, "cannot watch the lock's slot (SSUBSCRIBE)");
    }
}

/// A cluster: when a node with waiters says that one of their slots left
/// it, find the slot's new owner (the nodes learn it within moments of a
/// failover) and move the waiters' channel, under the same name: to the
/// new owner when the old node serves nothing any more (a replica took it
/// over), or again to the same node with another slot watched when it
/// still serves some (a migration; the migrated slot's waiters notice
/// their misplacement themselves, see [`Pool::misplaced`]).
fn follow_slots(cluster: &Arc<crate::net::cluster::Cluster>, hub: &Arc<Hub>, target: &Target) {
    let weak = Arc::downgrade(hub);
    let map = cluster.clone();
    let cluster = Arc::downgrade(cluster);
    let (connect, command) = (target.connect_timeout, target.command_timeout);
    let follow: crate::net::hub::SlotHook = Arc::new(move |node: &str, slot: u16| {
        let Some(cluster) = cluster.upgrade() else {
            return;
        };
        let Some(hub) = weak.upgrade() else { return };
        let until = Instant::now() + command;
        let owner = loop {
            if cluster.answers(connect, command) {
                if let Some(owner) = cluster.owner(slot).filter(|o| o != node) {
                    break Some(owner);
                }
            }
            if Instant::now() >= until {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Nobody took it over within the command timeout: the channel
        // stays, and its waiters look again at their retries.
        let Some(owner) = owner else { return };
        let (to, watch) = match cluster.first_slot_of(node) {
            Some(kept) => (node.to_string(), kept),
            None => (owner, slot),
        };
        hub.relocate(node, &to, |channel| {
            let at = |e: redis::RedisError| Error::Connection {
                addr: to.clone(),
                reason: io_reason(&e),
                hint: format!("connect timeout {connect:?}"),
            };
            let mut wire = cluster.connect(&to, connect, command).map_err(at)?;
            wire.subscribe(channel).map_err(at)?;
            watch_slot(&mut wire, watch);
            Ok(wire)
        });
    });
    hub.on_slot_left(follow.clone());
    // A command that found the node it waited for replaced (a frozen
    // master, see `Routed`): the node's subscriber may be frozen too.
    map.on_moved(follow);
}

/// Every method answers on the calling thread; the futures never suspend.
impl Transport for Arc<Pool> {
    fn target(&self) -> &Target {
        &self.target
    }

    fn stats(&self) -> &Counters {
        &self.stats
    }

    fn caps(&self) -> &crate::protocol::Caps {
        &self.caps
    }

    fn contended(&self) -> &crate::protocol::Contended {
        &self.contended
    }

    fn remote_publish(&self) -> bool {
        Pool::remote_publish(self)
    }

    fn is_cluster(&self) -> bool {
        Pool::is_cluster(self)
    }

    fn misplaced(&self, ticket: &Ticket, key: &[u8]) -> bool {
        Pool::misplaced(self, ticket, key)
    }

    async fn before_confirming(&self, ticket: &Ticket) {
        Pool::before_confirming(self, ticket.node().as_deref())
    }

    async fn failover_possible(&self) -> bool {
        Pool::failover_possible(self)
    }

    async fn script(
        &self,
        script: &'static Script,
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> Result<Value> {
        Pool::script(self, script, keys, args, retry_args)
    }

    async fn script_resent(
        &self,
        script: &'static Script,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<(Value, bool)> {
        Pool::script_resent(self, script, keys, args)
    }

    async fn query(&self, cmd: &Cmd) -> Result<Value> {
        self.with(|con, _| cmd.query(con))
    }

    async fn query_resent(&self, args: &[&[u8]]) -> Result<(Value, bool)> {
        let packed = crate::protocol::pack(args);
        let mut resent = false;
        let v = self.with(|con, retried| {
            resent |= retried;
            send_packed(con, &packed)
        })?;
        Ok((v, resent))
    }

    async fn pipeline(&self, pipe: &redis::Pipeline) -> Result<Vec<Value>> {
        self.with(|con, _| pipe.query(con))
    }

    async fn register_waiter(&self, key: &[u8]) -> Result<Ticket> {
        Pool::register_waiter(self, key)
    }

    async fn wait(&self, ticket: &Ticket, d: Duration) -> Option<Delivery> {
        ticket.wait(d)
    }

    async fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }

    fn detach(&self, f: crate::net::transport::Detached) {
        crate::net::transport::block_on(f)
    }
}
