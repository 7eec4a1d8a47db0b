//! Redlock: one lock over N independent Redis masters.
//!
//! Each operation runs the same scripts as the single-server lock on every
//! node at once (one thread per node), each bounded by a per-node timeout
//! much shorter than the TTL (a tenth of it, at least 5 ms and at most the
//! command timeout, unless set). An acquisition holds when a majority
//! (N/2+1, integer) agreed and the validity `ttl − elapsed − drift` (drift =
//! ttl·1% + 2 ms) is still positive, `elapsed` measured on the monotonic
//! clock from the start of that attempt. Otherwise the lock is released on
//! every node (compare-and-delete: only keys holding our token go) and,
//! while the wait allows, tried again after a random delay. Extend needs a
//! majority and re-checks validity; release goes to every node. When too
//! many nodes fail to answer for a majority to be possible, the result is
//! [`Error::NoQuorum`].
//!
//! Waiting here is by retries, not hand-off (a queue spread over nodes would
//! need its own consensus). Fencing numbers are the largest of the agreeing
//! nodes' counters: advisory only, since the nodes do not agree on a total
//! order.

use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use super::Deployment;
use crate::error::{show_key, Error, Result};
use crate::net::pool::Pool;
use crate::options::{Interrupt, LockInfo, Wait};
use crate::protocol::{self, scripts, Attempt, LockKeys};

/// The servers, and the bound on each one's reply if the caller set it.
pub(crate) struct Redlock {
    nodes: Vec<Pool>,
    node_timeout: Option<Duration>,
}

impl Redlock {
    pub(crate) fn new(nodes: Vec<Pool>, node_timeout: Option<Duration>) -> Redlock {
        Redlock {
            nodes,
            node_timeout,
        }
    }
}

impl Deployment for Redlock {
    fn describe(&self) -> String {
        let addrs: Vec<&str> = self.nodes.iter().map(|p| p.target.addr.as_str()).collect();
        format!("Redlock over {}", addrs.join(", "))
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
            Wait::TryOnce => Some(started),
            Wait::Timeout(d) => started.checked_add(d),
            Wait::Forever => None,
        };
        acquire(self, keys, token, ttl_ms, deadline, started, interrupt)
    }

    fn release(&self, keys: &LockKeys, token: &[u8]) -> Result<bool> {
        release(self, keys, token)
    }

    fn extend(&self, keys: &LockKeys, token: &[u8], fence: u64, ttl_ms: u64) -> Result<bool> {
        extend(self, keys, token, fence, ttl_ms)
    }

    fn inspect(&self, keys: &LockKeys) -> Result<LockInfo> {
        inspect(self, keys)
    }

    fn is_locked(&self, key: &[u8]) -> Result<bool> {
        Ok(holder(self, key)?.is_some())
    }

    fn is_owned_by(&self, key: &[u8], token: &[u8]) -> Result<bool> {
        is_owned_by(self, key, token)
    }

    #[cfg(feature = "tokio")]
    fn to_async(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn super::AsyncDeployment> {
        std::sync::Arc::new(asynchronous::AsyncRedlock(self))
    }
}

/// Longest pause between two attempts.
const MAX_RETRY_DELAY: Duration = Duration::from_millis(200);

pub(crate) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

fn drift_ms(ttl_ms: u64) -> u64 {
    ttl_ms / 100 + 2
}

/// The per-node bound for a lock of `ttl_ms`.
fn node_timeout(r: &Redlock, ttl_ms: u64) -> Duration {
    if let Some(t) = r.node_timeout {
        return t;
    }
    let command = r.nodes[0].target.command_timeout;
    Duration::from_millis(ttl_ms / 10).clamp(Duration::from_millis(5), command)
}

/// Run `f` on every node at once; the results in node order.
fn on_all<T: Send>(nodes: &[Pool], f: impl Fn(&Pool) -> Result<T> + Sync) -> Vec<Result<T>> {
    let f = &f;
    thread::scope(|s| {
        let handles: Vec<_> = nodes.iter().map(|p| s.spawn(move || f(p))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Internal("a Redlock node thread panicked".into()))
                })
            })
            .collect()
    })
}

fn no_quorum(key: &[u8], n: usize, errors: &[&Error]) -> Error {
    let mut detail = format!(
        "{} of {n} Redis nodes failed, a majority needs {}",
        errors.len(),
        quorum(n)
    );
    if let Some(first) = errors.first() {
        detail.push_str(&format!(" (first: {first})"));
    }
    Error::NoQuorum {
        key: show_key(key),
        detail,
    }
}

