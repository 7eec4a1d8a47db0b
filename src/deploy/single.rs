//! One server: every operation is one script (or command) on the server
//! that holds the lock's key: the server itself, Sentinel's current master,
//! or the Cluster node serving the key's slot (the pool routes). Waiting is
//! by hand-off (see `wait`). Errors name the lock.

use std::time::{Duration, Instant};

use redis::Value;

use super::wait::{self, Server as _};
use super::{Deployment, Extension};
use crate::error::{show_key, Error, Result};
use crate::net::pool::Pool;
use crate::options::{Interrupt, LockInfo, Wait};
use crate::protocol::{self, scripts, Attempt, LockKeys, Script};

pub(crate) struct Single {
    pool: Pool,
}

impl Single {
    pub(crate) fn new(pool: Pool) -> Single {
        Single { pool }
    }

    /// One attempt.
    fn try_once(
        &self,
        keys: &LockKeys,
        token: &[u8],
        ttl_ms: u64,
        started: Instant,
    ) -> Result<u64> {
        let ttl = ttl_ms.to_string();
        let reply = self.script(
            &scripts().acquire,
            &keys.lock,
            &keys.all(),
            &[token, ttl.as_bytes(), b"0"],
            Some(&[token, ttl.as_bytes(), b"1"]),
        )?;
        match protocol::parse_attempt(&reply) {
            Some(Attempt::Taken(fence)) => Ok(fence),
            Some(Attempt::Held { pttl, .. }) => Err(Error::not_acquired(&keys.lock, pttl, started)),
            None => Err(Error::unexpected(&reply)),
        }
    }

    /// `?wait_replicas=N`: rewrite the lock on our own connection (an
    /// extend, so that whatever path granted it, the write to wait for is
    /// ours) and WAIT for N replicas, in one round trip. Too few: release
    /// and fail with [`Error::NoQuorum`].
    fn confirm_replicated(
        &self,
        keys: &LockKeys,
        token: &[u8],
        fence: u64,
        ttl_ms: u64,
        (n, t): (u32, Duration),
    ) -> Result<()> {
        let (ms, fence) = (ttl_ms.to_string(), fence.to_string());
        let extend = scripts()
            .extend
            .eval(&keys.all(), &[token, ms.as_bytes(), fence.as_bytes()]);
        let wait_ms = t.as_millis().max(1) as u64;
        let (still, acked): (i64, i64) = self
            .pool
            .with(|con, _| {
                redis::pipe()
                    .add_command(extend.clone())
                    .cmd("WAIT")
                    .arg(n)
                    .arg(wait_ms)
                    .query(con)
            })
            .map_err(|e| self.with_key(e, &keys.lock))?;
        if still == 1 && acked >= i64::from(n) {
            return Ok(());
        }
        let _ = self.release(keys, token);
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
    fn with_key(&self, e: Error, key: &[u8]) -> Error {
        match e {
            // The scripts' own errors about the companion keys.
            Error::WrongType { found, .. } if found.contains("the fence counter") => {
                Error::WrongType {
                    key: show_key(&LockKeys::new(key).counter),
                    found: String::from("non-integer"),
                }
            }
            Error::WrongType { found, .. } if found.contains("the waiter queue") => {
                Error::WrongType {
                    key: show_key(&LockKeys::new(key).queue),
                    found: String::from("non-list"),
                }
            }
            Error::WrongType { .. } => {
                let found = self
                    .pool
                    .with(|con, _| redis::cmd("TYPE").arg(key).query::<String>(con))
                    .unwrap_or_else(|_| String::from("non-string"));
                Error::WrongType {
                    key: show_key(key),
                    found,
                }
            }
            other => other,
        }
    }
}

/// Scripts run with errors naming the lock (see [`Pool::script`]).
impl wait::Server for Single {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn script(
        &self,
        script: &Script,
        key: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> Result<Value> {
        self.pool
            .script(script, keys, args, retry_args)
            .map_err(|e| self.with_key(e, key))
    }

    fn holds(&self, key: &[u8], token: &[u8]) -> Result<bool> {
        self.is_owned_by(key, token)
    }
}

impl Deployment for Single {
    fn describe(&self) -> String {
        self.pool.target.addr.clone()
    }

