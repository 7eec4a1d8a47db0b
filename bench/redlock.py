#!/usr/bin/env python3
"""Redlock against one server: try-once acquire -> release cycles/s from
Python, over 3 and 5 healthy nodes and over 5 nodes one of which is
stopped (SIGSTOP), each paired with one server in the same process.

Every server is a fresh throwaway one started here. Batches of --batch
cycles alternate (one server first in even pairs); per pair the Redlock
rate over the single server's. Prints one JSON line per deployment.

    python3 redlock.py [--seconds S] [--batch N] [--out FILE] [--round R] [--only DEPLOYMENT]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))

import redislock  # noqa: E402
from common import emit  # noqa: E402
from redis_server import RedisServer  # noqa: E402

KEY = "bench:redlock"
TTL = 10.0


def cycles(client, n):
    """Seconds that `n` try-once cycles take (every one must acquire)."""
    lock = client.lock(KEY, ttl=TTL)
    t0 = time.perf_counter()
    for _ in range(n):
        assert lock.acquire(blocking=False)
        lock.release()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0, help="per deployment")
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--out")
    ap.add_argument("--round", type=int, default=0)
    ap.add_argument("--only", help="one deployment: '3 nodes', '5 nodes' or '5 nodes, one stopped'")
    args = ap.parse_args()
    servers = [RedisServer() for _ in range(1 + 3 + 5 + 5)]
    try:
        single = redislock.Client(servers[0].url)
        deployments = [
            ("3 nodes", servers[1:4], False),
            ("5 nodes", servers[4:9], False),
            ("5 nodes, one stopped", servers[9:14], True),
        ]
        for name, nodes, stop_one in deployments:
            if args.only and name != args.only:
                continue
            client = redislock.Client([s.url for s in nodes])
            cycles(client, 100)                     # connections, script cache
            cycles(single, 100)
            if stop_one:
                os.kill(nodes[-1].proc.pid, 19)     # SIGSTOP
            ratios, single_cps, redlock_cps = [], [], []
            end = time.monotonic() + args.seconds
            while time.monotonic() < end or len(ratios) < 3:
                order = ("single", "redlock") if len(ratios) % 2 == 0 else ("redlock", "single")
                took = {}
                for side in order:
                    took[side] = cycles(single if side == "single" else client, args.batch)
                single_cps.append(args.batch / took["single"])
                redlock_cps.append(args.batch / took["redlock"])
                ratios.append(round(took["single"] / took["redlock"], 3))
            if stop_one:
                os.kill(nodes[-1].proc.pid, 18)     # SIGCONT
            emit({"bench": "redlock", "impl": "redislock", "lang": "python", "deployment": name,
                  "round": args.round, "batch": args.batch,
                  "single_cps": round(statistics.median(single_cps)),
                  "redlock_cps": round(statistics.median(redlock_cps)),
                  "ratio": ratios}, args.out)
            del client
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
