//! Waiting for a lock held on one server (Redlock waits by retrying).
//!
//! A waiter registers with the client's subscriber connection to the
//! lock's server (a [`Ticket`]: every waiter of a client shares one
//! connection per node) and runs the ENQUEUE script, which either takes the
//! lock or puts the waiter in the lock's queue. (A lock this client found
//! held last time goes there without the plain try first; a grant after a
//! wait is released with RELEASE_QUEUED, which looks at the queue first.) Then it blocks on its
//! ticket until the release script hands the lock over (the message
//! carries the fencing number), or until its next retry is due. The head
//! of the queue retries backing off from 25 ms, doubling with jitter up to
//! 30 s, never later than the holder's remaining TTL; the waiters behind it
//! retry only once the holder's TTL has run out (spread over 2 s); none
//! past the caller's deadline. Each retry re-runs ENQUEUE, which notices a
//! release by another client (a plain `DEL`) or an expiry. A waiter gives up by running the CANCEL script,
//! which leaves the queue; if the lock was handed over in that very moment
//! the waiter keeps it. Only then is the ticket dropped, so that a hand-off
//! counted as received always reaches a waiter that takes it.

use std::future::Future;
use std::time::{Duration, Instant};

use redis::Value;

use super::{Grant, Granted};
use crate::error::{show_key, Error, Result};
use crate::net::hub::{Delivery, Ticket};
use crate::net::transport::Transport;
use crate::options::{Interrupt, INTERRUPT_SLICE};
use crate::protocol::{self, scripts, Attempt, Cap, LockKeys, Script, QUEUE_GRACE_MS};
use crate::stats::{Event, Gauge};

/// The server a waiter waits on: its transport, and its way of running
/// scripts and reading the key with errors that name the lock.
pub(super) trait Server {
    type Io: Transport;

    fn io(&self) -> &Self::Io;

    fn script(
        &self,
        script: &'static Script,
        key: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        retry_args: Option<&[&[u8]]>,
    ) -> impl Future<Output = Result<Value>> + Send;

    /// One command (its arguments) on the node of `key`, saying whether it
    /// was sent again after a broken connection; errors name `key`. A reply
    /// `accepts` does not take is an [`Error::Protocol`].
    fn command(
        &self,
        cmd: &[&[u8]],
        key: &[u8],
        accepts: protocol::Accepts,
    ) -> impl Future<Output = Result<(Value, bool)>> + Send;

    fn holds(&self, keys: &LockKeys, token: &[u8]) -> impl Future<Output = Result<bool>> + Send;
}

/// What one attempt found.
pub(super) enum Tried {
    /// Ours, with this fence (0: none drawn).
    Taken(u64),
    /// Held by another owner (or by us already: taking a lock held with
    /// the same token again fails, as the helper's `SET NX` does), with
    /// the holder's remaining TTL in ms as PTTL answers it, or
    /// [`crate::error::UNKNOWN_TTL`] when the reply does not tell it.
    Held(i64),
}

