#!/usr/bin/env python3
"""make bench-semaphore: counting semaphores, redislock against the anchors.

    python bench/semaphore.py [--workers 8] [--limit 2] [--rounds 3] [--seconds 2]
                              [--poll-ms 10] [--impls a,b,...] [--json PATH] [--out PATH]

Starts a throwaway redis-server on a free loopback port, then, round after
round, runs every implementation once (the order rotated every round): W
worker processes (semaphore_worker.py / .php) contend for --seconds on one
semaphore of limit N, each holding a permit for a short critical section.

Implementations (the wait of each, see the workers for details):
  redislock-py   client.semaphore(name, limit, ttl), blocking acquire: FIFO
                 queue, a release hands the permit to the next waiter (pub/sub)
  redislock-php  $client->acquireSemaphore($key, $limit, $ttlMs, null): the same
  laravel        Redis::funnel (Illuminate ConcurrencyLimiter 8.83, phpredis):
                 block() polls every 250 ms (fixed in the library)
  symfony        symfony/semaphore 5.4 RedisStore (phpredis): acquire() never
                 waits; the worker retries it every --poll-ms
  ria            the "Redis in Action" 6.3.2 fair semaphore (ZSET by time,
                 counter, owner ZSET; redis-py MULTI/EXEC pipelines), written in
                 the worker from the book's description; retried every --poll-ms

The critical section: LPOP one of N slot tokens from a list, GET + SET that
slot's counter (non-atomic), RPUSH the token back. With at most N holders
each counter has one writer at a time, so the counters must add up to the
acquisitions: any shortfall is a lost update. (One GET/SET counter shared by
N > 1 legitimate holders would lose updates by design.) An empty list means
more than N holders at that moment (`noslot`).

Figures per run:
  handoff p50/p90  a release -> a waiting worker's entry: the stamp taken just
                   before a holder calls release and the one taken just after
                   a worker's acquire returned (CLOCK_MONOTONIC, one clock for
                   all processes). Each entry takes the oldest release whose
                   permit nobody has taken yet; it is a hand-off when that
                   worker's acquire was called before that release (it was
                   waiting). Also in loopback round trips (a PING before the run)
  to waiter        share of entries that were such hand-offs (a poller's
                   hand-off p50/p90 covers only these, often a small share)
  barge            share of entries that took a freed permit with an acquire
                   called after that release while another worker was already
                   waiting (0 for a FIFO hand-off)
  cmds/acq         INFO total_commands_processed delta over the window /
                   acquisitions: every command of every client, those run
                   inside scripts and MULTI included, the bench's own 4 per
                   acquisition (LPOP, GET, SET, RPUSH) included
  acq/s, fairness  acquisitions per second; least/most per worker
  wait p99 / max   time inside the acquire call (starvation shows here; a
                   worker that never got in shows as 0 in least/most instead)
  max holders      most [entry, release] stamp intervals open at once (each lies
                   inside the real hold, so this never over-counts); must be <= N
  lost, noslot     lost updates; entries that found no slot token

Per round, every figure of redislock is divided by the anchor's of the same
round; the table gives the medians over rounds and the median (min-max) of
those ratios. One JSON line per run goes to --out (appended) and, with
--json, the whole summary to PATH.
"""
import argparse
import bisect
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import redis  # noqa: E402

from common import HOST, percentile, rtt_us, sleep_until  # noqa: E402
from redis_server import RedisServer  # noqa: E402

PY = sys.executable
IMPLS = ["redislock-py", "redislock-php", "laravel", "symfony", "ria"]
LANG = {"redislock-py": "py", "ria": "py", "redislock-php": "php", "laravel": "php", "symfony": "php"}
OURS = ["redislock-py", "redislock-php"]
ANCHORS = ["laravel", "symfony", "ria"]
SLOTS_KEY = "bench:sem:slots"
COUNTER_KEY = "bench:sem:counter:"
TTL_S = 10


