//! One command sent to every Redlock node at once, and the caller woken as
//! soon as the replies so far decide the outcome.
//!
//! The commands run on a small pool of library threads shared by every
//! Redlock client of the process (started when needed, gone after
//! [`IDLE_EXIT`] unused, started afresh in a child after `fork()`). Each
//! worker sends one command to one node and waits for its reply for as long
//! as the operation allows (for an acquisition, up to the lock's TTL), well
//! past the per-node timeout the caller waits: a reply that comes after the
//! caller decided goes to the round's `on_late` handler, which is how a
//! grant from a slow node is released when the lock was not taken (or was
//! released meanwhile) instead of being left on the server.
//!
//! A node that has left a command unanswered for a fifth of the per-node
//! timeout is slow: it gets no new commands (the caller counts it as failed
//! at once) while the other nodes can still form a majority. Once the
//! command has waited the whole per-node timeout the node has failed, and
//! gets none at all. Its first reply, or that command's own end (the
//! worker's longer wait), ends that.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use redis::Value;

use crate::error::{Error, Result};
use crate::net::pool::Pool;
use crate::sync::{locked, pid, spawn_quiet};

/// How long an idle worker thread waits for work before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(30);

/// A command for one node.
pub(crate) type Job = Arc<dyn Fn(&Pool) -> Result<Value> + Send + Sync>;

/// What to do with a reply that came after the caller decided: the node,
/// the reply and the decision as it is now.
pub(crate) type OnLate = Box<dyn Fn(&Node, &Value, Outcome) + Send + Sync>;

/// One server of a Redlock deployment, and the commands sent to it that
/// are still unanswered.
pub(crate) struct Node {
    pub(crate) pool: Pool,
    inflight: Mutex<Inflight>,
}

#[derive(Default)]
struct Inflight {
    pid: u32,
    next: u64,
    /// Each unanswered command: its number and when it was sent.
    sent: Vec<(u64, Instant)>,
}

impl Inflight {
    /// Forget a parent process's commands: their workers are not here.
    fn check_pid(&mut self) {
        let p = pid();
        if self.pid != p {
            self.pid = p;
            self.sent.clear();
        }
    }
}

impl Node {
    pub(crate) fn new(pool: Pool) -> Node {
        Node {
            pool,
            inflight: Mutex::new(Inflight::default()),
        }
    }

    /// How long its oldest unanswered command has waited.
    fn waiting(&self, now: Instant) -> Duration {
        let mut f = locked(&self.inflight);
        f.check_pid();
        f.sent
            .iter()
            .map(|(_, at)| now.saturating_duration_since(*at))
            .max()
            .unwrap_or_default()
    }

    fn begin(&self, now: Instant) -> u64 {
        let mut f = locked(&self.inflight);
        f.check_pid();
        f.next += 1;
        let id = f.next;
        f.sent.push((id, now));
        id
    }

    fn end(&self, id: u64) {
        let mut f = locked(&self.inflight);
        f.check_pid();
        f.sent.retain(|(i, _)| *i != id);
    }

    /// For messages.
    pub(crate) fn addr(&self) -> &str {
        &self.pool.target.addr
    }
}

/// What the caller made of a round; a reply coming later is handled by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The caller is still waiting for replies.
    Deciding,
    /// The lock is held (late grants are kept: they are the holder's).
    Held,
    /// Not held: late grants are released.
    Failed,
    /// Held, then released: late grants are released.
    Released,
}

/// One command on every node: the replies as they come.
pub(crate) struct Round {
    state: Mutex<RoundState>,
    replied: Condvar,
    on_late: Option<OnLate>,
}

struct RoundState {
    /// Per node: `None` while unanswered.
    replies: Vec<Option<Result<Value>>>,
    outcome: Outcome,
}

/// A decided round: the outcome, every reply that came in time (`None`:
/// none did), whether some node had not answered yet, and whether the
/// deadline had come.
pub(crate) struct Decided {
    pub(crate) outcome: Outcome,
    pub(crate) replies: Vec<Option<Result<Value>>>,
    pub(crate) pending: bool,
    pub(crate) timed_out: bool,
}

