//! Running a command again: after which failures (a transient state, a
//! dead or demoted connection, a refused connection while a failover may
//! be under way), how long to pause, and within what budget. Both pools
//! loop the same way with these.

use std::time::{Duration, Instant};

use redis::ErrorKind as RedisKind;

use crate::error::{Error, Result};

/// Why a run failed: the error, whether the connection was refused (the
/// command never left), and whether some sending may have taken effect.
pub(crate) struct Failed {
    pub(crate) error: Error,
    pub(crate) refused: bool,
    pub(crate) sent: bool,
}

impl Failed {
    /// Connecting failed: nothing was sent this time.
    pub(crate) fn refused(error: Error, sent: bool) -> Failed {
        Failed {
            refused: matches!(error, Error::Connection { .. }),
            error,
            sent,
        }
    }
}

/// The pauses while a server answers with a transient state (see
/// [`transient_state`]): 10 ms, then twice as long each time (at most
/// 200 ms), within `budget`.
pub(crate) struct Transient {
    started: Instant,
    pause: Duration,
    budget: Duration,
    budget_name: &'static str,
}

impl Transient {
    pub(crate) fn new(budget: Duration, budget_name: &'static str) -> Transient {
        Transient {
            started: Instant::now(),
            pause: Duration::from_millis(10),
            budget,
            budget_name,
        }
    }

    /// The pause before trying again while a server is unreachable, or
    /// `None` once the budget is spent.
    pub(crate) fn outage(&mut self) -> Option<Duration> {
        let left = self.budget.saturating_sub(self.started.elapsed());
        if left < self.pause {
            return None;
        }
        let p = self.pause;
        self.pause = (self.pause * 2).min(Duration::from_millis(200));
        Some(p)
    }

    /// The pause while the pool holds its commands (`held`: the server
    /// and why, see [`Pool::hold`](crate::net::pool::Pool::hold)): 2 ms at
    /// a time, so that the command goes as soon as the hold ends; once the
    /// budget is spent, the error that says so.
    pub(crate) fn held(&self, (addr, state): (String, String)) -> Result<Duration> {
        let left = self.budget.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return Err(Error::Unavailable {
                addr,
                state,
                waited: self.started.elapsed(),
                hint: format!("; the {} is {:?}", self.budget_name, self.budget),
            });
        }
        Ok(Duration::from_millis(2).min(left))
    }

    /// After a failed run, in either pool's loop: the pause before the next
    /// run and whether some sending may have taken effect, or the error to
    /// return. A server in a transient state is asked again within the
    /// budget; a connection refused, while `failover_possible` says that
    /// the deployment may give the server a successor.
    pub(crate) fn after(
        &mut self,
        failed: Failed,
        failover_possible: impl FnOnce() -> bool,
    ) -> Result<(Duration, bool)> {
        match failed {
            Failed {
                error: e @ Error::Unavailable { .. },
                sent,
                ..
            } => Ok((self.pause(e)?, sent)),
            Failed {
                error,
                refused: true,
                sent,
            } => match self.outage() {
                Some(pause) if failover_possible() => Ok((pause, sent)),
                _ => Err(error),
            },
            Failed { error, .. } => Err(error),
        }
    }

    /// The pause before asking again after `e` (an `Unavailable`), or, once
    /// the budget is spent, the error naming the state and how long it
    /// lasted.
    pub(crate) fn pause(&mut self, e: Error) -> Result<Duration> {
        let Error::Unavailable { addr, state, .. } = e else {
            return Err(e);
        };
        let left = self.budget.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return Err(Error::Unavailable {
                addr,
                state,
                waited: self.started.elapsed(),
                hint: format!("; the {} is {:?}", self.budget_name, self.budget),
            });
        }
        let p = self.pause.min(left);
        self.pause = (self.pause * 2).min(Duration::from_millis(200));
        Ok(p)
    }
}

/// A connection that must be replaced, after which the command may be sent
/// again: dropped, or talking to a master that was demoted in a failover
/// (the command was refused, so it had no effect).
/// Also a connection found out of step before the command was sent (see
/// [`is_stale`](crate::net::wire::is_stale)): the command never left.
pub(crate) fn is_dead_connection(e: &redis::RedisError) -> bool {
    (e.is_connection_dropped() && !e.is_timeout()) || is_demoted(e) || crate::net::wire::is_stale(e)
}

/// The states in which a server refuses a command for a moment, so that
/// asking again shortly is right (the command had no effect), in words.
pub(crate) fn transient_state(e: &redis::RedisError) -> Option<&'static str> {
    Some(match e.code()? {
        "LOADING" => "loading its data set into memory (LOADING)",
        "BUSY" => "blocked by a slow script (BUSY)",
        "TRYAGAIN" => "moving the lock's keys between cluster nodes (TRYAGAIN)",
        "CLUSTERDOWN" => "part of a cluster that is down (CLUSTERDOWN)",
        "MASTERDOWN" => "a replica that lost its master (MASTERDOWN)",
        // min-replicas-to-write: refused before any write (a script's
        // first write is refused, never a later one).
        "NOREPLICAS" => "short of replicas in sync for its min-replicas-to-write (NOREPLICAS)",
        _ => return None,
    })
}

/// An error reply after which a command sent on its own (see
/// [`Pool::take_pollable`](crate::net::pool::Pool::take_pollable)) must be run again the way
/// [`Pool::with`](crate::net::pool::Pool::with) runs
/// it: NOSCRIPT (EVAL follows), a transient state (asked again after a
/// pause) or a demoted master (a fresh connection finds the new one). The
/// command had no effect.
pub(crate) fn needs_rerun(e: &redis::RedisError) -> bool {
    e.kind() == RedisKind::Server(redis::ServerErrorKind::NoScript)
        || transient_state(e).is_some()
        || is_demoted(e)
}

pub(crate) fn is_demoted(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        RedisKind::Server(redis::ServerErrorKind::ReadOnly | redis::ServerErrorKind::MasterDown)
    )
}
