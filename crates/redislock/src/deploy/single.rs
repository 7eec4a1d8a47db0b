//! One server: every operation is one script (or command) on the server
//! that holds the lock's key: the server itself, Sentinel's current master,
//! or the Cluster node serving the key's slot (the pool routes). Waiting is
//! by hand-off (see `wait`). Errors name the lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::wait::{self, Server as _};
#[cfg(feature = "tokio")]
use super::{AsyncDeployment, Op};
use super::{Deployment, Extension, Grant, Granted};
use crate::error::{show_key, Error, Result};
#[cfg(feature = "tokio")]
use crate::net::async_pool::AsyncPool;
use crate::net::pool::Pool;
use crate::net::transport::{block_on, Transport};
use crate::options::{Interrupt, LockInfo, SharedInfo, Wait};
use crate::protocol::{self, scripts, Cap, LockKeys, Released, Script, QUEUE_GRACE_MS};
use crate::stats::Event;

/// Generic over the transport: the blocking [`Pool`] or the async one.
pub(crate) struct Single<P> {
    pool: P,
    /// `wait_replicas`: the master was seen with fewer replicas connected
    /// than asked for; acquisitions look first, and fail at once while
    /// that lasts.
    short_of_replicas: AtomicBool,
}

impl<P: Transport> Single<P> {
    pub(crate) fn new(pool: P) -> Single<P> {
        Single {
            pool,
            short_of_replicas: AtomicBool::new(false),
        }
    }

    /// How many replicas the server holding `key` has connected and in sync
    /// (`ROLE` lists those only; sent after a command on `key`, so that a
    /// cluster routes it to that node), or `None` when it will not say.
    async fn replicas(&self, key: &[u8]) -> Option<u32> {
        let mut pipe = redis::pipe();
        pipe.cmd("EXISTS").arg(key).cmd("ROLE");
        let replies = self.pool.pipeline(&pipe).await.ok()?;
        match replies.get(1)? {
            Value::Array(role) => match role.get(2)? {
                Value::Array(replicas) => u32::try_from(replicas.len()).ok(),
                _ => None,
            },
            _ => None,
        }
    }