/// One attempt, the cheapest that does what the caller asked for: the
/// hand-written helper's command `SET … NX PX … GET`, or the ACQUIRE
/// script for a fenced lock (or where the server does not take `NX` with
/// `GET`, before Redis 7.0: learnt once, then remembered). A key of another
/// type is [`Error::WrongType`].
pub(super) async fn try_take(
    server: &impl Server,
    keys: &LockKeys,
    token: &[u8],
    ttl_ms: u64,
    fenced: bool,
) -> Result<Tried> {
    let caps = server.io().caps();
    let ttl = protocol::Decimal::new(ttl_ms);
    if keys.shared() {
        let tail = keys.tail_args(fenced);
        let grace = QUEUE_GRACE_MS.to_string();
        let args: [&[u8]; 7] = [
            token,
            ttl.as_bytes(),
            b"",
            b"1",
            grace.as_bytes(),
            &tail[0],
            &tail[1],
        ];
        let reply = server
            .script(keys.scripts().enqueue, &keys.lock, &keys.all(), &args, None)
            .await?;
        return match protocol::parse_attempt(&reply) {
            Some(Attempt::Taken(fence) | Attempt::Handed(fence)) => Ok(Tried::Taken(fence)),
            Some(Attempt::Held { pttl, .. }) => Ok(Tried::Held(pttl)),
            None => Err(unexpected(server.io(), "SEM_ACQUIRE", &reply)),
        };
    }
    if !fenced && caps.worth_trying(Cap::NxGet) {
        let cmd = protocol::set_nx_get(&keys.lock, token, &ttl);
        let reply = server
            .command(&cmd, &keys.lock, protocol::is_nil_or_string)
            .await;
        if !caps.refused(Cap::NxGet, &reply) {
            return match reply? {
                (Value::Nil, _) => Ok(Tried::Taken(0)),
                // A first sending that took it before its connection broke.
                (Value::BulkString(holder), true) if holder == token => Ok(Tried::Taken(0)),
                (Value::BulkString(_), _) => Ok(Tried::Held(crate::error::UNKNOWN_TTL)),
                (other, _) => Err(unexpected(server.io(), "SET … NX … GET", &other)),
            };
        }
    }
    let f: &[u8] = if fenced { b"1" } else { b"0" };
    let reply = server
        .script(
            &scripts().acquire,
            &keys.lock,
            &keys.all(),
            &[token, ttl.as_bytes(), b"0", f],
            Some(&[token, ttl.as_bytes(), b"1", f]),
        )
        .await?;
    match protocol::parse_attempt(&reply) {
        Some(Attempt::Taken(fence) | Attempt::Handed(fence)) => Ok(Tried::Taken(fence)),
        Some(Attempt::Held { pttl, .. }) => Ok(Tried::Held(pttl)),
        None => Err(unexpected(server.io(), "ACQUIRE", &reply)),
    }
}

/// `io`'s server answered `what` with what it never answers (the
/// transport checks scripts' replies first: this is a second line).
fn unexpected(io: &impl Transport, what: &str, v: &Value) -> Error {
    Error::unexpected(&io.target().addr, what, v)
}

const FIRST_RETRY: Duration = Duration::from_millis(25);
/// Retries double from [`FIRST_RETRY`] up to this (always bounded by the
/// holder's remaining TTL): a waiter costs the server a few commands at
/// the start of its wait and about none after.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// The longest pause before asking a server that refused for a moment
/// (loading, busy) again.
const BUSY_RETRY: Duration = Duration::from_secs(1);
/// How far past the holder's expiry the waiters behind the head of the
/// queue spread their retries.
const BEHIND_SPREAD: Duration = Duration::from_secs(2);

