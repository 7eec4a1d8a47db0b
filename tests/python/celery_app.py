"""The Celery app that test_celery.py runs in real worker processes.

Broker, result backend and locks: the throwaway redis-server whose URL is in
REDISLOCK_CELERY_TEST_URL. Each task records its run in Redis (the raw
client): a shared "running" counter (a second copy inside the body would push
it above 1), start/end times, the worker's pid and the lock's fencing number.

The locks' TTLs are long enough that a busy machine's pauses never let one
expire between two renewals: only the theft in test_stolen_lock_is_reported
loses a lock.
"""
import json
import os
import time

import redis
from celery import Celery

from redislock.celery import Singleton

URL = os.environ.get("REDISLOCK_CELERY_TEST_URL", "redis://127.0.0.1:1/0")

app = Celery("celery_app", broker=URL, backend=URL)
app.conf.update(
    worker_prefetch_multiplier=1,
    task_acks_late=True,
    broker_connection_retry_on_startup=True,
    redislock_key_prefix="t:",
)

_raw = None


def raw():
    global _raw
    if _raw is None or _raw[0] != os.getpid():
        _raw = (os.getpid(), redis.Redis.from_url(URL))
    return _raw[1]


def _body(task, tag, i, hold):
    r = raw()
    start = time.time()
    now = r.incr(f"{tag}:running")
    if now > 1:
        r.incr(f"{tag}:overlaps")
    hold()
    r.decr(f"{tag}:running")
    r.rpush(f"{tag}:runs", json.dumps({
        "i": i, "start": start, "end": time.time(), "pid": os.getpid(),
        "fence": task.lock.fence,
    }))
    return i


class CountingSkips(Singleton):
    """A Singleton that counts its skipped calls in Redis (skip:skipped)."""

    def on_skip(self, key, args, kwargs):
        raw().incr("skip:skipped")
        return super().on_skip(key, args, kwargs)


@app.task(bind=True, base=Singleton, lock_on=["group"], on_duplicate="wait", lock_ttl=10.0)
def waiting(self, i, group="g", sleep=0.1):
    return _body(self, "wait", i, lambda: time.sleep(sleep))


@app.task(bind=True, base=Singleton, lock_on=[], on_duplicate="wait", lock_ttl=10.0, limit=2)
def limited(self, i, sleep=0.5):
    """At most two copies at once: records how many ran with it."""
    r = raw()
    now = r.incr("limited:running")
    r.rpush("limited:seen", now)
    time.sleep(sleep)
    r.decr("limited:running")
    return i


def _until_skipped(sleep, limit):
    """Sleep; the first run then holds on until a copy was skipped (at most
    `limit` s, so that with skipping broken the runs still end in time for
    the test to say so)."""
    time.sleep(sleep)
    r, t0 = raw(), time.monotonic()
    if r.incr("skip:holders") > 1:
        return
    while not r.get("skip:skipped") and time.monotonic() - t0 < limit:
        time.sleep(0.01)


@app.task(bind=True, base=CountingSkips, lock_on=["group"], on_duplicate="skip", lock_ttl=10.0)
def skipping(self, i, group="g", sleep=1.0, limit=10.0):
    return _body(self, "skip", i, lambda: _until_skipped(sleep, limit))


@app.task(bind=True, base=Singleton, lock_on=[], lock_ttl=3.0)
def stealable(self, limit=30.0):
    """Runs until told its lock is lost (or `limit` seconds)."""
    r = raw()
    r.set("steal:token", self.lock.token)
    r.set("steal:started", 1)
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            self.check_lock()
        except Exception as e:  # LockLost
            r.set("steal:lost_at", time.time())
            return f"lost: {type(e).__name__}"
        time.sleep(0.02)
    return "finished"


@app.task(bind=True, base=Singleton, lock_on=["account"], on_duplicate="raise")
def raising(self, account, verbose=False):
    return account


@app.task(base=Singleton, lock_on=lambda account, **_: f"acct-{account}", on_duplicate="skip")
def keyed(account, verbose=False):
    return account
