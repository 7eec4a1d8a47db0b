//! Statistics of one client: what its acquisitions, releases, extends and
//! renewals came to, how long it waited and held, and what it holds and
//! waits for right now.
//!
//! Every figure is a relaxed atomic, updated where the event happens;
//! nothing on the hot path takes a lock or allocates. Times go into
//! histograms with fixed buckets ([`BUCKET_BOUNDS`]), from which the
//! quantiles are estimated as Prometheus does. Nothing is kept per lock
//! name: a fleet with a million lock names costs the same few hundred bytes.
//!
//! Built with `--cfg redislock_no_stats` (only `make bench-stats` does),
//! nothing is recorded: the benchmark's baseline for what recording costs.
//!
//! A forked child starts from zero: its first update (or read) after the
//! fork clears what it inherited from the parent, whose locks and waiters
//! are not its own.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The upper bounds of the histograms' buckets, in microseconds; a last
/// bucket takes everything longer. Values are counted in the first bucket
/// whose bound they do not exceed.
const BOUNDS_US: [u64; BUCKETS - 1] = [
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    300_000_000,
    900_000_000,
    3_600_000_000,
];

/// How many buckets a [`Histogram`] has (the last one unbounded).
pub const BUCKETS: usize = 23;

/// The upper bound of each bucket but the last: 50 µs to 1 h.
pub const BUCKET_BOUNDS: [Duration; BUCKETS - 1] = {
    let mut out = [Duration::ZERO; BUCKETS - 1];
    let mut i = 0;
    while i < BUCKETS - 1 {
        out[i] = Duration::from_micros(BOUNDS_US[i]);
        i += 1;
    }
    out
};

/// A distribution of durations in fixed buckets ([`BUCKET_BOUNDS`]), as
/// [`Stats::wait`] and [`Stats::held`] give it: what a Prometheus histogram
/// exports, and the quantiles estimated from it.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use redislock::{Histogram, BUCKET_BOUNDS};
///
/// // Four durations between 1 ms and 2 ms: all in the bucket up to 2.5 ms.
/// let i = BUCKET_BOUNDS.iter().position(|&b| b == Duration::from_micros(2_500)).unwrap();
/// let mut h = Histogram::default();
/// h.count = 4;
/// h.sum = Duration::from_millis(6);
/// h.max = Duration::from_millis(2);
/// h.buckets[i] = 4;
/// assert_eq!(h.p50(), Duration::from_micros(1_750)); // halfway through the bucket
/// assert_eq!(h.p99(), Duration::from_millis(2)); // never above the longest
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Histogram {
    /// How many durations were recorded.
    pub count: u64,
    /// Their sum (the mean is `sum / count`).
    pub sum: Duration,
    /// The longest one recorded (zero when none was).
    pub max: Duration,
    /// How many fell in each bucket (not cumulative): bucket `i < BUCKETS - 1`
    /// holds those above `BUCKET_BOUNDS[i - 1]` and up to `BUCKET_BOUNDS[i]`;
    /// the last holds those above one hour.
    pub buckets: [u64; BUCKETS],
}

impl Histogram {
    /// The duration below which a fraction `q` (0 to 1) of the recorded
    /// ones fell, estimated within its bucket by linear interpolation (as
    /// Prometheus's `histogram_quantile`), and never above [`Histogram::max`].
    /// Zero when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
        let rank = q * self.count as f64;
        let mut below = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            if n == 0 || ((below + n) as f64) < rank {
                below += n;
                continue;
            }
            let Some(&upper) = BOUNDS_US.get(i) else {
                return self.max;
            };
            let lower = if i == 0 { 0 } else { BOUNDS_US[i - 1] };
            let within = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
            let us = lower as f64 + (upper - lower) as f64 * within;
            return Duration::from_micros(us as u64).min(self.max);
        }
        self.max
    }

    /// The median.
    pub fn p50(&self) -> Duration {
        self.quantile(0.5)
    }

    /// The 90th percentile.
    pub fn p90(&self) -> Duration {
        self.quantile(0.9)
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }
}