def worker_cmd(impl, limit, poll_ms):
    args = [str(limit), str(TTL_S), str(poll_ms)]
    if impl == "redislock-py":
        return [PY, "semaphore_worker.py", "redislock"] + args
    if impl == "ria":
        return [PY, "semaphore_worker.py", "ria"] + args
    if impl == "redislock-php":
        return ["php", "semaphore_worker.php", "redislock"] + args
    return ["php", "semaphore_worker.php", impl] + args


def snapshot(r):
    """total_commands_processed and the calls per command (2 INFO calls)."""
    stats, cmds = r.info("stats"), r.info("commandstats")
    return stats["total_commands_processed"], {k[len("cmdstat_"):]: v["calls"] for k, v in cmds.items()}


def analyse(results):
    """Hand-offs, barging and the most holders seen, from the stamps."""
    events = []                                       # (time, kind, worker, call)
    for i, w in enumerate(results):
        for c, a, rl in zip(w["call"], w["acq"], w["rel"]):
            events.append((a, 1, i, c))
            events.append((rl, 0, i, None))
    events.sort(key=lambda e: (e[0], e[1]))           # at a tie, the release first
    calls = [w["call"] for w in results]
    acqs = [w["acq"] for w in results]

    def someone_waiting(t, but):
        """Was a worker other than `but` inside acquire at time t?"""
        for j in range(len(results)):
            if j == but:
                continue
            k = bisect.bisect_right(calls[j], t) - 1  # its last call before t
            if k >= 0 and acqs[j][k] > t:
                return True
        return False

    pending, head = [], 0                             # releases whose permit is free
    handoffs, barges, entries, open_now, most = [], 0, 0, 0, 0
    for t, kind, i, c in events:
        if kind == 0:
            pending.append(t)
            open_now -= 1
            continue
        open_now += 1
        most = max(most, open_now)
        entries += 1
        if head == len(pending):                      # a permit never held before
            continue
        t_rel = pending[head]
        head += 1
        if c < t_rel:
            handoffs.append(t - t_rel)
        elif someone_waiting(t_rel, i):
            barges += 1
    handoffs.sort()
    return handoffs, barges, entries, most


