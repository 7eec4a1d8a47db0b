//! Connections to one Redis server: opening them with timeouts, a pool that
//! lets many threads work at once, and fork safety.
//!
//! Each operation takes a connection of its own from the pool (or opens
//! one), so a thread blocked in a wait never holds up another thread. The
//! pool remembers the process id it was filled in: in a child after
//! `fork()` the inherited connections are never used (they share sockets
//! with the parent) and fresh ones are opened. A connection that saw an I/O
//! error is dropped, not pooled. Waiters use a second kind of connection, a
//! [`Subscriber`], subscribed once to its own wake-up channel and pooled
//! while still subscribed.

use std::time::Duration;

use std::sync::Mutex;

use crate::sync::locked;
use redis::{Cmd, Connection, ConnectionLike, ErrorKind as RedisKind, Value};

use crate::error::{Error, Result};
use crate::protocol::{self, Script};

/// Where connections go.
pub(crate) enum Endpoint {
    /// One server.
    Direct(redis::Client),
    /// The current master of a Sentinel service.
    Sentinel(crate::sentinel::Sentinel),
}

/// How to reach the server and how long to wait for it.
pub(crate) struct Target {
    pub(crate) endpoint: Endpoint,
    /// Opt-in: after acquiring, wait until this many replicas have the lock
    /// (Redis WAIT), at most this long.
    pub(crate) wait_replicas: Option<(u32, Duration)>,
    /// `host:port` or the socket path: safe to print.
    pub(crate) addr: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
}

struct Idle {
    pid: u32,
    cmd: Vec<Connection>,
    subs: Vec<Subscriber>,
}

impl Idle {
    /// Forget what a parent process left behind. Dropping a connection only
    /// closes this process's descriptor; the parent's socket stays open.
    fn check_pid(&mut self) {
        let pid = std::process::id();
        if self.pid != pid {
            self.pid = pid;
            self.cmd.clear();
            self.subs.clear();
        }
    }
}

/// Most idle connections of each kind kept for reuse.
const MAX_IDLE: usize = 64;

/// The connection pool of one client.
pub(crate) struct Pool {
    pub(crate) target: Target,
    idle: Mutex<Idle>,
}

/// A connection subscribed to its own wake-up channel.
pub(crate) struct Subscriber {
    pub(crate) con: Connection,
    /// 32 hex characters, unique per subscriber.
    pub(crate) id: String,
}

impl Pool {
    pub(crate) fn new(target: Target) -> Pool {
        Pool {
            target,
            idle: Mutex::new(Idle {
                pid: std::process::id(),
                cmd: Vec::new(),
                subs: Vec::new(),
            }),
        }
    }

    fn connect(&self) -> Result<Connection> {
        self.connect_within(self.target.connect_timeout)
    }

    fn connect_within(&self, connect_timeout: Duration) -> Result<Connection> {
        let t = &self.target;
        let con = match &t.endpoint {
            Endpoint::Direct(client) => client.get_connection_with_timeout(connect_timeout),
            Endpoint::Sentinel(s) => s
                .master(connect_timeout)?
                .get_connection_with_timeout(connect_timeout),
        }
        .map_err(|e| self.error(e, true))?;
        let timeout = Some(t.command_timeout);
        con.set_read_timeout(timeout)
            .and_then(|_| con.set_write_timeout(timeout))
            .map_err(|e| self.error(e, true))?;
        Ok(con)
    }

    fn take(&self) -> Option<Connection> {
        let mut idle = locked(&self.idle);
        idle.check_pid();
        idle.cmd.pop()
    }

    fn put(&self, con: Connection) {
        let mut idle = locked(&self.idle);
        idle.check_pid();
        if con.is_open() && idle.cmd.len() < MAX_IDLE {
            idle.cmd.push(con);
        }
    }

    /// Run `f` on a pooled connection. When a reused connection turns out to
    /// be dead (the server restarted, or closed it as idle), `f` runs once
    /// more on a fresh connection; `retried` tells it which run it is.
    pub(crate) fn with<T>(
        &self,
        mut f: impl FnMut(&mut Connection, bool) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let (mut con, reused) = match self.take() {
            Some(c) => (c, true),
            None => (self.connect()?, false),
        };
        match f(&mut con, false) {
            Ok(v) => {
                self.put(con);
                Ok(v)
            }
            Err(e) if reused && is_dead_connection(&e) => {
                drop(con);
                let mut con = self.connect()?;
                let r = f(&mut con, true);
                self.finish(con, r)
            }
            Err(e) => self.finish(con, Err(e)),
        }
    }

