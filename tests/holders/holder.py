"""Holds a lock for the Ruby and Node.js tests: python holder.py URL KEY.

Prints the token, waits for a line on stdin, prints the monotonic time in
seconds, releases, prints "released". With KEY prefixed by "try:", tries
once instead and prints "held" or "free"."""
import sys
import time

import redislock

url, key = sys.argv[1], sys.argv[2]
client = redislock.Client(url)
if key.startswith("try:"):
    lock = client.lock(key[4:], ttl=5.0)
    if lock.acquire(blocking=False):
        lock.release()
        print("free", flush=True)
    else:
        print("held", flush=True)
    sys.exit(0)
lock = client.lock(key, ttl=30.0)
assert lock.acquire(blocking=False)
print(lock.token.hex(), flush=True)
sys.stdin.readline()
print(time.monotonic(), flush=True)
lock.release()
print("released", flush=True)