/// Acquire on a majority; retry until `deadline` (`None`: forever).
fn acquire(
    r: &Redlock,
    keys: &LockKeys,
    token: &[u8],
    ttl_ms: u64,
    deadline: Option<Instant>,
    started: Instant,
    interrupt: Option<&Interrupt>,
) -> Result<u64> {
    let nodes = &r.nodes;
    let n = nodes.len();
    let timeout = node_timeout(r, ttl_ms);
    let ttl = ttl_ms.to_string();
    loop {
        let t0 = Instant::now();
        let results = on_all(nodes, |p| {
            p.script_within(
                timeout,
                &scripts().acquire,
                &keys.all(),
                &[token, ttl.as_bytes(), b"0"],
            )
        });
        let elapsed = t0.elapsed().as_millis() as u64;
        let mut agreed = 0;
        let mut fence = 0;
        let mut holder_ttl: Option<i64> = None;
        let mut errors = Vec::new();
        for r in &results {
            match r {
                Ok(reply) => match protocol::parse_attempt(reply) {
                    Some(Attempt::Taken(f)) => {
                        agreed += 1;
                        fence = fence.max(f);
                    }
                    Some(Attempt::Held { pttl, .. }) => {
                        holder_ttl = Some(holder_ttl.map_or(pttl, |t| t.min(pttl)));
                    }
                    None => return Err(Error::unexpected(reply)),
                },
                Err(e) => errors.push(e),
            }
        }
        let validity = ttl_ms as i64 - elapsed as i64 - drift_ms(ttl_ms) as i64;
        if agreed >= quorum(n) && validity > 0 {
            return Ok(fence);
        }
        // Not held: take back what we got, everywhere.
        if agreed > 0 {
            release_all(r, keys, token, timeout);
        }
        let wrong_type = errors.iter().find_map(|e| match e {
            Error::WrongType { found, .. } => Some(found),
            _ => None,
        });
        if let Some(found) = wrong_type {
            return Err(Error::WrongType {
                key: show_key(&keys.lock),
                found: if found.contains("fence counter") {
                    "non-integer fence"
                } else {
                    "non-string"
                }
                .into(),
            });
        }
        if errors.len() > n - quorum(n) {
            return Err(no_quorum(&keys.lock, n, &errors));
        }
        let now = Instant::now();
        let left = match deadline {
            Some(d) if now >= d => {
                return Err(Error::not_acquired(
                    &keys.lock,
                    holder_ttl.unwrap_or(-1),
                    started,
                ))
            }
            Some(d) => d - now,
            None => MAX_RETRY_DELAY,
        };
        if interrupt.is_some_and(|i| i.stop()) {
            return Err(Error::not_acquired(
                &keys.lock,
                holder_ttl.unwrap_or(-1),
                started,
            ));
        }
        let holder_ttl = holder_ttl.and_then(|t| u64::try_from(t).ok());
        thread::sleep(retry_pause(holder_ttl.map(Duration::from_millis), left));
    }
}

/// The pause before the next attempt: random, at most [`MAX_RETRY_DELAY`],
/// the holder's remaining TTL (+1 ms) and what is `left` of the wait.
fn retry_pause(holder_ttl: Option<Duration>, left: Duration) -> Duration {
    let cap = match holder_ttl {
        Some(t) => (t + Duration::from_millis(1)).min(MAX_RETRY_DELAY),
        None => MAX_RETRY_DELAY,
    };
    random_below(cap.min(left))
}

fn random_below(d: Duration) -> Duration {
    let r = u32::from_le_bytes(protocol::random_bytes::<4>());
    d.mul_f64(r as f64 / u32::MAX as f64)
}

/// Release on every node; how many released and the errors.
fn release_all(
    r: &Redlock,
    keys: &LockKeys,
    token: &[u8],
    timeout: Duration,
) -> (usize, Vec<Error>) {
    let results = on_all(&r.nodes, |p| {
        p.script_within(timeout, &scripts().release, &keys.all(), &[token])
    });
    let mut released = 0;
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(Value::Int(1 | 2)) => released += 1,
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    (released, errors)
}

/// Release on every node. `Ok(false)` when no node held our token.
fn release(r: &Redlock, keys: &LockKeys, token: &[u8]) -> Result<bool> {
    let n = r.nodes.len();
    let timeout = r.nodes[0].target.command_timeout;
    let (released, errors) = release_all(r, keys, token, timeout);
    if released == 0 && errors.len() > n - quorum(n) {
        return Err(no_quorum(&keys.lock, n, &errors.iter().collect::<Vec<_>>()));
    }
    Ok(released > 0)
}

