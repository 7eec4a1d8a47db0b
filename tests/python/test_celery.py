"""redislock.celery.Singleton with real Celery worker processes.

One throwaway redis-server (broker, result backend and locks) and two
`celery worker --pool=prefork --concurrency=2` processes for the module;
both are stopped (their process groups killed) at the end.
"""
import importlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import redis

import redislock
from helpers import wait_until
from redis_server import RedisServer

HERE = os.path.dirname(os.path.abspath(__file__))
N = 20


@pytest.fixture(scope="module")
def celery_env(tmp_path_factory):
    server = RedisServer()
    old = os.environ.get("REDISLOCK_CELERY_TEST_URL")
    os.environ["REDISLOCK_CELERY_TEST_URL"] = server.url
    sys.modules.pop("celery_app", None)
    celery_app = importlib.import_module("celery_app")
    # pytest's own temporary directory: kept for the last few runs (the
    # workers' logs of a failure), removed after.
    logdir = str(tmp_path_factory.mktemp("celery-logs"))
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    workers = []
    try:
        for n in (1, 2):
            log = open(os.path.join(logdir, f"w{n}.log"), "wb")
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "celery_app", "worker",
                 "--pool=prefork", "--concurrency=2", "-n", f"w{n}@%h", "--loglevel=INFO",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"],
                cwd=HERE, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))
            log.close()
        deadline = time.monotonic() + 60  # a busy machine starts six processes slowly
        while True:
            for w in workers:
                assert w.poll() is None, f"a celery worker exited early; logs in {logdir}"
            replies = celery_app.app.control.ping(timeout=0.5)
            if len(replies) >= 2:
                break
            assert time.monotonic() < deadline, f"workers did not answer; logs in {logdir}"
        yield celery_app, redis.Redis(port=server.port), logdir
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)  # warm shutdown
        for w in workers:
            try:
                w.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(w.pid, signal.SIGKILL)  # the worker's own group: its pool children
            except ProcessLookupError:
                pass
            w.wait()
        if old is None:
            os.environ.pop("REDISLOCK_CELERY_TEST_URL", None)
        else:
            os.environ["REDISLOCK_CELERY_TEST_URL"] = old
        server.stop()


def runs(raw, tag):
    return sorted((json.loads(x) for x in raw.lrange(f"{tag}:runs", 0, -1)), key=lambda r: r["start"])


def test_wait_runs_every_task_one_at_a_time(celery_env):
    app, raw, _ = celery_env
    t0 = time.monotonic()
    results = [app.waiting.delay(i) for i in range(N)]
    assert sorted(r.get(timeout=60) for r in results) == list(range(N))  # none lost
    took = time.monotonic() - t0
    done = runs(raw, "wait")
    assert len(done) == N
    assert int(raw.get("wait:overlaps") or 0) == 0
    for a, b in zip(done, done[1:]):
        assert a["end"] <= b["start"], (a, b)  # no overlapping intervals
        assert a["fence"] < b["fence"]  # each run a newer acquisition
    assert took >= N * 0.1
    assert not raw.exists(app.waiting.singleton_key((0,), {}))
    pids = {r["pid"] for r in done}
    print(f"\nwait: {N} tasks ran serially in {took:.2f} s on {len(pids)} worker processes")


def test_limit_runs_at_most_that_many_copies_at_once(celery_env):
    app, raw, _ = celery_env
    results = [app.limited.delay(i) for i in range(8)]
    assert sorted(r.get(timeout=60) for r in results) == list(range(8))
    seen = [int(v) for v in raw.lrange("limited:seen", 0, -1)]
    # Two at once (4 worker slots, 0.5 s each), never three.
    assert len(seen) == 8 and max(seen) == 2, seen
    key = app.limited.singleton_key((0,), {})
    assert not raw.exists("{%s}:sem" % key, "{%s}:sem:queue" % key)
    print(f"\nlimit=2: at most {max(seen)} of 8 copies ran at once on 4 worker slots")


def test_skip_drops_duplicates(celery_env):
    app, raw, _ = celery_env
    results = [app.skipping.delay(i) for i in range(N)]
    values = [r.get(timeout=60) for r in results]
    ran = [v for v in values if v is not None]
    skipped = values.count(None)
    done = runs(raw, "skip")
    assert len(done) == len(ran) >= 1
    # The first run holds the lock until a copy was skipped: at least one is.
    assert skipped == N - len(ran) and skipped >= 1, f"{len(ran)} ran, {skipped} skipped"
    assert int(raw.get("skip:skipped") or 0) == skipped
    assert int(raw.get("skip:overlaps") or 0) == 0
    for a, b in zip(done, done[1:]):
        assert a["end"] <= b["start"], (a, b)
    key = app.skipping.singleton_key((0,), {})
    assert key == 't:celery_app.skipping:group="g"'
    assert not raw.exists(key)  # released afterwards
    print(f"\nskip: {len(ran)} ran, {skipped} skipped of {N}")


def test_stolen_lock_is_reported_to_the_task(celery_env):
    app, raw, _ = celery_env
    result = app.stealable.delay()
    wait_until(lambda: raw.get("steal:started"), what="the task to start")
    key = app.stealable.singleton_key()
    assert raw.get(key) == raw.get("steal:token")
    # Someone deletes the lock (a plain DEL, as celery-once would) and a
    # second owner takes it.
    stolen_at = time.time()
    raw.delete(key)
    thief = redislock.Client(f"redis://127.0.0.1:{raw.connection_pool.connection_kwargs['port']}/0")
    lock = thief.lock(key, ttl=20.0, timeout=0)
    assert lock.acquire()
    # Told before its 30 s run ended ("finished")...
    assert result.get(timeout=60) == "lost: LockLost"
    # ... by the renewal (every 1 s of its 3 s TTL): within a TTL.
    lost_after = float(raw.get("steal:lost_at")) - stolen_at
    assert lost_after < 3.0, f"told {lost_after:.3f} s after the theft"
    # The task's owner-checked release left the new owner's lock alone.
    assert raw.get(key) == lock.token
    lock.release()
    assert not raw.exists(key)


def test_raise_and_key_function_in_process(celery_env):
    app, raw, _ = celery_env
    url = f"redis://127.0.0.1:{raw.connection_pool.connection_kwargs['port']}/0"
    client = redislock.Client(url)
    key = app.raising.singleton_key((7,), {"verbose": True})
    assert key == "t:celery_app.raising:account=7"
    assert app.keyed.singleton_key((7,), {}) == "t:celery_app.keyed:acct-7"
    held = client.lock(key, ttl=10.0)
    assert held.acquire()
    r = app.raising.apply((7,))
    assert isinstance(r.result, redislock.celery.AlreadyRunning)
    assert isinstance(r.result, redislock.LockTimeout)
    assert app.raising.apply((8,)).get() == 8  # another key is free
    other = client.lock(app.keyed.singleton_key((7,), {}), ttl=10.0)
    assert other.acquire()
    assert app.keyed.apply((7,)).get() is None  # skipped
    other.release()
    held.release()
    assert app.raising.apply((7,)).get() == 7
    assert app.keyed.apply((7,)).get() == 7
    assert raw.keys("t:*") == []
