#!/usr/bin/env python3
"""Partitions: a Sentinel deployment split by the network while C, Python
and PHP workers on both sides contend for ONE redislock lock; then the
same with a Cluster, a Redlock and a lone holder; then the figures.

    target/venv-test/bin/python tests/chaos/partition.py                # both URLs, a table
    target/venv-test/bin/python tests/chaos/partition.py --wait-replicas --json OUT

Needs root (`ip netns`, from iproute2). Two network namespaces made here
and deleted on the way out (also on Ctrl-C or an exception), joined by one
virtual link; nothing outside them is touched:

    side A (10.77.0.1): the master, and the workers of group A
    side B (10.77.0.2): one replica, three sentinels (down-after 2000 ms),
                        and the workers of group B

Every worker uses the same URL, the three sentinels. After --before
seconds the link goes down for --cut seconds (`ip link set … down`): the
master and group A are cut off from the replica, the sentinels and group
B, which promote the replica; then the link comes up again (the sentinels
turn the old master into a replica) and the run goes on for --after
seconds. This is the split brain of the Jepsen analyses of Redis
Sentinel: two masters at once, each with clients.

The workers are tests/chaos/worker.c, worker.py and worker.php in turn
on each side (--langs; three a side by default; fenced acquisition, TTL 2 s,
waiting up to 5 s; a critical section on a file store that refuses a
fence not above the stored one). The figures, from their CLOCK_MONOTONIC
stamps (every namespace shares the clock and the file system):

- grants on the old side after the promotion: acquisitions by group A
  between the moment side B's sentinels name the replica and the heal.
  Each is a lock the new master never saw: a second owner (a double grant)
  once group B holds it too;
- overlaps: two workers holding at once, lost updates, fence refusals (the
  store refusing a fence below one it has seen: the fenced storage
  catching a double grant), as in chaos.py;
- time from the cut to group A's last grant, from the promotion to group
  B's first, from the heal to group A's first.
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos  # noqa: E402  (tests/chaos/chaos.py)

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = chaos.SERVICE
A_IP, B_IP = "10.77.0.1", "10.77.0.2"
MASTER_PORT, REPLICA_PORT = 6379, 6380
SENTINEL_PORTS = (26379, 26380, 26381)
DOWN_AFTER_MS = 2000


def run(args: List[str], check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s%s" % (" ".join(args), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


class Net:
    """Two namespaces (side A, side B) joined by a veth pair."""

    def __init__(self) -> None:
        tag = "rl%d" % os.getpid()
        self.a, self.b = tag + "a", tag + "b"
        self.link_a = tag + "va"
        if os.geteuid() != 0:
            raise RuntimeError("partition.py needs root for ip netns")
        if shutil.which("ip") is None:
            raise RuntimeError("no `ip`: apt-get install iproute2")
        atexit.register(self.delete)
        for ns in (self.a, self.b):
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "link", "add", self.link_a, "netns", self.a, "type", "veth", "peer", "name", tag + "vb",
             "netns", self.b])
        run(["ip", "-n", self.a, "addr", "add", A_IP + "/24", "dev", self.link_a])
        run(["ip", "-n", self.b, "addr", "add", B_IP + "/24", "dev", tag + "vb"])
        self.heal()
        run(["ip", "-n", self.b, "link", "set", tag + "vb", "up"])

    def cut(self) -> None:
        run(["ip", "-n", self.a, "link", "set", self.link_a, "down"])

    def heal(self) -> None:
        run(["ip", "-n", self.a, "link", "set", self.link_a, "up"])

    def delete(self) -> None:
        chaos.kill_all()     # nothing may still run inside
        for ns in (self.a, self.b):
            run(["ip", "netns", "del", ns], check=False)


def in_ns(ns: Optional[str], args: List[str]) -> List[str]:
    """`args` run inside the namespace `ns` (None: here)."""
    return args if ns is None else ["ip", "netns", "exec", ns] + args


def cli(ns: str, host: str, port: int, *args: str) -> Optional[str]:
    """One redis-cli command inside `ns` (1 s at most): its output, None on failure."""
    try:
        r = subprocess.run(in_ns(ns, [chaos.cli_bin(), "-h", host, "-p", str(port), "--raw", *args]),
                           capture_output=True, text=True, timeout=3)
    except subprocess.TimeoutExpired:
        return None
    return r.stdout.strip() if r.returncode == 0 and not r.stdout.startswith("ERR") else None


def keys_left(ns: Optional[str], host: str, port: int) -> List[str]:
    """The keys on a server but the fence counters, which stay by design
    (fences never go backwards)."""
    return [k for k in (cli(ns, host, port, "KEYS", "*") or "").split() if not k.startswith("redislock:fence:")]


def wait_for(what: str, predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def server(ns: str, ip: str, port: int, base: str, extra: List[str]):
    d = os.path.join(base, "%s-%d" % (ip, port))
    os.makedirs(d, exist_ok=True)
    args = [chaos.server_bin(), "--port", str(port), "--bind", ip, "--protected-mode", "no", "--save", "", "--appendonly", "no",
            "--dir", d, "--logfile", "redis.log", "--repl-diskless-sync-delay", "0"] + extra
    p = chaos.spawn(in_ns(ns, args), cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    wait_for("redis-server %s:%d" % (ip, port), lambda: cli(ns, ip, port, "PING") == "PONG", 15)
    return p


def sentinel(ns: Optional[str], port: int, base: str, bind: str = B_IP,
             master: Tuple[str, int] = (A_IP, MASTER_PORT), binary: Optional[str] = None):
    """A sentinel on `bind`:`port` inside `ns`, watching `master` (down-after
    DOWN_AFTER_MS, quorum 2), of `binary` (default: the suite's server)."""
    d = os.path.join(base, "sentinel-%d" % port)
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write("port %d\nbind %s\nprotected-mode no\ndir %s\nlogfile sentinel.log\n"
                "sentinel monitor %s %s %d 2\n"
                "sentinel down-after-milliseconds %s %d\n"
                "sentinel failover-timeout %s 3000\n"
                % (port, bind, d, SERVICE, master[0], master[1], SERVICE, DOWN_AFTER_MS, SERVICE))
    p = chaos.spawn(in_ns(ns, [binary or chaos.server_bin(), conf, "--sentinel"]), cwd=d, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for("sentinel %d" % port, lambda: cli(ns, bind, port, "PING") == "PONG", 15)
    return p


# The languages of the workers, in turn on each side (main() sets them from
# --langs; the tests keep Python alone).
WORKER_LANGS = ["python"]
_C_WORKER: Dict[str, str] = {}


def worker_command(lang: str, base: str) -> List[str]:
    """How to start one chaos worker of `lang` (C: worker.c, compiled once
    per process against the library chaos.find_library() picks)."""
    if lang == "c":
        if "exe" not in _C_WORKER:
            _C_WORKER["exe"] = chaos.build_c_worker(tempfile.mkdtemp(prefix="c-", dir=base), chaos.find_library())
        return [_C_WORKER["exe"]]
    if lang == "php":
        return ["php", os.path.join(HERE, "worker.php")]
    return [sys.executable, os.path.join(HERE, "worker.py")]


def start_workers(run_dir: str, url: str, sides: List[tuple]) -> List[chaos.Worker]:
    """`sides`: (prefix, namespace, how many). Workers on the lock of `url`,
    of the languages of WORKER_LANGS in turn, started at once once every one
    is ready (DIR/go)."""
    with open(os.path.join(run_dir, "store"), "w") as f:
        f.write("0 0\n")
    env = dict(os.environ, REDISLOCK_LIB=chaos.find_library()) if set(WORKER_LANGS) - {"python"} else None
    workers = []
    for side, ns, n in sides:
        for i in range(n):
            lang = WORKER_LANGS[i % len(WORKER_LANGS)]
            wid = "%s%d" % (side, i)
            with open(os.path.join(run_dir, "stderr-%s.log" % wid), "w") as err:
                p = chaos.spawn(in_ns(ns, worker_command(lang, os.path.dirname(run_dir))
                                      + [url, run_dir, wid, "2000", "5000"]), cwd=run_dir, env=env,
                                stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT)
            workers.append(chaos.Worker(wid, lang, p))
    wait_for("the workers", lambda: all(os.path.exists(os.path.join(run_dir, "ready-" + w.wid))
                                        for w in workers), 60)
    open(os.path.join(run_dir, "go"), "w").close()
    return workers


def stop_workers(run_dir: str, workers: List[chaos.Worker]) -> tuple:
    """Stop them (DIR/stop): the store's counter and every attempt."""
    open(os.path.join(run_dir, "stop"), "w").close()
    for w in workers:
        try:
            w.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            w.killed = True
            chaos.kill_proc(w.proc)
    return chaos.read_store(run_dir)[0], chaos.read_events(run_dir, workers)


def named_master(net: Net) -> Optional[str]:
    out = cli(net.b, B_IP, SENTINEL_PORTS[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
    return ":".join(out.split()) if out else None


def side_figures(res: dict, events: List[dict], workers: List[chaos.Worker], t_cut: int,
                 t_promotion: Optional[int], t_heal: int) -> None:
    """The figures of a cut between group A (beside the old master) and
    group B (beside the promoted replica), into `res`."""
    oks = [e for e in events if e.get("ok")]
    side_a = [e["t1"] for e in oks if e["w"].startswith("a")]
    side_b = [e["t1"] for e in oks if e["w"].startswith("b")]
    ms = lambda t: None if t is None else round(t / 1e6, 1)  # noqa: E731
    res["promotion_after_cut_ms"] = ms(t_promotion - t_cut) if t_promotion else None
    res["old_side_grants_after_promotion"] = (
        sum(1 for t in side_a if t_promotion <= t < t_heal) if t_promotion else None)
    res["old_side_grants_during_cut"] = sum(1 for t in side_a if t_cut <= t < t_heal)
    last_a = max((t for t in side_a if t_cut <= t < t_heal), default=None)
    res["cut_to_old_side_last_grant_ms"] = ms(last_a - t_cut) if last_a else None
    first_b = min((t for t in side_b if t_promotion and t >= t_promotion), default=None)
    res["promotion_to_new_side_first_grant_ms"] = ms(first_b - t_promotion) if first_b else None
    first_a = min((t for t in side_a if t >= t_heal), default=None)
    res["heal_to_old_side_first_grant_ms"] = ms(first_a - t_heal) if first_a else None
    res["workers_not_granted_after_heal"] = sorted(
        w.wid for w in workers if not any(e["w"] == w.wid and e["t1"] >= t_heal for e in oks))
    res["errors_old_side_during_cut"] = {}
    for e in events:
        if not e.get("ok") and e["w"].startswith("a") and t_cut <= e["t1"] < t_heal:
            res["errors_old_side_during_cut"][e["err"]] = res["errors_old_side_during_cut"].get(e["err"], 0) + 1


def scenario(base: str, wait_replicas: bool, before: float, cut: float, after: float, per_side: int,
             recommended: bool = False, isolated: bool = False) -> dict:
    """One run; its figures. `isolated`: every worker on side B (the master
    cut off from everyone) rather than half of them beside it."""
    label = "sentinel " + ("master isolated" if isolated else "split brain") + (", wait_replicas=1" if wait_replicas else "") + (
        ", min-replicas-to-write 1" if recommended else "")
    res: dict = {"scenario": label}
    run_dir = tempfile.mkdtemp(prefix="run-", dir=base)
    net = Net()
    try:
        extra = ["--min-replicas-to-write", "1", "--min-replicas-max-lag", "2"] if recommended else []
        server(net.a, A_IP, MASTER_PORT, base, extra)
        server(net.b, B_IP, REPLICA_PORT, base, ["--replicaof", A_IP, str(MASTER_PORT)] + extra)
        wait_for("the replica to sync", lambda: "master_link_status:up" in (
            cli(net.b, B_IP, REPLICA_PORT, "INFO", "replication") or ""), 30)
        for port in SENTINEL_PORTS:
            sentinel(net.b, port, base)
        wait_for("the sentinels to know each other and the replica", lambda: all(
            "OK" in (cli(net.b, B_IP, p, "SENTINEL", "CKQUORUM", SERVICE) or "") for p in SENTINEL_PORTS), 60)
        query = "?wait_replicas=1&wait_timeout=100ms" if wait_replicas else ""
        url = "redis+sentinel://%s/%s%s" % (",".join("%s:%d" % (B_IP, p) for p in SENTINEL_PORTS), SERVICE, query)
        sides = [("b", net.b, 2 * per_side)] if isolated else [("a", net.a, per_side), ("b", net.b, per_side)]
        workers = start_workers(run_dir, url, sides)
        t_start = chaos.now()
        time.sleep(before)
        t_cut = chaos.now()
        net.cut()
        t_promotion = None
        old = "%s:%d" % (A_IP, MASTER_PORT)
        while chaos.now() < t_cut + cut * 1e9:
            if t_promotion is None and named_master(net) not in (None, old):
                t_promotion = chaos.now()
            time.sleep(0.02)
        t_heal = chaos.now()
        net.heal()
        time.sleep(after)
        t_stop = chaos.now()
        counter, events = stop_workers(run_dir, workers)
        fault = {"kind": "partition", "t_fault": t_cut, "old_master": MASTER_PORT, "new_master": REPLICA_PORT,
                 "t_promotion": t_promotion}
        res.update(chaos.analyze(events, [fault], workers, t_start, t_stop, counter))
        side_figures(res, events, workers, t_cut, t_promotion, t_heal)
        res["keys_left"] = None
        wait_for("the old master to follow the new one", lambda: "role:slave" in (
            cli(net.a, A_IP, MASTER_PORT, "INFO", "replication") or ""), 60)
        time.sleep(2.5)   # the TTL, with room
        res["keys_left"] = keys_left(net.b, B_IP, REPLICA_PORT)
    finally:
        chaos.kill_all()
        net.delete()
    return res


# --------------------------------------------------------------------------
# Cluster: the lock's slot master on side A with group A, the other two
# masters and its replica on side B with group B.

CLUSTER_PORTS = {"m1": 7001, "m2": 7002, "m3": 7003, "r1": 7004}
NODE_TIMEOUT_MS = 2000


def lock_slot() -> int:
    """The slot of the workers' lock (CRC16/XMODEM of its name)."""
    import binascii
    import worker  # tests/chaos/worker.py: NAME
    return binascii.crc_hqx(worker.NAME.encode(), 0) % 16384


def role(ns: str, ip: str, port: int) -> Optional[str]:
    out = cli(ns, ip, port, "ROLE")
    return out.split()[0] if out else None


def cluster_scenario(base: str, wait_replicas: bool, before: float, cut: float, after: float,
                     per_side: int, recommended: bool = False) -> dict:
    """Three masters and one replica; the master of the lock's slot (m1)
    and group A cut off from the rest for `cut` s: m1 is in the minority.
    `recommended`: min-replicas-to-write 1 on m1 and its replica (the
    other masters have no replica)."""
    label = "cluster: the lock's master in the minority" + (", wait_replicas=1" if wait_replicas else "") + (
        ", min-replicas-to-write 1" if recommended else "")
    res: dict = {"scenario": label}
    run_dir = tempfile.mkdtemp(prefix="run-", dir=base)
    net = Net()
    try:
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS)]
        where = {"m1": (net.a, A_IP), "m2": (net.b, B_IP), "m3": (net.b, B_IP), "r1": (net.b, B_IP)}
        for name, (ns, ip) in where.items():
            # In this run's directory: a node must not find the nodes.conf
            # of an earlier run.
            extra = ["--min-replicas-to-write", "1", "--min-replicas-max-lag", "2"] if (
                recommended and name in ("m1", "r1")) else []
            server(ns, ip, CLUSTER_PORTS[name], run_dir, args + extra)
        # From side B, whose redis-cli drives the creation (a node it cannot
        # ask yet counts as "not empty").
        wait_for("side B to reach m1", lambda: cli(net.b, A_IP, CLUSTER_PORTS["m1"], "PING") == "PONG", 15)
        # redis-cli gives the first master slots 0-5460, the second
        # 5461-10922, the third the rest: m1 goes where the lock's slot is.
        others = ["%s:%d" % (B_IP, CLUSTER_PORTS[n]) for n in ("m2", "m3")]
        others.insert(min(lock_slot() * 3 // 16384, 2), "%s:%d" % (A_IP, CLUSTER_PORTS["m1"]))
        run(in_ns(net.b, [chaos.cli_bin(), "--cluster", "create"] + others + ["--cluster-yes"]))
        m1_id = cli(net.a, A_IP, CLUSTER_PORTS["m1"], "CLUSTER", "MYID")
        run(in_ns(net.b, [chaos.cli_bin(), "--cluster", "add-node", "%s:%d" % (B_IP, CLUSTER_PORTS["r1"]),
                          "%s:%d" % (A_IP, CLUSTER_PORTS["m1"]), "--cluster-slave", "--cluster-master-id", m1_id]))
        wait_for("the replica to sync", lambda: "master_link_status:up" in (
            cli(net.b, B_IP, CLUSTER_PORTS["r1"], "INFO", "replication") or ""), 30)
        wait_for("every node to see the cluster ok", lambda: all(
            "cluster_state:ok" in (cli(ns, ip, CLUSTER_PORTS[n], "CLUSTER", "INFO") or "")
            for n, (ns, ip) in where.items()), 30)
        query = "?wait_replicas=1&wait_timeout=100ms" if wait_replicas else ""
        url = "redis+cluster://%s%s" % (",".join("%s:%d" % (ip, CLUSTER_PORTS[n]) for n, (_, ip) in where.items()
                                                 if n != "r1"), query)
        workers = start_workers(run_dir, url, [("a", net.a, per_side), ("b", net.b, per_side)])
        t_start = chaos.now()
        time.sleep(before)
        t_cut = chaos.now()
        net.cut()
        t_promotion = t_minority_fail = None
        while chaos.now() < t_cut + cut * 1e9:
            if t_promotion is None and role(net.b, B_IP, CLUSTER_PORTS["r1"]) == "master":
                t_promotion = chaos.now()
            if t_minority_fail is None and "cluster_state:fail" in (
                    cli(net.a, A_IP, CLUSTER_PORTS["m1"], "CLUSTER", "INFO") or ""):
                t_minority_fail = chaos.now()
            time.sleep(0.02)
        t_heal = chaos.now()
        net.heal()
        time.sleep(after)
        t_stop = chaos.now()
        counter, events = stop_workers(run_dir, workers)
        fault = {"kind": "partition", "t_fault": t_cut, "old_master": CLUSTER_PORTS["m1"],
                 "new_master": CLUSTER_PORTS["r1"], "t_promotion": t_promotion}
        res.update(chaos.analyze(events, [fault], workers, t_start, t_stop, counter))
        side_figures(res, events, workers, t_cut, t_promotion, t_heal)
        res["minority_refuses_after_cut_ms"] = (round((t_minority_fail - t_cut) / 1e6, 1)
                                                if t_minority_fail else None)
        master = ("r1", net.b, B_IP) if t_promotion else ("m1", net.a, A_IP)
        if t_promotion:
            wait_for("the old master to follow the new one",
                     lambda: role(net.a, A_IP, CLUSTER_PORTS["m1"]) == "slave", 60)
        time.sleep(2.5)   # the TTL, with room
        res["keys_left"] = keys_left(master[1], master[2], CLUSTER_PORTS[master[0]])
    finally:
        chaos.kill_all()
        net.delete()
    return res


# --------------------------------------------------------------------------
# A holder cut off from its server: the server and a second client (the
# taker) on side B, the holder alone on side A.

HOLDER_TTL_S = 3.0


def holder_main(url: str, d: str) -> None:
    """partition.py --holder URL DIR (inside side A): take the lock "cut",
    renewed, and stamp DIR/held, DIR/lost (on_lost), then take it again
    once the network is back and stamp DIR/again; stop at DIR/stop."""
    import redislock
    stamp = lambda name, text="": open(os.path.join(d, name), "w").write(  # noqa: E731
        "%d %s\n" % (chaos.now(), text))
    client = redislock.Client(url)
    lock = client.lock("cut", ttl=HOLDER_TTL_S, auto_renew=True, fenced=True,
                       on_lost=lambda: stamp("lost"))
    lock.acquire()
    stamp("held", str(lock.fence))
    while not os.path.exists(os.path.join(d, "lost")):
        time.sleep(0.005)
    while not os.path.exists(os.path.join(d, "healed")):
        time.sleep(0.005)
    again = client.lock("cut", ttl=HOLDER_TTL_S, fenced=True)
    while True:
        try:
            if again.acquire(timeout=30):
                break
        except redislock.LockError:
            time.sleep(0.05)
    stamp("again", str(again.fence))
    again.release()
    while not os.path.exists(os.path.join(d, "stop")):
        time.sleep(0.01)


def taker_main(url: str, d: str) -> None:
    """partition.py --taker URL DIR (inside side B): wait for the lock
    "cut", stamp DIR/taken, hold it 1 s, release."""
    import redislock
    lock = redislock.Client(url).lock("cut", ttl=HOLDER_TTL_S, fenced=True)
    assert lock.acquire(timeout=60)
    with open(os.path.join(d, "taken"), "w") as f:
        f.write("%d %s\n" % (chaos.now(), lock.fence))
    time.sleep(1)
    lock.release()


def holder_cut_scenario(base: str, cut: float = 8.0) -> dict:
    """The holder's side cut off from the server while it holds a renewed
    lock; the taker on the server's side waits for it."""
    res: dict = {"scenario": "a holder cut off from its server (TTL %.0f s, renewed)" % HOLDER_TTL_S}
    run_dir = tempfile.mkdtemp(prefix="run-", dir=base)
    net = Net()
    here = os.path.abspath(__file__)
    read = lambda name: open(os.path.join(run_dir, name)).read().split()  # noqa: E731
    has = lambda name: os.path.exists(os.path.join(run_dir, name))  # noqa: E731
    try:
        server(net.b, B_IP, MASTER_PORT, run_dir, [])
        url = "redis://%s:%d" % (B_IP, MASTER_PORT)
        for role_, ns in (("--holder", net.a), ("--taker", net.b)):
            with open(os.path.join(run_dir, "stderr%s.log" % role_), "w") as err:
                chaos.spawn(in_ns(ns, [sys.executable, here, role_, url, run_dir]), cwd=run_dir,
                            stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT)
            if role_ == "--holder":
                wait_for("the holder to hold", lambda: has("held"), 30)
        time.sleep(2 * HOLDER_TTL_S)   # renewals keep it; the taker waits
        assert not has("taken"), "the taker was granted a renewed lock"
        t_cut = chaos.now()
        net.cut()
        wait_for("the taker's grant", lambda: has("taken"), 30)
        wait_for("on_lost", lambda: has("lost"), 30)
        time.sleep(max(0.0, cut - (chaos.now() - t_cut) / 1e9))
        t_heal = chaos.now()
        net.heal()
        open(os.path.join(run_dir, "healed"), "w").close()
        wait_for("the holder to take it again", lambda: has("again"), 60)
        t_lost, t_taken, t_again = (int(read(n)[0]) for n in ("lost", "taken", "again"))
        fences = [int(read(n)[1]) for n in ("held", "taken", "again")]
        ms = lambda t: round(t / 1e6, 1)  # noqa: E731
        res["cut_to_on_lost_ms"] = ms(t_lost - t_cut)
        res["cut_to_taker_grant_ms"] = ms(t_taken - t_cut)
        res["on_lost_before_taker_ms"] = ms(t_taken - t_lost)
        res["heal_to_holder_again_ms"] = ms(t_again - t_heal)
        res["fences_rise"] = fences[0] < fences[1] < fences[2]
        res["overlaps"] = 0 if t_lost < t_taken else 1
        open(os.path.join(run_dir, "stop"), "w").close()
        time.sleep(HOLDER_TTL_S + 0.5)
        res["keys_left"] = keys_left(net.b, B_IP, MASTER_PORT)
    finally:
        chaos.kill_all()
        net.delete()
    return res


HOLDER_COLUMNS = [
    ("scenario", "scenario"),
    ("cut to on_lost ms", "cut_to_on_lost_ms"),
    ("cut to the other side's grant ms", "cut_to_taker_grant_ms"),
    ("on_lost before that grant ms", "on_lost_before_taker_ms"),
    ("heal to the holder's next grant ms", "heal_to_holder_again_ms"),
    ("fences rise", "fences_rise"),
    ("keys left", "keys_left"),
]


# --------------------------------------------------------------------------
# Redlock: three nodes in a namespace of their own, reached by each group
# over its own link; a cut drops a node's packets to one group (`ip rule …
# blackhole` on the nodes' side: the group's SYNs and commands arrive, no
# reply comes back), as a partition between them does.

NODE_IPS = ("10.77.9.1", "10.77.9.2", "10.77.9.3")
GROUP_NET = {"a": ("10.77.1.1", "10.77.1.254"), "b": ("10.77.2.1", "10.77.2.254")}


class RedlockNet:
    """Namespaces for group A, group B and the nodes (S)."""

    def __init__(self) -> None:
        tag = "rl%d" % os.getpid()
        self.ns = {"a": tag + "a", "b": tag + "b", "s": tag + "s"}
        if os.geteuid() != 0:
            raise RuntimeError("partition.py needs root for ip netns")
        atexit.register(self.delete)
        for ns in self.ns.values():
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        for ip in NODE_IPS:
            run(["ip", "-n", self.ns["s"], "addr", "add", ip + "/32", "dev", "lo"])
        for g, (ip, gw) in GROUP_NET.items():
            here, there = tag + g + "g", tag + g + "s"
            run(["ip", "link", "add", here, "netns", self.ns[g], "type", "veth", "peer", "name", there,
                 "netns", self.ns["s"]])
            run(["ip", "-n", self.ns[g], "addr", "add", ip + "/24", "dev", here])
            run(["ip", "-n", self.ns["s"], "addr", "add", gw + "/24", "dev", there])
            run(["ip", "-n", self.ns[g], "link", "set", here, "up"])
            run(["ip", "-n", self.ns["s"], "link", "set", there, "up"])
            run(["ip", "-n", self.ns[g], "route", "add", "10.77.9.0/24", "via", gw])
        self.rules: List[List[str]] = []

    def cut(self, group: str, nodes: List[int]) -> None:
        for n in nodes:
            rule = ["from", NODE_IPS[n], "to", GROUP_NET[group][0], "blackhole"]
            run(["ip", "-n", self.ns["s"], "rule", "add"] + rule)
            self.rules.append(rule)

    def heal(self) -> None:
        while self.rules:
            run(["ip", "-n", self.ns["s"], "rule", "del"] + self.rules.pop())

    def delete(self) -> None:
        chaos.kill_all()
        for ns in self.ns.values():
            run(["ip", "netns", "del", ns], check=False)


def redlock_scenario(base: str, cut_nodes: List[int], before: float, cut: float, after: float,
                     per_side: int) -> dict:
    """Group A cut off from the nodes `cut_nodes` (0-based) for `cut` s."""
    label = "redlock: group A cut off from %d of 3 nodes" % len(cut_nodes)
    res: dict = {"scenario": label}
    run_dir = tempfile.mkdtemp(prefix="run-", dir=base)
    net = RedlockNet()
    try:
        for ip in NODE_IPS:
            server(net.ns["s"], ip, MASTER_PORT, base, [])
        url = " ".join("redis://%s:%d" % (ip, MASTER_PORT) for ip in NODE_IPS)
        workers = start_workers(run_dir, url, [("a", net.ns["a"], per_side), ("b", net.ns["b"], per_side)])
        t_start = chaos.now()
        time.sleep(before)
        t_cut = chaos.now()
        net.cut("a", cut_nodes)
        time.sleep(cut)
        t_heal = chaos.now()
        net.heal()
        time.sleep(after)
        t_stop = chaos.now()
        counter, events = stop_workers(run_dir, workers)
        fault = {"kind": "partition", "t_fault": t_cut, "old_master": 0, "new_master": None, "t_promotion": None}
        res.update(chaos.analyze(events, [fault], workers, t_start, t_stop, counter))
        oks = [e for e in events if e.get("ok")]
        secs = (t_heal - t_cut) / 1e9
        for side in ("a", "b"):
            n = sum(1 for e in oks if e["w"].startswith(side) and t_cut <= e["t1"] < t_heal)
            res["group_%s_acq_per_s_during_cut" % side] = round(n / secs, 1)
        first_a = min((e["t1"] for e in oks if e["w"].startswith("a") and e["t1"] >= t_heal), default=None)
        res["heal_to_old_side_first_grant_ms"] = round((first_a - t_heal) / 1e6, 1) if first_a else None
        res["workers_not_granted_after_heal"] = sorted(
            w.wid for w in workers if not any(e["w"] == w.wid and e["t1"] >= t_heal for e in oks))
        errs: Dict[str, int] = {}
        for e in events:
            if not e.get("ok") and e["w"].startswith("a") and t_cut <= e["t1"] < t_heal:
                errs[e["err"]] = errs.get(e["err"], 0) + 1
        res["errors_old_side_during_cut"] = errs
        time.sleep(2.5)   # the TTL, with room
        res["keys_left"] = ["%s %s" % (ip, k) for ip in NODE_IPS for k in keys_left(net.ns["s"], ip, MASTER_PORT)]
    finally:
        chaos.kill_all()
        net.delete()
    return res


REDLOCK_COLUMNS = [
    ("scenario", "scenario"),
    ("overlaps", "overlaps"),
    ("lost updates", "lost_updates"),
    ("fence refusals", "fence_regressions"),
    ("group A acq/s in cut", "group_a_acq_per_s_during_cut"),
    ("group B acq/s in cut", "group_b_acq_per_s_during_cut"),
    ("group A errors in cut", "errors_old_side_during_cut"),
    ("group A: 1st grant after heal ms", "heal_to_old_side_first_grant_ms"),
    ("acq/s", "acq_per_s"),
]


COLUMNS = [
    ("scenario", "scenario"),
    ("promotion after cut ms", "promotion_after_cut_ms"),
    ("old side: grants after promotion", "old_side_grants_after_promotion"),
    ("old side: last grant after cut ms", "cut_to_old_side_last_grant_ms"),
    ("overlaps", "overlaps"),
    ("lost updates", "lost_updates"),
    ("fence refusals", "fence_regressions"),
    ("new side: 1st grant after promotion ms", "promotion_to_new_side_first_grant_ms"),
    ("minority master refuses after cut ms", "minority_refuses_after_cut_ms"),
    ("old side: 1st grant after heal ms", "heal_to_old_side_first_grant_ms"),
    ("acq/s", "acq_per_s"),
]


def table(results: List[dict], columns=None) -> str:
    columns = columns or COLUMNS
    head = "| " + " | ".join(c for c, _ in columns) + " |"
    sep = "|" + "---|" * len(columns)
    rows = ["| " + " | ".join("-" if r.get(k) is None else str(r.get(k)) for _, k in columns) + " |"
            for r in results]
    return "\n".join([head, sep] + rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wait-replicas", action="store_true", help="only the ?wait_replicas=1 URL")
    ap.add_argument("--recommended", action="store_true", help="only min-replicas-to-write 1 on the servers")
    ap.add_argument("--before", type=float, default=3.0)
    ap.add_argument("--cut", type=float, default=10.0)
    ap.add_argument("--after", type=float, default=8.0)
    ap.add_argument("--per-side", type=int, default=3)
    ap.add_argument("--langs", default="c,python,php", help="the workers' languages, in turn on each side")
    ap.add_argument("--isolated", action="store_true", help="only the master isolated from every worker")
    ap.add_argument("--redlock", action="store_true", help="only Redlock (three nodes), no Sentinel")
    ap.add_argument("--cluster", action="store_true", help="only Cluster (the lock's master in the minority)")
    ap.add_argument("--holder-cut", action="store_true", help="only a holder cut off from its server")
    ap.add_argument("--holder", nargs=2, metavar=("URL", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--taker", nargs=2, metavar=("URL", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--json", help="append each run's figures as a JSON line")
    a = ap.parse_args()
    if a.holder:
        holder_main(*a.holder)
        return 0
    if a.taker:
        taker_main(*a.taker)
        return 0
    WORKER_LANGS[:] = a.langs.split(",")
    timing = (a.before, a.cut, a.after, a.per_side)
    sentinel_runs = [(False, False, False), (True, False, False), (False, True, False), (False, False, True)]
    if a.wait_replicas:
        sentinel_runs = [(True, False, False)]
    elif a.recommended:
        sentinel_runs = [(False, True, False)]
    elif a.isolated:
        sentinel_runs = [(False, False, True)]
    everything = not (a.wait_replicas or a.recommended or a.isolated or a.redlock or a.cluster or a.holder_cut)
    runs = []   # (table, thunk)
    if everything or a.redlock:
        runs += [("redlock", lambda nodes=nodes: redlock_scenario(base, nodes, *timing)) for nodes in ([2], [0, 1])]
    if everything or a.cluster:
        runs += [("cluster", lambda w=w, r=r: cluster_scenario(base, w, *timing, recommended=r))
                 for w, r in ((False, False), (True, False), (False, True))]
    if everything or a.holder_cut:
        runs.append(("holder", lambda: holder_cut_scenario(base)))
    if not (a.redlock or a.cluster or a.holder_cut):
        runs += [("sentinel", lambda r=r: scenario(base, r[0], *timing, recommended=r[1], isolated=r[2]))
                 for r in sentinel_runs]
    base = tempfile.mkdtemp(prefix="redislock-partition-")
    tables: Dict[str, List[dict]] = {}
    try:
        for kind, thunk in runs:
            r = thunk()
            tables.setdefault(kind, []).append(r)
            print(json.dumps({k: v for k, v in r.items() if not k.endswith("examples")}), file=sys.stderr)
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    columns = {"redlock": REDLOCK_COLUMNS, "holder": HOLDER_COLUMNS}
    for kind in ("sentinel", "cluster", "redlock", "holder"):
        if kind in tables:
            print(table(tables[kind], columns.get(kind, COLUMNS)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
