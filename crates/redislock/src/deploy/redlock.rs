//! Redlock: one lock over N independent Redis masters.
//!
//! Each operation runs the same scripts as the single-server lock on every
//! node at once (see `fanout`) and returns as soon as the replies so far
//! decide it. An acquisition holds when a majority (N/2+1, integer) agreed
//! and the validity `ttl − elapsed − drift` (drift = ttl·1% + 2 ms) is still
//! positive, `elapsed` measured on the monotonic clock from the start of
//! that attempt; it fails as soon as a majority can no longer agree, or
//! when the per-node timeout (by default a tenth of the TTL, at least 10 ms
//! and at most the command timeout: 1 s for a 10 s lock) runs out. A node
//! that had not answered by then is left to finish in the background: its
//! late grant is kept if the lock is held and released otherwise (or once
//! the lock is released). A failed attempt takes back what it got
//! (compare-and-delete: only keys holding our token go) and, while the
//! wait allows, is tried again after a random delay. Extend needs a
//! majority and re-checks validity; release goes to every node and returns
//! once a majority answered. When too many nodes fail to answer for a
//! majority to be possible, the result is [`Error::NoQuorum`].
//!
//! Waiting here is by retries, not hand-off (a queue spread over nodes would
//! need its own consensus). Fencing numbers are the largest of the agreeing
//! nodes' counters: advisory only, since the nodes do not agree on a total
//! order.

use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use super::fanout::{self, Decided, Job, Node, Outcome, Round};
use super::{Deployment, Grant, Granted};
use crate::error::{show_key, Error, Result};
use crate::net::pool::Pool;
use crate::options::{Holder, Interrupt, LockInfo, SharedInfo, Wait};
use crate::protocol::{self, scripts, Attempt, Kind, LockKeys, QUEUE_GRACE_MS};
use crate::stats::{Counters, Gauge};
use crate::sync::locked;

/// The servers, the bound on each one's reply if the caller set it, and the
/// held locks whose acquisition still waits for a node.
pub(crate) struct Redlock {
    nodes: Vec<Arc<Node>>,
    node_timeout: Option<Duration>,
    stragglers: Mutex<Vec<Straggler>>,
}

/// A held lock's acquisition round with nodes yet to answer.
struct Straggler {
    key: Vec<u8>,
    token: Vec<u8>,
    round: Weak<Round>,
}

impl Redlock {
    pub(crate) fn new(nodes: Vec<Pool>, node_timeout: Option<Duration>) -> Redlock {
        Redlock {
            nodes: nodes.into_iter().map(|p| Arc::new(Node::new(p))).collect(),
            node_timeout,
            stragglers: Mutex::new(Vec::new()),
        }
    }
}

impl Redlock {
    /// The client's statistics (every node's pool shares them).
    fn stats(&self) -> &Counters {
        &self.nodes[0].pool.stats
    }
}

impl Deployment for Redlock {
    fn describe(&self) -> String {
        let addrs: Vec<&str> = self.nodes.iter().map(|n| n.addr()).collect();
        format!("Redlock over {}", addrs.join(", "))
    }

    fn pools(&self) -> Vec<&Pool> {
        self.nodes.iter().map(|n| &n.pool).collect()
    }

    fn acquire(
        &self,
        keys: &LockKeys,
        token: &[u8],
        ttl_ms: u64,
        (wait, fenced): (Wait, bool),
        interrupt: Option<&Interrupt>,
        started: Instant,
    ) -> Result<Grant> {
        let deadline = match wait {
            Wait::TryOnce => Some(started),
            Wait::Timeout(d) => started.checked_add(d),
            Wait::Forever => None,
        };
        let strict = fenced && !keys.shared();
        acquire(
            self, keys, token, ttl_ms, deadline, started, interrupt, strict,
        )
    }

    fn fence(&self, keys: &LockKeys, token: &[u8]) -> Result<Option<u64>> {
        fence(self, keys, token)
    }

    fn release(&self, keys: &LockKeys, token: &[u8]) -> Result<bool> {
        release(self, keys, token)
    }

    fn force_release(&self, keys: &LockKeys) -> Result<bool> {
        force_release(self, keys)
    }

    fn extend(&self, keys: &LockKeys, token: &[u8], fence: u64, ttl_ms: u64) -> Result<bool> {
        extend(self, keys, token, fence, ttl_ms)
    }