    /// `wait_replicas=N` while the master was last seen short of replicas:
    /// fail at once, without writing the lock, unless N are connected again.
    async fn replicas_connected(&self, keys: &LockKeys, n: u32) -> Result<()> {
        if !self.short_of_replicas.load(Ordering::Relaxed) {
            return Ok(());
        }
        match self.replicas(&keys.lock).await {
            Some(have) if have < n => Err(short_of_replicas(keys, have, n, "no lock was taken")),
            _ => {
                self.short_of_replicas.store(false, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// One attempt: the plain `SET … NX PX … GET` unless the caller wants
    /// the fence drawn at once (or the server is older than Redis 7.0).
    /// The fence, 0 when none was drawn.
    async fn try_once(
        &self,
        keys: &LockKeys,
        token: &[u8],
        ttl_ms: u64,
        fenced: bool,
        started: Instant,
    ) -> Result<u64> {
        match wait::try_take(self, keys, token, ttl_ms, fenced).await? {
            wait::Tried::Taken(fence) => Ok(fence),
            wait::Tried::Held(pttl) => Err(Error::not_acquired(&keys.lock, pttl, started)),
        }
    }

    /// `?wait_replicas=N`: rewrite the lock on our own connection (an
    /// extend, so that whatever path granted it, the write to wait for is
    /// ours) and WAIT for N replicas, in one round trip (in a Cluster, on
    /// the node serving the lock's slot: the pipeline goes there whole).
    /// Too few: release and fail with [`Error::NoQuorum`]. Any other
    /// failure releases too (best effort): the caller is told it has no
    /// lock, so none must stay behind.
    async fn confirm_replicated(
        &self,
        keys: &LockKeys,
        token: &[u8],
        fence: u64,
        ttl_ms: u64,
        (n, t): (u32, Duration),
    ) -> Result<()> {
        let (ms, fence) = (ttl_ms.to_string(), fence.to_string());
        let grace = QUEUE_GRACE_MS.to_string();
        let extend = keys.scripts().extend.eval(
            &keys.all(),
            &[token, ms.as_bytes(), fence.as_bytes(), grace.as_bytes()],
        );
        let wait_ms = t.as_millis().max(1) as u64;
        let mut pipe = redis::pipe();
        pipe.add_command(extend).cmd("WAIT").arg(n).arg(wait_ms);
        let replies = match self.pool.pipeline(&pipe).await {
            Ok(r) => r,
            Err(e) => {
                let _ = self.release(keys, token).await;
                return Err(self.with_key(e, &keys.lock).await);
            }
        };
        let (still, acked): (i64, i64) = redis::from_redis_value(Value::Array(replies))
            .map_err(|e| Error::Internal(e.to_string()))?;
        if still == 1 && acked >= i64::from(n) {
            return Ok(());
        }
        let _ = self.release(keys, token).await;
        // Too few replicas connected (a failover took one away): said so,
        // and later acquisitions fail at once while it lasts.
        if let Some(have) = self.replicas(&keys.lock).await.filter(|&have| have < n) {
            self.short_of_replicas.store(true, Ordering::Relaxed);
            return Err(short_of_replicas(keys, have, n, "the lock was released"));
        }
        Err(Error::NoQuorum {
            key: show_key(&keys.lock),
            detail: format!(
                "only {acked} of the {n} replicas asked for (wait_replicas) acknowledged the lock \
                 within {wait_ms} ms; it was released"
            ),
        })
    }

    /// Name the key in a WrongType error, and what it holds (one more round
    /// trip, on this error path only).
    /// The server answered `what` with what it never answers (the
    /// transport checks scripts' replies first: this is a second line).
    fn unexpected(&self, what: &str, v: &Value) -> Error {
        Error::unexpected(&self.pool.target().addr, what, v)
    }

    async fn with_key(&self, e: Error, key: &[u8]) -> Error {
        match e {
            // The scripts' own errors about the companion keys.
            Error::WrongType { found, .. } if found.contains("the fence counter") => {
                Error::WrongType {
                    key: show_key(LockKeys::new(key).counter()),
                    found: String::from("non-integer"),
                }
            }
            Error::WrongType { found, .. } if found.contains("the waiter queue") => {
                Error::WrongType {
                    key: show_key(LockKeys::new(key).queue()),
                    found: String::from("non-list"),
                }
            }
            Error::WrongType { .. } => {
                let found = match self.pool.query(redis::cmd("TYPE").arg(key)).await {
                    Ok(Value::SimpleString(t)) => t,
                    _ => String::from("non-string"),
                };
                Error::WrongType {
                    key: show_key(key),
                    found,
                }
            }
            other => other,
        }
    }
}

/// A refusal for memory: `OOM command not allowed when used memory >
/// 'maxmemory'` (noeviction).
fn is_oom(message: &str) -> bool {
    message.starts_with("OOM")
}

/// The master has `have` replicas connected where `wait_replicas` asks for
/// `n`; `done`: what became of the lock.
fn short_of_replicas(keys: &LockKeys, have: u32, n: u32, done: &str) -> Error {
    Error::NoQuorum {
        key: show_key(&keys.lock),
        detail: format!(
            "the master has {have} replica(s) connected and wait_replicas asks for {n}; {done}. \
             After a failover the new master has no replica until the others are reconfigured \
             to follow it (Sentinel converts the old master after about 10 s); acquisitions \
             resume as soon as {n} are connected and in sync"
        ),
    }
}

/// Scripts run with errors naming the lock.
impl<P: Transport> wait::Server for Single<P> {
    type Io = P;

    fn io(&self) -> &P {
        &self.pool
    }

    async fn script(
        &self,
        script: &'static Script,
        key: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> Result<Value> {
        match self.pool.script(script, keys, args, retry_args).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.with_key(e, key).await),
        }
    }

    async fn command(
        &self,
        cmd: &[&[u8]],
        key: &[u8],
        accepts: protocol::Accepts,
    ) -> Result<(Value, bool)> {
        match self.pool.query_resent(cmd, accepts).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.with_key(e, key).await),
        }
    }

    async fn holds(&self, keys: &LockKeys, token: &[u8]) -> Result<bool> {
        if keys.shared() {
            return Ok(self.fence(keys, token).await?.is_some());
        }
        self.is_owned_by(&keys.lock, token).await
    }
}

/// The operations, once for both transports.
impl<P: Transport> Single<P> {
    pub(crate) async fn acquire(
        &self,
        keys: &LockKeys,
        token: &[u8],
        ttl_ms: u64,
        (wait, fenced): (Wait, bool),
        interrupt: Option<&Interrupt>,
        started: Instant,
    ) -> Result<Grant> {
        if let Some((n, _)) = self.pool.target().wait_replicas {
            self.replicas_connected(keys, n).await?;
        }
        let deadline = match wait {
            Wait::TryOnce => None,
            Wait::Timeout(d) if d.is_zero() => None,
            Wait::Timeout(d) => Some(started.checked_add(d)),
            Wait::Forever => Some(None),
        };
        let attempt = match deadline {
            None => (self.try_once(keys, token, ttl_ms, fenced, started).await)
                .map(|fence| Grant::new(fence, Granted::AtOnce)),
            Some(deadline) => {
                let when = (deadline, started);
                (wait::acquire(self, keys, token, ttl_ms, fenced, when, interrupt).await)
                    .inspect(|grant| keys.set_waited(grant.how != Granted::AtOnce))
            }
        };
        let grant = match attempt {
            // The call ran out while the server could not be reached and
            // the deployment may give it a successor (the sentinels or the
            // cluster can promote a replica): a moment of unavailability,
            // not a connection fault to report.
            Err(Error::Connection { addr, reason, .. }) if self.pool.failover_possible().await => {
                return Err(Error::Unavailable {
                    addr,
                    state: format!(
                        "unreachable ({reason}) while a replica may take its place (a failover \
                         may be under way)"
                    ),
                    waited: started.elapsed(),
                    hint: String::from("; the call's wait or command timeout ran out"),
                })
            }
            r => r?,
        };
        if let Some(replicas) = self.pool.target().wait_replicas {
            self.confirm_replicated(keys, token, grant.fence, ttl_ms, replicas)
                .await?;
        }
        Ok(grant)
    }

