#!/usr/bin/env python3
"""make bench: redislock side by side with the locks users would pick instead.

Starts its own redis-server on a free loopback port, then runs every
comparison ROUNDS times, interleaved (so machine noise spreads over all
implementations alike), appending JSON lines under bench/results/DATE/:

  raw_limit      redis-benchmark -c 1 -P 1 (PING, SET NX PX, EVALSHA) and loopback RTT
  uncontended    one client, one key, acquire->release: Rust, Python (redislock,
                 redis-py Lock, python-redis-lock, pottery, raw socket), PHP
                 (Compat\\RedisTool and Client over FFI, predis and phpredis helpers)
  fpm            requests/s through a real php-fpm, one lock per request, 8 clients:
                 redislock persistent, predis (new and persistent), phpredis pconnect
  fresh_process  PHP per-request cost: bare PHP, predis, phpredis, redislock with
                 FFI::cdef and with ffi.preload
  contended      2, 8 and 32 worker processes on one key (Python and PHP)
  handoff        Rust: release -> woken waiter in another thread
  waiters        1,000 waiting threads on one lock (Python), 1,000 waiting asyncio
                 tasks on held locks (redislock, redis-py asyncio Lock), and 10,000
                 tokio tasks on 100 locks (Rust): connections, commands while
                 waiting, hand-off, a free lock's latency meanwhile
  redlock        try-once cycles/s over 3 and 5 nodes (and 5 with one stopped)
                 against one server, paired batches: Rust and Python
  renewal        10,000 locks renewed in the background by one client
  paired         ours against the hand-written helper in one process, interleaved
                 batches: Python (raw socket), PHP (phpredis)
  semaphore      counting semaphores, W processes on a semaphore of N: redislock
                 (Python, PHP) against Laravel's funnel, symfony/semaphore and the
                 Redis in Action semaphore (semaphore.py, its own server and rounds)
  server_cost    server CPU, command time and commands per uncontended cycle, ours
                 (try-once, waiting, fenced) against the helper, and the C API
                 against hiredis; throughput per server CPU second with many
                 clients: on Redis 7.0, Valkey 8.1 and 9.1 (server_cost.py, bench/c/)

Then bench/report.py writes bench/results/DATE.md and DATE.png and updates
the figures in docs/performance.md.

    python bench/run.py [--quick] [--rounds N] [--seconds S]

Run it with an interpreter that has the anchors installed (make bench
prepares target/venv-bench); REDISLOCK_LIB must point at the library.
"""
import argparse
import datetime
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

from redis_server import RedisServer  # noqa: E402


def run(cmd, env, **kw):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=HERE, env=env, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one short round (under 3 minutes)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--out", help="results directory (default bench/results/DATE)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds = 1, 1.0
    workers = [2, 8] if args.quick else [2, 8, 32]
    waiters, tasks = ("300", "2000") if args.quick else ("1000", "10000")
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(HERE, "results", date + ("-quick" if args.quick else ""))
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".jsonl"):
            os.unlink(os.path.join(out, f))

    server = RedisServer()
    env = dict(os.environ,
               BENCH_HOST="127.0.0.1", BENCH_PORT=str(server.port), REDISLOCK_PROJECT=ROOT,
               REDISLOCK_LIB=os.environ.get("REDISLOCK_LIB",
                                            os.path.join(ROOT, "target", "release", "libredislock.so")))
    py = sys.executable
    examples = os.path.join(ROOT, "target", "release", "examples")
    secs = str(args.seconds)
    started = time.monotonic()
    try:
        for rnd in range(1, args.rounds + 1):
            print(f"=== round {rnd} of {args.rounds}", flush=True)
            r = str(rnd)
            run([py, "raw_limit.py", "--n", "20000" if args.quick else "100000",
                 "--seconds", secs, "--round", r, "--out", f"{out}/raw_limit.jsonl"], env)
            run([os.path.join(examples, "bench_core"), "--url", server.url, "--json",
                 f"{out}/uncontended.jsonl", "--round", r, "--seconds", secs], env)
            for impl in ["raw-socket", "redislock", "redis-py", "python-redis-lock", "pottery"]:
                run([py, "uncontended.py", impl, "--seconds", secs, "--round", r,
                     "--out", f"{out}/uncontended.jsonl"], env)
            for mode in ["redis-tool-ffi", "redislock", "phpredis", "predis"]:
                run(["php", "uncontended.php", mode, secs, r, f"{out}/uncontended.jsonl"], env)
            run(["php", "fpm.php", secs, r, f"{out}/fpm.jsonl"], env)
            run([py, "fresh_process.py", "--seconds", str(3 * args.seconds), "--round", r,
                 "--out", f"{out}/fresh_process.jsonl"], env)
            for n in workers:
                for impl in ["redislock", "redis-py", "python-redis-lock", "redislock-php", "predis-1ms"]:
                    run([py, "contended.py", impl, "--workers", str(n), "--seconds", secs,
                         "--round", r, "--out", f"{out}/contended.jsonl"], env)
            run([py, "waiters.py", "threads", "--n", waiters, "--round", r,
                 "--out", f"{out}/waiters.jsonl"], env)
            for impl in ["redislock", "redis-py", "redis-py-big-pool"]:
                run([py, "waiters.py", "asyncio", impl, "--n", waiters, "--round", r,
                     "--out", f"{out}/waiters.jsonl"], env)
            run([os.path.join(examples, "bench_core"), "--redlock", "--url", server.url,
                 "--seconds", secs, "--json", f"{out}/redlock.jsonl"], env)
            run([py, "redlock.py", "--seconds", secs, "--round", r, "--out", f"{out}/redlock.jsonl"], env)
            run([os.path.join(examples, "async_contention"), "--url", server.url,
                 "--tasks", tasks, "--locks", "100", "--round", r,
                 "--json", f"{out}/async_contention.jsonl"], env)
        # Ours against the hand-written helper, paired inside one run: Python
        # and PHP in one process on this server; the server's cost per cycle,
        # the C API and throughput on fresh Redis 7.0 and Valkey 8.1 servers.
        paired = "4" if args.quick else "20"
        run([py, "uncontended.py", "paired", "--seconds", paired, "--out", f"{out}/paired.jsonl"], env)
        run(["php", "uncontended.php", "paired", paired, "0", f"{out}/paired.jsonl"], env)
        run([os.path.join(examples, "bench_core"), "--url", server.url, "--json", f"{out}/paired.jsonl",
             "--paired", "6" if args.quick else "30"], env)
        run([py, "server_cost.py", "--out", out] + (["--quick"] if args.quick else []), env)
        run([py, "semaphore.py", "--rounds", str(args.rounds), "--seconds", "1" if args.quick else "2",
             "--out", f"{out}/semaphore.jsonl", "--json", f"{out}/semaphore.json"], env)
        locks, hold = ("2000", "6") if args.quick else ("10000", "30")
        run([os.path.join(examples, "bench_renew"), "--url", server.url, "--locks", locks,
             "--ttl-ms", "3000", "--seconds", hold, "--json", f"{out}/renewal.jsonl"], env)
    finally:
        server.stop()
    print(f"benchmarks took {time.monotonic() - started:.0f} s", flush=True)
    # A quick run is a smoke test: it never replaces the figures of docs/performance.md.
    readme = [] if args.quick else ["--readme", os.path.join(ROOT, "docs", "performance.md")]
    run([py, "report.py", out] + readme, env)


if __name__ == "__main__":
    main()
