#!/usr/bin/env python3
"""Many waiters in one process: what they cost the server while they wait,
and whether they slow anything else down.

  waiters.py threads [--n 1000]
      N threads of one process wait on one lock; then the holder releases
      and each releases as soon as it has it, down the chain. Connections of
      the process while they wait (right after they queued, and once idle
      command connections closed), client commands per second meanwhile,
      the whole chain's time and the hand-off p50 (one thread's release
      call -> the next thread holds it).

  waiters.py asyncio IMPL [--n 1000]
      IMPL: redislock | redis-py (its asyncio Lock, default pool: at most
      100 connections) | redis-py-big-pool (a pool of N + 100)
      N asyncio tasks, each waiting on its own held lock (held by another
      connection for 60 s). Connections of the process, client commands per
      second while they wait, the p50 time to acquire an unrelated free lock
      meanwhile, next to the same p50 in the idle process, and the tasks
      that failed instead of waiting (by exception type).

Every record carries the loopback round trip measured in the same run
(a raw-socket PING every 2 ms), so that figures can be read in round trips.
"""
import argparse
import asyncio
import os
import socket
import statistics
import threading
import time

import redis

from common import HOST, PORT, emit, percentile, rtt_us

WINDOW = 5.0     # seconds of waiting over which commands are counted
SETTLE = 2.0     # seconds of waiting before the window opens
IDLE_CLOSE = 6.0  # past the 5 s after which idle command connections close
FREE_SAMPLES = 200


def connections(raw):
    """The server's clients other than `raw` itself: the process's own (the
    server serves nobody else during a run)."""
    me = raw.client_id()
    return sum(1 for c in raw.client_list() if int(c["id"]) != me)


def commands_per_s(seconds):
    """Commands per second that clients sent the server over `seconds`
    (read from MONITOR; the calls scripts make inside are not counted: a
    script is one command, one round trip)."""
    s = socket.create_connection((HOST, PORT))
    s.sendall(b"*1\r\n$7\r\nMONITOR\r\n")
    buf, n = b"", 0
    end = time.monotonic() + seconds
    ok = False
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            raise SystemExit("the server closed MONITOR")
        lines = (buf + chunk).split(b"\r\n")
        buf = lines.pop()
        for line in lines:
            if line == b"+OK" and not ok:
                ok = True
            elif line.startswith(b"+") and b" lua] " not in line:
                n += 1
    s.close()
    return n / seconds


def wait_until(check, limit, what):
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def threads(args, raw, url):
    import redislock
    client = redislock.Client(url)
    name = "chain"
    holder = client.lock(name, ttl=120.0)
    assert holder.acquire(blocking=False)
    acquired = [None] * args.n
    releasing = [None] * args.n

    def worker(i):
        lock = client.lock(name, ttl=30.0, timeout=300.0)
        assert lock.acquire()
        acquired[i] = time.perf_counter_ns()
        releasing[i] = time.perf_counter_ns()
        lock.release()

    ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.n)]
    for t in ts:
        t.start()
    wait_until(lambda: raw.llen("{%s}:queue" % name) == args.n, 120, "every thread queued")
    # The command connections that the burst of threads opened at once
    # close when idle; the subscriber stays.
    burst = connections(raw)
    time.sleep(IDLE_CLOSE)
    conns = connections(raw)
    cps = commands_per_s(WINDOW)
    start = time.perf_counter_ns()
    holder.release()
    for t in ts:
        t.join()
    total = (max(acquired) - start) / 1e9
    order = sorted(range(args.n), key=lambda i: acquired[i])
    hand = [acquired[order[0]] - start]
    hand += [acquired[b] - releasing[a] for a, b in zip(order, order[1:])]
    hand.sort()
    time.sleep(1.0)
    return {"impl": "redislock", "waiting_connections": conns, "cmds_per_s_waiting": cps,
            "burst_connections": burst,
            "chain_s": total, "handoff_p50_us": percentile(hand, 50) / 1000,
            "handoff_p99_us": percentile(hand, 99) / 1000,
            "connections_after": connections(raw)}


async def free_lock_p50_us(impl, client, aclient):
    """p50 of acquiring a free lock (try once), released after each."""
    lat = []
    for _ in range(FREE_SAMPLES):
        if impl == "redislock":
            lock = client.lock("free", ttl=5.0)
            t = time.perf_counter_ns()
            assert await lock.acquire_async(blocking=False)
            lat.append(time.perf_counter_ns() - t)
            await lock.release_async()
        else:
            lock = aclient.lock("free", timeout=5.0)
            t = time.perf_counter_ns()
            assert await lock.acquire(blocking=False)
            lat.append(time.perf_counter_ns() - t)
            await lock.release()
    return statistics.median(lat) / 1000


async def waiting_tasks(impl, args, raw, url):
    names = ["held%d" % i for i in range(args.n)]
    pipe = raw.pipeline(transaction=False)
    for n in names:
        pipe.set(n, b"someone-else", px=60000)
    pipe.execute()
    client = aclient = None
    if impl == "redislock":
        import redislock
        client = redislock.Client(url)

        def wait(n):
            return client.lock(n, ttl=10.0, timeout=120.0).acquire_async()
    else:
        import redis.asyncio
        pool = {"max_connections": args.n + 100} if impl == "redis-py-big-pool" else {}
        aclient = redis.asyncio.Redis(host=HOST, port=PORT, **pool)

        def wait(n):
            return aclient.lock(n, timeout=10.0, blocking_timeout=120.0).acquire()
    idle = await free_lock_p50_us(impl, client, aclient)
    tasks = [asyncio.ensure_future(wait(n)) for n in names]
    await asyncio.sleep(SETTLE)
    # Measured from another thread: the loop keeps serving the tasks.
    conns = await asyncio.to_thread(connections, raw)
    cps = await asyncio.to_thread(commands_per_s, WINDOW)
    busy = await free_lock_p50_us(impl, client, aclient)
    failed = {}
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            e = type(t.exception()).__name__
            failed[e] = failed.get(e, 0) + 1
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    raw.delete(*names)
    return {"impl": impl, "waiting_connections": conns, "cmds_per_s_waiting": cps,
            "free_p50_us_idle": idle, "free_p50_us_waiting": busy,
            "failed": failed}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["threads", "asyncio"])
    ap.add_argument("impl", nargs="?", default="redislock", choices=["redislock", "redis-py", "redis-py-big-pool"])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--round", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args()
    url = f"redis://{HOST}:{PORT}/0"
    raw = redis.Redis(host=HOST, port=PORT)
    raw.config_set("maxclients", max(10000, 4 * args.n))
    rtt = rtt_us()
    if args.mode == "threads":
        rec = threads(args, raw, url)
    else:
        rec = asyncio.run(waiting_tasks(args.impl, args, raw, url))
    rec.update({"bench": "waiters-" + args.mode, "n": args.n, "round": args.round,
                "rtt_us": (rtt + rtt_us()) / 2, "window_s": WINDOW, "settle_s": SETTLE})
    emit(rec, args.out)
    # Waiting threads of another implementation are not waited for.
    os._exit(0)


if __name__ == "__main__":
    main()
