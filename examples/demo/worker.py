"""make demo: a Python worker (the installed redislock wheel).

Until the deadline: take the lock, increment the counter non-atomically
(GET, then SET), release. Prints "fence acquired_ns release_ns" per
acquisition (time.monotonic_ns: CLOCK_MONOTONIC).

    python worker.py REDIS_PORT SECONDS
"""
import sys
import time

import redis

import redislock

port, seconds = int(sys.argv[1]), float(sys.argv[2])
client = redislock.Client(f"redis://127.0.0.1:{port}")
raw = redis.Redis(port=port)
lock = client.lock("demo:lock", ttl=5.0, timeout=10.0)
end = time.monotonic_ns() + int(seconds * 1e9)
out = []
while time.monotonic_ns() < end:
    with lock:
        acquired = time.monotonic_ns()
        value = int(raw.get("demo:counter") or 0)
        raw.set("demo:counter", value + 1)
        fence = lock.fence
        release = time.monotonic_ns()
    out.append(f"{fence} {acquired} {release}")
print("\n".join(out))
