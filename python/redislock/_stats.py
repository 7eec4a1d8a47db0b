"""The shape of ``Client.stats()``: plain dicts, typed for checkers.

Defined here rather than only in the stubs so that ``redislock.Stats`` and
``redislock.HistogramStats`` exist at run time too (for annotations, and
for ``typing.get_type_hints``).
"""

from typing import List, TypedDict


class HistogramStats(TypedDict):
    """A distribution of durations in fixed buckets; times in seconds."""

    count: int
    """How many durations were recorded."""
    sum: float
    """Their sum."""
    max: float
    """The longest."""
    p50: float
    """The median, estimated within its bucket (as Prometheus's histogram_quantile), at most ``max``."""
    p90: float
    """The 90th percentile, estimated likewise."""
    p99: float
    """The 99th percentile, estimated likewise."""
    buckets: List[int]
    """How many fell in each of the 23 buckets (not cumulative): bucket ``i`` holds those above
    ``bounds[i - 1]`` and up to ``bounds[i]``; the last one those above ``bounds[-1]`` (one hour)."""
    bounds: List[float]
    """The 22 upper bounds, 50 µs to one hour."""


class Stats(TypedDict):
    """What one client did since it was made (or since a fork, in the child).

    Each figure is exact on its own; read while other threads work, two
    figures may be a few events apart.
    """

    acquired_at_once: int
    """Acquisitions that found the lock free on their first try."""
    acquired_after_wait: int
    """Acquisitions that waited and took the lock by a retry (after an expiry, or a release
    by a client that does not hand over)."""
    acquired_handed_over: int
    """Acquisitions that waited and were handed the lock by its releaser."""
    acquire_timed_out: int
    """Acquisitions whose wait ran out (or was interrupted), and tries-once that found the lock held."""
    acquire_errors: int
    """Acquisitions that failed with any other error (connection, quorum, server, wrong type)."""
    releases_ok: int
    """Releases (by lock or by token) that released or handed over."""
    releases_not_owner: int
    """Releases that found the lock no longer theirs."""
    extends_ok: int
    """Extends by the caller that succeeded."""
    extends_lost: int
    """Extends by the caller that found the lock gone."""
    renewals_ok: int
    """Background renewals that succeeded."""
    renewals_lost: int
    """Locks that background renewal found gone (or could not reach the server in time)."""
    locks_lost: int
    """Held locks found lost, however it was found; each counted once."""
    handoffs_given: int
    """Releases that handed the lock straight to a waiter."""
    handoffs_received: int
    """Locks this client's waiters were handed."""
    connection_errors: int
    """Connections that could not be opened, broke, or timed out."""
    reconnects: int
    """Connections opened again in place of one that broke."""
    held_now: int
    """Locks held right now."""
    waiters_now: int
    """Acquisitions waiting right now for a lock held by someone else."""
    acquired_locks: int
    """Acquisitions that took a plain lock (each success counts once by kind)."""
    acquired_semaphores: int
    """Acquisitions that took permits of a counting semaphore."""
    acquired_reads: int
    """Acquisitions that took the read side of a read-write lock."""
    acquired_writes: int
    """Acquisitions that took the write side of a read-write lock."""
    permits_held_now: int
    """Semaphore permits held right now (a handle of k permits counts k)."""
    wait: HistogramStats
    """How long each acquisition took, whatever its outcome."""
    held: HistogramStats
    """How long each lock was held: from acquire to release, or until it was found lost."""
