//! A client's statistics in C: `struct redislock_stats` and its
//! histograms (`struct redislock_histogram`), which only ever grow at the
//! end (the caller says in `size` how much it can take), filled from the
//! core's `Stats` by `redislock_client_stats`, and the buckets' bounds
//! (`redislock_stats_bucket_bound_us`).

use std::time::Duration;

use redislock::{Error, Histogram, Stats};

use crate::args::non_null;
use crate::client::redislock_client;
use crate::error::redislock_status::{self, *};
use crate::error::status;
use crate::guard::guard;

/// How many buckets each histogram of `redislock_stats` has: one per bound
/// of `redislock_stats_bucket_bound_us`, and a last one for longer times.
pub const REDISLOCK_STATS_BUCKETS: usize = 23;

const _: () = assert!(REDISLOCK_STATS_BUCKETS == redislock::BUCKETS);

/// A distribution of durations, in microseconds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct redislock_histogram {
    /// How many durations were recorded (the sum of `buckets`).
    pub count: u64,
    /// Their sum.
    pub sum_us: u64,
    /// The longest.
    pub max_us: u64,
    /// The median, estimated within its bucket (as Prometheus's
    /// `histogram_quantile`) and never above `max_us`; 0 when `count` is 0.
    pub p50_us: u64,
    /// The 90th percentile, estimated as `p50_us`.
    pub p90_us: u64,
    /// The 99th percentile, estimated as `p50_us`.
    pub p99_us: u64,
    /// How many durations fell in each bucket (not cumulative): bucket `i`
    /// holds those above the bound of bucket `i - 1` and up to
    /// `redislock_stats_bucket_bound_us(i)`; the last one, those above one
    /// hour.
    pub buckets: [u64; REDISLOCK_STATS_BUCKETS],
}

/// What one client did since it was opened (or since `fork()`, in the
/// child), from `redislock_client_stats`. Handles of one shared client
/// (`redislock_client_open_shared`) share these figures.
///
/// Growth rule: fields are only ever appended, never moved or removed. A
/// program sets `size` to `sizeof(struct redislock_stats)` as it was
/// compiled, and the library fills that many bytes at most: a program built
/// against this header keeps working with later libraries, and a newer
/// program learns from `size` how much an older library filled.
///
/// Every figure is exact on its own; two of them may be a few events apart
/// when other threads use the client meanwhile.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct redislock_stats {
    /// In: the bytes the caller's struct holds. Out: the bytes filled.
    pub size: u32,
    /// Zero.
    pub reserved: u32,
    /// Acquisitions that found the lock free on their first try.
    pub acquired_at_once: u64,
    /// Acquisitions that waited and then took the lock by a retry (after an
    /// expiry, or a release by a client that does not hand over).
    pub acquired_after_wait: u64,
    /// Acquisitions that waited and were handed the lock by its releaser.
    pub acquired_handed_over: u64,
    /// Acquisitions that did not get the lock: the wait ran out, or a
    /// try-once found it held (`REDISLOCK_NOT_ACQUIRED`).
    pub acquire_timed_out: u64,
    /// Acquisitions that failed with another error (connection, quorum,
    /// server, wrong type); invalid arguments are not counted.
    pub acquire_errors: u64,
    /// Releases (by handle or by token) that released or handed over.
    pub releases_ok: u64,
    /// Releases that found the lock no longer theirs.
    pub releases_not_owner: u64,
    /// Extends by the caller (by handle or by token) that succeeded.
    pub extends_ok: u64,
    /// Extends by the caller that found the lock gone.
    pub extends_lost: u64,
    /// Background renewals that succeeded.
    pub renewals_ok: u64,
    /// Locks that background renewal found gone (or could not reach the
    /// server before their TTL ran out).
    pub renewals_lost: u64,
    /// Held locks found lost, by renewal, extend or release of the handle:
    /// each is counted once.
    pub locks_lost: u64,
    /// Releases that handed the lock straight to a waiter.
    pub handoffs_given: u64,
    /// Locks this client's waiters were handed.
    pub handoffs_received: u64,
    /// Connections that could not be opened, broke, or timed out.
    pub connection_errors: u64,
    /// Connections opened again in place of one that broke.
    pub reconnects: u64,
    /// Lock handles held right now.
    pub held_now: u64,
    /// Acquisitions waiting right now for a lock held by someone else.
    pub waiters_now: u64,
    /// How long each acquisition took, whatever its outcome.
    pub wait: redislock_histogram,
    /// How long each lock handle was held: from acquire to release, free,
    /// or until it was found lost.
    pub held: redislock_histogram,
    /// Acquisitions that took a plain lock (each acquisition counted in
    /// `acquired_at_once`, `acquired_after_wait` or `acquired_handed_over`
    /// is also counted in one of the four by kind).
    pub acquired_locks: u64,
    /// Acquisitions that took permits of a counting semaphore.
    pub acquired_semaphores: u64,
    /// Acquisitions that took the read side of a read-write lock.
    pub acquired_reads: u64,
    /// Acquisitions that took the write side of a read-write lock.
    pub acquired_writes: u64,
    /// Semaphore permits held right now (a handle of k permits counts k).
    pub permits_held_now: u64,
}