/// Extend on every node; `Ok(true)` when a majority extended in time.
fn extend(r: &Redlock, keys: &LockKeys, token: &[u8], fence: u64, ttl_ms: u64) -> Result<bool> {
    let n = r.nodes.len();
    let timeout = node_timeout(r, ttl_ms);
    let (ms, fence) = (ttl_ms.to_string(), fence.to_string());
    let t0 = Instant::now();
    let results = on_all(&r.nodes, |p| {
        p.script_within(
            timeout,
            &scripts().extend,
            &keys.all(),
            &[token, ms.as_bytes(), fence.as_bytes()],
        )
    });
    let elapsed = t0.elapsed().as_millis() as i64;
    let agreed = results
        .iter()
        .filter(|r| matches!(r, Ok(Value::Int(1))))
        .count();
    let errors: Vec<&Error> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if agreed >= quorum(n) && ttl_ms as i64 - elapsed - (drift_ms(ttl_ms) as i64) > 0 {
        return Ok(true);
    }
    if errors.len() > n - quorum(n) {
        return Err(no_quorum(&keys.lock, n, &errors));
    }
    Ok(false)
}

/// GET on every node: how many hold `token`, and the values seen.
fn values(r: &Redlock, key: &[u8]) -> Result<Vec<Option<Vec<u8>>>> {
    let n = r.nodes.len();
    let results = on_all(&r.nodes, |p| {
        p.with(|con, _| redis::cmd("GET").arg(key).query::<Option<Vec<u8>>>(con))
    });
    let errors: Vec<&Error> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if errors.len() > n - quorum(n) {
        return Err(no_quorum(key, n, &errors));
    }
    Ok(results.into_iter().map(|r| r.ok().flatten()).collect())
}

/// Whether a majority of nodes hold `token` under `key`.
fn is_owned_by(r: &Redlock, key: &[u8], token: &[u8]) -> Result<bool> {
    let vals = values(r, key)?;
    Ok(vals.iter().filter(|v| v.as_deref() == Some(token)).count() >= quorum(r.nodes.len()))
}

/// INSPECT on every node, summed up for the holder a majority agrees on.
fn inspect(r: &Redlock, keys: &LockKeys) -> Result<LockInfo> {
    let n = r.nodes.len();
    let results = on_all(&r.nodes, |p| {
        p.script(&scripts().inspect, &keys.all(), &[], None)
    });
    let errors: Vec<&Error> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if errors.len() > n - quorum(n) {
        return Err(no_quorum(&keys.lock, n, &errors));
    }
    let infos = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|v| protocol::parse_info(v).ok_or_else(|| Error::unexpected(v)))
        .collect::<Result<Vec<_>>>()?;
    let waiters = infos.iter().map(|i| i.waiters).max().unwrap_or(0);
    let holder = infos.iter().filter_map(|i| i.holder.as_ref()).find(|h| {
        infos
            .iter()
            .filter(|i| i.holder.as_ref() == Some(*h))
            .count()
            >= quorum(n)
    });
    let Some(holder) = holder else {
        return Ok(LockInfo {
            holder: None,
            ttl: None,
            fence: None,
            waiters,
        });
    };
    let held: Vec<&LockInfo> = infos
        .iter()
        .filter(|i| i.holder.as_ref() == Some(holder))
        .collect();
    Ok(LockInfo {
        holder: Some(holder.clone()),
        ttl: held.iter().map(|i| i.ttl).min().flatten(),
        fence: held.iter().filter_map(|i| i.fence).max(),
        waiters,
    })
}