    fn inspect(&self, keys: &LockKeys) -> Result<LockInfo> {
        inspect(self, keys)
    }

    fn inspect_shared(&self, keys: &LockKeys) -> Result<SharedInfo> {
        inspect_shared(self, keys)
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

/// The default per-node timeout is the TTL divided by this…
///
/// The Redlock description asks for a timeout small against the TTL (1/200
/// in its example) so that a dead node does not hold the caller up. Here a
/// round is decided by the first majority of replies, so a stalled or dead
/// node costs nothing whatever this bound is while the others answer: the
/// bound is spent only when no majority can answer, and then it is how
/// long the caller learns it. A pause of the caller's machine (50-300 ms
/// on a busy 2-core host, while a compiler runs) delays every reply alike,
/// and a bound shorter than the pause refuses a free lock; a tenth of the
/// TTL rides such pauses out and still leaves 89 % of the TTL (after the
/// drift) to a lock granted at its very end.
const NODE_TIMEOUT_DIVISOR: u32 = 10;
/// …and at least this.
const NODE_TIMEOUT_FLOOR: Duration = Duration::from_millis(10);
/// The per-node timeout of operations without a TTL (release, reads): as
/// for an acquisition, spent only when no majority answers, and long
/// enough that a pause of the machine is not taken for a failure.
const OP_NODE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a worker waits for an acquisition's reply, at most: a grant
/// that comes later than this is left to expire by its TTL.
const LATE_GRANT_WAIT: Duration = Duration::from_secs(60);

pub(crate) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// How many of `n` nodes must admit a holder of a name of this kind.
///
/// A majority for a lock, a read-write lock and a semaphore of 1: two
/// majorities share a node, and no node admits two writers, or a writer
/// and a reader, at once. Not for a semaphore of `limit` L > 1: L + 1
/// holders on majorities need not share a node (3 nodes, L = 2: holders on
/// nodes {1,2}, {2,3} and {1,3}, 2 per node). Each node admits at most L
/// permits, so L + 1 holders on `q` nodes each are impossible once
/// (L + 1)·q > n·L: `q` = ⌊n·L / (L + 1)⌋ + 1, which is all the nodes
/// once L ≥ n − 1 (a semaphore over Redlock then rides out no dead node).
pub(crate) fn quorum_for(n: usize, kind: Kind) -> usize {
    match kind {
        Kind::Semaphore { limit, .. } if limit > 1 => {
            let l = limit as usize;
            n * l / (l + 1) + 1
        }
        _ => quorum(n),
    }
}

fn drift_ms(ttl_ms: u64) -> u64 {
    ttl_ms / 100 + 2
}

/// The per-node bound for a lock of `ttl_ms`.
fn node_timeout(r: &Redlock, ttl_ms: u64) -> Duration {
    if let Some(t) = r.node_timeout {
        return t;
    }
    let command = r.command_timeout();
    (Duration::from_millis(ttl_ms) / NODE_TIMEOUT_DIVISOR)
        .max(NODE_TIMEOUT_FLOOR)
        .min(command)
}

/// The per-node bound of release and the reads.
fn op_timeout(r: &Redlock) -> Duration {
    r.node_timeout
        .unwrap_or(OP_NODE_TIMEOUT)
        .min(r.command_timeout())
}

impl Redlock {
    fn command_timeout(&self) -> Duration {
        self.nodes[0].pool.target.command_timeout
    }

    /// What the nodes that had not answered by the deadline count as.
    fn no_answer(&self, i: usize, timeout: Duration) -> Error {
        Error::Connection {
            addr: self.nodes[i].addr().to_string(),
            reason: String::from("no answer in time"),
            hint: format!("node timeout {timeout:?}"),
        }
    }

    /// The errors of a decided round, and the nodes that had not answered
    /// when its deadline came.
    fn errors(&self, d: &Decided, timeout: Duration) -> Vec<Error> {
        d.replies
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                None if d.timed_out => Some(self.no_answer(i, timeout)),
                None => None,
                Some(Err(e)) => Some(e.clone()),
                Some(Ok(_)) => None,
            })
            .collect()
    }

    /// Remember a held lock's round that still waits for nodes, so that its
    /// release has their late grants released.
    fn remember(&self, keys: &LockKeys, token: &[u8], round: &Arc<Round>) {
        let mut s = locked(&self.stragglers);
        s.retain(|st| st.round.strong_count() > 0);
        s.push(Straggler {
            key: keys.lock.clone(),
            token: token.to_vec(),
            round: Arc::downgrade(round),
        });
    }

