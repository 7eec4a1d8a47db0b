#!/usr/bin/env python3
"""PHP lock as a fresh process per request (php-fpm-like worst case).

Runs `php fresh_lock.php MODE` back to back for --seconds, cycling through the
modes none / predis / phpredis / redislock-cdef / redislock-preload in turn (interleaved, so machine noise hits
all of them alike).  MODE=none is bare PHP start-up; "overhead" is the median
of the paired differences (MODE - none) of neighbouring runs, i.e. the
per-request cost of loading the client, connecting, locking and unlocking.

    python3 fresh_process.py [--seconds 15]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

from common import emit, latency_summary

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["none", "predis", "phpredis", "redislock-cdef", "redislock-preload"]


def preload_header():
    """redislock_preload.h with FFI_LIB pointing at the library under test."""
    root = os.environ.get("REDISLOCK_PROJECT", os.path.dirname(HERE))
    lib = os.environ["REDISLOCK_LIB"]
    with open(os.path.join(root, "bindings", "php", "redislock_preload.h")) as f:
        text = f.read()
    text = "\n".join('#define FFI_LIB "%s"' % lib if line.startswith("#define FFI_LIB") else line
                     for line in text.split("\n"))
    path = os.path.join(tempfile.gettempdir(), "redislock-bench-preload.h")
    with open(path, "w") as f:
        f.write(text)
    return path


def command(mode):
    script = os.path.join(HERE, "fresh_lock.php")
    if mode == "redislock-cdef":
        return ["php", script, "redis-tool-ffi"]
    if mode == "redislock-preload":
        return ["php", "-d", "ffi.enable=preload", "-d", "ffi.preload=" + preload_header(),
                script, "redis-tool-ffi"]
    return ["php", script, mode]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--out")
    ap.add_argument("--round", type=int, default=0)
    args = ap.parse_args()

    cmds = {m: command(m) for m in MODES}
    for m in MODES:
        subprocess.run(cmds[m], check=True)                # warm the page cache
    lat = {m: [] for m in MODES}
    clock = time.perf_counter_ns
    t0 = clock()
    end = t0 + int(args.seconds * 1e9)
    while clock() < end:
        for m in MODES:
            t = clock()
            subprocess.run(cmds[m], check=True)
            lat[m].append(clock() - t)
    busy = {m: sum(v) / 1e9 for m, v in lat.items()}
    for m in MODES:
        rec = latency_summary(lat[m], busy[m])             # processes/s while running MODE
        rec["overhead_ms"] = statistics.median(
            (a - b) / 1e6 for a, b in zip(lat[m], lat["none"]))
        rec.update(bench="fresh_process", impl="php-fresh-" + m, lang="php", round=args.round)
        emit(rec, args.out)


if __name__ == "__main__":
    main()