/// Whether one owner holds `key` on a majority of nodes.
fn holder(r: &Redlock, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let vals = values(r, key)?;
    let q = quorum(r.nodes.len());
    Ok(vals
        .iter()
        .flatten()
        .find(|v| vals.iter().filter(|w| w.as_ref() == Some(*v)).count() >= q)
        .cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_is_an_integer_majority() {
        assert_eq!(quorum(1), 1);
        assert_eq!(quorum(2), 2);
        assert_eq!(quorum(3), 2);
        assert_eq!(quorum(4), 3);
        assert_eq!(quorum(5), 3);
    }

    #[test]
    fn drift_follows_the_spec() {
        assert_eq!(drift_ms(10_000), 102);
        assert_eq!(drift_ms(100), 3);
    }
}

/// Async Redlock: each attempt runs on tokio's blocking threads (one
/// thread per node for the length of the attempt, as the blocking API
/// does), and the pauses between attempts are tokio timers, so a waiting
/// task holds no thread. A lock granted to an attempt whose caller is gone
/// is released at once.
#[cfg(feature = "tokio")]
mod asynchronous {
    use std::sync::Arc;
    use std::time::Instant;

    use super::{retry_pause, Redlock, MAX_RETRY_DELAY};
    use crate::deploy::{AsyncDeployment, Deployment, Op};
    use crate::error::{show_key, Error, Result};
    use crate::options::{LockInfo, Wait};
    use crate::protocol::LockKeys;

    pub(crate) struct AsyncRedlock(pub(crate) Arc<Redlock>);

    /// A lock one attempt took, released when dropped before its caller
    /// took it over.
    struct Granted {
        redlock: Arc<Redlock>,
        keys: LockKeys,
        token: Vec<u8>,
        fence: Option<u64>,
    }

    impl Granted {
        fn take(mut self) -> u64 {
            self.fence.take().unwrap_or(0)
        }
    }

    impl Drop for Granted {
        fn drop(&mut self) {
            if self.fence.is_none() {
                return;
            }
            let (r, keys, token) = (
                self.redlock.clone(),
                self.keys.clone(),
                std::mem::take(&mut self.token),
            );
            let release = move || {
                let _ = r.release(&keys, &token);
            };
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(release)),
                Err(_) => release(),
            }
        }
    }

    impl AsyncRedlock {
        /// One attempt on the blocking threads; its grant reaches the
        /// caller or is released.
        async fn attempt(&self, keys: &LockKeys, token: &[u8], ttl_ms: u64) -> Result<u64> {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (r, keys, token) = (self.0.clone(), keys.clone(), token.to_vec());
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let got = r
                    .acquire(&keys, &token, ttl_ms, Wait::TryOnce, None, started)
                    .map(|fence| Granted {
                        redlock: r.clone(),
                        keys,
                        token,
                        fence: Some(fence),
                    });
                // Refused (the caller is gone): the grant is dropped, and
                // released.
                let _ = tx.send(got);
            });
            match rx.await {
                Ok(got) => got.map(Granted::take),
                Err(_) => Err(Error::Internal("a Redlock attempt was lost".into())),
            }
        }

        /// Run a blocking operation on the blocking threads.
        async fn blocking<T: Send + 'static>(
            &self,
            f: impl FnOnce(&Redlock) -> Result<T> + Send + 'static,
        ) -> Result<T> {
            let r = self.0.clone();
            tokio::task::spawn_blocking(move || f(&r))
                .await
                .unwrap_or_else(|e| Err(Error::Internal(format!("a Redlock task failed: {e}"))))
        }
    }

    impl AsyncDeployment for AsyncRedlock {
        fn acquire<'a>(
            &'a self,
            keys: &'a LockKeys,
            token: &'a [u8],
            ttl_ms: u64,
            wait: Wait,
            started: Instant,
        ) -> Op<'a, u64> {
            Box::pin(async move {
                let deadline = match wait {
                    Wait::TryOnce => Some(started),
                    Wait::Timeout(d) => started.checked_add(d),
                    Wait::Forever => None,
                };
                loop {
                    let holder_ttl = match self.attempt(keys, token, ttl_ms).await {
                        Err(Error::NotAcquired { holder_ttl, .. }) => holder_ttl,
                        r => return r,
                    };
                    let left = match deadline {
                        Some(d) => d.saturating_duration_since(Instant::now()),
                        None => MAX_RETRY_DELAY,
                    };
                    if left.is_zero() {
                        return Err(Error::NotAcquired {
                            key: show_key(&keys.lock),
                            holder_ttl,
                            waited: started.elapsed(),
                        });
                    }
                    tokio::time::sleep(retry_pause(holder_ttl, left)).await;
                }
            })
        }

        fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a [u8]) -> Op<'a, bool> {
            let (keys, token) = (keys.clone(), token.to_vec());
            Box::pin(self.blocking(move |r| r.release(&keys, &token)))
        }

        fn extend<'a>(
            &'a self,
            keys: &'a LockKeys,
            token: &'a [u8],
            fence: u64,
            ttl_ms: u64,
        ) -> Op<'a, bool> {
            let (keys, token) = (keys.clone(), token.to_vec());
            Box::pin(self.blocking(move |r| r.extend(&keys, &token, fence, ttl_ms)))
        }

        fn inspect<'a>(&'a self, keys: &'a LockKeys) -> Op<'a, LockInfo> {
            let keys = keys.clone();
            Box::pin(self.blocking(move |r| r.inspect(&keys)))
        }

        fn is_locked<'a>(&'a self, key: &'a [u8]) -> Op<'a, bool> {
            let key = key.to_vec();
            Box::pin(self.blocking(move |r| r.is_locked(&key)))
        }

        fn is_owned_by<'a>(&'a self, key: &'a [u8], token: &'a [u8]) -> Op<'a, bool> {
            let (key, token) = (key.to_vec(), token.to_vec());
            Box::pin(self.blocking(move |r| r.is_owned_by(&key, &token)))
        }
    }
}
