//! The async transport: the same operations as the blocking [`Pool`], on
//! tokio, without a thread per caller.
//!
//! Commands to one server (directly, or Sentinel's master) go over one
//! redis-rs multiplexed connection per client, which every task shares.
//! Waiters register with the blocking pool's [`Hub`](crate::net::hub), so a
//! client's threads and tasks share one subscriber connection per node; a
//! task waits on its ticket's waker, never on a thread. Opening that
//! subscriber (once per client and node) and Cluster commands (routed by
//! the blocking pool's slot map) run on tokio's blocking threads for the
//! length of one connection or one command, never for a wait.
//!
//! Fork: the multiplexed connection belongs to the process that opened it
//! (its driver task runs on that process's runtime); a child opens its own.

use std::future::{poll_fn, Future};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, ConnectionInfo, ErrorKind as RedisKind, Pipeline, Value};

use crate::error::{Error, Result};
use crate::net::follow::{role_is_master, still_named};
use crate::net::hub::{Delivery, Ticket};
use crate::net::pool::command_name;
use crate::net::pool::Hold;
use crate::net::pool::Pool;
use crate::net::retry::{is_dead_connection, is_demoted, Failed, Transient};
use crate::net::strict;
use crate::net::target::{Endpoint, Target};
use crate::net::transport::{Detached, Transport};
use crate::protocol::{checked, Accepts, Script};
use crate::stats::{Counters, Event};
use crate::sync::locked;

/// A cheap handle: clones share the connection.
#[derive(Clone)]
pub(crate) struct AsyncPool(Arc<Inner>);

struct Inner {
    /// The blocking pool: target, subscriber hub, Cluster routing.
    pool: Arc<Pool>,
    /// The shared connection, the process that opened it, its number (so
    /// that a task forgets only the connection that failed it) and, for
    /// Sentinel, the generation of the master it goes to.
    mux: Mutex<Option<(u32, u64, MultiplexedConnection, u64)>>,
    /// Sentinel: notified when the client follows a new master, so that
    /// commands waiting on the old one are sent to the new one.
    switched: Arc<tokio::sync::Notify>,
    opened: std::sync::atomic::AtomicU64,
    /// Held while connecting, so that a thousand tasks starting at once
    /// open one connection.
    connecting: tokio::sync::Mutex<()>,
}

/// The shared connection as one task got it.
struct Shared {
    con: MultiplexedConnection,
    /// Which opening of the connection it is.
    n: u64,
    /// Opened before this task asked (so it may have died since).
    reused: bool,
    /// Sentinel: the generation of its master (0 otherwise).
    generation: u64,
}

/// One request, sent again as is (or with its retry arguments) on a fresh
/// connection when the reused one turns out dead.
enum Request<'a> {
    Script {
        script: &'static Script,
        keys: &'a [&'a [u8]],
        args: &'a [&'a [u8]],
        retry_args: Option<&'a [&'a [u8]]>,
    },
    Cmd(&'a Cmd),
    /// A command given as its arguments, whose reply must be one that
    /// `accepts` takes.
    Checked(&'a [&'a [u8]], Accepts),
    Pipeline(&'a Pipeline),
}

impl AsyncPool {
    pub(crate) fn new(pool: Arc<Pool>) -> AsyncPool {
        let switched = Arc::new(tokio::sync::Notify::new());
        if let Endpoint::Sentinel(s) = &pool.target.endpoint {
            let weak = Arc::downgrade(&switched);
            s.on_switch(Box::new(move |_| {
                if let Some(n) = weak.upgrade() {
                    n.notify_waiters();
                }
            }));
        }
        AsyncPool(Arc::new(Inner {
            pool,
            mux: Mutex::new(None),
            opened: std::sync::atomic::AtomicU64::new(0),
            connecting: tokio::sync::Mutex::new(()),
            switched,
        }))
    }

    /// The generation of the Sentinel master followed now (0 otherwise).
    fn generation(&self) -> u64 {
        match &self.target_ref().endpoint {
            Endpoint::Sentinel(s) => s.generation(),
            _ => 0,
        }
    }