    /// The lock is being released: rounds of its acquisition still waiting
    /// for nodes release what those nodes grant.
    /// Those rounds are returned, marked released (see
    /// [`fanout::releasing`]).
    fn forget(&self, keys: &LockKeys, token: &[u8]) -> Vec<Arc<Round>> {
        let mut rounds = Vec::new();
        locked(&self.stragglers).retain(|st| {
            if st.key == keys.lock && st.token == token {
                rounds.extend(st.round.upgrade());
                return false;
            }
            st.round.strong_count() > 0
        });
        for round in &rounds {
            fanout::releasing(&self.nodes, round);
        }
        rounds
    }
}

/// A script with these arguments on the lock's keys, its reply awaited up
/// to `wait`.
fn script_job(
    script: fn() -> &'static protocol::Script,
    keys: &LockKeys,
    args: Vec<Vec<u8>>,
    wait: Duration,
) -> Job {
    let keys = keys.clone();
    let packed = {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let script = script();
        script.evalsha_packed(&keys.all()[..script.nkeys], &args)
    };
    let shape = (script().name, script().accepts);
    Job::new(packed, wait, shape, move |p: &Pool| {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let script = script();
        p.script_within(wait, script, &keys.all()[..script.nkeys], &args)
    })
}

/// Release `token`'s hold of `keys` on every node it is sent to.
fn release_job(keys: &LockKeys, token: &[u8], wait: Duration) -> Job {
    if keys.shared() {
        let args = vec![token.to_vec(), QUEUE_GRACE_MS.to_string().into_bytes()];
        return script_job(|| &scripts().sem_release, keys, args, wait).must_run();
    }
    script_job(|| &scripts().release, keys, vec![token.to_vec()], wait).must_run()
}

/// Release `token`'s hold of `keys` on one node.
fn release_on(pool: &Pool, keys: &LockKeys, token: &[u8]) -> Result<Value> {
    if keys.shared() {
        let grace = QUEUE_GRACE_MS.to_string();
        pool.script(
            &scripts().sem_release,
            &keys.all(),
            &[token, grace.as_bytes()],
            None,
        )
    } else {
        pool.script(&scripts().release, &keys.release(), &[token], None)
    }
}

/// Replies of a round, by kind.
#[derive(Default)]
struct Tally {
    /// Nodes that answered with a number 1 or a grant.
    agreed: usize,
    /// Nodes that answered otherwise.
    refused: usize,
    failed: usize,
}

impl Tally {
    fn of(replies: &[Option<Result<Value>>], agrees: impl Fn(&Value) -> bool) -> Tally {
        let mut t = Tally::default();
        for r in replies.iter().flatten() {
            match r {
                Ok(v) if agrees(v) => t.agreed += 1,
                Ok(_) => t.refused += 1,
                Err(_) => t.failed += 1,
            }
        }
        t
    }
}

fn granted(v: &Value) -> bool {
    matches!(
        protocol::parse_attempt(v),
        Some(Attempt::Taken(_) | Attempt::Handed(_))
    )
}