    /// [`Error::Unconfirmed`] when it was not the owner on a second sending
    /// whose first sending's reply was lost with its connection.
    pub(crate) async fn release(&self, keys: &LockKeys, token: &[u8]) -> Result<bool> {
        let grace = QUEUE_GRACE_MS.to_string();
        let sent = if keys.shared() {
            let all = keys.all();
            self.pool
                .script_resent(&scripts().sem_release, &all, &[token, grace.as_bytes()])
                .await
        } else if keys.waited() {
            let s = scripts();
            let keys = keys.release_queued();
            self.pool
                .script_resent(&s.release_queued, &keys, &[token])
                .await
        } else {
            let keys = keys.release();
            self.pool
                .script_resent(&scripts().release, &keys, &[token])
                .await
        };
        let (reply, resent) = match sent {
            Ok(r) => r,
            Err(e) => return Err(self.with_key(e, &keys.lock).await),
        };
        match protocol::parse_released(&reply) {
            Some(Released::NotOwner) if resent => Err(Error::Unconfirmed {
                key: show_key(&keys.lock),
                addr: self.pool.target().addr.clone(),
            }),
            Some(Released::NotOwner) => Ok(false),
            Some(Released::Deleted) => Ok(true),
            Some(Released::Handed(to)) => {
                self.pool.stats().count(Event::HandoffGiven);
                if let Some((id, nonce)) = to {
                    // A waiter of this process: told now, not when the
                    // subscriber's copy of the message is read.
                    if self.pool.hand_here(id, nonce) {
                        tracing::debug!(
                            lock = %show_key(&keys.lock),
                            "released: handed to a waiter of this process"
                        );
                    }
                }
                Ok(true)
            }
            None => Err(self.unexpected("the release", &reply)),
        }
    }

    pub(crate) async fn force_release(&self, keys: &LockKeys) -> Result<bool> {
        let s = scripts();
        let reply = self
            .script(
                &s.force_release,
                &keys.lock,
                &keys.release_queued(),
                &[],
                None,
            )
            .await?;
        let (removed, handed) = protocol::parse_forced(&reply)
            .ok_or_else(|| self.unexpected("FORCE_RELEASE", &reply))?;
        if handed {
            self.pool.stats().count(Event::HandoffGiven);
        }
        Ok(removed)
    }

    pub(crate) async fn extend(
        &self,
        keys: &LockKeys,
        token: &[u8],
        fence: u64,
        ttl_ms: u64,
    ) -> Result<bool> {
        // Without a fence to keep beside the lock, `SET … IFEQ` does it
        // where the server has it (Valkey 8.1, Redis 8.4).
        let caps = self.pool.caps();
        if fence == 0 && !keys.shared() && caps.worth_trying(Cap::IfEq) {
            let cmd = protocol::set_ifeq(&keys.lock, token, ttl_ms);
            let reply = self.pool.query(&cmd).await;
            if !caps.refused(Cap::IfEq, &reply) {
                match reply {
                    Ok(Value::Okay) => return Ok(true),
                    Ok(Value::Nil) => return Ok(false),
                    Ok(other) => return Err(self.unexpected("SET … IFEQ", &other)),
                    // A full memory (noeviction) refuses SET, not PEXPIRE:
                    // the EXTEND script below keeps the lock.
                    Err(Error::Server { message, .. }) if is_oom(&message) => {}
                    Err(e) => return Err(self.with_key(e, &keys.lock).await),
                }
            }
        }
        let (ms, fence) = (ttl_ms.to_string(), fence.to_string());
        let grace = QUEUE_GRACE_MS.to_string();
        let reply = self
            .script(
                keys.scripts().extend,
                &keys.lock,
                &keys.all(),
                &[token, ms.as_bytes(), fence.as_bytes(), grace.as_bytes()],
                None,
            )
            .await?;
        match reply {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            other => Err(self.unexpected("EXTEND", &other)),
        }
    }

