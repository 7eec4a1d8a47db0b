"""One chaos worker in Python (started by chaos.py, not by hand).

    python worker.py URL DIR ID TTL_MS WAIT_MS

URL: one URL, or several separated by spaces (Redlock).

The protocol of worker.c: DIR/ready-ID once the client exists, wait for
DIR/go, loop until DIR/stop exists: a fenced acquisition of the lock
"chaos", the critical section on the file store DIR/store (flock on
DIR/store.lock; read, 1 ms, write: two sections, so that two owners lose an
update), release; one JSON line per attempt in DIR/events-ID.jsonl with
CLOCK_MONOTONIC nanoseconds (t0 acquire called, t1 returned, t2 release
called, t3 returned).
"""
import fcntl
import json
import os
import sys
import time

import redislock

NAME = "chaos"
clock = time.monotonic_ns  # CLOCK_MONOTONIC, shared by every process of the machine


def err_class(e: BaseException) -> str:
    for cls, name in ((redislock.LockTimeout, "timeout"), (redislock.LockNotOwned, "not_owner"),
                      (redislock.LockUnconfirmed, "unconfirmed"), (redislock.LockQuorumError, "no_quorum"),
                      (redislock.LockConnectionError, "connection"), (redislock.LockServerError, "server"),
                      (redislock.LockWrongType, "wrong_type"), (ValueError, "invalid_argument")):
        if isinstance(e, cls):
            return name
    return "other"


def store_read(path):
    try:
        with open(path) as f:
            c, fence = f.read().split()
        return int(c), int(fence)
    except (OSError, ValueError):
        return None


def critical_section(lockfd, store, fence):
    """(outcome, stored fence, interleaved): "ok", "refused" or "store_error"."""
    fcntl.flock(lockfd, fcntl.LOCK_EX)
    first = store_read(store)
    fcntl.flock(lockfd, fcntl.LOCK_UN)
    if first is None:
        return "store_error", 0, False
    if fence <= first[1]:
        return "refused", first[1], False
    time.sleep(0.001)  # the increment is not atomic: a second owner loses an update
    fcntl.flock(lockfd, fcntl.LOCK_EX)
    try:
        now = store_read(store)
        if now is None:
            return "store_error", 0, False
        if fence <= now[1]:
            return "refused", now[1], False
        with open(store, "w") as f:
            f.write("%d %d\n" % (first[0] + 1, fence))
        return "ok", now[1], now[0] != first[0]
    finally:
        fcntl.flock(lockfd, fcntl.LOCK_UN)


def main():
    url, d, wid, ttl_ms, wait_ms = sys.argv[1:6]
    ttl, wait = int(ttl_ms) / 1000.0, int(wait_ms) / 1000.0
    store = os.path.join(d, "store")
    lockfd = os.open(os.path.join(d, "store.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    out = open(os.path.join(d, "events-%s.jsonl" % wid), "w", buffering=1)
    urls = url.split()  # several: Redlock
    client = redislock.Client(urls if len(urls) > 1 else url)
    lock = client.lock(NAME, ttl=ttl, fenced=True)
    open(os.path.join(d, "ready-" + wid), "w").close()
    go, stop = os.path.join(d, "go"), os.path.join(d, "stop")
    deadline = time.monotonic() + 120
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.001)

    while not os.path.exists(stop):
        ev = {"w": wid, "lang": "python", "t0": clock()}
        try:
            ok = lock.acquire(timeout=wait)
            err = None if ok else ("timeout", "")
        except Exception as e:  # every failure is a figure, none ends the worker
            ok, err = False, (err_class(e), "%s: %s" % (type(e).__name__, e))
        ev["t1"] = clock()
        ev["ok"] = ok
        if not ok:
            ev["err"], ev["msg"] = err
            out.write(json.dumps(ev) + "\n")
            if err[0] != "timeout":
                time.sleep(0.01)  # an error that comes at once must not spin
            continue
        fence = lock.fence or 0
        outcome, stored, interleaved = critical_section(lockfd, store, fence)
        ev.update(fence=fence, cs=outcome, stored=stored, interleaved=interleaved, t2=clock())
        try:
            lock.release()
            ev["rel"] = "ok"
        except Exception as e:
            ev["rel"], ev["rel_msg"] = err_class(e), "%s: %s" % (type(e).__name__, e)
        ev["t3"] = clock()
        out.write(json.dumps(ev) + "\n")
    out.close()


if __name__ == "__main__":
    main()