fn no_quorum(key: &[u8], n: usize, errors: &[Error]) -> Error {
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
/// `strict`: a fenced acquisition, whose fence must rise above every
/// earlier holder's (see [`raise_floor`]).
#[allow(clippy::too_many_arguments)]
fn acquire(
    r: &Redlock,
    keys: &LockKeys,
    token: &[u8],
    ttl_ms: u64,
    deadline: Option<Instant>,
    started: Instant,
    interrupt: Option<&Interrupt>,
    strict: bool,
) -> Result<Grant> {
    let mut waiting = None;
    loop {
        let holder_ttl = match attempt(r, keys, token, ttl_ms, strict)? {
            Ok(fence) if waiting.is_none() => return Ok(Grant::new(fence, Granted::AtOnce)),
            Ok(fence) => return Ok(Grant::new(fence, Granted::AfterWait)),
            Err(holder_ttl) => holder_ttl,
        };
        let now = Instant::now();
        let left = match deadline {
            Some(d) if now >= d => {
                return Err(Error::not_acquired(&keys.lock, holder_ttl, started))
            }
            Some(d) => d - now,
            None => MAX_RETRY_DELAY,
        };
        if interrupt.is_some_and(|i| i.stop()) {
            return Err(Error::not_acquired(&keys.lock, holder_ttl, started));
        }
        if waiting.is_none() {
            waiting = Some(r.stats().up(Gauge::Waiters));
        }
        let holder_ttl = u64::try_from(holder_ttl).ok();
        let pause = retry_pause(holder_ttl.map(Duration::from_millis), left);
        tracing::debug!(
            lock = %show_key(&keys.lock),
            holder_ttl_ms = holder_ttl,
            retry_in_ms = pause.as_millis() as u64,
            "Redlock: no majority granted the lock; retrying"
        );
        thread::sleep(pause);
    }
}

/// One attempt: the fence when held, the holder's TTL (-1: unknown) when
/// refused, or an error that no retry would mend.
fn attempt(
    r: &Redlock,
    keys: &LockKeys,
    token: &[u8],
    ttl_ms: u64,
    strict: bool,
) -> Result<Result<u64, i64>> {
    let n = r.nodes.len();
    let q = quorum_for(n, keys.kind);
    let timeout = node_timeout(r, ttl_ms);
    let ttl = Duration::from_millis(ttl_ms);
    let wait = ttl.min(LATE_GRANT_WAIT).max(r.command_timeout());
    let t0 = Instant::now();
    let late = {
        let (keys, token) = (keys.clone(), token.to_vec());
        Box::new(move |node: &Node, reply: &Value, outcome: Outcome| {
            if outcome != Outcome::Held && granted(reply) {
                let _ = release_on(&node.pool, &keys, &token);
            }
        })
    };
    let job = if keys.shared() {
        // Tried without queueing (waiters retry, as for the lock), with a
        // fence of its own on every node.
        let mut args = vec![
            token.to_vec(),
            ttl_ms.to_string().into_bytes(),
            Vec::new(),
            b"1".to_vec(),
            QUEUE_GRACE_MS.to_string().into_bytes(),
        ];
        args.extend(keys.tail_args(true));
        script_job(|| &scripts().sem_acquire, keys, args, wait)
    } else {
        script_job(
            || &scripts().acquire,
            keys,
            vec![
                token.to_vec(),
                ttl_ms.to_string().into_bytes(),
                b"0".to_vec(),
                // Redlock draws its (advisory) fence at once on every node.
                b"1".to_vec(),
            ],
            wait,
        )
    };
    let round = Round::send(&r.nodes, None, timeout, true, job, Some(late));
    let d = round.decide(t0 + timeout, |replies, last| {
        let t = Tally::of(replies, granted);
        if t.agreed >= q {
            let validity =
                ttl_ms as i64 - t0.elapsed().as_millis() as i64 - drift_ms(ttl_ms) as i64;
            return Some(if validity > 0 {
                Outcome::Held
            } else {
                Outcome::Failed
            });
        }
        (last || t.refused + t.failed > n - q).then_some(Outcome::Failed)
    });
    let mut fence = 0;
    let mut holder_ttl: Option<i64> = None;
    let mut got = Vec::new();
    let mut drawn = Vec::new();
    for (i, reply) in d.replies.iter().enumerate() {
        if let Some(Ok(v)) = reply {
            match protocol::parse_attempt(v) {
                Some(Attempt::Taken(f) | Attempt::Handed(f)) => {
                    got.push(i);
                    drawn.push((i, f));
                    fence = fence.max(f);
                }
                Some(Attempt::Held { pttl, .. }) => {
                    holder_ttl = Some(holder_ttl.map_or(pttl, |t| t.min(pttl)));
                }
                None => return Err(Error::unexpected(r.nodes[i].addr(), "ACQUIRE", v)),
            }
        }
    }
    if d.outcome == Outcome::Held {
        if d.pending {
            r.remember(keys, token, &round);
        }
        if !strict || raise_floor(r, keys, &drawn, fence, q, (t0, ttl_ms, timeout)) {
            return Ok(Ok(fence));
        }
        // Too few raised while the grant was valid: give it back whole
        // (late grants included) and try again.
        tracing::debug!(
            lock = %show_key(&keys.lock),
            "Redlock: too few nodes raised their fence counter in time; retrying"
        );
        let _ = release(r, keys, token);
        return Ok(Err(crate::error::UNKNOWN_TTL));
    }
    // Not held: take back what we got (late grants are taken back by the
    // workers that receive them).
    if !got.is_empty() {
        let job = release_job(keys, token, r.command_timeout());
        let cleanup = Round::send(&r.nodes, Some(&got), timeout, false, job, None);
        cleanup.decide(Instant::now() + r.command_timeout(), |_, _| None);
    }
    let errors = r.errors(&d, timeout);
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
    if errors.len() > n - q {
        return Err(no_quorum(&keys.lock, n, &errors));
    }
    Ok(Err(holder_ttl.unwrap_or(crate::error::UNKNOWN_TTL)))
}

/// Fences that never go backwards over Redlock, whatever the nodes' clocks
/// say. Each node draws `max(counter + 1, its TIME)`, and the grant keeps
/// the largest, `f`; nodes whose clocks differ draw apart, so a later
/// majority without the node that drew `f` could draw below it. Before a
/// fenced grant returns, a majority of nodes must therefore hold a counter
/// of at least `f`: the granting nodes that drew `f`, and as many of those
/// that drew less as are needed, raised by `FLOOR`. Any later majority
/// shares a node with that one and draws above `f` there. One more round
/// trip to some nodes, unless a majority drew `f` (a counter above every
/// clock). `false` when too few answered while the grant (`t0`, its TTL,
/// the per-node timeout) was still valid.
fn raise_floor(
    r: &Redlock,
    keys: &LockKeys,
    drawn: &[(usize, u64)],
    f: u64,
    q: usize,
    (t0, ttl_ms, timeout): (Instant, u64, Duration),
) -> bool {
    let at_f = drawn.iter().filter(|&&(_, d)| d == f).count();
    if at_f >= q {
        return true;
    }
    let below: Vec<usize> = drawn
        .iter()
        .filter(|&&(_, d)| d < f)
        .map(|&(i, _)| i)
        .collect();
    let need = q - at_f;
    let job = script_job(
        || &scripts().floor,
        keys,
        vec![f.to_string().into_bytes()],
        r.command_timeout(),
    );
    let round = Round::send(&r.nodes, Some(&below), timeout, false, job, None);
    let raised = |replies: &[Option<Result<Value>>]| {
        below
            .iter()
            .filter(|&&i| matches!(replies[i], Some(Ok(Value::Int(0 | 1)))))
            .count()
    };
    let d = round.decide(Instant::now() + timeout, |replies, last| {
        if raised(replies) >= need {
            return Some(Outcome::Held);
        }
        last.then_some(Outcome::Failed)
    });
    let valid = ttl_ms as i64 - t0.elapsed().as_millis() as i64 - drift_ms(ttl_ms) as i64 > 0;
    d.outcome == Outcome::Held && valid
}

/// The pause before the next attempt: random, at most [`MAX_RETRY_DELAY`],
/// the holder's remaining TTL (+1 ms) and what is `left` of the wait.
fn retry_pause(holder_ttl: Option<Duration>, left: Duration) -> Duration {
    let cap = match holder_ttl {
        // `Duration::MAX`: a key with no expiry.
        Some(t) => t
            .saturating_add(Duration::from_millis(1))
            .min(MAX_RETRY_DELAY),
        None => MAX_RETRY_DELAY,
    };
    random_below(cap.min(left))
}

fn random_below(d: Duration) -> Duration {
    let r = u32::from_le_bytes(protocol::random_bytes::<4>());
    d.mul_f64(r as f64 / u32::MAX as f64)
}

/// Release on every node, returning once a majority answered. `Ok(false)`
/// when no node that answered held our token.
fn release(r: &Redlock, keys: &LockKeys, token: &[u8]) -> Result<bool> {
    let acquired = r.forget(keys, token);
    let n = r.nodes.len();
    let q = quorum(n);
    let timeout = op_timeout(r);
    let job = release_job(keys, token, r.command_timeout()).covering(acquired.first().cloned());
    let round = Round::send(&r.nodes, None, timeout, false, job, None);
    if !acquired.is_empty() {
        fanout::released_leftovers(&r.nodes);
    }
    let released = |v: &Value| {
        matches!(
            protocol::parse_released(v),
            Some(protocol::Released::Deleted | protocol::Released::Handed(_))
        )
    };
    let d = round.decide(Instant::now() + timeout, |replies, last| {
        let t = Tally::of(replies, released);
        (last || t.agreed + t.refused >= q || t.failed > n - q).then_some(Outcome::Released)
    });
    let t = Tally::of(&d.replies, released);
    let errors = r.errors(&d, timeout);
    if t.agreed == 0 && errors.len() > n - q {
        return Err(no_quorum(&keys.lock, n, &errors));
    }
    Ok(t.agreed > 0)
}

/// Take the lock from whoever holds it on every node, waiting for every
/// node's reply (an operator's unlock should leave no node behind): `true`
/// when a holder was removed somewhere. A node that refuses because the
/// key is of another type makes the whole call fail with that error.
fn force_release(r: &Redlock, keys: &LockKeys) -> Result<bool> {
    let n = r.nodes.len();
    let timeout = op_timeout(r);
    let job = script_job(
        || &scripts().force_release,
        keys,
        Vec::new(),
        r.command_timeout(),
    )
    .must_run();
    let round = Round::send(&r.nodes, None, timeout, false, job, None);
    let d = round.decide(Instant::now() + timeout, |_, last| {
        last.then_some(Outcome::Released)
    });
    let mut removed = false;
    for (i, reply) in d.replies.iter().enumerate() {
        let Some(reply) = reply else { continue };
        match reply {
            Ok(v) => match protocol::parse_forced(v) {
                Some((gone, _)) => removed |= gone,
                None => return Err(Error::unexpected(r.nodes[i].addr(), "FORCE_RELEASE", v)),
            },
            Err(e) if e.kind() == crate::ErrorKind::WrongType => return Err(e.clone()),
            Err(_) => {}
        }
    }
    let errors = r.errors(&d, timeout);
    if !removed && errors.len() > n - quorum(n) {
        return Err(no_quorum(&keys.lock, n, &errors));
    }
    Ok(removed)
}

/// Draw a fence on every node (a grant whose reply was lost and was found
/// held by a repeated run has none): the largest of a majority's, `Ok(None)`
/// when fewer than a majority still hold the lock with `token`.
fn fence(r: &Redlock, keys: &LockKeys, token: &[u8]) -> Result<Option<u64>> {
    let n = r.nodes.len();
    let q = quorum_for(n, keys.kind);
    let timeout = op_timeout(r);
    let script = if keys.shared() {
        || &scripts().sem_fence
    } else {
        || &scripts().fence
    };
    let job = script_job(script, keys, vec![token.to_vec()], r.command_timeout());
    let round = Round::send(&r.nodes, None, timeout, false, job, None);
    let drawn = |v: &Value| matches!(v, Value::Array(_));
    let d = round.decide(Instant::now() + timeout, |replies, last| {
        let t = Tally::of(replies, drawn);
        (last || t.agreed >= q || t.refused + t.failed > n - q).then_some(Outcome::Released)
    });
    let fences: Vec<u64> = d
        .replies
        .iter()
        .filter_map(|r| match r {
            Some(Ok(Value::Array(items))) => items.first().and_then(protocol::parse_fence),
            _ => None,
        })
        .collect();
    if fences.len() >= q {
        return Ok(fences.into_iter().max());
    }
    let errors = r.errors(&d, timeout);
    if errors.len() > n - q {
        return Err(no_quorum(&keys.lock, n, &errors));
    }
    Ok(None)
}

/// Extend on every node; `Ok(true)` when a majority extended in time.
fn extend(r: &Redlock, keys: &LockKeys, token: &[u8], fence: u64, ttl_ms: u64) -> Result<bool> {
    let n = r.nodes.len();
    let q = quorum_for(n, keys.kind);
    let timeout = node_timeout(r, ttl_ms);
    let t0 = Instant::now();
    let script = if keys.shared() {
        || &scripts().sem_extend
    } else {
        || &scripts().extend
    };
    let job = script_job(
        script,
        keys,
        vec![
            token.to_vec(),
            ttl_ms.to_string().into_bytes(),
            fence.to_string().into_bytes(),
            QUEUE_GRACE_MS.to_string().into_bytes(),
        ],
        r.command_timeout(),
    )
    .must_run();
    let round = Round::send(&r.nodes, None, timeout, true, job, None);
    let extended = |v: &Value| matches!(v, Value::Int(1));
    let valid = || ttl_ms as i64 - t0.elapsed().as_millis() as i64 - (drift_ms(ttl_ms) as i64) > 0;
    let d = round.decide(t0 + timeout, |replies, last| {
        let t = Tally::of(replies, extended);
        if t.agreed >= q {
            return Some(if valid() {
                Outcome::Held
            } else {
                Outcome::Failed
            });
        }
        (last || t.refused + t.failed > n - q).then_some(Outcome::Failed)
    });
    if d.outcome == Outcome::Held {
        return Ok(true);
    }
    let errors = r.errors(&d, timeout);
    if errors.len() > n - q {
        return Err(no_quorum(&keys.lock, n, &errors));
    }
    Ok(false)
}

/// A read on every node, until all answered (or `enough` says the replies
/// so far suffice) or the per-node timeout ran out. The replies (`None`:
/// no answer), or [`Error::NoQuorum`] when too few answered.
fn read(
    r: &Redlock,
    key: &[u8],
    job: Job,
    enough: impl Fn(&[Option<Result<Value>>]) -> bool,
) -> Result<Vec<Option<Value>>> {
    let n = r.nodes.len();
    let timeout = op_timeout(r);
    let round = Round::send(&r.nodes, None, timeout, false, job, None);
    let d = round.decide(Instant::now() + timeout, |replies, last| {
        (last || enough(replies)).then_some(Outcome::Failed)
    });
    let errors = r.errors(&d, timeout);
    if errors.len() > n - quorum(n) {
        return Err(no_quorum(key, n, &errors));
    }
    Ok(d.replies
        .into_iter()
        .map(|r| r.and_then(Result::ok))
        .collect())
}

/// GET on every node: the values seen (`None` also for no answer).
fn values(
    r: &Redlock,
    key: &[u8],
    enough: impl Fn(&[Option<Result<Value>>]) -> bool,
) -> Result<Vec<Option<Vec<u8>>>> {
    let k = key.to_vec();
    let job = Job::new(
        protocol::pack(&[b"GET", key]),
        r.command_timeout(),
        ("GET", protocol::is_nil_or_string),
        move |p: &Pool| {
            p.with(|con, _| {
                let v = redis::cmd("GET").arg(&k).query(con)?;
                protocol::checked(v, protocol::is_nil_or_string, "GET")
            })
        },
    );
    let vals = read(r, key, job, enough)?;
    Ok(vals
        .into_iter()
        .map(|v| match v {
            Some(Value::BulkString(b)) => Some(b),
            _ => None,
        })
        .collect())
}

/// Whether a majority of nodes hold `token` under `key`.
fn is_owned_by(r: &Redlock, key: &[u8], token: &[u8]) -> Result<bool> {
    let n = r.nodes.len();
    let q = quorum(n);
    let holds = |v: &Value| matches!(v, Value::BulkString(b) if b == token);
    let vals = values(r, key, |replies| {
        let t = Tally::of(replies, holds);
        t.agreed >= q || t.refused + t.failed > n - q
    })?;
    Ok(vals.iter().filter(|v| v.as_deref() == Some(token)).count() >= q)
}

/// SEM_INSPECT on every node: the holders a majority of the nodes list
/// (with the shortest lease and the largest fence seen), the most waiters
/// seen on one node. A semaphore's holder needs more than a majority (see
/// [`quorum_for`]), which this call, told no limit, cannot check.
fn inspect_shared(r: &Redlock, keys: &LockKeys) -> Result<SharedInfo> {
    let n = r.nodes.len();
    let k = keys.clone();
    let inspect = &scripts().sem_inspect;
    let job = Job::new(
        inspect.evalsha_packed(&keys.all()[..inspect.nkeys], &[]),
        r.command_timeout(),
        (inspect.name, inspect.accepts),
        move |p: &Pool| p.script(&scripts().sem_inspect, &k.all(), &[], None),
    );
    let replies = read(r, &keys.lock, job, |_| false)?;
    let infos = replies
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, v.as_ref()?)))
        .map(|(i, v)| {
            protocol::parse_shared_info(v)
                .ok_or_else(|| Error::unexpected(r.nodes[i].addr(), "SEM_INSPECT", v))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut holders: Vec<(Holder, usize)> = Vec::new();
    for h in infos.iter().flat_map(|i| &i.holders) {
        match holders.iter_mut().find(|(seen, _)| seen.token == h.token) {
            Some((seen, count)) => {
                *count += 1;
                seen.ttl = seen.ttl.min(h.ttl);
                seen.fence = seen.fence.max(h.fence);
            }
            None => holders.push((h.clone(), 1)),
        }
    }
    let mut holders: Vec<Holder> = holders
        .into_iter()
        .filter(|(_, count)| *count >= quorum(n))
        .map(|(h, _)| h)
        .collect();
    holders.sort_by_key(|h| h.ttl);
    // Past the 100 listed per node: as many as a majority of nodes count.
    let mut counts: Vec<u64> = infos.iter().map(|i| i.holder_count).collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let counted = counts.get(quorum(n) - 1).copied().unwrap_or(0);
    Ok(SharedInfo {
        holder_count: counted.max(holders.len() as u64),
        holders,
        waiters: infos.iter().map(|i| i.waiters).max().unwrap_or(0),
    })
}

/// INSPECT on every node, summed up for the holder a majority agrees on.
fn inspect(r: &Redlock, keys: &LockKeys) -> Result<LockInfo> {
    let n = r.nodes.len();
    let k = keys.clone();
    let inspect = &scripts().inspect;
    let job = Job::new(
        inspect.evalsha_packed(&keys.all()[..inspect.nkeys], &[]),
        r.command_timeout(),
        (inspect.name, inspect.accepts),
        move |p: &Pool| p.script(&scripts().inspect, &k.all(), &[], None),
    );
    let replies = read(r, &keys.lock, job, |_| false)?;
    let infos = replies
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, v.as_ref()?)))
        .map(|(i, v)| {
            protocol::parse_info(v)
                .ok_or_else(|| Error::unexpected(r.nodes[i].addr(), "INSPECT", v))
        })
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
    let vals = values(r, key, |_| false)?;
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
    fn a_semaphore_of_more_than_one_needs_more_than_a_majority() {
        let sem = |limit| Kind::Semaphore { limit, permits: 1 };
        for n in [1, 2, 3, 4, 5, 7] {
            assert_eq!(quorum_for(n, Kind::Lock), quorum(n));
            assert_eq!(quorum_for(n, Kind::Read), quorum(n));
            assert_eq!(quorum_for(n, Kind::Write), quorum(n));
            assert_eq!(quorum_for(n, sem(1)), quorum(n));
            // Large limits need every node.
            assert_eq!(quorum_for(n, sem(1_000_000)), n);
            for limit in 2..50u32 {
                let (l, q) = (limit as usize, quorum_for(n, sem(limit)));
                // Enough: L + 1 holders on q nodes each overfill one node…
                assert!((l + 1) * q > n * l, "n {n} limit {limit}: {q}");
                // …and no fewer would do.
                assert!(l * (q - 1) < n * l && (l + 1) * (q - 1) <= n * l);
                assert!(q <= n);
            }
        }
        assert_eq!(quorum_for(3, sem(2)), 3);
        assert_eq!(quorum_for(5, sem(2)), 4);
        assert_eq!(quorum_for(7, sem(2)), 5);
        assert_eq!(quorum_for(5, sem(4)), 5);
    }

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
    use crate::deploy::{AsyncDeployment, Deployment, Grant, Op};
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
                    .acquire(&keys, &token, ttl_ms, (Wait::TryOnce, true), None, started)
                    .map(|grant| Granted {
                        redlock: r.clone(),
                        keys,
                        token,
                        fence: Some(grant.fence),
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
            (wait, _fenced): (Wait, bool),
            started: Instant,
        ) -> Op<'a, Grant> {
            Box::pin(async move {
                let deadline = match wait {
                    Wait::TryOnce => Some(started),
                    Wait::Timeout(d) => started.checked_add(d),
                    Wait::Forever => None,
                };
                let mut waiting = None;
                loop {
                    let holder_ttl = match self.attempt(keys, token, ttl_ms).await {
                        Err(Error::NotAcquired { holder_ttl, .. }) => holder_ttl,
                        Ok(fence) if waiting.is_none() => {
                            return Ok(Grant::new(fence, crate::deploy::Granted::AtOnce))
                        }
                        Ok(fence) => {
                            return Ok(Grant::new(fence, crate::deploy::Granted::AfterWait))
                        }
                        Err(e) => return Err(e),
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
                    if waiting.is_none() {
                        waiting = Some(self.0.stats().up(crate::stats::Gauge::Waiters));
                    }
                    tokio::time::sleep(retry_pause(holder_ttl, left)).await;
                }
            })
        }

        fn fence<'a>(&'a self, keys: &'a LockKeys, token: &'a [u8]) -> Op<'a, Option<u64>> {
            let (keys, token) = (keys.clone(), token.to_vec());
            Box::pin(self.blocking(move |r| r.fence(&keys, &token)))
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