    fn acquire(
        &self,
        keys: &LockKeys,
        token: &[u8],
        ttl_ms: u64,
        wait: Wait,
        interrupt: Option<&Interrupt>,
        started: Instant,
    ) -> Result<u64> {
        let deadline = match wait {
            Wait::TryOnce => None,
            Wait::Timeout(d) if d.is_zero() => None,
            Wait::Timeout(d) => Some(started.checked_add(d)),
            Wait::Forever => Some(None),
        };
        let fence = match deadline {
            None => self.try_once(keys, token, ttl_ms, started)?,
            Some(deadline) => {
                wait::acquire(self, keys, token, ttl_ms, (deadline, started), interrupt)?
            }
        };
        if let Some(replicas) = self.pool.target.wait_replicas {
            self.confirm_replicated(keys, token, fence, ttl_ms, replicas)?;
        }
        Ok(fence)
    }

    /// [`Error::Unconfirmed`] when it was not the owner on a second sending
    /// whose first sending's reply was lost with its connection.
    fn release(&self, keys: &LockKeys, token: &[u8]) -> Result<bool> {
        let (reply, resent) = self
            .pool
            .script_resent(&scripts().release, &keys.all(), &[token])
            .map_err(|e| self.with_key(e, &keys.lock))?;
        match reply {
            Value::Int(0) if resent => Err(Error::Unconfirmed {
                key: show_key(&keys.lock),
                addr: self.pool.target.addr.clone(),
            }),
            Value::Int(0) => Ok(false),
            Value::Int(1 | 2) => Ok(true),
            other => Err(Error::unexpected(&other)),
        }
    }

    fn extend(&self, keys: &LockKeys, token: &[u8], fence: u64, ttl_ms: u64) -> Result<bool> {
        let (ms, fence) = (ttl_ms.to_string(), fence.to_string());
        let reply = self.script(
            &scripts().extend,
            &keys.lock,
            &keys.all(),
            &[token, ms.as_bytes(), fence.as_bytes()],
            None,
        )?;
        match reply {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            other => Err(Error::unexpected(&other)),
        }
    }

    /// In one pipelined round trip; in a Cluster one by one (each lock on
    /// its own slot's node).
    fn extend_many(&self, locks: &[Extension]) -> Vec<Option<bool>> {
        if self.pool.is_cluster() {
            return locks
                .iter()
                .map(|l| self.extend(l.keys, l.token, l.fence, l.ttl_ms).ok())
                .collect();
        }
        let extend = &scripts().extend;
        let mut pipe = redis::pipe();
        for l in locks {
            let (ttl, fence) = (l.ttl_ms.to_string(), l.fence.to_string());
            pipe.add_command(
                extend.eval(&l.keys.all(), &[l.token, ttl.as_bytes(), fence.as_bytes()]),
            );
        }
        match self.pool.with(|con, _| pipe.query::<Vec<Value>>(con)) {
            Ok(replies) => replies
                .into_iter()
                .map(|reply| match reply {
                    Value::Int(1) => Some(true),
                    Value::Int(0) => Some(false),
                    _ => None,
                })
                .collect(),
            Err(_) => vec![None; locks.len()],
        }
    }

    fn inspect(&self, keys: &LockKeys) -> Result<LockInfo> {
        let reply = self.script(&scripts().inspect, &keys.lock, &keys.all(), &[], None)?;
        protocol::parse_info(&reply).ok_or_else(|| Error::unexpected(&reply))
    }

    fn is_locked(&self, key: &[u8]) -> Result<bool> {
        let n: i64 = self
            .pool
            .with(|con, _| redis::cmd("EXISTS").arg(key).query(con))?;
        Ok(n > 0)
    }

    fn is_owned_by(&self, key: &[u8], token: &[u8]) -> Result<bool> {
        let v: Value = self
            .pool
            .with(|con, _| redis::cmd("GET").arg(key).query(con))
            .map_err(|e| self.with_key(e, key))?;
        Ok(matches!(v, Value::BulkString(ref b) if b.as_slice() == token))
    }
}