/// What one client did since it was made (or since a `fork()`, in the
/// child), from [`Client::stats`](crate::Client::stats). Every clone of a
/// client shares these figures.
///
/// The fields are read one after the other while other threads may be
/// updating them, so two fields may be a few events apart; each one is
/// exact on its own.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use redislock::{Client, Wait};
///
/// # let redis = redislock_tests::Server::start();
/// # let client = Client::open(redis.url())?;
/// let lock = client.acquire("stats-demo", Duration::from_secs(10), Wait::TryOnce)?;
/// assert_eq!(client.stats().held_now, 1);
/// lock.release()?;
///
/// let stats = client.stats(); // no I/O: a few dozen atomic loads
/// assert_eq!(stats.acquired_at_once, 1);
/// assert_eq!(stats.releases_ok, 1);
/// assert_eq!(stats.held_now, 0);
/// assert_eq!(stats.wait.count, 1); // one acquisition timed
/// println!("p99 of the waits: {:?}", stats.wait.p99());
/// for (name, value) in stats.counters() {
///     println!("redislock_{name} {value}"); // e.g. for an exporter
/// }
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Acquisitions that found the lock free on their first try.
    pub acquired_at_once: u64,
    /// Acquisitions that found it held, waited, and then took it by a
    /// retry (after an expiry, or a release by a client without waiters'
    /// support).
    pub acquired_after_wait: u64,
    /// Acquisitions that waited and were handed the lock by its releaser.
    pub acquired_handed_over: u64,
    /// Acquisitions that did not get the lock: their wait ran out (or was
    /// interrupted), or a try-once found it held ([`Error::NotAcquired`](crate::Error::NotAcquired)).
    pub acquire_timed_out: u64,
    /// Acquisitions that failed with any other error (connection, quorum,
    /// server, wrong type). Invalid arguments are refused before and are
    /// not counted.
    pub acquire_errors: u64,
    /// Releases (by handle or by token) that released or handed over.
    pub releases_ok: u64,
    /// Releases that found the lock no longer theirs ([`Error::NotOwner`](crate::Error::NotOwner),
    /// or `false` by token).
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
    /// Held locks found lost, however it was found (renewal, extend or
    /// release of the handle): each is counted once.
    pub locks_lost: u64,
    /// Releases that handed the lock straight to a waiter.
    pub handoffs_given: u64,
    /// Locks this client's waiters were handed (also those that arrived as
    /// a waiter gave up, and were kept or released).
    pub handoffs_received: u64,
    /// Connections that could not be opened, broke, or timed out.
    pub connection_errors: u64,
    /// Connections opened again in place of one that broke (a pooled
    /// connection found dead, a waiters' subscriber connection lost).
    pub reconnects: u64,
    /// Lock handles held right now.
    pub held_now: u64,
    /// Acquisitions waiting right now for a lock held by someone else.
    pub waiters_now: u64,
    /// Acquisitions that took a plain lock (of the three kinds of
    /// `acquired_*` above, and of the kinds below, each counts once).
    pub acquired_locks: u64,
    /// Acquisitions that took permits of a counting semaphore.
    pub acquired_semaphores: u64,
    /// Acquisitions that took the read (shared) side of a read-write lock.
    pub acquired_reads: u64,
    /// Acquisitions that took the write (exclusive) side of a read-write
    /// lock.
    pub acquired_writes: u64,
    /// Semaphore permits held right now by this client's handles (a handle
    /// of k permits counts k; `held_now` counts it once).
    pub permits_held_now: u64,
    /// How long each acquisition took, whatever its outcome.
    pub wait: Histogram,
    /// How long each lock handle was held: from acquire to release, drop,
    /// or until it was found lost.
    pub held: Histogram,
}

impl Stats {
    /// Every counter and gauge with its name (the field's), in the fields'
    /// order: what bindings and exporters iterate, so that a field added
    /// here reaches them all.
    pub fn counters(&self) -> [(&'static str, u64); 23] {
        // Destructured in full: a new field fails to compile here until it
        // is listed.
        let Stats {
            acquired_at_once,
            acquired_after_wait,
            acquired_handed_over,
            acquire_timed_out,
            acquire_errors,
            releases_ok,
            releases_not_owner,
            extends_ok,
            extends_lost,
            renewals_ok,
            renewals_lost,
            locks_lost,
            handoffs_given,
            handoffs_received,
            connection_errors,
            reconnects,
            held_now,
            waiters_now,
            acquired_locks,
            acquired_semaphores,
            acquired_reads,
            acquired_writes,
            permits_held_now,
            wait: _,
            held: _,
        } = *self;
        [
            ("acquired_at_once", acquired_at_once),
            ("acquired_after_wait", acquired_after_wait),
            ("acquired_handed_over", acquired_handed_over),
            ("acquire_timed_out", acquire_timed_out),
            ("acquire_errors", acquire_errors),
            ("releases_ok", releases_ok),
            ("releases_not_owner", releases_not_owner),
            ("extends_ok", extends_ok),
            ("extends_lost", extends_lost),
            ("renewals_ok", renewals_ok),
            ("renewals_lost", renewals_lost),
            ("locks_lost", locks_lost),
            ("handoffs_given", handoffs_given),
            ("handoffs_received", handoffs_received),
            ("connection_errors", connection_errors),
            ("reconnects", reconnects),
            ("held_now", held_now),
            ("waiters_now", waiters_now),
            ("acquired_locks", acquired_locks),
            ("acquired_semaphores", acquired_semaphores),
            ("acquired_reads", acquired_reads),
            ("acquired_writes", acquired_writes),
            ("permits_held_now", permits_held_now),
        ]
    }
}

/// A histogram being recorded.
#[derive(Default)]
struct Cells {
    sum_us: AtomicU64,
    max_us: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl Cells {
    fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_US.partition_point(|&b| b < us);
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
        self.max_us.fetch_max(us, Relaxed);
    }