    /// Like [`Pool::with`], with every wait (connect, send, reply) bounded by
    /// `timeout` instead of the client's timeouts: Redlock's per-node limit.
    pub(crate) fn with_timeout<T>(
        &self,
        timeout: Duration,
        mut f: impl FnMut(&mut Connection, bool) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let normal = Some(self.target.command_timeout);
        let mut run = |con: &mut Connection, retried: bool| {
            con.set_read_timeout(Some(timeout))?;
            con.set_write_timeout(Some(timeout))?;
            let r = f(con, retried)?;
            con.set_read_timeout(normal)?;
            con.set_write_timeout(normal)?;
            Ok(r)
        };
        let (mut con, reused) = match self.take() {
            Some(c) => (c, true),
            None => (
                self.connect_within(timeout.min(self.target.connect_timeout))?,
                false,
            ),
        };
        match run(&mut con, false) {
            Ok(v) => {
                self.put(con);
                Ok(v)
            }
            Err(e) if reused && is_dead_connection(&e) => {
                drop(con);
                let mut con = self.connect_within(timeout.min(self.target.connect_timeout))?;
                let r = run(&mut con, true);
                self.finish(con, r)
            }
            Err(e) => self.finish(con, Err(e)),
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
        let evalsha = script.evalsha(keys, args);
        self.with_timeout(timeout, |con, _| {
            run_script(con, script, &evalsha, keys, args)
        })
    }

    fn finish<T>(&self, con: Connection, r: redis::RedisResult<T>) -> Result<T> {
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
                Err(self.error(e, false))
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
        let evalsha = script.evalsha(keys, args);
        self.with(|con, retried| match (retried, retry_args) {
            (true, Some(again)) => {
                run_script(con, script, &script.evalsha(keys, again), keys, again)
            }
            _ => run_script(con, script, &evalsha, keys, args),
        })
    }

    /// A subscriber from the pool (`true`: reused), or a new one.
    pub(crate) fn subscriber(&self) -> Result<(Subscriber, bool)> {
        {
            let mut idle = locked(&self.idle);
            idle.check_pid();
            if let Some(s) = idle.subs.pop() {
                return Ok((s, true));
            }
        }
        Ok((self.new_subscriber()?, false))
    }

    /// A new subscriber: connect, then SUBSCRIBE to a fresh channel.
    pub(crate) fn new_subscriber(&self) -> Result<Subscriber> {
        let mut con = self.connect()?;
        let id = protocol::hex(&protocol::random_bytes::<16>());
        let channel = format!("{}{}", protocol::WAKE_CHANNEL_PREFIX, id);
        let mut ps = con.as_pubsub();
        let r = ps.subscribe(&channel);
        // Dropping the PubSub would unsubscribe; the connection is meant to
        // stay subscribed for its whole life, so the wrapper is forgotten
        // (it owns nothing but an empty message queue).
        std::mem::forget(ps);
        r.map_err(|e| self.error(e, false))?;
        Ok(Subscriber { con, id })
    }

    /// Return a subscriber that ended its wait cleanly.
    pub(crate) fn put_subscriber(&self, s: Subscriber) {
        let mut idle = locked(&self.idle);
        idle.check_pid();
        if s.con.is_open() && idle.subs.len() < MAX_IDLE {
            idle.subs.push(s);
        }
    }

    /// Translate a redis-rs error into ours, never showing credentials.
    pub(crate) fn error(&self, e: redis::RedisError, connecting: bool) -> Error {
        let t = &self.target;
        if e.kind() == RedisKind::AuthenticationFailed
            || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
        {
            return Error::Server {
                addr: t.addr.clone(),
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
                let hint = if connecting {
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

fn run_script(
    con: &mut Connection,
    script: &Script,
    evalsha: &Cmd,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> redis::RedisResult<Value> {
    match evalsha.query::<Value>(con) {
        Err(e) if e.kind() == RedisKind::Server(redis::ServerErrorKind::NoScript) => {
            script.eval(keys, args).query(con)
        }
        r => r,
    }
}

/// A connection that must be replaced, after which the command may be sent
/// again: dropped, or talking to a master that was demoted in a failover
/// (the command was refused, so it had no effect).
fn is_dead_connection(e: &redis::RedisError) -> bool {
    (e.is_connection_dropped() && !e.is_timeout()) || is_demoted(e)
}

fn is_demoted(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        RedisKind::Server(redis::ServerErrorKind::ReadOnly | redis::ServerErrorKind::MasterDown)
    )
}

fn io_reason(e: &redis::RedisError) -> String {
    if e.is_connection_refusal() {
        return String::from("connection refused");
    }
    if e.is_connection_dropped() {
        return String::from("the connection was closed");
    }
    server_message(e)
}

/// The error's text. redis-rs never puts the URL in its messages, so this
/// holds no credentials.
fn server_message(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}
