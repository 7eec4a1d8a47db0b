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

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::thread::LocalKey;
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionAddr, ConnectionLike, ErrorKind as RedisKind, RedisResult, Value};

use crate::error::{Error, Result};
use crate::net::cluster::Routed;
use crate::net::follow::{
    answers_as_master, follow_slots, follow_with_subscriber, still_named, watch_slot,
};
use crate::net::hub::{Delivery, Hub, Ticket};
use crate::net::retry::{is_dead_connection, is_demoted, transient_state, Failed, Transient};
use crate::net::sentinel::{Lease, Sentinel};
use crate::net::target::{Endpoint, Target};
use crate::net::transport::Transport;
use crate::net::wire::{io_reason, is_auth_error, server_message, Wire, UNTRUSTED_HINT};
use crate::protocol::{checked, Accepts, Script};
use crate::stats::{Counters, Event};
use crate::sync::locked;

thread_local! {
    /// See [`within`].
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// See [`waiting_until`].
    static WAIT_UNTIL: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Run `f` with this thread's `key` set to `at`, then as it was.
fn scoped<T>(
    key: &'static LocalKey<Cell<Option<Instant>>>,
    at: Instant,
    f: impl FnOnce() -> T,
) -> T {
    let before = key.with(|d| d.replace(Some(at)));
    let r = f();
    key.with(|d| d.set(before));
    r
}

/// Run `f` with every command this thread sends through a pool bounded to
/// end by `deadline` (its waits, the holds of [`Pool::hold`] included):
/// the renewal, which must learn that a lock is lost before its TTL runs
/// out rather than a command timeout later.
pub(crate) fn within<T>(deadline: Instant, f: impl FnOnce() -> T) -> T {
    scoped(&DEADLINE, deadline, f)
}

/// Run `f` (an acquire that may wait until `until`) with the pauses of
/// this thread's pools (a refused connection while a failover may be under
/// way, a transient state, a hold) ending by `until` rather than a command
/// timeout later; the waits on the socket keep the client's timeouts, so
/// that a command sent is read.
pub(crate) fn waiting_until<T>(until: Instant, f: impl FnOnce() -> T) -> T {
    scoped(&WAIT_UNTIL, until, f)
}

/// Why a pool's commands wait (see [`Pool::hold`]).
pub(crate) enum Hold {
    /// For the server (`addr`), in the state the error would name.
    Wait(String, String),
    /// For the sentinels to name a master: none is known yet, and asking
    /// them now gives their refusal or silence as the error at once.
    Ask(Arc<crate::net::sentinel::Sentinel>),
}

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

    /// A connection for `doctor` to `host:port` (a replica of one of this
    /// pool's servers, as its master's INFO names it), with the pool's
    /// credentials and TLS.
    pub(crate) fn inspection_connection_to(&self, host: &str, port: u16) -> Result<Wire> {
        let t = &self.target;
        let (ct, timeout) = (t.connect_timeout, t.command_timeout);
        let addr = format!("{host}:{port}");
        let info = match &t.endpoint {
            Endpoint::Direct(info) => (**info).clone(),
            Endpoint::Sentinel(s) => s.master(ct)?.0,
            Endpoint::Cluster(cluster) => {
                return cluster
                    .connect(&addr, ct, timeout)
                    .map_err(|e| self.translate(e, true));
            }
        };
        let at = match info.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.to_string(), port),
        };
        Wire::connect(&info.set_addr(at), t.tls.as_ref(), ct, timeout)
            .map_err(|e| self.translate(e, true))
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

    /// Sentinel: whether commands wait now (see [`Hold`]): its sentinels
    /// are promoting a replica (see [`Sentinel::promoting`]), or this
    /// client cannot hear a majority of them (see [`Sentinel::deaf`]: it
    /// fails closed). Never blocks.
    pub(crate) fn hold(&self) -> Option<Hold> {
        let Endpoint::Sentinel(s) = &self.target.endpoint else {
            return None;
        };
        if let Some((master, replica)) = s.promoting() {
            let state = format!(
                "being replaced by {replica}, which its sentinels are promoting (what it would \
                 write now would be lost)"
            );
            return Some(Hold::Wait(master, state));
        }
        let heard = s.deaf(self.target.connect_timeout)?;
        Some(match s.followed() {
            None => Hold::Ask(s.clone()),
            Some(_) => {
                let (addr, state) = s.deaf_state(heard);
                Hold::Wait(addr, state)
            }
        })
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
        if let Some(deadline) = DEADLINE.with(Cell::get) {
            return self.with_deadline(deadline, f);
        }
        self.run(t.connect_timeout, t.command_timeout, "command timeout", f)
    }

    /// [`Pool::with`] under [`within`]: every wait bounded by the time left
    /// until `deadline` (and by the client's timeouts); none left, an
    /// [`Error::Unavailable`] at once, nothing sent.
    fn with_deadline<T>(
        &self,
        deadline: Instant,
        f: impl FnMut(&mut Conn, bool) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(1) {
            return Err(Error::Unavailable {
                addr: self.target.addr.clone(),
                state: String::from("not asked: the caller's deadline had passed"),
                waited: Duration::ZERO,
                hint: String::new(),
            });
        }
        let timeout = left.min(self.target.command_timeout);
        self.bounded(timeout, "deadline", f)
    }

    /// Like [`Pool::with`], with every wait (connect, send, reply) bounded by
    /// `timeout` instead of the client's timeouts: Redlock's per-node limit.
    pub(crate) fn with_timeout<T>(
        &self,
        timeout: Duration,
        f: impl FnMut(&mut Conn, bool) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.bounded(timeout, "node timeout", f)
    }

    /// [`Pool::with_timeout`], the budget named `budget_name` in errors.
    fn bounded<T>(
        &self,
        timeout: Duration,
        budget_name: &'static str,
        mut f: impl FnMut(&mut Conn, bool) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let normal = self.target.command_timeout;
        let connect = timeout.min(self.target.connect_timeout);
        self.run(connect, timeout, budget_name, |con, retried| {
            con.set_timeouts(timeout)?;
            let r = f(con, retried);
            // Also after a server error: the connection goes back to the pool.
            con.set_timeouts(normal)?;
            r
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
        let (budget, budget_name) = match WAIT_UNTIL.with(Cell::get) {
            Some(until) if until < Instant::now() + budget => {
                (until.saturating_duration_since(Instant::now()), "wait")
            }
            _ => (budget, budget_name),
        };
        let mut transient = Transient::new(budget, budget_name);
        let mut sent = false;
        loop {
            match self.hold() {
                Some(Hold::Wait(addr, state)) => {
                    std::thread::sleep(transient.held((addr, state))?);
                    continue;
                }
                Some(Hold::Ask(s)) => {
                    s.current(connect_timeout, None)?;
                    continue;
                }
                None => {}
            }
            match self.run_once(connect_timeout, sent, &mut f) {
                Ok(v) => return Ok(v),
                Err(failed) => {
                    let pause;
                    (pause, sent) = transient.after(failed, || self.failover_possible())?;
                    std::thread::sleep(pause);
                }
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
        if matches!(e, Error::Connection { .. } | Error::Protocol { .. }) {
            self.stats.count(Event::ConnectionError);
        }
        e
    }

    fn translate(&self, e: redis::RedisError, connecting: bool) -> Error {
        let t = &self.target;
        if let Some(state) = transient_state(&e) {
            // Sentinel: the master that answered, of the service.
            let addr = match &t.endpoint {
                Endpoint::Sentinel(s) => s
                    .followed()
                    .map_or_else(|| t.addr.clone(), |m| format!("master {m} of {}", t.addr)),
                _ => t.addr.clone(),
            };
            return Error::Unavailable {
                addr,
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
        #[cfg(feature = "tokio")]
        if crate::net::strict::is_protocol(&e) {
            return Error::Protocol {
                addr: t.addr.clone(),
                detail: e.to_string(),
            };
        }
        match e.kind() {
            RedisKind::Parse => Error::Protocol {
                addr: t.addr.clone(),
                detail: match e.detail() {
                    Some(detail) => detail.to_string(),
                    None => e.to_string(),
                },
            },
            RedisKind::Io | RedisKind::RESP3NotSupported => {
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

/// A command's name, from its arguments, for errors.
pub(crate) fn command_name(args: &[&[u8]]) -> String {
    args.first()
        .map_or(String::new(), |n| String::from_utf8_lossy(n).into_owned())
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
    let reply = match send_packed(con, evalsha) {
        Err(e) if e.kind() == RedisKind::Server(redis::ServerErrorKind::NoScript) => {
            script.eval(keys, args).query(con)
        }
        r => r,
    };
    reply.and_then(|v| script.checked(v))
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

    fn hand_here(&self, id: &str, nonce: &str) -> bool {
        crate::net::hub::hand_here(id, nonce)
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

    async fn query_resent(&self, args: &[&[u8]], accepts: Accepts) -> Result<(Value, bool)> {
        let packed = crate::protocol::pack(args);
        let mut resent = false;
        let v = self.with(|con, retried| {
            resent |= retried;
            send_packed(con, &packed).and_then(|v| checked(v, accepts, &command_name(args)))
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
