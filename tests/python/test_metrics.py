"""redislock.metrics: a Prometheus scrape of running clients parses and
equals client.stats(), under the names every language exports."""
import subprocess
import sys
import threading
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from helpers import wait_until
from redislock import Client
from redislock.metrics import RedislockCollector

SAMPLE_NAMES = {
    "redislock_acquisitions_total", "redislock_releases_total", "redislock_extends_total",
    "redislock_renewals_total", "redislock_locks_lost_total", "redislock_handoffs_total",
    "redislock_connection_errors_total", "redislock_reconnects_total",
    "redislock_acquisitions_by_kind_total",
    "redislock_locks_held", "redislock_waiters", "redislock_permits_held",
    "redislock_acquire_wait_seconds_bucket", "redislock_acquire_wait_seconds_sum",
    "redislock_acquire_wait_seconds_count",
    "redislock_held_seconds_bucket", "redislock_held_seconds_sum",
    "redislock_held_seconds_count",
}
LABELLED = {
    "redislock_acquisitions_total": ("outcome", {
        "at_once": "acquired_at_once", "after_wait": "acquired_after_wait",
        "handed_over": "acquired_handed_over", "timed_out": "acquire_timed_out",
        "error": "acquire_errors"}),
    "redislock_releases_total": ("outcome", {"ok": "releases_ok",
                                             "not_owner": "releases_not_owner"}),
    "redislock_extends_total": ("outcome", {"ok": "extends_ok", "lost": "extends_lost"}),
    "redislock_renewals_total": ("outcome", {"ok": "renewals_ok", "lost": "renewals_lost"}),
    "redislock_handoffs_total": ("direction", {"given": "handoffs_given",
                                               "received": "handoffs_received"}),
    "redislock_acquisitions_by_kind_total": ("kind", {
        "lock": "acquired_locks", "semaphore": "acquired_semaphores",
        "read": "acquired_reads", "write": "acquired_writes"}),
}
PLAIN = {
    "redislock_locks_lost_total": "locks_lost",
    "redislock_connection_errors_total": "connection_errors",
    "redislock_reconnects_total": "reconnects",
    "redislock_locks_held": "held_now",
    "redislock_waiters": "waiters_now",
    "redislock_permits_held": "permits_held_now",
}
HISTOGRAMS = {"redislock_acquire_wait_seconds": "wait", "redislock_held_seconds": "held"}


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def key_of(name, labels):
    """A sample's name and labels, its bound (le) as a float to compare."""
    return name, tuple(sorted((k, float(v) if k == "le" else v) for k, v in labels.items()))


def expected_samples(stats, labels):
    """(name, sorted label items) -> value, as the scrape should show them."""
    out = {}

    def put(name, extra, value):
        out[key_of(name, {**labels, **extra})] = float(value)

    for name, (label, keys) in LABELLED.items():
        for value, key in keys.items():
            put(name, {label: value}, stats[key])
    for name, key in PLAIN.items():
        put(name, {}, stats[key])
    for name, key in HISTOGRAMS.items():
        h = stats[key]
        running = 0
        for bound, n in zip(h["bounds"], h["buckets"]):
            running += n
            put(name + "_bucket", {"le": bound}, running)
        put(name + "_bucket", {"le": "+Inf"}, h["count"])
        put(name + "_count", {}, h["count"])
        put(name + "_sum", {}, h["sum"])
    return out


