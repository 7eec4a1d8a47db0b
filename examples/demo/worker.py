"""make demo: a Python worker (the installed redislock wheel).

Once, then until the deadline: take the lock, increment the counter
non-atomically (GET, then SET), release. Prints "fence value acquired_ns
release_ns" per acquisition: the counter as read, time.monotonic_ns
(CLOCK_MONOTONIC) after the acquisition and before the release.

With LIMIT, it takes a permit of the semaphore `demo:pool` of LIMIT
instead, counts it with INCR `demo:pool:done`, holds it 1 ms, and reports
the value as 0.

    python worker.py REDIS_PORT SECONDS [LIMIT]
"""
import sys
import time

import redis

import redislock

port, seconds = int(sys.argv[1]), float(sys.argv[2])
limit = int(sys.argv[3]) if len(sys.argv) > 3 else 0
client = redislock.Client(f"redis://127.0.0.1:{port}")
raw = redis.Redis(port=port)
# A TTL and a wait no pause of a busy machine comes near.
if limit:
    lock = client.semaphore("demo:pool", limit=limit, ttl=30.0, timeout=30.0)
else:
    lock = client.lock("demo:lock", ttl=30.0, timeout=30.0)
end = time.monotonic_ns() + int(seconds * 1e9)
out = []
while True:
    with lock:
        acquired = time.monotonic_ns()
        if limit:
            raw.incr("demo:pool:done")
            time.sleep(0.001)
            value = 0
        else:
            value = int(raw.get("demo:counter") or 0)
            raw.set("demo:counter", value + 1)
        fence = lock.fence
        release = time.monotonic_ns()
    out.append(f"{fence} {value} {acquired} {release}")
    if time.monotonic_ns() >= end:
        break
print("\n".join(out))