    fn read(&self) -> Histogram {
        let mut h = Histogram {
            count: 0,
            sum: Duration::from_micros(self.sum_us.load(Relaxed)),
            max: Duration::from_micros(self.max_us.load(Relaxed)),
            buckets: [0; BUCKETS],
        };
        for (out, cell) in h.buckets.iter_mut().zip(&self.buckets) {
            *out = cell.load(Relaxed);
        }
        // The count is the buckets' sum, so that quantiles add up.
        h.count = h.buckets.iter().sum();
        h
    }

    fn clear(&self) {
        self.sum_us.store(0, Relaxed);
        self.max_us.store(0, Relaxed);
        for b in &self.buckets {
            b.store(0, Relaxed);
        }
    }
}

/// One counter of [`Counters`].
#[derive(Clone, Copy)]
pub(crate) enum Event {
    AcquiredAtOnce,
    AcquiredAfterWait,
    AcquiredHandedOver,
    AcquireTimedOut,
    AcquireError,
    ReleaseOk,
    ReleaseNotOwner,
    ExtendOk,
    ExtendLost,
    RenewalOk,
    RenewalLost,
    LockLost,
    HandoffGiven,
    HandoffReceived,
    ConnectionError,
    Reconnect,
    AcquiredLock,
    AcquiredSemaphore,
    AcquiredRead,
    AcquiredWrite,
}

const EVENTS: usize = Event::AcquiredWrite as usize + 1;

/// A gauge of [`Counters`].
#[derive(Clone, Copy)]
pub(crate) enum Gauge {
    Held,
    Waiters,
    Permits,
}

/// The figures of one client, as they are recorded.
pub(crate) struct Counters {
    /// The process they belong to (see the module comment).
    pid: AtomicU32,
    events: [AtomicU64; EVENTS],
    /// Signed: a gauge may go below zero for a moment in a forked child.
    gauges: [AtomicI64; 3],
    wait: Cells,
    held: Cells,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            pid: AtomicU32::new(crate::sync::pid()),
            events: Default::default(),
            gauges: Default::default(),
            wait: Cells::default(),
            held: Cells::default(),
        }
    }
}

impl Counters {
    /// Clear the parent's figures in a forked child, once.
    #[inline]
    fn own(&self) -> &Self {
        let pid = crate::sync::pid();
        let was = self.pid.load(Relaxed);
        if was != pid
            && self
                .pid
                .compare_exchange(was, pid, Relaxed, Relaxed)
                .is_ok()
        {
            for e in &self.events {
                e.store(0, Relaxed);
            }
            for g in &self.gauges {
                g.store(0, Relaxed);
            }
            self.wait.clear();
            self.held.clear();
        }
        self
    }

