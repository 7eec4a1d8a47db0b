#!/usr/bin/env python3
"""Raw limits of one lock cycle, without any lock library.

  * redis-benchmark -c 1 -P 1 (C client, one connection, no pipelining) for
    PING, `SET k v NX PX 10000` and `EVALSHA <release sha> 1 k tok`.
    (SET NX on an existing key and EVALSHA with a foreign token are the same
    round trip and nearly the same server work as the successful ones.)
  * redis-cli --latency for --seconds: PING every 10 ms, i.e. the round trip
    of a client that was asleep (wake-up included), as a waiter sees it
    (redis-cli prints ms with coarse precision, so the same is repeated from
    Python with a raw socket: "sparse-ping-socket", p50/p99 in us).

The Python loops (raw socket / redis-py doing SET NX PX then EVALSHA, and a
PING loop) live in uncontended.py: raw-socket, raw-redis-py, ping-socket.

    python3 raw_limit.py [--n 100000] [--seconds 5]
"""
import argparse
import csv
import io
import signal
import subprocess

import socket
import time

import redis

from common import HOST, PORT, RELEASE_LUA, emit, percentile


def bench(args, *cmd):
    out = subprocess.run(["redis-benchmark", "-h", HOST, "-p", str(PORT), "-c", "1", "-P", "1",
                          "-n", str(args.n), "--csv", *cmd],
                         check=True, capture_output=True, text=True).stdout
    row = list(csv.DictReader(io.StringIO(out)))[-1]
    rec = {"bench": "raw_limit", "impl": "redis-benchmark " + cmd[0], "round": args.round,
           "cmds_per_s": float(row["rps"]),
           "p50_us": 1000 * float(row["p50_latency_ms"]),
           "p99_us": 1000 * float(row["p99_latency_ms"])}
    emit(rec, args.out)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--out")
    ap.add_argument("--round", type=int, default=0)
    args = ap.parse_args()

    r = redis.Redis(host=HOST, port=PORT)
    sha = r.script_load(RELEASE_LUA)
    r.delete("k")
    ping = bench(args, "PING")
    setnx = bench(args, "SET", "k", "v", "NX", "PX", "10000")
    evsha = bench(args, "EVALSHA", sha, "1", "k", "tok")
    # one cycle = SET NX PX + EVALSHA, strictly sequential
    cycle_us = 1e6 / setnx["cmds_per_s"] + 1e6 / evsha["cmds_per_s"]
    emit({"bench": "raw_limit", "impl": "redis-benchmark SET+EVALSHA cycle", "round": args.round,
          "cycles_per_s": 1e6 / cycle_us, "cycle_us": cycle_us,
          "rtt_us": 1e6 / ping["cmds_per_s"]}, args.out)

    p = subprocess.Popen(["redis-cli", "-h", HOST, "-p", str(PORT), "--latency"],
                         stdout=subprocess.PIPE, text=True)
    try:
        p.wait(timeout=args.seconds)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)                  # our own child, by PID
    last = p.communicate()[0].strip().split("\n")[-1].split()   # "min max avg count" in ms
    if len(last) >= 4:   # nothing when it was stopped before its first report
        emit({"bench": "raw_limit", "impl": "redis-cli --latency (sparse PING)", "round": args.round,
              "min_us": 1000 * float(last[0]), "avg_us": 1000 * float(last[2]),
              "max_us": 1000 * float(last[1]), "samples": int(last[3])}, args.out)

    s = socket.create_connection((HOST, PORT))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lat = []
    for _ in range(int(args.seconds / 0.01)):
        time.sleep(0.01)
        t = time.perf_counter_ns()
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        assert s.recv(64) == b"+PONG\r\n"
        lat.append(time.perf_counter_ns() - t)
    lat.sort()
    emit({"bench": "raw_limit", "impl": "sparse-ping-socket (every 10 ms)", "round": args.round,
          "p50_us": percentile(lat, 50) / 1000, "p99_us": percentile(lat, 99) / 1000}, args.out)


if __name__ == "__main__":
    main()