/// The bytes of `redislock_stats` up to and including `waiters_now`, its
/// first version: the least a caller may ask for.
const STATS_MIN_SIZE: usize = std::mem::offset_of!(redislock_stats, waiters_now) + 8;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn c_histogram(h: &Histogram) -> redislock_histogram {
    redislock_histogram {
        count: h.count,
        sum_us: micros(h.sum),
        max_us: micros(h.max),
        p50_us: micros(h.p50()),
        p90_us: micros(h.p90()),
        p99_us: micros(h.p99()),
        buckets: h.buckets,
    }
}

fn c_stats(s: &Stats) -> redislock_stats {
    redislock_stats {
        size: std::mem::size_of::<redislock_stats>() as u32,
        reserved: 0,
        acquired_at_once: s.acquired_at_once,
        acquired_after_wait: s.acquired_after_wait,
        acquired_handed_over: s.acquired_handed_over,
        acquire_timed_out: s.acquire_timed_out,
        acquire_errors: s.acquire_errors,
        releases_ok: s.releases_ok,
        releases_not_owner: s.releases_not_owner,
        extends_ok: s.extends_ok,
        extends_lost: s.extends_lost,
        renewals_ok: s.renewals_ok,
        renewals_lost: s.renewals_lost,
        locks_lost: s.locks_lost,
        handoffs_given: s.handoffs_given,
        handoffs_received: s.handoffs_received,
        connection_errors: s.connection_errors,
        reconnects: s.reconnects,
        held_now: s.held_now,
        waiters_now: s.waiters_now,
        wait: c_histogram(&s.wait),
        held: c_histogram(&s.held),
        acquired_locks: s.acquired_locks,
        acquired_semaphores: s.acquired_semaphores,
        acquired_reads: s.acquired_reads,
        acquired_writes: s.acquired_writes,
        permits_held_now: s.permits_held_now,
    }
}

/// Read the client's statistics.
///
/// `client`: borrowed. `out`: borrowed; the caller sets `out->size` to
/// `sizeof(struct redislock_stats)` first. The library then writes at most
/// `out->size` bytes (whole fields only) and sets `out->size` to the number
/// of bytes it filled: the whole struct as this library knows it, or the
/// caller's shorter struct (see the growth rule at `redislock_stats`).
/// Reading costs a few dozen atomic loads and no I/O.
///
/// Returns `REDISLOCK_INVALID_ARGUMENT`, and writes nothing, when a pointer
/// is NULL or `out->size` is smaller than the first version of the struct
/// (up to and including `waiters_now`).
#[no_mangle]
pub extern "C" fn redislock_client_stats(
    client: *const redislock_client,
    out: *mut redislock_stats,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let client = non_null(client, "client")?;
            if out.is_null() {
                return Err(Error::InvalidArgument("out is NULL".into()));
            }
            // Only `size` is read through `out`: the caller's struct may be
            // shorter than this one.
            // SAFETY: non-NULL, and the caller promises a readable `size`.
            let size = unsafe { std::ptr::addr_of!((*out).size).read_unaligned() } as usize;
            if size < STATS_MIN_SIZE {
                return Err(Error::InvalidArgument(format!(
                    "out->size is {size}: set it to sizeof(struct redislock_stats) before the call \
                     (at least {STATS_MIN_SIZE} bytes)"
                )));
            }
            let mut stats = c_stats(&client.client.stats());
            // Every field after the first two is 8 bytes long, as they are.
            let filled = size.min(std::mem::size_of::<redislock_stats>()) / 8 * 8;
            stats.size = filled as u32;
            // SAFETY: the caller promises `size` writable bytes at `out`,
            // and `filled` is at most that and at most our struct's size.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (&raw const stats).cast::<u8>(),
                    out.cast::<u8>(),
                    filled,
                )
            };
            Ok(())
        })())
    })
}

/// The upper bound, in microseconds, of bucket `i` of a
/// `redislock_histogram` (50 for bucket 0 up to 3,600,000,000, one hour, for bucket
/// `REDISLOCK_STATS_BUCKETS - 2`), and `UINT64_MAX` for the last bucket,
/// which has none, and beyond.
#[no_mangle]
pub extern "C" fn redislock_stats_bucket_bound_us(i: usize) -> u64 {
    guard(u64::MAX, || {
        redislock::BUCKET_BOUNDS
            .get(i)
            .map_or(u64::MAX, |&bound| micros(bound))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stats_struct_keeps_its_first_layout() {
        // The first version's fields: appending is fine, moving is not.
        assert_eq!(STATS_MIN_SIZE, 8 + 18 * 8);
        assert_eq!(std::mem::offset_of!(redislock_stats, wait), STATS_MIN_SIZE);
        assert_eq!(std::mem::size_of::<redislock_histogram>(), 8 * (6 + 23));
        assert_eq!(redislock_stats_bucket_bound_us(0), 50);
        assert_eq!(redislock_stats_bucket_bound_us(21), 3_600_000_000);
        assert_eq!(redislock_stats_bucket_bound_us(22), u64::MAX);
        assert_eq!(redislock_stats_bucket_bound_us(usize::MAX), u64::MAX);
    }
}