/// Acquire, waiting until `deadline` (`None`: forever; the pair is the
/// deadline and when the call started) or until `interrupt` says to stop.
/// Returns the fence (0 when none was drawn: only a `fenced` acquisition
/// draws one at once) and how the lock came. While the lock is seen held,
/// the waiter counts in the statistics' `waiters_now`.
pub(super) async fn acquire(
    server: &impl Server,
    keys: &LockKeys,
    token: &[u8],
    ttl_ms: u64,
    fenced: bool,
    (deadline, started): (Option<Instant>, Instant),
    interrupt: Option<&Interrupt>,
) -> Result<Grant> {
    // A free lock costs one request, as with the hand-written helper; the
    // queue (and a subscriber registration) only once it is seen held. A
    // lock this client found held last time goes to the queue at once.
    let io = server.io();
    let mut outage = Outage::new();
    if !io.contended().is(&keys.lock) {
        match try_take(server, keys, token, ttl_ms, fenced).await {
            Ok(Tried::Taken(fence)) => return Ok(Grant::new(fence, Granted::AtOnce)),
            // Held, or a server that refuses for a moment (loading): the
            // queue below asks again while the wait allows.
            Ok(Tried::Held(_)) | Err(Error::Unavailable { .. }) => {}
            // Unreachable: the queue below tries again while the outage
            // may end within the wait.
            Err(e @ Error::Connection { .. }) if !outage.again(io, deadline, false).await => {
                return Err(e)
            }
            Err(Error::Connection { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let stats = io.stats();
    let mut waiting = None;
    let mut backoff = FIRST_RETRY;
    let ticket = loop {
        match io.register_waiter(&keys.lock).await {
            Err(Error::Connection { .. }) if outage.again(io, deadline, false).await => {}
            // A server that refuses for a moment (a slow script: BUSY)
            // refuses the SUBSCRIBE too: ask again while the wait allows,
            // as for ENQUEUE below.
            Err(Error::Unavailable { .. })
                if deadline.is_none_or(|d| Instant::now() + backoff < d) =>
            {
                io.sleep(jitter(backoff)).await;
                backoff = (backoff * 2).min(BUSY_RETRY);
            }
            Err(Error::Unavailable { addr, state, .. }) => {
                return Err(Error::Unavailable {
                    addr,
                    state,
                    waited: started.elapsed(),
                    hint: String::from("; the wait ran out"),
                })
            }
            r => break r?,
        }
    };
    backoff = FIRST_RETRY;
    let mut q = Queued::new(io, keys, token, ttl_ms, ticket);
    let ttl = ttl_ms.to_string();
    let grace = QUEUE_GRACE_MS.to_string();
    let mut first = true;
    let tail = keys.tail_args(fenced);
    let enqueue = keys.scripts().enqueue;
    loop {
        // A repeated run (after a dead connection) checks whether the first
        // one already took the lock or queued us: "not first".
        let mut again: Vec<&[u8]> = vec![token, ttl.as_bytes(), &q.member, b"0", grace.as_bytes()];
        again.extend(tail.iter().map(Vec::as_slice));
        let mut args = again.clone();
        args[3] = if first { b"1" } else { b"0" };
        let reply = match server
            .script(enqueue, &keys.lock, &keys.all(), &args, Some(&again))
            .await
        {
            Ok(r) => r,
            // The server refused for a moment (loading, a slow script, a
            // resharding) longer than one command may wait: ask again while
            // the wait allows. Nothing was queued.
            Err(Error::Unavailable { .. })
                if deadline.is_none_or(|d| Instant::now() + backoff < d) =>
            {
                io.sleep(jitter(backoff)).await;
                backoff = (backoff * 2).min(BUSY_RETRY);
                continue;
            }
            // The server went away (a restart, a failover; this run may
            // have queued us before its connection broke, also the first
            // one, whose reply the restart may have taken with it): queue
            // again once it, or its successor, answers, as when the
            // subscriber is lost (see [`Outage`]). The server answered this
            // wait already (its subscriber is registered), so it gets the
            // connect timeout to come back. The old entry is left (keeping
            // the lock if it was handed over meanwhile) before its ticket
            // goes.
            Err(e @ Error::Connection { .. }) => {
                match rejoin(server, keys, token, &q.member, &mut outage, deadline).await {
                    Ok(Ok(ticket)) => {
                        drop(q.done());
                        q = Queued::new(io, keys, token, ttl_ms, ticket);
                        first = true;
                        backoff = FIRST_RETRY;
                        continue;
                    }
                    Ok(Err(fence)) => {
                        q.done();
                        return Ok(handed(io, keys, fence, started));
                    }
                    Err(_) => return leave(server, q, e, started).await,
                }
            }
            // We may be in the queue (an earlier run put us there), or this
            // run may have put us there before answering what it never
            // answers: leave it (a queue entry without its waiter would
            // hold the waiters behind up until it expired).
            Err(e) if !first || matches!(e, Error::Protocol { .. }) => {
                return leave(server, q, e, started).await
            }
            Err(e) => return Err(e),
        };
        first = false;
        outage.over();
        let (pttl, ahead) = match protocol::parse_attempt(&reply) {
            Some(Attempt::Taken(fence)) => {
                q.done();
                if waiting.is_none() {
                    io.contended().set(&keys.lock, false);
                    return Ok(Grant::new(fence, Granted::AtOnce));
                }
                tracing::debug!(
                    lock = %show_key(&keys.lock),
                    fence,
                    waited_ms = started.elapsed().as_millis() as u64,
                    "took the lock by a retry (it expired or was deleted)"
                );
                return Ok(Grant::new(fence, Granted::AfterWait));
            }
            // Handed over while the retry timer ran out (the message is
            // still on its way): a hand-off all the same.
            Some(Attempt::Handed(fence)) => {
                q.done();
                return Ok(handed(io, keys, fence, started));
            }
            Some(Attempt::Held {
                pttl,
                ahead,
                holder,
            }) => {
                if waiting.is_none() {
                    // The first reply leaves the holder out (the hot path).
                    waiting = Some(stats.up(Gauge::Waiters));
                    io.contended().set(&keys.lock, true);
                    tracing::debug!(
                        lock = %show_key(&keys.lock),
                        holder_ttl_ms = pttl,
                        ahead,
                        "lock is held: queued to wait for it"
                    );
                } else {
                    tracing::debug!(
                        lock = %show_key(&keys.lock),
                        holder = %show_key(&holder),
                        holder_ttl_ms = pttl,
                        ahead,
                        "still held after a retry"
                    );
                }
                (pttl, ahead)
            }
            None => {
                let e = unexpected(io, "ENQUEUE", &reply);
                return leave(server, q, e, started).await;
            }
        };
        // The next retry. A release by this library wakes the waiter at the
        // head of the queue; retries only notice what it cannot announce: a
        // foreign client's DEL, an expiry. The head backs off, never later
        // than the holder's lock would expire; the waiters behind it are
        // served by hand-off in turn and come back only then, spread over
        // up to 2 s so that a thousand of them do not come at once (they
        // refresh the queue's expiry, well within its grace).
        let expiry = match u64::try_from(pttl) {
            Ok(ms) => Duration::from_millis(ms + 1),
            // A holder without expiry: come back before the queue expires.
            Err(_) => Duration::from_millis(QUEUE_GRACE_MS / 2),
        };
        let mut slice = if ahead == 0 {
            let s = jitter(backoff).min(expiry);
            backoff = (backoff * 2).min(MAX_RETRY);
            s
        } else {
            (expiry + spread(expiry.min(BEHIND_SPREAD))).min(MAX_RETRY)
        };
        if let Some(d) = deadline {
            slice = slice.min(d.saturating_duration_since(Instant::now()));
        }
        // A subscriber on a node that lost the slot (a migration) is
        // counted by no release: queue again, as when it is lost.
        let (woken, stopped) = if io.misplaced(q.ticket(), &keys.lock) {
            let moved = String::from("the lock's slot moved to another node");
            (Some(Delivery::Lost(moved)), false)
        } else {
            wait_for_handoff(io, q.ticket(), slice, interrupt).await
        };
        match woken {
            // With Cluster and Sentinel a hand-off message can reach a waiter
            // whose subscriber sits on another node than the one that ran
            // the release (cluster PUBLISH is broadcast, a replica gets it
            // replicated), where PUBLISH did not count it and the lock went
            // elsewhere. There the message is checked against the key.
            Some(Delivery::Handed(fence)) => {
                if !io.remote_publish() {
                    q.done();
                    return Ok(handed(io, keys, fence, started));
                }
                io.before_confirming(q.ticket()).await;
                match server.holds(keys, token).await {
                    Ok(true) => {
                        q.done();
                        return Ok(handed(io, keys, fence, started));
                    }
                    Ok(false) => q.ticket().rearm(),
                    Err(e) => return leave(server, q, e, started).await,
                }
            }
            Some(Delivery::Moved) => {
                q.ticket().rearm();
                tracing::debug!(
                    lock = %show_key(&keys.lock),
                    "the waiters' subscriber followed a failover: checking the queue"
                );
            }
            None => {
                let why = if ahead == 0 {
                    "first in the queue: checking for an expiry or a release by another client"
                } else {
                    "the holder's TTL has run out: checking the lock"
                };
                tracing::debug!(lock = %show_key(&keys.lock), ahead, "retrying: {why}");
            }
            Some(Delivery::Lost(reason)) => {
                // The subscriber connection died: the server restarted or
                // closed it, or failed over. Leave the queue under the old
                // channel (keeping the lock if it was handed over
                // meanwhile), then queue again on a fresh one, once the
                // server or its successor answers (see [`Outage`]).
                // Dropped from here on, the waiter is at worst a dead entry
                // in the queue: no subscriber counts a message to it.
                let (old, member) = q.done();
                drop(old);
                tracing::debug!(
                    lock = %show_key(&keys.lock),
                    %reason,
                    "the waiters' subscriber connection was lost: queueing again"
                );
                stats.count(Event::Reconnect);
                let rejoined = rejoin(server, keys, token, &member, &mut outage, deadline).await;
                let ticket = match rejoined {
                    Ok(Ok(t)) => t,
                    Ok(Err(fence)) => return Ok(handed(io, keys, fence, started)),
                    Err(Error::Connection {
                        addr,
                        reason: now,
                        hint,
                    }) => {
                        return Err(Error::Connection {
                            addr,
                            reason: format!(
                                "{now} (after the subscriber connection was lost: {reason})"
                            ),
                            hint,
                        })
                    }
                    Err(e) => return Err(e),
                };
                q = Queued::new(io, keys, token, ttl_ms, ticket);
                first = true;
                backoff = FIRST_RETRY;
                continue;
            }
        }
        if stopped || deadline.is_some_and(|d| Instant::now() >= d) {
            let gave_up = Error::not_acquired(&keys.lock, pttl, started);
            tracing::debug!(
                lock = %show_key(&keys.lock),
                waited_ms = started.elapsed().as_millis() as u64,
                interrupted = stopped,
                "gave up waiting for the lock"
            );
            return leave(server, q, gave_up, started).await;
        }
    }
}

/// A waiter that may be in a lock's queue: its ticket and queue entry. If
/// the waiting future is dropped while it is (an async caller cancelled
/// it), the waiter leaves the queue in the background, and releases the
/// lock if it was handed over in that very moment; only then is the ticket
/// dropped, as when a wait ends normally.
struct Queued<'a, T: Transport> {
    io: &'a T,
    keys: &'a LockKeys,
    token: &'a [u8],
    member: Vec<u8>,
    ticket: Option<Ticket>,
}

impl<'a, T: Transport> Queued<'a, T> {
    fn new(io: &'a T, keys: &'a LockKeys, token: &'a [u8], ttl_ms: u64, t: Ticket) -> Self {
        Queued {
            io,
            keys,
            token,
            member: keys.member(t.channel_id(), t.nonce(), ttl_ms, token),
            ticket: Some(t),
        }
    }

    fn ticket(&self) -> &Ticket {
        self.ticket
            .as_ref()
            .expect("a queued waiter has its ticket")
    }

    /// The wait is over (or its caller takes over the leaving).
    fn done(mut self) -> (Ticket, Vec<u8>) {
        let ticket = self.ticket.take().expect("a queued waiter has its ticket");
        (ticket, std::mem::take(&mut self.member))
    }
}

impl<T: Transport> Drop for Queued<'_, T> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        let io = self.io.clone();
        let keys = self.keys.clone();
        let token = self.token.to_vec();
        let member = std::mem::take(&mut self.member);
        self.io.detach(Box::pin(async move {
            let grace = QUEUE_GRACE_MS.to_string();
            let left = io
                .script(
                    keys.scripts().cancel,
                    &keys.all(),
                    &[&token, &member, grace.as_bytes()],
                    None,
                )
                .await
                .and_then(|reply| parse_cancel(&io, &reply));
            match left {
                Ok(None) => {}
                // Handed to us as we left: nobody wants it now.
                Ok(Some(_)) => {
                    io.stats().count(Event::HandoffReceived);
                    let _ = if keys.shared() {
                        io.script(
                            &scripts().sem_release,
                            &keys.all(),
                            &[&token, grace.as_bytes()],
                            None,
                        )
                        .await
                    } else {
                        io.script(&scripts().release, &keys.release(), &[&token], None)
                            .await
                    };
                }
                Err(_) => ticket.abandon(),
            }
        }));
    }
}

/// Leave the queue under a lost channel and register on a new one
/// (`Err(fence)`: the lock was handed to us meanwhile), trying again while
/// the server cannot be reached and the `outage` may end within the wait.
async fn rejoin<S: Server>(
    server: &S,
    keys: &LockKeys,
    token: &[u8],
    member: &[u8],
    outage: &mut Outage,
    deadline: Option<Instant>,
) -> Result<std::result::Result<Ticket, u64>> {
    loop {
        let r = match cancel(server, keys, token, member).await {
            Ok(Some(fence)) => return Ok(Err(fence)),
            Ok(None) => server.io().register_waiter(&keys.lock).await.map(Ok),
            Err(e) => Err(e),
        };
        match r {
            // The waiter was queued (or may have been): the server gets the
            // connect timeout to come back.
            Err(Error::Connection { .. }) if outage.again(server.io(), deadline, true).await => {}
            r => return r,
        }
    }
}

/// A wait riding out a server that cannot be reached. A server that
/// restarts while a waiter is queued gets the connect timeout to come back
/// (one never reached fails at once); a deployment that may
/// give it a successor (a Sentinel service whose sentinels are listened to,
/// a cluster whose other nodes answer) gets the whole wait, so that an
/// acquire never fails with a connection error while a failover is under
/// way. Between attempts it pauses 10 ms, then twice as long each time (at
/// most 200 ms): the new master is found within that of its promotion.
struct Outage {
    since: Option<Instant>,
    pause: Duration,
}

impl Outage {
    fn new() -> Outage {
        Outage {
            since: None,
            pause: Duration::from_millis(10),
        }
    }

    /// After a connection error: pause and say to try again, or say that
    /// the wait is over (`deadline`: the caller's; `patient`: the waiter
    /// was queued on the server, which may be restarting).
    async fn again(
        &mut self,
        io: &impl Transport,
        deadline: Option<Instant>,
        patient: bool,
    ) -> bool {
        let since = *self.since.get_or_insert_with(Instant::now);
        let mut until = deadline;
        if !io.failover_possible().await {
            let restart = if patient {
                since + io.target().connect_timeout
            } else {
                since
            };
            until = Some(until.map_or(restart, |d| d.min(restart)));
        }
        if until.is_some_and(|u| Instant::now() + self.pause >= u) {
            return false;
        }
        io.sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(200));
        true
    }

    /// The server answered.
    fn over(&mut self) {
        *self = Outage::new();
    }
}