    /// In one pipelined round trip; in a Cluster one by one (each lock on
    /// its own slot's node).
    pub(crate) async fn extend_many(&self, locks: &[Extension<'_>]) -> Vec<Option<bool>> {
        if self.pool.is_cluster() {
            let mut out = Vec::with_capacity(locks.len());
            for l in locks {
                out.push(self.extend(l.keys, l.token, l.fence, l.ttl_ms).await.ok());
            }
            return out;
        }
        // `SET … IFEQ` once the server is known to take it (a refusal in
        // a pipeline would cost that lock its renewal): while that is not
        // known, the first lock without a fence goes alone, and teaches it.
        let caps = self.pool.caps();
        let mut alone = None;
        if !caps.known(Cap::IfEq) && caps.worth_trying(Cap::IfEq) {
            if let Some(i) = locks.iter().position(|l| l.fence == 0 && !l.keys.shared()) {
                let l = &locks[i];
                alone = Some((i, self.extend(l.keys, l.token, 0, l.ttl_ms).await.ok()));
            }
        }
        let ifeq = caps.known(Cap::IfEq);
        let grace = QUEUE_GRACE_MS.to_string();
        let mut pipe = redis::pipe();
        let rest = (locks.iter().enumerate()).filter(|&(i, _)| Some(i) != alone.map(|a| a.0));
        for (_, l) in rest {
            if ifeq && l.fence == 0 && !l.keys.shared() {
                pipe.add_command(protocol::set_ifeq(&l.keys.lock, l.token, l.ttl_ms));
                continue;
            }
            let (ttl, fence) = (l.ttl_ms.to_string(), l.fence.to_string());
            let args = [l.token, ttl.as_bytes(), fence.as_bytes(), grace.as_bytes()];
            pipe.add_command(l.keys.scripts().extend.eval(&l.keys.all(), &args));
        }
        let sent = if locks.len() > usize::from(alone.is_some()) {
            self.pool.pipeline(&pipe).await
        } else {
            Ok(Vec::new())
        };
        let mut out: Vec<Option<bool>> = match sent {
            Ok(replies) => replies
                .into_iter()
                .map(|reply| match reply {
                    Value::Int(1) | Value::Okay => Some(true),
                    Value::Int(0) | Value::Nil => Some(false),
                    _ => None,
                })
                .collect(),
            Err(_) => vec![None; locks.len() - usize::from(alone.is_some())],
        };
        // A renewal refused for memory (SET … IFEQ under OOM) is made again
        // by the EXTEND script, whose PEXPIRE the server allows.
        if ifeq {
            let rest = (locks.iter().enumerate()).filter(|&(i, _)| Some(i) != alone.map(|a| a.0));
            for (slot, (_, l)) in out.iter_mut().zip(rest) {
                if slot.is_none() && l.fence == 0 && !l.keys.shared() {
                    *slot = self.extend(l.keys, l.token, l.fence, l.ttl_ms).await.ok();
                }
            }
        }
        if let Some((i, first)) = alone {
            out.insert(i, first);
        }
        out
    }

    pub(crate) async fn fence(&self, keys: &LockKeys, token: &[u8]) -> Result<Option<u64>> {
        let reply = self
            .script(
                keys.scripts().fence,
                &keys.lock,
                &keys.all(),
                &[token],
                None,
            )
            .await?;
        match &reply {
            Value::Nil => Ok(None),
            Value::Array(items) if items.len() == 1 => protocol::parse_fence(&items[0])
                .filter(|&f| f > 0)
                .map(Some)
                .ok_or_else(|| self.unexpected("FENCE", &reply)),
            _ => Err(self.unexpected("FENCE", &reply)),
        }
    }

    pub(crate) async fn inspect(&self, keys: &LockKeys) -> Result<LockInfo> {
        let reply = self
            .script(&scripts().inspect, &keys.lock, &keys.all(), &[], None)
            .await?;
        protocol::parse_info(&reply).ok_or_else(|| self.unexpected("INSPECT", &reply))
    }

    pub(crate) async fn inspect_shared(&self, keys: &LockKeys) -> Result<SharedInfo> {
        let reply = self
            .script(&scripts().sem_inspect, &keys.lock, &keys.all(), &[], None)
            .await?;
        protocol::parse_shared_info(&reply).ok_or_else(|| self.unexpected("SEM_INSPECT", &reply))
    }

    pub(crate) async fn is_locked(&self, key: &[u8]) -> Result<bool> {
        match self.pool.query(redis::cmd("EXISTS").arg(key)).await? {
            Value::Int(n) => Ok(n > 0),
            other => Err(self.unexpected("EXISTS", &other)),
        }
    }

    pub(crate) async fn is_owned_by(&self, key: &[u8], token: &[u8]) -> Result<bool> {
        let v = match self.pool.query(redis::cmd("GET").arg(key)).await {
            Ok(v) => v,
            Err(e) => return Err(self.with_key(e, key).await),
        };
        Ok(matches!(v, Value::BulkString(ref b) if b.as_slice() == token))
    }
}

impl Deployment for Single<Arc<Pool>> {
    fn describe(&self) -> String {
        self.pool.target.addr.clone()
    }

