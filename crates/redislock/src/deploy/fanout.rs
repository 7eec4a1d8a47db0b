//! One command sent to every Redlock node at once, and the caller woken as
//! soon as the replies so far decide the outcome.
//!
//! The caller's thread sends the command itself on an idle pooled
//! connection to each node and polls their sockets for the replies: no
//! thread is woken on the way. A node without such a connection (none
//! opened yet, TLS, a cluster), and a command that has to be run again
//! whole (NOSCRIPT, a transient state, a broken connection), goes to a
//! small pool of library threads shared by every Redlock client of the
//! process (started when needed, gone after [`IDLE_EXIT`] unused, started
//! afresh in a child after `fork()`).
//!
//! Once the caller has decided, the replies still to come are not waited
//! for. When the round needs nothing of them soon (it has no `on_late`
//! handler, or the lock is held: late grants are the holder's) and its
//! command need not take effect on every node (an acquisition, a read;
//! not a release or an extension: [`Job::must_run`]), they stay
//! on their connections ("parked"): the next command to the node reads
//! what has come first, or is sent behind them on the same connection
//! (pipelined: the server runs one connection's commands in order), so a
//! healthy node that answers last costs no wait, no thread and no extra
//! connection. A release sent behind its own acquisition undoes that
//! grant by itself ([`Job::covering`]); an acquisition's replies that the
//! release did not follow (a slow node it was not sent to) go to worker
//! threads, as do those of a round whose late grants must be taken back
//! (the lock was not taken) or whose command must take effect everywhere:
//! the caller first reads them for a moment
//! ([`LINGER`]). Workers wait as long as the operation allows (for an
//! acquisition, up to the lock's TTL), well past the per-node timeout the
//! caller waited: a reply that comes after the caller decided goes to the
//! round's `on_late` handler, which is how a grant from a slow node is
//! released when the lock was not taken (or was released meanwhile)
//! instead of being left on the server.
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
use crate::net::retry::{is_dead_connection, is_demoted, needs_rerun};
use crate::net::wire::Wire;
use crate::protocol::{checked, Accepts};
use crate::stats::Event;
use crate::sync::{locked, pid, spawn_quiet};

/// How long an idle worker thread waits for work before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(30);

/// Once decided, the caller reads the replies still to come for at most
/// this fraction (1/LINGER) of the time the round took so far, or
/// LINGER_FLOOR if longer: a healthy node's reply comes within moments of
/// the others', a slow one's is left to a worker at a bounded cost to the
/// caller.
const LINGER: u32 = 2;
const LINGER_FLOOR: Duration = Duration::from_millis(1);