/// Wait on the ticket for `slice`, in slices of [`INTERRUPT_SLICE`] that
/// ask `interrupt` in between. Returns what came, and whether `interrupt`
/// said to stop.
async fn wait_for_handoff(
    io: &impl Transport,
    ticket: &Ticket,
    slice: Duration,
    interrupt: Option<&Interrupt>,
) -> (Option<Delivery>, bool) {
    let until = Instant::now() + slice;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (None, false);
        }
        let chunk = match interrupt {
            Some(_) => left.min(INTERRUPT_SLICE),
            None => left,
        };
        if let Some(d) = io.wait(ticket, chunk).await {
            return (Some(d), false);
        }
        if interrupt.is_some_and(|i| i.stop()) {
            return (None, true);
        }
    }
}

/// Give up the wait with `e`: leave the queue, then unregister. If the lock
/// was handed to us meanwhile we keep it, and the wait succeeded after all.
/// If leaving fails, the channel is abandoned, so that no release hands the
/// lock to this waiter that is gone.
async fn leave<S: Server>(
    server: &S,
    q: Queued<'_, S::Io>,
    e: Error,
    started: Instant,
) -> Result<Grant> {
    let (keys, token) = (q.keys, q.token);
    let (ticket, member) = q.done();
    match cancel(server, keys, token, &member).await {
        Ok(Some(fence)) => Ok(handed(server.io(), keys, fence, started)),
        Ok(None) => Err(e),
        Err(_) => {
            ticket.abandon();
            Err(e)
        }
    }
}

