//! Waiting for a lock held on one server (Redlock waits by retrying).
//!
//! A waiter takes a [`Subscriber`] (a connection subscribed to its own
//! channel) and runs the ENQUEUE script, which either takes the lock or puts
//! the waiter in the lock's queue. Then it blocks on its subscriber until
//! the release script hands the lock over (the message carries the fencing
//! number), or until its next retry is due. Retries back off from 25 ms to
//! 1 s with jitter, never later than the holder's remaining TTL, and never
//! past the caller's deadline; each retry re-runs ENQUEUE, which notices a
//! release by another client (a plain `DEL`) or an expiry. When the deadline
//! comes, the CANCEL script leaves the queue; if the lock was handed over in
//! that very moment the waiter keeps it.

use std::time::{Duration, Instant};

use redis::Value;

use crate::error::{Error, Result};
use crate::net::pool::{Pool, Subscriber};
use crate::options::{Interrupt, INTERRUPT_SLICE};
use crate::protocol::{self, scripts, Attempt, LockKeys, Script, QUEUE_GRACE_MS};

/// The server a waiter waits on: its pool, and its way of running scripts
/// and reading the key with errors that name the lock.
pub(super) trait Server {
    fn pool(&self) -> &Pool;

    fn script(
        &self,
        script: &Script,
        key: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> Result<Value>;

    fn holds(&self, key: &[u8], token: &[u8]) -> Result<bool>;
}

const FIRST_RETRY: Duration = Duration::from_millis(25);
const MAX_RETRY: Duration = Duration::from_secs(1);

/// Acquire, waiting until `deadline` (`None`: forever; the pair is the
/// deadline and when the call started) or until `interrupt` says to stop.
/// Returns the fence.
pub(super) fn acquire(
    server: &impl Server,
    keys: &LockKeys,
    token: &[u8],
    ttl_ms: u64,
    (deadline, started): (Option<Instant>, Instant),
    interrupt: Option<&Interrupt>,
) -> Result<u64> {
    let pool = server.pool();
    let (mut sub, mut reused) = pool.subscriber(&keys.lock)?;
    let nonce = protocol::hex(&protocol::random_bytes::<8>());
    let mut member = protocol::queue_member(&sub.id, &nonce, ttl_ms, token);
    let ttl = ttl_ms.to_string();
    let grace = QUEUE_GRACE_MS.to_string();
    let mut first = true;
    let mut backoff = FIRST_RETRY;
    loop {
        // A repeated run (after a dead connection) checks whether the first
        // one already took the lock or queued us: "not first".
        let again: [&[u8]; 5] = [token, ttl.as_bytes(), &member, b"0", grace.as_bytes()];
        let mut args = again;
        args[3] = if first { b"1" } else { b"0" };
        let reply = match server.script(
            &scripts().enqueue,
            &keys.lock,
            &keys.all(),
            &args,
            Some(&again),
        ) {
            Ok(r) => r,
            // The server refused for a moment (loading, a slow script, a
            // resharding) longer than one command may wait: ask again while
            // the wait allows. Nothing was queued.
            Err(Error::Unavailable { .. })
                if deadline.is_none_or(|d| Instant::now() + backoff < d) =>
            {
                std::thread::sleep(jitter(backoff));
                backoff = (backoff * 2).min(MAX_RETRY);
                continue;
            }
            Err(e) => {
                // Leave nothing behind in the queue (best effort: after a
                // connection error this fails too, and the dead subscriber
                // makes the entry harmless).
                if !first {
                    let _ = cancel(server, keys, token, &member);
                }
                return Err(e);
            }
        };
        first = false;
        let pttl = match protocol::parse_attempt(&reply) {
            Some(Attempt::Taken(fence)) => {
                pool.put_subscriber(sub);
                return Ok(fence);
            }
            Some(Attempt::Held { pttl, .. }) => pttl,
            None => return Err(Error::unexpected(&reply)),
        };
        let mut slice = jitter(backoff);
        backoff = (backoff * 2).min(MAX_RETRY);
        if pttl >= 0 {
            // Retry when the holder's lock would have expired, not later.
            slice = slice.min(Duration::from_millis(pttl as u64 + 1));
        }
        if let Some(d) = deadline {
            slice = slice.min(d.saturating_duration_since(Instant::now()));
        }
        if interrupt.is_some() {
            slice = slice.min(INTERRUPT_SLICE);
        }
        let woken = if slice.is_zero() {
            Ok(None)
        } else {
            wait_for_handoff(&mut sub, &nonce, slice, interrupt.is_some())
        };
        match woken {
            // With Cluster and Sentinel a hand-off message can reach a waiter
            // whose subscriber sits on another node than the one that ran
            // the release (cluster PUBLISH is broadcast, a replica gets it
            // replicated), where PUBLISH did not count it and the lock went
            // elsewhere. There the message is checked against the key.
            Ok(Some(fence)) if !pool.remote_publish() || server.holds(&keys.lock, token)? => {
                pool.put_subscriber(sub);
                return Ok(fence);
            }
            Ok(Some(_)) | Ok(None) => {}
            Err(e) => {
                // The subscriber is dead: the server restarted or closed it.
                // Leave the queue under the old channel (keeping the lock if
                // it was handed over meanwhile), then queue again with a
                // fresh subscriber; a fresh one failing too is an error.
                if let Some(fence) = cancel(server, keys, token, &member)? {
                    return Ok(fence);
                }
                if !reused {
                    return Err(pool.error(e, false));
                }
                sub = pool.new_subscriber(&keys.lock)?;
                reused = false;
                member = protocol::queue_member(&sub.id, &nonce, ttl_ms, token);
                first = true;
                continue;
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) || interrupt.is_some_and(|i| i.stop()) {
            return match cancel(server, keys, token, &member)? {
                Some(fence) => {
                    pool.put_subscriber(sub);
                    Ok(fence)
                }
                None => {
                    pool.put_subscriber(sub);
                    Err(Error::not_acquired(&keys.lock, pttl, started))
                }
            };
        }
    }
}

/// Leave the queue; `Some(fence)` when the lock was handed to us meanwhile.
fn cancel(
    server: &impl Server,
    keys: &LockKeys,
    token: &[u8],
    member: &[u8],
) -> Result<Option<u64>> {
    let reply = server.script(
        &scripts().cancel,
        &keys.lock,
        &keys.all(),
        &[token, member],
        None,
    )?;
    match &reply {
        redis::Value::Nil => Ok(None),
        redis::Value::Array(items) if items.len() == 1 => protocol::parse_fence(&items[0])
            .map(Some)
            .ok_or_else(|| Error::unexpected(&reply)),
        _ => Err(Error::unexpected(&reply)),
    }
}

/// Block on the subscriber for at most `slice`. `Ok(Some(fence))` when our
/// hand-off arrived, `Ok(None)` when the time ran out (or a signal came and
/// the wait is `interruptible`: its caller checks then). Messages for earlier
/// waits on this subscriber (another nonce) are skipped.
fn wait_for_handoff(
    sub: &mut Subscriber,
    nonce: &str,
    slice: Duration,
    interruptible: bool,
) -> redis::RedisResult<Option<u64>> {
    let until = Instant::now() + slice;
    // Messages for earlier waits on this subscriber are skipped.
    while let Some(payload) = sub.con.next_message(until, interruptible)? {
        if let Some(fence) = protocol::parse_handoff(&payload, nonce) {
            return Ok(Some(fence));
        }
    }
    Ok(None)
}

/// A random duration in [d/2, d].
fn jitter(d: Duration) -> Duration {
    let r = u32::from_le_bytes(protocol::random_bytes::<4>());
    let half = d / 2;
    half + half.mul_f64(r as f64 / u32::MAX as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..1000 {
            let j = jitter(Duration::from_millis(100));
            assert!(j >= Duration::from_millis(50) && j <= Duration::from_millis(100));
        }
    }
}
