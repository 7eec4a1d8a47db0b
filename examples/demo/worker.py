"""make demo: a Python worker (the installed redislock wheel).

Once, then until the deadline: take the lock, increment the counter
non-atomically (GET, then SET), release. Prints "fence value acquired_ns
release_ns" per acquisition: the counter as read, time.monotonic_ns
(CLOCK_MONOTONIC) after the acquisition and before the release.

    python worker.py REDIS_PORT SECONDS
"""
import sys
import time

import redis

import redislock

port, seconds = int(sys.argv[1]), float(sys.argv[2])
client = redislock.Client(f"redis://127.0.0.1:{port}")
raw = redis.Redis(port=port)
# A TTL and a wait no pause of a busy machine comes near.
lock = client.lock("demo:lock", ttl=30.0, timeout=30.0)
end = time.monotonic_ns() + int(seconds * 1e9)
out = []
while True:
    with lock:
        acquired = time.monotonic_ns()
        value = int(raw.get("demo:counter") or 0)
        raw.set("demo:counter", value + 1)
        fence = lock.fence
        release = time.monotonic_ns()
    out.append(f"{fence} {value} {acquired} {release}")
    if time.monotonic_ns() >= end:
        break
print("\n".join(out))