    fn pools(&self) -> Vec<&Pool> {
        vec![&self.pool]
    }

    fn acquire(
        &self,
        keys: &LockKeys,
        token: &[u8],
        ttl_ms: u64,
        wait: (Wait, bool),
        interrupt: Option<&Interrupt>,
        started: Instant,
    ) -> Result<Grant> {
        block_on(Single::acquire(
            self, keys, token, ttl_ms, wait, interrupt, started,
        ))
    }

    fn fence(&self, keys: &LockKeys, token: &[u8]) -> Result<Option<u64>> {
        block_on(Single::fence(self, keys, token))
    }

    fn release(&self, keys: &LockKeys, token: &[u8]) -> Result<bool> {
        block_on(Single::release(self, keys, token))
    }

    fn force_release(&self, keys: &LockKeys) -> Result<bool> {
        block_on(Single::force_release(self, keys))
    }

    fn extend(&self, keys: &LockKeys, token: &[u8], fence: u64, ttl_ms: u64) -> Result<bool> {
        block_on(Single::extend(self, keys, token, fence, ttl_ms))
    }

    fn extend_many(&self, locks: &[Extension]) -> Vec<Option<bool>> {
        block_on(Single::extend_many(self, locks))
    }

    fn inspect(&self, keys: &LockKeys) -> Result<LockInfo> {
        block_on(Single::inspect(self, keys))
    }

    fn inspect_shared(&self, keys: &LockKeys) -> Result<SharedInfo> {
        block_on(Single::inspect_shared(self, keys))
    }

    fn is_locked(&self, key: &[u8]) -> Result<bool> {
        block_on(Single::is_locked(self, key))
    }

    fn is_owned_by(&self, key: &[u8], token: &[u8]) -> Result<bool> {
        block_on(Single::is_owned_by(self, key, token))
    }

    #[cfg(feature = "tokio")]
    fn to_async(self: Arc<Self>) -> Arc<dyn AsyncDeployment> {
        Arc::new(Single::new(AsyncPool::new(self.pool.clone())))
    }
}

#[cfg(feature = "tokio")]
impl AsyncDeployment for Single<AsyncPool> {
    fn acquire<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a [u8],
        ttl_ms: u64,
        wait: (Wait, bool),
        started: Instant,
    ) -> Op<'a, Grant> {
        Box::pin(Single::acquire(
            self, keys, token, ttl_ms, wait, None, started,
        ))
    }

    fn fence<'a>(&'a self, keys: &'a LockKeys, token: &'a [u8]) -> Op<'a, Option<u64>> {
        Box::pin(Single::fence(self, keys, token))
    }

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a [u8]) -> Op<'a, bool> {
        Box::pin(Single::release(self, keys, token))
    }

    fn extend<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a [u8],
        fence: u64,
        ttl_ms: u64,
    ) -> Op<'a, bool> {
        Box::pin(Single::extend(self, keys, token, fence, ttl_ms))
    }

    fn inspect<'a>(&'a self, keys: &'a LockKeys) -> Op<'a, LockInfo> {
        Box::pin(Single::inspect(self, keys))
    }

    fn is_locked<'a>(&'a self, key: &'a [u8]) -> Op<'a, bool> {
        Box::pin(Single::is_locked(self, key))
    }

    fn is_owned_by<'a>(&'a self, key: &'a [u8], token: &'a [u8]) -> Op<'a, bool> {
        Box::pin(Single::is_owned_by(self, key, token))
    }
}