impl Round {
    /// Send `job` to each of `nodes` whose index is in `only` (all when
    /// `None`; the others count as answered with nil). A slow or failed
    /// node (see the module text; `timeout` is the per-node timeout) is
    /// not sent it and counts as failed. With `majority`, nothing is sent
    /// when those nodes alone rule a majority out (the round is then
    /// decided at once).
    pub(crate) fn send(
        nodes: &[Arc<Node>],
        only: Option<&[usize]>,
        timeout: Duration,
        majority: bool,
        job: Job,
        on_late: Option<OnLate>,
    ) -> Arc<Round> {
        let now = Instant::now();
        let n = nodes.len();
        let targeted = |i: usize| only.is_none_or(|o| o.contains(&i));
        let slow_after = (timeout / 5).max(Duration::from_millis(2));
        let waiting: Vec<Duration> = nodes.iter().map(|node| node.waiting(now)).collect();
        let healthy = (0..n)
            .filter(|&i| targeted(i) && waiting[i] < slow_after)
            .count();
        let majority_without = healthy > n / 2;
        let mut replies = Vec::with_capacity(n);
        let mut to_send = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            if !targeted(i) {
                replies.push(Some(Ok(Value::Nil)));
            } else if waiting[i] >= timeout || (waiting[i] >= slow_after && majority_without) {
                replies.push(Some(Err(Error::Connection {
                    addr: node.addr().to_string(),
                    reason: format!(
                        "not asked: an earlier command to it has had no answer for {:?}",
                        waiting[i]
                    ),
                    hint: String::from("a node that does not answer counts as failed"),
                })));
            } else {
                replies.push(None);
                to_send.push(i);
            }
        }
        let skipped = replies.iter().filter(|r| matches!(r, Some(Err(_)))).count();
        if majority && skipped > n - (n / 2 + 1) {
            // Decided already: the others stay unasked (and unanswered).
            to_send.clear();
        }
        let round = Arc::new(Round {
            state: Mutex::new(RoundState {
                replies,
                outcome: Outcome::Deciding,
            }),
            replied: Condvar::new(),
            on_late,
        });
        for i in to_send {
            let (node, round, job) = (nodes[i].clone(), round.clone(), job.clone());
            let id = node.begin(now);
            run(Box::new(move || {
                let reply = job(&node.pool);
                node.end(id);
                round.deliver(i, reply, &node);
            }));
        }
        round
    }

    fn deliver(&self, i: usize, reply: Result<Value>, node: &Node) {
        let mut st = locked(&self.state);
        if st.outcome == Outcome::Deciding {
            st.replies[i] = Some(reply);
            self.replied.notify_all();
            return;
        }
        let outcome = st.outcome;
        drop(st);
        if let (Some(f), Ok(v)) = (&self.on_late, &reply) {
            f(node, v, outcome);
        }
    }

    /// Wait until `decide` settles the outcome from the replies so far, or
    /// until `deadline`, after which it is asked with `last` set and must
    /// settle it (unanswered nodes then count as failed).
    pub(crate) fn decide(
        &self,
        deadline: Instant,
        mut decide: impl FnMut(&[Option<Result<Value>>], bool) -> Option<Outcome>,
    ) -> Decided {
        let mut st = locked(&self.state);
        loop {
            let now = Instant::now();
            let all = st.replies.iter().all(Option::is_some);
            let timed_out = now >= deadline;
            let last = all || timed_out;
            let outcome = decide(&st.replies, last).or(last.then_some(Outcome::Failed));
            if let Some(outcome) = outcome {
                st.outcome = outcome;
                let replies = std::mem::take(&mut st.replies);
                return Decided {
                    outcome,
                    pending: replies.iter().any(Option::is_none),
                    timed_out,
                    replies,
                };
            }
            st = self
                .replied
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A held lock's round, released by its holder: replies still to come
    /// are handled as for a lock not taken.
    pub(crate) fn released(&self) {
        let mut st = locked(&self.state);
        if st.outcome == Outcome::Held {
            st.outcome = Outcome::Released;
        }
    }
}

type Task = Box<dyn FnOnce() + Send>;

struct Queue {
    pid: u32,
    tasks: VecDeque<Task>,
    /// Worker threads waiting for a task.
    idle: usize,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    pid: 0,
    tasks: VecDeque::new(),
    idle: 0,
});
static WORK: Condvar = Condvar::new();

/// Run `task` on a worker thread, starting one if none is idle.
fn run(task: Task) {
    let mut q = locked(&QUEUE);
    let p = pid();
    if q.pid != p {
        // A child after fork(): the parent's workers and tasks are not here.
        q.pid = p;
        q.idle = 0;
        q.tasks.clear();
    }
    q.tasks.push_back(task);
    if q.tasks.len() <= q.idle {
        WORK.notify_one();
        return;
    }
    drop(q);
    if spawn_quiet("redislock-redlock", work).is_err() {
        // No thread to be had: run what is queued on this one.
        loop {
            let next = locked(&QUEUE).tasks.pop_front();
            match next {
                Some(t) => t(),
                None => break,
            }
        }
    }
}

fn work() {
    let mut q = locked(&QUEUE);
    loop {
        if let Some(task) = q.tasks.pop_front() {
            drop(q);
            task();
            q = locked(&QUEUE);
            continue;
        }
        q.idle += 1;
        let (g, waited) = WORK
            .wait_timeout(q, IDLE_EXIT)
            .unwrap_or_else(|e| e.into_inner());
        q = g;
        q.idle = q.idle.saturating_sub(1);
        if waited.timed_out() && q.tasks.is_empty() {
            return;
        }
    }
}