    fn target_ref(&self) -> &Target {
        &self.0.pool.target
    }

    /// The shared connection if this process has one (to the master
    /// followed now, for Sentinel).
    fn cached(&self) -> Option<Shared> {
        let mux = locked(&self.0.mux);
        match &*mux {
            Some((pid, n, con, generation))
                if *pid == crate::sync::pid() && *generation == self.generation() =>
            {
                Some(Shared {
                    con: con.clone(),
                    n: *n,
                    reused: true,
                    generation: *generation,
                })
            }
            _ => None,
        }
    }

    /// Forget the shared connection (it died, or talks to a demoted master)
    /// unless another task already replaced it.
    fn forget(&self, dead: &Shared) {
        let mut mux = locked(&self.0.mux);
        if matches!(&*mux, Some((_, n, _, _)) if *n == dead.n) {
            *mux = None;
        }
    }

    /// The shared connection, opened if needed.
    async fn connection(&self) -> Result<Shared> {
        if let Some(s) = self.cached() {
            return Ok(s);
        }
        let _connecting = self.0.connecting.lock().await;
        if let Some(s) = self.cached() {
            return Ok(s);
        }
        let (con, generation) = self.connect().await?;
        let n = self
            .0
            .opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *locked(&self.0.mux) = Some((crate::sync::pid(), n, con.clone(), generation));
        Ok(Shared {
            con,
            n,
            reused: false,
            generation,
        })
    }

    /// A connection to the server, or to the master a Sentinel service has
    /// now (checked with ROLE as the blocking pool does), with that
    /// master's generation.
    async fn connect(&self) -> Result<(MultiplexedConnection, u64)> {
        let t = self.target_ref();
        let s = match &t.endpoint {
            Endpoint::Direct(info) => return Ok((self.open((**info).clone()).await?, 0)),
            Endpoint::Sentinel(s) => s,
            Endpoint::Cluster(_) => {
                return Err(Error::Internal(
                    "cluster commands go through the blocking pool".into(),
                ))
            }
        };
        let mut demoted = None;
        loop {
            let (sentinel, timeout) = (s.clone(), t.connect_timeout);
            let master = blocking(move || sentinel.current(timeout, demoted)).await?;
            if demoted == Some(master.generation) {
                return Err(still_named(s, &master));
            }
            let mut con = self
                .open(master.info.clone())
                .await
                .map_err(|e| s.at_master(e, &master.addr))?;
            // A frozen server would hold every task up: not past a switch.
            let ask = redis::cmd("ROLE");
            let role = self
                .until_switched(master.generation, ask.query_async(&mut con))
                .await;
            match role_is_master(role) {
                Ok(true) => return Ok((con, master.generation)),
                Ok(false) => demoted = Some(master.generation),
                Err(e) => return Err(s.at_master(self.0.pool.error(e, true), &master.addr)),
            }
        }
    }

    /// redis-rs's multiplexed connection over a stream read through our
    /// framer first (see `strict`), with the blocking pool's TLS settings.
    async fn open(&self, info: ConnectionInfo) -> Result<MultiplexedConnection> {
        let t = self.target_ref();
        let config = AsyncConnectionConfig::new().set_response_timeout(Some(t.command_timeout));
        strict::open(&info, t.tls.as_ref(), t.connect_timeout, config)
            .await
            .map_err(|e| self.0.pool.error(e, true))
    }