/// A hand-off received: counted and logged.
fn handed(io: &impl Transport, keys: &LockKeys, fence: u64, started: Instant) -> Grant {
    io.stats().count(Event::HandoffReceived);
    tracing::debug!(
        lock = %show_key(&keys.lock),
        fence,
        waited_ms = started.elapsed().as_millis() as u64,
        "the lock was handed over by its releaser"
    );
    Grant::new(fence, Granted::HandedOver)
}

/// Leave the queue; `Some(fence)` when the lock was handed to us meanwhile.
async fn cancel(
    server: &impl Server,
    keys: &LockKeys,
    token: &[u8],
    member: &[u8],
) -> Result<Option<u64>> {
    let grace = QUEUE_GRACE_MS.to_string();
    let reply = server
        .script(
            keys.scripts().cancel,
            &keys.lock,
            &keys.all(),
            &[token, member, grace.as_bytes()],
            None,
        )
        .await?;
    parse_cancel(server.io(), &reply)
}

/// CANCEL's reply: `Some(fence)` when the lock is ours.
fn parse_cancel(io: &impl Transport, reply: &Value) -> Result<Option<u64>> {
    match reply {
        Value::Nil => Ok(None),
        Value::Array(items) if items.len() == 1 => protocol::parse_fence(&items[0])
            .map(Some)
            .ok_or_else(|| unexpected(io, "CANCEL", reply)),
        _ => Err(unexpected(io, "CANCEL", reply)),
    }
}

/// A random duration in [d/2, d].
fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    half + spread(half)
}

/// A random duration in [0, d].
fn spread(d: Duration) -> Duration {
    let r = u32::from_le_bytes(protocol::random_bytes::<4>());
    d.mul_f64(r as f64 / u32::MAX as f64)
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