def test_a_scrape_of_running_clients_equals_their_stats(server, raw):
    main, jobs = Client(server.url), Client(server.url)
    # Some history: acquisitions at once, a timeout, a hand-off, a loss.
    for _ in range(3):
        with main.lock("once", ttl=5.0):
            pass
    raw.set("taken", "someone")
    assert not main.lock("taken", ttl=5.0).acquire(timeout=0.05)
    lost = jobs.lock("lost", ttl=5.0)
    assert lost.acquire(blocking=False)
    raw.set("lost", "thief")
    with pytest.raises(Exception):
        lost.extend(5.0)
    # Running: 2 permits of a semaphore and a write lock held, one lock
    # held and one thread waiting for it.
    sem = main.semaphore("pool", limit=3, permits=2, ttl=30.0)
    assert sem.acquire(blocking=False)
    writer = main.write_lock("pool", ttl=30.0)
    assert writer.acquire(blocking=False)
    holder = main.lock("busy", ttl=30.0)
    assert holder.acquire(blocking=False)
    waiter = main.lock("busy", ttl=30.0, timeout=30.0)
    t = threading.Thread(target=waiter.acquire)
    t.start()
    wait_until(lambda: main.stats()["waiters_now"] == 1, what="the thread to wait")

    collector = RedislockCollector(main, labels={"client": "main"})
    collector.add(jobs, labels={"client": "jobs"})
    registry = CollectorRegistry()
    registry.register(collector)
    httpd, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        text = scrape(httpd.server_port)
        stats = {"main": main.stats(), "jobs": jobs.stats()}
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    try:
        got = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                got[key_of(s.name, s.labels)] = s.value
        assert {name for name, _ in got} == SAMPLE_NAMES
        want = {}
        for name, s in stats.items():
            want.update(expected_samples(s, {"client": name}))
        assert got.keys() == want.keys()
        for key, value in want.items():
            assert got[key] == pytest.approx(value, abs=1e-9), key
        # The running state, as exposed.
        assert got[("redislock_locks_held", (("client", "main"),))] == 3
        assert got[("redislock_permits_held", (("client", "main"),))] == 2
        by_kind = "redislock_acquisitions_by_kind_total"
        assert got[(by_kind, (("client", "main"), ("kind", "lock")))] == 4
        assert got[(by_kind, (("client", "main"), ("kind", "semaphore")))] == 1
        assert got[(by_kind, (("client", "main"), ("kind", "write")))] == 1
        assert got[(by_kind, (("client", "main"), ("kind", "read")))] == 0
        assert got[("redislock_waiters", (("client", "main"),))] == 1
        # 4 locks, the semaphore and the write lock
        assert got[("redislock_acquisitions_total", (("client", "main"), ("outcome", "at_once")))] == 6
        assert got[("redislock_locks_lost_total", (("client", "jobs"),))] == 1
        # The exposition's own lines name the families exactly.
        assert "# TYPE redislock_acquisitions_total counter" in text
        assert "# TYPE redislock_locks_held gauge" in text
        assert "# TYPE redislock_acquire_wait_seconds histogram" in text
        assert 'redislock_held_seconds_bucket{client="main",le="+Inf"}' in text
    finally:
        holder.release()
        t.join(30)
        waiter.release()
        sem.release()
        writer.release()
        assert main.stats()["permits_held_now"] == 0


def test_one_collector_without_labels(client):
    with client.lock("x", ttl=5.0):
        pass
    registry = CollectorRegistry()
    registry.register(RedislockCollector(client))
    from prometheus_client import generate_latest
    text = generate_latest(registry).decode()
    assert 'redislock_acquisitions_total{outcome="at_once"} 1.0' in text
    assert "redislock_held_seconds_count 1.0" in text
    assert 'redislock_acquire_wait_seconds_bucket{le="+Inf"} 1.0' in text


def test_several_clients_need_one_collector_and_distinct_labels(server):
    a, b = Client(server.url), Client(server.url)
    registry = CollectorRegistry()
    registry.register(RedislockCollector(a, labels={"client": "a"}))
    with pytest.raises(ValueError, match="Duplicated"):
        registry.register(RedislockCollector(b, labels={"client": "b"}))
    collector = RedislockCollector(a, labels={"client": "a"})
    with pytest.raises(ValueError, match="same label names"):
        collector.add(b, labels={"pool": "b"})
    with pytest.raises(ValueError, match="already collected"):
        collector.add(b, labels={"client": "a"})
    with pytest.raises(ValueError, match="reserved"):
        RedislockCollector(a, labels={"outcome": "x"})
    with pytest.raises(TypeError):
        RedislockCollector(object())  # type: ignore[arg-type]


def test_redislock_needs_no_prometheus_client():
    code = (
        "import sys\n"
        "sys.modules['prometheus_client'] = None\n"
        "import redislock\n"
        "assert 'redislock.metrics' not in sys.modules\n"
        "try:\n"
        "    import redislock.metrics\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    raise SystemExit('imported without prometheus_client')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "pip install prometheus-client" in proc.stdout