    /// Send `req`; a server in a transient state (loading, busy) is asked
    /// again with backoff for up to the command timeout, as the blocking
    /// pool does. The reply, and whether it was sent again on a fresh
    /// connection.
    async fn run(&self, req: Request<'_>) -> Result<(Value, bool)> {
        if self.is_cluster_target() {
            return self.run_blocking(&req).await;
        }
        let (mut budget, mut budget_name) = (self.target_ref().command_timeout, "command timeout");
        if let Ok(until) = WAIT_UNTIL.try_with(|u| *u) {
            if until < Instant::now() + budget {
                (budget, budget_name) = (until.saturating_duration_since(Instant::now()), "wait");
            }
        }
        let mut transient = Transient::new(budget, budget_name);
        let mut sent = false;
        loop {
            match self.0.pool.hold() {
                Some(Hold::Wait(addr, state)) => {
                    tokio::time::sleep(transient.held((addr, state))?).await;
                    continue;
                }
                Some(Hold::Ask(s)) => {
                    let timeout = self.target_ref().connect_timeout;
                    blocking(move || s.current(timeout, None)).await?;
                    continue;
                }
                None => {}
            }
            match self.run_once(&req, sent).await {
                Ok(r) => return Ok(r),
                // A master that refuses connections while the sentinels
                // may replace it: the command goes to the new one.
                Err(failed) => {
                    let pool = &self.0.pool;
                    let pause;
                    (pause, sent) = transient.after(failed, || Pool::failover_possible(pool))?;
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// `sent`: an earlier run may have taken effect. The reply, and whether
    /// some sending may have taken effect before this one.
    async fn run_once(
        &self,
        req: &Request<'_>,
        sent: bool,
    ) -> std::result::Result<(Value, bool), Failed> {
        let shared = self
            .connection()
            .await
            .map_err(|error| Failed::refused(error, sent))?;
        match self.send_following(&shared, req, sent).await {
            Ok(v) => Ok((v, sent)),
            Err(e) if (shared.reused && is_dead_connection(&e)) || self.superseded(&shared) => {
                self.forget(&shared);
                let stats = &self.0.pool.stats;
                stats.count(Event::ConnectionError);
                stats.count(Event::Reconnect);
                let fresh = self
                    .connection()
                    .await
                    .map_err(|error| Failed::refused(error, true))?;
                match send(fresh.con.clone(), req, true).await {
                    Ok(v) => Ok((v, true)),
                    Err(e) => Err(self.failed(&fresh, e)),
                }
            }
            Err(e) => Err(self.failed(&shared, e)),
        }
    }

    /// Send `req` on `shared`; with Sentinel, a command still waiting when
    /// the client follows a new master is abandoned (an I/O error, sent
    /// again by the caller on a connection to the new master).
    async fn send_following(
        &self,
        shared: &Shared,
        req: &Request<'_>,
        sent: bool,
    ) -> redis::RedisResult<Value> {
        if !matches!(self.target_ref().endpoint, Endpoint::Sentinel(_)) {
            return send(shared.con.clone(), req, sent).await;
        }
        self.until_switched(shared.generation, send(shared.con.clone(), req, sent))
            .await
    }

    /// `f`, a command to the master of `generation`, unless the client
    /// follows another master first (then an I/O error at once).
    async fn until_switched<T>(
        &self,
        generation: u64,
        f: impl Future<Output = redis::RedisResult<T>>,
    ) -> redis::RedisResult<T> {
        let switched = self.0.switched.notified();
        tokio::pin!(switched);
        switched.as_mut().enable();
        if generation != self.generation() {
            return Err(left_behind());
        }
        tokio::pin!(f);
        poll_fn(|cx| {
            if let Poll::Ready(r) = f.as_mut().poll(cx) {
                return Poll::Ready(r);
            }
            match switched.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(left_behind())),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// A connection to a Sentinel master the client no longer follows.
    fn superseded(&self, shared: &Shared) -> bool {
        shared.generation != self.generation()
    }

    /// Our error for `e`; the connection is dropped when it is dead or
    /// talks to a demoted master (a timeout leaves a multiplexed connection
    /// usable: the late reply is matched and discarded).
    /// The command was sent: it may have taken effect.
    fn failed(&self, shared: &Shared, e: redis::RedisError) -> Failed {
        // A reply of the wrong shape: whatever sent it is not trusted again.
        if is_demoted(&e)
            || (e.is_connection_dropped() && !e.is_timeout())
            || e.kind() == RedisKind::Parse
            || strict::is_protocol(&e)
        {
            self.forget(shared);
        }
        Failed {
            error: self.0.pool.error(e, false),
            refused: false,
            sent: true,
        }
    }

    fn is_cluster_target(&self) -> bool {
        self.0.pool.is_cluster()
    }

    /// Cluster: the blocking pool's routed connections, on a blocking
    /// thread for the length of one command.
    async fn run_blocking(&self, req: &Request<'_>) -> Result<(Value, bool)> {
        let pool = self.0.pool.clone();
        match req {
            Request::Script {
                script,
                keys,
                args,
                retry_args,
            } => {
                let script: &'static Script = script;
                let keys = owned(keys);
                let args = owned(args);
                let retry = retry_args.map(owned);
                blocking(move || {
                    let keys = borrowed(&keys);
                    let args = borrowed(&args);
                    match &retry {
                        None => Pool::script_resent(&pool, script, &keys, &args),
                        Some(again) => {
                            Pool::script(&pool, script, &keys, &args, Some(&borrowed(again)))
                                .map(|v| (v, false))
                        }
                    }
                })
                .await
            }
            Request::Cmd(cmd) => {
                let cmd = (*cmd).clone();
                blocking(move || pool.with(|con, _| cmd.query(con)).map(|v| (v, false))).await
            }
            Request::Checked(args, accepts) => {
                let args = owned(args);
                let accepts = *accepts;
                blocking(move || {
                    let args = borrowed(&args);
                    crate::net::transport::block_on(Transport::query_resent(&pool, &args, accepts))
                })
                .await
            }
            Request::Pipeline(pipe) => {
                let pipe = (*pipe).clone();
                blocking(move || {
                    pool.with(|con, _| pipe.query::<Vec<Value>>(con))
                        .map(|v| (Value::Array(v), false))
                })
                .await
            }
        }
    }
}

/// One sending of `req` on `con` (`retried`: the second, on a fresh one).
async fn send(
    mut con: MultiplexedConnection,
    req: &Request<'_>,
    retried: bool,
) -> redis::RedisResult<Value> {
    match req {
        Request::Script {
            script,
            keys,
            args,
            retry_args,
        } => {
            let args = match (retried, retry_args) {
                (true, Some(again)) => *again,
                _ => *args,
            };
            let reply = match script.evalsha(keys, args).query_async(&mut con).await {
                Err(e) if e.kind() == RedisKind::Server(redis::ServerErrorKind::NoScript) => {
                    script.eval(keys, args).query_async(&mut con).await
                }
                r => r,
            };
            reply.and_then(|v| script.checked(v))
        }
        Request::Cmd(cmd) => cmd.query_async(&mut con).await,
        Request::Checked(args, accepts) => {
            let reply = crate::protocol::cmd_of(args).query_async(&mut con).await;
            reply.and_then(|v| checked(v, *accepts, &command_name(args)))
        }
        Request::Pipeline(pipe) => pipe
            .query_async::<Vec<Value>>(&mut con)
            .await
            .map(Value::Array),
    }
}

/// The error of a command abandoned on a master the client left.
fn left_behind() -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the client followed a failover to a new master",
    ))
}

tokio::task_local! {
    /// See [`waiting_until`].
    static WAIT_UNTIL: Instant;
}

/// `f` (an acquire that may wait until `until`) with the pauses of the
/// pools it uses ending by `until`, as [`crate::net::pool::waiting_until`]
/// does for the blocking pools.
pub(crate) async fn waiting_until<F: std::future::Future>(until: Instant, f: F) -> F::Output {
    WAIT_UNTIL.scope(until, f).await
}

/// Run `f` on tokio's blocking threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    // The caller's wait bounds the blocking pool's pauses too.
    let until = WAIT_UNTIL.try_with(|u| *u).ok();
    tokio::task::spawn_blocking(move || match until {
        Some(until) => crate::net::pool::waiting_until(until, f),
        None => f(),
    })
    .await
    .unwrap_or_else(|e| Err(Error::Internal(format!("a blocking task failed: {e}"))))
}

fn owned(v: &[&[u8]]) -> Vec<Vec<u8>> {
    v.iter().map(|b| b.to_vec()).collect()
}

fn borrowed(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

impl Transport for AsyncPool {
    fn target(&self) -> &Target {
        self.target_ref()
    }

    fn stats(&self) -> &Counters {
        &self.0.pool.stats
    }

    fn caps(&self) -> &crate::protocol::Caps {
        &self.0.pool.caps
    }

    fn contended(&self) -> &crate::protocol::Contended {
        &self.0.pool.contended
    }

    fn remote_publish(&self) -> bool {
        self.0.pool.remote_publish()
    }

    fn is_cluster(&self) -> bool {
        self.is_cluster_target()
    }

    fn hand_here(&self, id: &str, nonce: &str) -> bool {
        crate::net::hub::hand_here(id, nonce)
    }

    fn misplaced(&self, ticket: &Ticket, key: &[u8]) -> bool {
        self.0.pool.misplaced(ticket, key)
    }

    async fn before_confirming(&self, ticket: &Ticket) {
        if !self.is_cluster_target() {
            return;
        }
        // It may read the slot map: off the runtime's threads.
        let (pool, node) = (self.0.pool.clone(), ticket.node());
        let _ = blocking(move || {
            Pool::before_confirming(&pool, node.as_deref());
            Ok(())
        })
        .await;
    }

    async fn failover_possible(&self) -> bool {
        let pool = self.0.pool.clone();
        match &pool.target.endpoint {
            // Asks a node: off the runtime's threads.
            Endpoint::Cluster(_) => blocking(move || Ok(Pool::failover_possible(&pool)))
                .await
                .unwrap_or(false),
            _ => Pool::failover_possible(&pool),
        }
    }

    async fn script(
        &self,
        script: &'static Script,
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> Result<Value> {
        let req = Request::Script {
            script,
            keys,
            args,
            retry_args,
        };
        self.run(req).await.map(|(v, _)| v)
    }

    async fn script_resent(
        &self,
        script: &'static Script,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<(Value, bool)> {
        let req = Request::Script {
            script,
            keys,
            args,
            retry_args: None,
        };
        self.run(req).await
    }

    async fn query(&self, cmd: &Cmd) -> Result<Value> {
        self.run(Request::Cmd(cmd)).await.map(|(v, _)| v)
    }

    async fn query_resent(&self, args: &[&[u8]], accepts: Accepts) -> Result<(Value, bool)> {
        self.run(Request::Checked(args, accepts)).await
    }

    async fn pipeline(&self, pipe: &Pipeline) -> Result<Vec<Value>> {
        match self.run(Request::Pipeline(pipe)).await? {
            (Value::Array(v), _) => Ok(v),
            (other, _) => Err(Error::unexpected(
                &self.target_ref().addr,
                "a pipeline",
                &other,
            )),
        }
    }

    async fn register_waiter(&self, key: &[u8]) -> Result<Ticket> {
        // The usual case: the client's subscriber is up; registering is a
        // map insertion.
        if let Some(t) = self.0.pool.register_live_waiter() {
            return Ok(t);
        }
        let pool = self.0.pool.clone();
        let key = key.to_vec();
        blocking(move || Pool::register_waiter(&pool, &key)).await
    }

    async fn wait(&self, ticket: &Ticket, d: Duration) -> Option<Delivery> {
        tokio::time::timeout(d, poll_fn(|cx| ticket.poll_delivery(cx)))
            .await
            .ok()
    }

    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await
    }

    fn detach(&self, f: Detached) {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(f);
            }
            // Dropped outside any runtime (the runtime is shutting down):
            // finish on a thread of its own.
            Err(_) => {
                let _ = crate::sync::spawn_quiet("redislock-leave", move || {
                    if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        rt.block_on(f);
                    }
                });
            }
        }
    }
}
