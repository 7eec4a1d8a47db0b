"""The Celery app that test_celery.py runs in real worker processes.

Broker, result backend and locks: the throwaway redis-server whose URL is in
REDISLOCK_CELERY_TEST_URL. Each task records its run in Redis (the raw
client): a shared "running" counter (a second copy inside the body would push
it above 1), start/end times, the worker's pid and the lock's fencing number.
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


def _body(task, tag, i, sleep):
    r = raw()
    start = time.time()
    now = r.incr(f"{tag}:running")
    if now > 1:
        r.incr(f"{tag}:overlaps")
    time.sleep(sleep)
    r.decr(f"{tag}:running")
    r.rpush(f"{tag}:runs", json.dumps({
        "i": i, "start": start, "end": time.time(), "pid": os.getpid(),
        "fence": task.lock.fence,
    }))
    return i


@app.task(bind=True, base=Singleton, lock_on=["group"], on_duplicate="wait", lock_ttl=3.0)
def waiting(self, i, group="g", sleep=0.1):
    return _body(self, "wait", i, sleep)


@app.task(bind=True, base=Singleton, lock_on=["group"], on_duplicate="skip", lock_ttl=3.0)
def skipping(self, i, group="g", sleep=1.0):
    return _body(self, "skip", i, sleep)


@app.task(bind=True, base=Singleton, lock_on=[], lock_ttl=0.9)
def stealable(self, limit=15.0):
    """Runs until told its lock is lost (or `limit` seconds)."""
    r = raw()
    r.set("steal:token", self.lock.token)
    r.set("steal:started", 1)
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            self.check_lock()
        except Exception as e:  # LockLost
            r.set("steal:lost_after", time.monotonic() - t0)
            return f"lost: {type(e).__name__}"
        time.sleep(0.02)
    return "finished"


@app.task(bind=True, base=Singleton, lock_on=["account"], on_duplicate="raise")
def raising(self, account, verbose=False):
    return account


@app.task(base=Singleton, lock_on=lambda account, **_: f"acct-{account}", on_duplicate="skip")
def keyed(account, verbose=False):
    return account