    pub(crate) fn count(&self, e: Event) {
        if cfg!(redislock_no_stats) {
            return;
        }
        self.own().events[e as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn gauge(&self, g: Gauge, delta: i64) {
        if cfg!(redislock_no_stats) {
            return;
        }
        self.own().gauges[g as usize].fetch_add(delta, Relaxed);
    }

    pub(crate) fn waited(&self, d: Duration) {
        if cfg!(redislock_no_stats) {
            return;
        }
        self.own().wait.record(d);
    }

    pub(crate) fn held(&self, d: Duration) {
        if cfg!(redislock_no_stats) {
            return;
        }
        self.own().held.record(d);
    }

    /// A gauge up by one until the guard is dropped.
    pub(crate) fn up(&self, g: Gauge) -> GaugeGuard<'_> {
        self.gauge(g, 1);
        GaugeGuard(self, g)
    }

    pub(crate) fn read(&self) -> Stats {
        let c = self.own();
        let e = |e: Event| c.events[e as usize].load(Relaxed);
        let g = |g: Gauge| u64::try_from(c.gauges[g as usize].load(Relaxed)).unwrap_or(0);
        Stats {
            acquired_at_once: e(Event::AcquiredAtOnce),
            acquired_after_wait: e(Event::AcquiredAfterWait),
            acquired_handed_over: e(Event::AcquiredHandedOver),
            acquire_timed_out: e(Event::AcquireTimedOut),
            acquire_errors: e(Event::AcquireError),
            releases_ok: e(Event::ReleaseOk),
            releases_not_owner: e(Event::ReleaseNotOwner),
            extends_ok: e(Event::ExtendOk),
            extends_lost: e(Event::ExtendLost),
            renewals_ok: e(Event::RenewalOk),
            renewals_lost: e(Event::RenewalLost),
            locks_lost: e(Event::LockLost),
            handoffs_given: e(Event::HandoffGiven),
            handoffs_received: e(Event::HandoffReceived),
            connection_errors: e(Event::ConnectionError),
            reconnects: e(Event::Reconnect),
            held_now: g(Gauge::Held),
            waiters_now: g(Gauge::Waiters),
            acquired_locks: e(Event::AcquiredLock),
            acquired_semaphores: e(Event::AcquiredSemaphore),
            acquired_reads: e(Event::AcquiredRead),
            acquired_writes: e(Event::AcquiredWrite),
            permits_held_now: g(Gauge::Permits),
            wait: c.wait.read(),
            held: c.held.read(),
        }
    }
}

/// See [`Counters::up`].
pub(crate) struct GaugeGuard<'a>(&'a Counters, Gauge);

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.gauge(self.1, -1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn values_land_in_the_first_bucket_they_fit() {
        let c = Counters::default();
        c.waited(Duration::from_micros(50));
        c.waited(Duration::from_micros(51));
        c.waited(ms(1));
        c.waited(Duration::from_secs(7200));
        let h = c.read().wait;
        assert_eq!(h.count, 4);
        assert_eq!(h.buckets[0], 1);
        assert_eq!(h.buckets[1], 1);
        assert_eq!(h.buckets[4], 1);
        assert_eq!(h.buckets[BUCKETS - 1], 1);
        assert_eq!(h.max, Duration::from_secs(7200));
        assert_eq!(h.sum, Duration::from_micros(50 + 51 + 1000 + 7_200_000_000));
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket_and_stop_at_the_max() {
        let c = Counters::default();
        // 100 values in (10 ms, 25 ms]: the median is half way through it,
        // the 99th percentile would be near its top but stops at the max.
        for _ in 0..100 {
            c.waited(ms(20));
        }
        let h = c.read().wait;
        assert_eq!(h.p50(), Duration::from_micros(17_500));
        assert_eq!(h.p99(), ms(20));
        assert_eq!(h.quantile(1.0), ms(20));
        assert_eq!(Histogram::default().p99(), Duration::ZERO);
        // Beyond the last bound: the max.
        c.held(Duration::from_secs(4000));
        assert_eq!(c.read().held.p50(), Duration::from_secs(4000));
    }

    #[test]
    fn quantiles_follow_the_distribution() {
        let c = Counters::default();
        for i in 1..=1000u64 {
            c.waited(Duration::from_micros(i * 100)); // 0.1 ms .. 100 ms
        }
        let h = c.read().wait;
        // The buckets are coarse: each estimate lies within its bucket.
        let (p50, p90, p99) = (h.p50(), h.p90(), h.p99());
        assert!(p50 > ms(25) && p50 <= ms(50), "{p50:?}");
        assert!(p90 > ms(50) && p90 <= ms(100), "{p90:?}");
        assert!(p99 > p90 && p99 <= ms(100), "{p99:?}");
    }

    #[test]
    fn gauges_count_what_is_live() {
        let c = Counters::default();
        let a = c.up(Gauge::Waiters);
        let b = c.up(Gauge::Waiters);
        c.gauge(Gauge::Held, 1);
        assert_eq!(c.read().waiters_now, 2);
        drop(a);
        drop(b);
        let s = c.read();
        assert_eq!((s.waiters_now, s.held_now), (0, 1));
    }

    #[test]
    fn counters_name_every_figure_once() {
        let c = Counters::default();
        c.count(Event::Reconnect);
        c.gauge(Gauge::Waiters, 2);
        let named = c.read().counters();
        let names: std::collections::HashSet<_> = named.iter().map(|(n, _)| n).collect();
        assert_eq!(names.len(), named.len());
        assert!(named.contains(&("reconnects", 1)));
        assert!(named.contains(&("waiters_now", 2)));
        assert_eq!(named.iter().map(|(_, v)| v).sum::<u64>(), 3);
    }

    #[test]
    fn the_bounds_grow() {
        assert!(BOUNDS_US.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(BUCKET_BOUNDS[BUCKETS - 2], Duration::from_secs(3600));
    }
}
