#!/usr/bin/env python3
"""make bench-versus: this tree's contended path against the same figures
before the change, interleaved.

    python bench/versus.py BASE_DIR NEW_DIR [--rounds 6] [--seconds 3] [--only FIGURE]

BASE_DIR and NEW_DIR each hold an installed `redislock` package (pip
install --target); `make bench-versus BASE=<git revision>` builds both.
Every round runs each figure for both builds back to back, in alternating
order, on one throwaway redis-server, and measures the loopback round trip
(a raw-socket PING, see waiters.py) right before each run, so that each
figure is also read in round trips of its own moment:

  contended 2 and 8   worker processes on one key (contended.py): hand-off
                      p50 in µs and in RTT, server commands per acquisition
                      (the bench's GET+SET included), least/most
                      acquisitions per worker, lost updates, acquisitions/s
  threads             100 threads of one process, one client, down a chain
                      (waiters.py threads): hand-off p50 in µs and in RTT
  redlock             try-once cycles/s over 3 healthy nodes against one
                      server, paired in one process (redlock.py): the ratio

It prints a table of medians and, per figure, the median of the ratios
new/base taken inside each round; JSON lines go to bench/results/.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

from redis_server import RedisServer  # noqa: E402


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def run(cmd, env):
    return subprocess.run(cmd, cwd=HERE, env=env, check=True, capture_output=True,
                          text=True, timeout=600).stdout


def rtt_us(env):
    code = "import waiters; print(waiters.rtt_us(300))"
    return float(run([sys.executable, "-c", code], env).strip())


def one(kind, workers, seconds, env):
    rtt = rtt_us(env)
    if kind == "contended":
        rec = last_json(run([sys.executable, "contended.py", "redislock", "--workers",
                             str(workers), "--seconds", str(seconds)], env))
        return {"rtt_us": rtt, "handoff_us": rec["handoff_p50_us"],
                "handoff_rtt": rec["handoff_p50_us"] / rtt, "cmds_per_acq": rec["cmds_per_acq"],
                "fairness": rec["fair_min"] / max(1, rec["fair_max"]),
                "lost": rec["lost_updates"] + rec["overlaps"], "acq_per_s": rec["acq_per_s"]}
    if kind == "redlock":
        recs = [json.loads(line) for line in
                run([sys.executable, "redlock.py", "--seconds", str(seconds), "--only", "3 nodes"],
                    env).strip().splitlines() if line.startswith("{")]
        return {"rtt_us": rtt, "redlock_ratio": statistics.median(recs[0]["ratio"])}
    rec = last_json(run([sys.executable, "waiters.py", "threads", "--n", str(workers)], env))
    return {"rtt_us": rtt, "handoff_us": rec["handoff_p50_us"],
            "handoff_rtt": rec["handoff_p50_us"] / rtt}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--only", action="append", choices=["contended", "threads", "redlock"],
                    help="run only this figure (repeatable)")
    args = ap.parse_args()
    day = datetime.date.today().isoformat()
    out_dir = os.path.join(HERE, "results", day)
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "versus.jsonl")
    server = RedisServer()
    figures = [("contended", 2), ("contended", 8), ("threads", 100), ("redlock", 3)]
    figures = [f for f in figures if not args.only or f[0] in args.only]
    got = {}
    try:
        for r in range(args.rounds):
            for kind, n in figures:
                order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
                pair = {}
                for which in order:
                    env = dict(os.environ, BENCH_PORT=str(server.port),
                               PYTHONPATH=os.path.abspath(getattr(args, which)))
                    pair[which] = one(kind, n, args.seconds, env)
                    rec = dict(pair[which], bench="versus", figure=kind, n=n, build=which, round=r)
                    with open(out, "a") as f:
                        f.write(json.dumps(rec, sort_keys=True) + "\n")
                got.setdefault((kind, n), []).append(pair)
                print(f"round {r} {kind} {n}: " + ", ".join(
                    f"{w} ratio {pair[w]['redlock_ratio']:.2f}" if kind == "redlock" else
                    f"{w} {pair[w]['handoff_us']:.0f} µs = {pair[w]['handoff_rtt']:.2f} RTT" for w in order),
                    flush=True)
    finally:
        server.stop()

    def med(vals):
        return statistics.median(vals) if vals else float("nan")

    print("\n| figure | before | after | after/before (median of pairs) |")
    print("|---|---|---|---|")
    for (kind, n), pairs in got.items():
        name = f"{kind} {n}" + {"contended": " processes", "threads": " threads"}.get(kind, " nodes")
        for key, fmt in [("redlock_ratio", "{:.2f}× one server"),
                         ("handoff_us", "{:.0f} µs"), ("handoff_rtt", "{:.2f} RTT"),
                         ("cmds_per_acq", "{:.1f}"), ("fairness", "{:.2f}"), ("lost", "{:.0f}"),
                         ("acq_per_s", "{:.0f}/s")]:
            if key not in pairs[0]["base"]:
                continue
            b = med([p["base"][key] for p in pairs])
            a = med([p["new"][key] for p in pairs])
            ratios = [p["new"][key] / p["base"][key] for p in pairs if p["base"][key]]
            ratio = f"{med(ratios):.2f}" if ratios else "-"
            print(f"| {name}: {key} | {fmt.format(b)} | {fmt.format(a)} | {ratio} |")
    print(f"\n(raw records: {os.path.relpath(out, ROOT)})")


if __name__ == "__main__":
    main()