def run_one(impl, args, port, rnd):
    env = dict(os.environ, BENCH_HOST=HOST, BENCH_PORT=str(port), REDISLOCK_PROJECT=ROOT)
    r = redis.Redis(host=HOST, port=port)
    r.flushdb()
    r.rpush(SLOTS_KEY, *[str(k) for k in range(args.limit)])
    rtt = rtt_us(100, port)

    procs = [subprocess.Popen(worker_cmd(impl, args.limit, args.poll_ms), cwd=HERE, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(args.workers)]
    for p in procs:                                   # wait until all are connected
        line = p.stdout.readline().strip()
        if line != "ready":
            for q in procs:
                q.kill()                              # only our own children, by PID
            raise SystemExit(f"{impl}: a worker did not start (said {line!r})")

    start = time.monotonic_ns() + 300_000_000
    end = start + int(args.seconds * 1e9)
    for p in procs:
        p.stdin.write("%d %d\n" % (start, end))
        p.stdin.flush()
    sleep_until(start)
    c0, k0 = snapshot(r)
    sleep_until(end)
    c1, k1 = snapshot(r)

    results = []
    for p in procs:                                   # workers drain after END
        try:
            out, _ = p.communicate(timeout=120)
            results.append(json.loads(out.strip().splitlines()[-1]))
        except (subprocess.TimeoutExpired, IndexError, ValueError):
            p.kill()                                  # only our own child, by PID
            p.communicate()
            results.append({"call": [], "acq": [], "rel": [], "noslot": 0, "hung": True})

    counts = [len(w["acq"]) for w in results]
    total = sum(counts)
    counters = sum(int(r.get(COUNTER_KEY + str(k)) or 0) for k in range(args.limit))
    noslot = sum(w.get("noslot", 0) for w in results)
    handoffs, barges, entries, most = analyse(results)
    waits = sorted(a - c for w in results for c, a in zip(w["call"], w["acq"]))
    window = (end - start) / 1e9
    dcmd = c1 - c0 - 2                                # less the 2 INFO calls of a snapshot
    d = {k: k1[k] - k0.get(k, 0) for k in k1}
    h50 = percentile(handoffs, 50) / 1000.0 if handoffs else None
    rec = {
        "bench": "semaphore", "impl": impl, "round": rnd, "workers": args.workers,
        "limit": args.limit, "poll_ms": args.poll_ms, "seconds": args.seconds, "rtt_us": rtt,
        "acquisitions": total, "acq_per_s": total / window,
        "fair_min": min(counts), "fair_max": max(counts),
        "hung_workers": sum(1 for w in results if w.get("hung")),
        "lost_updates": total - counters - noslot, "noslot": noslot, "max_holders": most,
        "handoffs": len(handoffs),
        "handoff_p50_us": h50,
        "handoff_p90_us": percentile(handoffs, 90) / 1000.0 if handoffs else None,
        "handoff_p50_rtt": h50 / rtt if h50 is not None else None,
        "to_waiter_frac": len(handoffs) / max(1, entries),
        "barge_frac": barges / max(1, entries),
        "wait_p50_ms": percentile(waits, 50) / 1e6 if waits else None,
        "wait_p99_ms": percentile(waits, 99) / 1e6 if waits else None,
        "wait_max_ms": waits[-1] / 1e6 if waits else None,
        "cmds_per_acq": dcmd / max(1, total),
        "calls_per_acq": {k: round(v / max(1, total), 2) for k, v in sorted(d.items())
                          if v and k != "info"},
    }
    with open(args.out, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
    return rec


FIGURES = [  # key, heading, format
    ("handoff_p50_us", "hand-off p50", "{:.0f} µs"),
    ("handoff_p90_us", "hand-off p90", "{:.0f} µs"),
    ("handoff_p50_rtt", "p50 in RTT", "{:.1f}"),
    ("cmds_per_acq", "cmds/acq", "{:.1f}"),
    ("acq_per_s", "acq/s", "{:.0f}"),
]


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(f, v):
    return "-" if v is None else f.format(v)


def summarise(got, args):
    rounds = sorted({r for recs in got.values() for r in recs})
    lines = [f"{args.workers} worker processes, semaphore of {args.limit}, "
             f"{len(rounds)} rounds of {args.seconds:g} s, poll {args.poll_ms:g} ms "
             f"(symfony, ria; laravel: 250 ms fixed); medians over rounds", "",
             "| implementation | hand-off p50 | hand-off p90 | p50 in RTT | cmds/acq | acq/s "
             "| least/most per worker | to waiter | barge | wait p99 / max | max holders | lost | noslot |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summary = {"workers": args.workers, "limit": args.limit, "seconds": args.seconds,
               "poll_ms": args.poll_ms, "rounds": len(rounds), "impls": {}, "ratios": {}}
    for impl in [i for i in args.impls if i in got]:
        recs = list(got[impl].values())
        m = {k: med([x[k] for x in recs]) for k, _, _ in FIGURES}
        m["fairness"] = med([x["fair_min"] / max(1, x["fair_max"]) for x in recs])
        for k in ["to_waiter_frac", "barge_frac", "wait_p99_ms", "wait_max_ms"]:
            m[k] = med([x[k] for x in recs])
        worst = {"max_holders": max(x["max_holders"] for x in recs),
                 "lost_updates": sum(x["lost_updates"] for x in recs),
                 "noslot": sum(x["noslot"] for x in recs),
                 "hung_workers": sum(x["hung_workers"] for x in recs)}
        fair = med([x["fair_min"] for x in recs]), med([x["fair_max"] for x in recs])
        summary["impls"][impl] = dict(m, **worst)
        lines.append(f"| {impl} | " + " | ".join(fmt(f, m[k]) for k, _, f in FIGURES)
                     + f" | {fair[0]:.0f} / {fair[1]:.0f} ({m['fairness']:.2f}) | {m['to_waiter_frac']:.0%}"
                     + f" | {m['barge_frac']:.0%} | {fmt('{:.1f}', m['wait_p99_ms'])} / "
                     + f"{fmt('{:.0f} ms', m['wait_max_ms'])}"
                     + f" | {worst['max_holders']} | {worst['lost_updates']} | {worst['noslot']} |"
                     + (f" {worst['hung_workers']} hung" if worst["hung_workers"] else ""))
    lines += ["", "redislock / anchor, median (min-max) of the ratios inside each round "
              "(same language first):", "",
              "| pair | " + " | ".join(h for _, h, _ in FIGURES) + " |",
              "|---|" + "---|" * len(FIGURES)]
    pairs = [(o, a) for o in OURS for a in ANCHORS if LANG[o] == LANG[a]]
    pairs += [(o, a) for o in OURS for a in ANCHORS if LANG[o] != LANG[a]]
    for ours, anchor in pairs:
        if ours not in got or anchor not in got:
            continue
        cells, rat = [], {}
        for k, _, _ in FIGURES:
            vals = [got[ours][r][k] / got[anchor][r][k] for r in rounds
                    if r in got[ours] and r in got[anchor]
                    and got[ours][r][k] is not None and got[anchor][r][k]]
            rat[k] = vals
            cells.append(f"{med(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})" if vals else "-")
        summary["ratios"][f"{ours}/{anchor}"] = rat
        lines.append(f"| {ours} / {anchor} | " + " | ".join(cells) + " |")
    lines += ["", "cmds/acq: INFO total_commands_processed per acquisition, commands inside "
              "scripts and MULTI included, the bench's own 4 (LPOP, GET, SET, RPUSH) included. "
              "to waiter: share of entries that were hand-offs to a waiting worker (the hand-off "
              "columns cover only these); barge: share taken by a fresh call while others waited. "
              "max holders must be <= " + str(args.limit) + "; lost and noslot summed over rounds."]
    return "\n".join(lines), summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--limit", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--poll-ms", type=float, default=10.0,
                    help="retry interval of symfony and ria (laravel's is fixed at 250 ms)")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--out", help="append one JSON line per run (default bench/results/DATE/semaphore.jsonl)")
    ap.add_argument("--json", help="write the summary (medians and ratios) as JSON")
    args = ap.parse_args()
    args.impls = [i for i in args.impls.split(",") if i]
    for i in args.impls:
        if i not in IMPLS:
            raise SystemExit(f"unknown implementation {i} (have {', '.join(IMPLS)})")
    if not args.out:
        out_dir = os.path.join(HERE, "results", datetime.date.today().isoformat())
        os.makedirs(out_dir, exist_ok=True)
        args.out = os.path.join(out_dir, "semaphore.jsonl")

    server = RedisServer()
    got = {}
    try:
        for rnd in range(args.rounds):
            k = rnd % len(args.impls)
            order = args.impls[k:] + args.impls[:k]
            if rnd % 2:
                order.reverse()
            for impl in order:
                rec = run_one(impl, args, server.port, rnd)
                got.setdefault(impl, {})[rnd] = rec
                print(f"round {rnd} {impl}: hand-off p50 {fmt('{:.0f}', rec['handoff_p50_us'])} µs, "
                      f"{rec['cmds_per_acq']:.1f} cmds/acq, {rec['acq_per_s']:.0f} acq/s, "
                      f"max holders {rec['max_holders']}, lost {rec['lost_updates']}",
                      file=sys.stderr, flush=True)
    finally:
        server.stop()
    table, summary = summarise(got, args)
    print("\n" + table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
