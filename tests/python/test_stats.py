"""client.stats(): a scripted run whose figures add up exactly."""
import threading
import time

import pytest

import redislock
from helpers import DEADLINE, wait_until
from redislock import Client, LockNotOwned, LockWrongType

COUNTERS = [
    "acquired_at_once", "acquired_after_wait", "acquired_handed_over", "acquire_timed_out",
    "acquire_errors", "releases_ok", "releases_not_owner", "extends_ok", "extends_lost",
    "renewals_ok", "renewals_lost", "locks_lost", "handoffs_given", "handoffs_received",
    "connection_errors", "reconnects", "held_now", "waiters_now",
    "acquired_locks", "acquired_semaphores", "acquired_reads", "acquired_writes",
    "permits_held_now",
]
HISTOGRAM_KEYS = {"count", "sum", "max", "p50", "p90", "p99", "buckets", "bounds"}


def check_histogram(h):
    assert set(h) == HISTOGRAM_KEYS
    assert isinstance(h["count"], int)
    for k in ("sum", "max", "p50", "p90", "p99"):
        assert isinstance(h[k], float) and h[k] >= 0.0
    assert len(h["buckets"]) == 23 and all(isinstance(n, int) for n in h["buckets"])
    assert sum(h["buckets"]) == h["count"]
    assert len(h["bounds"]) == 22 and h["bounds"] == sorted(h["bounds"])
    assert h["bounds"][0] == pytest.approx(50e-6) and h["bounds"][-1] == 3600.0
    assert h["p50"] <= h["p90"] <= h["p99"] <= h["max"]
    if h["count"]:
        assert h["max"] <= h["sum"] + 1e-9


def test_a_new_client_has_the_full_shape_and_zeros(client):
    s = client.stats()
    assert set(s) == set(COUNTERS) | {"wait", "held"}
    for k in COUNTERS:
        assert s[k] == 0 and isinstance(s[k], int)
    for h in (s["wait"], s["held"]):
        check_histogram(h)
        assert h["count"] == 0 and h["sum"] == 0.0 and h["max"] == 0.0
    assert redislock.Stats.__annotations__.keys() == s.keys()
    assert redislock.HistogramStats.__annotations__.keys() == s["wait"].keys()


def test_a_scripted_run_adds_up(server, raw):
    c = Client(server.url)
    other = Client(server.url)
    n_at_once, n_timeouts, n_handoffs = 3, 2, 2
    # How long each acquisition of `c` took, timed around the call: the
    # histogram's times are within these.
    took = []

    def timed(acquire, **kwargs):
        t = time.monotonic()
        try:
            return acquire(**kwargs)
        finally:
            took.append(time.monotonic() - t)

    # N acquisitions that find the lock free; the first one is extended.
    for i in range(n_at_once):
        lock = c.lock(f"once:{i}", ttl=10.0)
        assert timed(lock.acquire, blocking=False)
        if i == 0:
            lock.extend(20.0)
        lock.release()

    # M that do not get it: a try-once, and a wait that runs out.
    busy = other.lock("busy", ttl=30.0)
    assert busy.acquire(blocking=False)
    assert not timed(c.lock("busy", ttl=5.0).acquire, blocking=False)
    assert not timed(c.lock("busy", ttl=5.0).acquire, timeout=0.2)
    busy.release()

    # K hand-offs, from a holder to a waiting thread of the same client.
    for _ in range(n_handoffs):
        holder = c.lock("relay", ttl=10.0)
        assert timed(holder.acquire, blocking=False)
        waiter = c.lock("relay", ttl=10.0, timeout=30.0)
        got = []
        t = threading.Thread(target=lambda: got.append(timed(waiter.acquire)))
        t.start()
        wait_until(lambda: c.stats()["waiters_now"] == 1, what="the waiter to queue")
        holder.release()
        t.join(30)
        assert got == [True]
        assert c.stats()["waiters_now"] == 0
        waiter.release()  # the only acquisition of that Lock: released from here

    # One error: the key is not a lock.
    raw.lpush("a-list", "x")
    with pytest.raises(LockWrongType):
        timed(c.lock("a-list").acquire, blocking=False)

    # One lock lost: renewed in the background, its key stolen with SET.
    # Its TTL is long enough that the SET comes before the first renewal
    # (due in 1 s), which finds the lock stolen: no renewal succeeds.
    lost = threading.Event()
    stolen = c.lock("stolen", ttl=3.0, auto_renew=True, on_lost=lost.set)
    assert timed(stolen.acquire, blocking=False)
    assert c.stats()["held_now"] == 1
    raw.set("stolen", "thief")
    assert lost.wait(DEADLINE)
    assert c.stats()["held_now"] == 0  # a lost lock is no longer held
    # ... and one release that finds the lock no longer ours.
    with pytest.raises(LockNotOwned):
        stolen.release()
    assert raw.get("stolen") == b"thief"

    s = c.stats()
    expected = {
        "acquired_at_once": n_at_once + n_handoffs + 1,
        "acquired_after_wait": 0,
        "acquired_handed_over": n_handoffs,
        "acquire_timed_out": n_timeouts,
        "acquire_errors": 1,
        "releases_ok": n_at_once + 2 * n_handoffs,
        "releases_not_owner": 1,
        "extends_ok": 1,
        "extends_lost": 0,
        "renewals_ok": 0,
        "renewals_lost": 1,
        "locks_lost": 1,
        "handoffs_given": n_handoffs,
        "handoffs_received": n_handoffs,
        "connection_errors": 0,
        "reconnects": 0,
        "held_now": 0,
        "waiters_now": 0,
        # every successful acquisition, by kind: all of them locks here
        "acquired_locks": n_at_once + n_handoffs + 1 + n_handoffs,
        "acquired_semaphores": 0,
        "acquired_reads": 0,
        "acquired_writes": 0,
        "permits_held_now": 0,
    }
    assert {k: s[k] for k in COUNTERS} == expected
    check_histogram(s["wait"])
    check_histogram(s["held"])
    # Every acquisition's time, whatever its outcome; every lock's time held.
    assert s["wait"]["count"] == n_at_once + n_handoffs + 1 + n_handoffs + n_timeouts + 1
    assert s["held"]["count"] == n_at_once + 2 * n_handoffs + 1
    assert len(took) == s["wait"]["count"]
    # The longest is at least the wait that ran out; none is longer than
    # the call that made it (1 ms: the histogram keeps microseconds).
    assert 0.2 <= s["wait"]["max"] <= max(took) + 0.001, (s["wait"]["max"], took)
    assert s["wait"]["sum"] <= sum(took) + 0.001, (s["wait"]["sum"], took)
    assert s["wait"]["sum"] >= s["wait"]["max"]
    # The other client's figures are its own.
    o = other.stats()
    assert (o["acquired_at_once"], o["releases_ok"], o["handoffs_given"]) == (1, 1, 0)


def test_connection_errors_are_counted(dead_url):
    c = Client(dead_url, connect_timeout=0.5)
    with pytest.raises(redislock.LockConnectionError):
        c.lock("x").acquire(blocking=False)
    s = c.stats()
    assert s["connection_errors"] >= 1
    assert s["acquire_errors"] == 1
    assert s["wait"]["count"] == 1


def test_stats_are_per_client_and_shared_by_its_locks(server):
    a, b = Client(server.url), Client(server.url)
    with a.lock("k", ttl=5.0):
        assert a.stats()["held_now"] == 1
        assert b.stats()["held_now"] == 0
    assert a.stats()["releases_ok"] == 1