/// `poll(2)` of `fds` for at most `wait` (to the nanosecond; zero: a look
/// that never waits): the number of descriptors ready, 0 when none was,
/// negative on error.
fn poll_for(fds: &mut [libc::pollfd], wait: Duration) -> i32 {
    let ts = libc::timespec {
        tv_sec: wait.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` holds initialised pollfds for open descriptors (their
    // connections are the caller's) and outlives the call; `ts` is valid.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    }
}

/// A command run whole on one node's pool.
type Whole = Arc<dyn Fn(&Pool) -> Result<Value> + Send + Sync>;

/// A command for one node.
#[derive(Clone)]
pub(crate) struct Job {
    /// The command as it goes on the wire (EVALSHA for a script), for the
    /// caller's thread to send itself.
    packed: Arc<[u8]>,
    /// How long a reply the caller did not wait for is still awaited.
    wait: Duration,
    /// The command's name and the shape of its replies: another closes
    /// the connection and counts as the node's failure.
    name: &'static str,
    accepts: Accepts,
    /// The command run whole on a worker thread: connecting, EVAL after
    /// NOSCRIPT, again on a fresh connection after a broken one.
    whole: Whole,
    /// A round whose effect on a node this command undoes when it follows
    /// that round's command on the same connection (see [`Job::covering`]).
    covers: Option<Arc<Round>>,
    /// Its effect must reach every node it is sent to (see
    /// [`Job::must_run`]).
    must_run: bool,
}

impl Job {
    /// `whole` checks its reply itself (as `Pool::script` does).
    pub(crate) fn new(
        packed: Vec<u8>,
        wait: Duration,
        (name, accepts): (&'static str, Accepts),
        whole: impl Fn(&Pool) -> Result<Value> + Send + Sync + 'static,
    ) -> Job {
        Job {
            packed: packed.into(),
            wait,
            name,
            accepts,
            whole: Arc::new(whole),
            covers: None,
            must_run: false,
        }
    }

    /// The command must take effect on every node it is sent to, also
    /// after the caller decided (a release, an extension): its replies are
    /// never parked, since a parked reply asking for the command again
    /// (NOSCRIPT, a transient state, a connection the server closed) is
    /// read only when the next command comes to that node, if one does.
    /// They are read by the caller for a moment, then by worker threads,
    /// which run the command again whole where the reply asks for it.
    pub(crate) fn must_run(mut self) -> Job {
        self.must_run = true;
        self
    }

    /// This command undoes `round`'s (a release after an acquisition):
    /// sent on a connection where a reply to `round` is still owed, it runs
    /// after it, so that reply's late handling has nothing to undo.
    pub(crate) fn covering(mut self, round: Option<Arc<Round>>) -> Job {
        self.covers = round;
        self
    }
}

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
    /// Commands of decided rounds whose replies stay on their connections
    /// until the next command to the node reads them (see [`Round::decide`]).
    parked: Vec<Parked>,
}

/// A command sent to node `i` for `round`, its reply still to come.
struct Owed {
    round: Arc<Round>,
    i: usize,
    /// [`Node::begin`]'s number, and when.
    id: u64,
    at: Instant,
    /// A later command on the same connection undoes this one's effect
    /// (see [`Job::covering`]): its late reply needs no handling.
    covered: bool,
}

impl Owed {
    /// Whether its reply needs handling soon: its round takes back late
    /// grants (the lock was not taken, or was released), and no later
    /// command on the connection does it (see [`Job::covering`]).
    fn matters(&self) -> bool {
        !self.covered && self.round.on_late.is_some() && self.round.outcome() != Outcome::Held
    }
}

/// A connection with replies owed to rounds that decided without them and
/// need nothing of them soon (see [`Round::decide`]), in the order sent.
struct Parked {
    wire: Wire,
    owed: VecDeque<Owed>,
}

impl Inflight {
    /// Forget a parent process's commands: their workers are not here, and
    /// the replies on its connections are its own (dropping a connection
    /// only closes this process's descriptor).
    fn check_pid(&mut self) {
        let p = pid();
        if self.pid != p {
            self.pid = p;
            self.sent.clear();
            self.parked.clear();
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

    /// Read the replies that have come for the node's parked commands,
    /// without waiting, and handle them as late replies of their rounds; a
    /// command unanswered past its round's wait is given up (its
    /// connection closed) as a worker would. A connection owing a reply
    /// that now needs handling soon (see [`Owed::matters`]) goes to a
    /// worker thread, which waits for it, unless it is owed to `spare`
    /// (the round a command about to be sent covers).
    fn collect(self: &Arc<Node>, spare: Option<&Arc<Round>>) {
        let parked = {
            let mut f = locked(&self.inflight);
            f.check_pid();
            if f.parked.is_empty() {
                return;
            }
            std::mem::take(&mut f.parked)
        };
        let now = Instant::now();
        let mut still = Vec::new();
        for mut p in parked {
            while !p.owed.is_empty() {
                let r = match p.wire.try_reply() {
                    Ok(None) => break,
                    Ok(Some(v)) => Ok(v),
                    Err(e) => Err(e),
                };
                let o = p.owed.pop_front().expect("owed");
                self.late(o, &mut p.wire, r);
            }
            let Some(first) = p.owed.front() else {
                self.pool.put_wire(p.wire);
                continue;
            };
            if now >= first.at + first.round.job.wait {
                // Given up, as a worker would: the connection is closed.
                for o in p.owed {
                    self.end(o.id);
                }
                continue;
            }
            let spared = |o: &Owed| spare.is_some_and(|r| Arc::ptr_eq(r, &o.round));
            if p.owed.iter().any(|o| o.matters() && !spared(o)) {
                self.parked_on_worker(p);
            } else {
                still.push(p);
            }
        }
        if !still.is_empty() {
            let mut f = locked(&self.inflight);
            f.check_pid();
            f.parked.append(&mut still);
        }
    }

    /// The parked connection owing the fewest replies, for another command
    /// (a node too slow to answer them gets none: see [`Round::send`]).
    fn take_parked(&self) -> Option<Parked> {
        let mut f = locked(&self.inflight);
        f.check_pid();
        let k = (0..f.parked.len()).min_by_key(|&k| f.parked[k].owed.len())?;
        Some(f.parked.swap_remove(k))
    }

    /// A worker thread waits for the replies owed on a parked connection
    /// (see [`Node::owed_replies`]), then pools it.
    fn parked_on_worker(self: &Arc<Node>, mut p: Parked) {
        let node = self.clone();
        run(Box::new(move || {
            node.owed_replies(&mut p.wire, p.owed);
            node.pool.put_wire(p.wire);
        }));
    }

    /// Wait (on a worker thread) for each of the replies `owed` on `wire`,
    /// as long as its round allows, and handle it as a late one.
    fn owed_replies(self: &Arc<Node>, wire: &mut Wire, owed: VecDeque<Owed>) {
        for o in owed {
            let r = wire.reply_by(o.at + o.round.job.wait);
            self.late(o, wire, r);
        }
    }

    /// The reply `r` to `o`, read on `wire` after its round decided: its
    /// late handling. A reply that leaves the connection unusable closes
    /// it (the replies still owed on it then fail).
    fn late(self: &Arc<Node>, o: Owed, wire: &mut Wire, r: redis::RedisResult<Value>) {
        self.end(o.id);
        let (reply, keep) = Round::judge(&o.round.job, &self.pool, r);
        if !keep {
            wire.discard();
        }
        match reply {
            // The command that follows undoes it, whether it ran or not
            // (and is itself run again whole when its reply asks).
            _ if o.covered => {}
            Some(reply) => o.round.deliver(o.i, reply, self),
            None => o.round.whole_on_worker(o.i, self.clone()),
        }
    }
}

/// A held lock's acquisition `round` is being released: the replies that
/// have come for the nodes' parked commands are read (see
/// [`Node::collect`]) while it is still held (grants it keeps), then it is
/// marked released (late grants are released). The release itself follows
/// on the connections still owing it a reply (see [`Job::covering`]); then
/// [`released_leftovers`].
pub(crate) fn releasing(nodes: &[Arc<Node>], round: &Arc<Round>) {
    for node in nodes {
        node.collect(None);
    }
    round.released();
}

/// After a release covering acquisitions was sent: their commands still
/// unanswered on connections the release did not follow go to worker
/// threads, which release what they grant.
pub(crate) fn released_leftovers(nodes: &[Arc<Node>]) {
    for node in nodes {
        node.collect(None);
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
    job: Job,
    /// The commands the caller's thread sent, for it to read the replies.
    sent: Mutex<Vec<Sent>>,
}

/// A command the caller's thread sent on a pooled connection to node `i`.
struct Sent {
    i: usize,
    node: Arc<Node>,
    wire: Wire,
    fd: std::os::fd::RawFd,
    /// [`Node::begin`]'s number, and when.
    id: u64,
    at: Instant,
    /// Replies owed on `wire` to earlier rounds, before this command's.
    before: VecDeque<Owed>,
}

impl Drop for Round {
    fn drop(&mut self) {
        // Never the case once decided (see `decide`): still, the nodes
        // must not look slow for ever.
        for s in std::mem::take(&mut *locked(&self.sent)) {
            s.node.end(s.id);
        }
    }
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
        for node in nodes {
            node.collect(job.covers.as_ref());
        }
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
            job,
            sent: Mutex::new(Vec::new()),
        });
        let mut sent = Vec::new();
        let mut to_workers = Vec::new();
        let mut picked = Vec::with_capacity(to_send.len());
        for i in to_send {
            let node = &nodes[i];
            // A connection whose replies to decided rounds are still to
            // come (the command follows them: the server runs one client's
            // commands in order), else an idle one.
            let (wire, mut before) = match node.take_parked() {
                Some(p) => (p.wire, p.owed),
                None => match node.pool.take_pollable() {
                    Some(wire) => (wire, VecDeque::new()),
                    None => {
                        to_workers.push(i);
                        continue;
                    }
                },
            };
            if let Some(c) = &round.job.covers {
                for o in before.iter_mut().filter(|o| Arc::ptr_eq(&o.round, c)) {
                    o.covered = true;
                }
            }
            picked.push((i, wire, before));
        }
        // Nothing may wait to be read on a connection that owes no reply
        // (see `Wire::send`): one look at all of them.
        let mut looks: Vec<libc::pollfd> = picked
            .iter()
            .map(|(_, wire, before)| libc::pollfd {
                // (poll(2) skips a negative descriptor)
                fd: if before.is_empty() {
                    wire.poll_fd().unwrap_or(-1)
                } else {
                    -1
                },
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let looked = looks.iter().all(|p| p.fd < 0) || poll_for(&mut looks, Duration::ZERO) >= 0;
        for ((i, mut wire, before), look) in picked.into_iter().zip(looks) {
            let node = &nodes[i];
            let id = node.begin(now);
            let fd = wire.poll_fd();
            let readable = !looked || look.revents != 0;
            match (wire.send_command_polled(&round.job.packed, readable), fd) {
                (Ok(()), Some(fd)) => sent.push(Sent {
                    i,
                    node: node.clone(),
                    wire,
                    fd,
                    id,
                    at: now,
                    before,
                }),
                _ => {
                    // A connection found broken: as `Pool::with` does,
                    // again on a fresh one (the replies owed on it fail).
                    for o in before {
                        let gone = std::io::Error::from(std::io::ErrorKind::NotConnected);
                        node.late(o, &mut wire, Err(gone.into()));
                    }
                    node.end(id);
                    node.pool.stats.count(Event::ConnectionError);
                    node.pool.stats.count(Event::Reconnect);
                    to_workers.push(i);
                }
            }
        }
        *locked(&round.sent) = sent;
        for i in to_workers {
            round.whole_on_worker(i, nodes[i].clone());
        }
        round
    }

    /// Run the job whole for node `i` on a worker thread.
    fn whole_on_worker(self: &Arc<Round>, i: usize, node: Arc<Node>) {
        let round = self.clone();
        let id = node.begin(Instant::now());
        run(Box::new(move || {
            let reply = (round.job.whole)(&node.pool);
            node.end(id);
            round.deliver(i, reply, &node);
        }));
    }

    /// What the reply read on a connection the caller's thread sent on
    /// makes of it: the reply, or `None` when the job must run whole.
    fn settle(job: &Job, s: Sent, r: redis::RedisResult<Value>) -> Option<Result<Value>> {
        debug_assert!(s.before.is_empty());
        let Sent { node, wire, id, .. } = s;
        node.end(id);
        let (reply, keep) = Round::judge(job, &node.pool, r);
        if keep {
            node.pool.put_wire(wire);
        }
        reply
    }

    /// What a reply to `job` read on a connection of `pool` makes of it:
    /// the reply (`None`: the job must run whole), and whether the
    /// connection stays usable.
    fn judge(
        job: &Job,
        pool: &Pool,
        r: redis::RedisResult<Value>,
    ) -> (Option<Result<Value>>, bool) {
        let r = r
            .and_then(|v| v.extract_error())
            .and_then(|v| checked(v, job.accepts, job.name));
        match r {
            Ok(v) => (Some(Ok(v)), true),
            Err(e) if needs_rerun(&e) => (None, !is_demoted(&e)),
            // A connection the server closed: again on a fresh one, as
            // `Pool::with` does (never after a timeout: the command may
            // still run).
            Err(e) if is_dead_connection(&e) => {
                pool.stats.count(Event::ConnectionError);
                pool.stats.count(Event::Reconnect);
                (None, false)
            }
            Err(e) => {
                // A server error leaves the connection usable; nothing else
                // does (a late reply would be taken for the next).
                let keep = matches!(
                    e.kind(),
                    redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
                );
                (Some(Err(pool.error(e, false))), keep)
            }
        }
    }

    /// The replies that have come on the connections the caller's thread
    /// sent on, waiting at most `wait` for one: each node's index and its
    /// settled reply (`None`: the job must run whole), the connections out
    /// of `sent`.
    fn take_replies(
        &self,
        sent: &mut Vec<Sent>,
        wait: Duration,
    ) -> Vec<(usize, Arc<Node>, Option<Result<Value>>)> {
        let mut fds: Vec<libc::pollfd> = sent
            .iter()
            .map(|s| libc::pollfd {
                fd: s.fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut came = Vec::new();
        if poll_for(&mut fds, wait.max(Duration::from_micros(1))) <= 0 {
            return came;
        }
        let mut k = 0;
        while k < sent.len() {
            if fds[k].revents == 0 {
                k += 1;
                continue;
            }
            let s = &mut sent[k];
            let r = loop {
                let r = match s.wire.try_reply() {
                    Ok(None) => break None,
                    Ok(Some(v)) => Ok(v),
                    Err(e) => Err(e),
                };
                // First the replies owed to earlier rounds.
                match s.before.pop_front() {
                    Some(o) => s.node.clone().late(o, &mut s.wire, r),
                    None => break Some(r),
                }
            };
            let Some(r) = r else {
                k += 1;
                continue;
            };
            fds.swap_remove(k);
            let s = sent.swap_remove(k);
            let (i, node) = (s.i, s.node.clone());
            came.push((i, node, Round::settle(&self.job, s, r)));
        }
        came
    }

    /// Read the replies that have come on the connections the caller's
    /// thread sent on, waiting at most `wait` for one.
    fn read_sent(self: &Arc<Round>, sent: &mut Vec<Sent>, wait: Duration) {
        let mut redo = Vec::new();
        let came = self.take_replies(sent, wait);
        if !came.is_empty() {
            let mut st = locked(&self.state);
            for (i, node, reply) in came {
                match reply {
                    Some(reply) => st.replies[i] = Some(reply),
                    None => redo.push((i, node)),
                }
            }
        }
        for (i, node) in redo {
            self.whole_on_worker(i, node);
        }
    }

    /// After the caller decided: the replies still to come are read here
    /// while they come about as soon as the others did (healthy nodes
    /// answer within moments of each other), until `until`, and handled
    /// as late ones. Reading them here costs no thread, and leaves their
    /// connections idle for the caller's next command, which would
    /// otherwise find one busy and go to a worker as well.
    fn linger(self: &Arc<Round>, sent: &mut Vec<Sent>, until: Instant) {
        while !sent.is_empty() {
            let now = Instant::now();
            if now >= until {
                return;
            }
            for (i, node, reply) in self.take_replies(sent, until - now) {
                match reply {
                    Some(reply) => self.deliver(i, reply, &node),
                    None => self.whole_on_worker(i, node),
                }
            }
        }
    }

    /// After the caller decided: the connections still waiting for a
    /// reply go to worker threads, which read it (its late handling).
    fn leave_to_workers(self: &Arc<Round>, sent: Vec<Sent>) {
        for mut s in sent {
            // A reply already here costs no thread.
            if !s.before.is_empty() {
                self.reply_on_worker(s);
                continue;
            }
            if let r @ (Ok(Some(_)) | Err(_)) = s.wire.try_reply() {
                let (i, node) = (s.i, s.node.clone());
                match Round::settle(&self.job, s, r.map(|v| v.unwrap_or(Value::Nil))) {
                    Some(reply) => self.deliver(i, reply, &node),
                    None => self.whole_on_worker(i, node),
                }
                continue;
            }
            self.reply_on_worker(s);
        }
    }

    /// A worker thread waits for the reply to `s` (as long as the job
    /// allows) and handles it as a late one.
    fn reply_on_worker(self: &Arc<Round>, mut s: Sent) {
        let round = self.clone();
        run(Box::new(move || {
            let node = s.node.clone();
            node.owed_replies(&mut s.wire, std::mem::take(&mut s.before));
            let r = s.wire.reply_by(s.at + round.job.wait);
            let i = s.i;
            let reply = match Round::settle(&round.job, s, r) {
                Some(reply) => reply,
                None => (round.job.whole)(&node.pool),
            };
            round.deliver(i, reply, &node);
        }));
    }

    /// After the caller decided: the commands still unanswered stay on
    /// their connections, whose next use reads their replies first. A
    /// reply owed there to an earlier round that needs handling soon (see
    /// [`Owed::matters`]) sends the connection to a worker thread.
    fn park(self: &Arc<Round>, sent: Vec<Sent>) {
        for s in sent {
            let mut owed = s.before;
            owed.push_back(Owed {
                round: self.clone(),
                i: s.i,
                id: s.id,
                at: s.at,
                covered: false,
            });
            let p = Parked { wire: s.wire, owed };
            if p.owed.iter().any(Owed::matters) {
                s.node.parked_on_worker(p);
                continue;
            }
            let mut f = locked(&s.node.inflight);
            f.check_pid();
            f.parked.push(p);
        }
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
        self: &Arc<Round>,
        deadline: Instant,
        mut decide: impl FnMut(&[Option<Result<Value>>], bool) -> Option<Outcome>,
    ) -> Decided {
        let mut sent = std::mem::take(&mut *locked(&self.sent));
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
                drop(st);
                let parks = self.on_late.is_none() || outcome == Outcome::Held;
                if !timed_out && !self.job.must_run && parks {
                    // The late replies need nothing soon: none are
                    // handled, or they are grants the holder keeps (until
                    // `release_round`). The next command to each node
                    // reads them.
                    self.park(sent);
                } else {
                    if !timed_out {
                        if let Some(first) = sent.iter().map(|s| s.at).min() {
                            let linger = (now.duration_since(first) / LINGER).max(LINGER_FLOOR);
                            self.linger(&mut sent, now + linger);
                        }
                    }
                    self.leave_to_workers(sent);
                }
                return Decided {
                    outcome,
                    pending: replies.iter().any(Option::is_none),
                    timed_out,
                    replies,
                };
            }
            if sent.is_empty() {
                st = crate::sync::wait_timeout(&self.replied, st, deadline - now).0;
                continue;
            }
            // Workers deliver under the lock and notify; while the caller
            // polls its sockets it looks at theirs every millisecond.
            let workers = st
                .replies
                .iter()
                .enumerate()
                .any(|(i, r)| r.is_none() && !sent.iter().any(|s| s.i == i));
            drop(st);
            let mut wait = deadline - now;
            if workers {
                wait = wait.min(Duration::from_millis(1));
            }
            self.read_sent(&mut sent, wait);
            st = locked(&self.state);
        }
    }

    fn outcome(&self) -> Outcome {
        locked(&self.state).outcome
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
    // The workers wait on QUEUE: fork() holds it (see `crate::sync`).
    static HOLD: std::sync::Once = std::sync::Once::new();
    HOLD.call_once(|| {
        crate::sync::hold_across_fork(|| Box::new(QUEUE.lock().unwrap_or_else(|e| e.into_inner())))
    });
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
        let (g, waited) = crate::sync::wait_timeout(&WORK, q, IDLE_EXIT);
        q = g;
        q.idle = q.idle.saturating_sub(1);
        if waited.timed_out() && q.tasks.is_empty() {
            return;
        }
    }
}
