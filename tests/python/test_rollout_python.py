"""A rolling migration from redis-py's Lock to redislock's drop-in.

For a while some processes of a fleet still take a name with redis-py's own
``redis.lock.Lock`` and others with ``redislock.compat.redis_py.Lock``. Each
side runs here in a process of its own (rollout_peer.py, the real classes on
a real redis-py client), both ways round: a holder on either class excludes
the other class (a single try, and a wait bounded by blocking_timeout) until
it releases or its lock expires, after which the other takes it; and a
process whose lock expired and went to the other class can neither release,
extend nor reacquire what the other now holds (ownership is the token).
"""
import json
import os
import queue
import subprocess
import sys
import threading

import pytest

from helpers import DEADLINE, info_stat, queued, wait_until

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rollout_peer.py")
NAME = "rollout"
MODULES = {"redis-py": "redis.lock", "compat": "redislock.compat.redis_py"}
DIRECTIONS = [("redis-py", "compat"), ("compat", "redis-py")]


class Peer:
    """One process with one Lock object of its class for NAME."""

    def __init__(self, port: int, kind: str):
        self.kind = kind
        self.proc = subprocess.Popen([sys.executable, PEER, str(port), kind, NAME],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        self.replies: "queue.Queue" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))
        self.replies.put(None)

    def send(self, op: str, **kwargs) -> None:
        self.proc.stdin.write(json.dumps(dict(op=op, **kwargs)) + "\n")
        self.proc.stdin.flush()

    def reply(self):
        try:
            r = self.replies.get(timeout=3 * DEADLINE)
        except queue.Empty:
            pytest.fail(f"the {self.kind} process did not answer within {3 * DEADLINE} s")
        assert r is not None, f"the {self.kind} process exited ({self.proc.poll()})"
        return r

    def ok(self, op: str, **kwargs):
        """The result of a command that must not raise."""
        self.send(op, **kwargs)
        r = self.reply()
        assert "ok" in r, f"{self.kind} {op}: {r}"
        return r["ok"]

    def error(self, op: str, **kwargs) -> str:
        """The name of the exception a command raises (it must raise)."""
        self.send(op, **kwargs)
        r = self.reply()
        assert "error" in r, f"{self.kind} {op} did not raise: {r}"
        assert r["lock_name"] == NAME
        return r["error"]

    def new(self, **kwargs) -> None:
        assert self.ok("new", **kwargs) == MODULES[self.kind]  # the real class of each side

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def fleet(server):
    peers = []

    def start(kind: str) -> Peer:
        p = Peer(server.port, kind)
        peers.append(p)
        return p

    yield start
    for p in peers:
        p.close()


def set_calls(raw) -> int:
    """SET commands the server ran (redis-py's Lock tries with SET NX)."""
    return int(raw.info("commandstats").get("cmdstat_set", {}).get("calls", 0))


def wait_for_waiter(raw, kind: str, sets_before: int) -> None:
    """Until the peer of class `kind` is seen waiting for NAME on the server:
    redislock's waiter queues itself; redis-py's retries SET NX every
    `sleep` (0.1 s) seconds."""
    if kind == "compat":
        wait_until(lambda: queued(raw, NAME) == 1, what="redislock's waiter to queue")
    else:
        wait_until(lambda: set_calls(raw) >= sets_before + 3, what="redis-py's waiter to retry")


@pytest.mark.parametrize("holder_kind,other_kind", DIRECTIONS)
def test_each_class_excludes_the_other_until_released(fleet, raw, holder_kind, other_kind):
    holder, other = fleet(holder_kind), fleet(other_kind)
    holder.new(timeout=60)
    other.new(timeout=60)

    assert holder.ok("acquire", blocking=False) is True
    token = holder.ok("token")
    assert raw.get(NAME).decode() == token
    assert other.ok("acquire", blocking=False) is False
    assert other.ok("acquire", blocking_timeout=0.3) is False
    assert other.ok("token") is None
    # Not acquired: nothing of the holder's to release or extend.
    assert other.error("release") == "LockError"
    assert other.error("extend", additional_time=10) == "LockError"
    assert raw.get(NAME).decode() == token and holder.ok("owned") is True

    # A waiter of the other class gets the name once the holder releases it
    # (long before its 60 s TTL: nothing expires).
    sets = set_calls(raw)
    other.send("acquire", blocking_timeout=3 * DEADLINE)
    wait_for_waiter(raw, other_kind, sets)
    assert raw.get(NAME).decode() == token  # still the holder's while it waits
    assert holder.ok("release") is None
    assert other.reply() == {"ok": True}
    theirs = other.ok("token")
    assert theirs != token and raw.get(NAME).decode() == theirs
    assert info_stat(raw, "expired_keys") == 0

    # And the other way round: the first class is now excluded.
    assert holder.ok("acquire", blocking=False) is False
    assert holder.ok("acquire", blocking_timeout=0.3) is False
    assert holder.error("release") == "LockError"
    assert raw.get(NAME).decode() == theirs and other.ok("owned") is True
    assert holder.ok("owned") is False
    assert other.ok("release") is None
    assert raw.get(NAME) is None


@pytest.mark.parametrize("stale_kind,other_kind", DIRECTIONS)
def test_an_expired_holder_cannot_touch_the_other_classes_lock(fleet, raw, stale_kind, other_kind):
    stale, other = fleet(stale_kind), fleet(other_kind)
    stale.new(timeout=1)
    other.new(timeout=60)

    assert stale.ok("acquire", blocking=False) is True
    stale_token = stale.ok("token")
    expired = info_stat(raw, "expired_keys")
    # Nobody releases: the waiter of the other class gets the name when the
    # 1 s lock expires.
    assert other.ok("acquire", blocking_timeout=3 * DEADLINE) is True
    theirs = other.ok("token")
    assert theirs != stale_token and raw.get(NAME).decode() == theirs
    assert info_stat(raw, "expired_keys") == expired + 1

    # The expired holder still has its token; every owner-checked call
    # with it finds the name someone else's, and leaves it alone.
    assert stale.ok("token") == stale_token
    assert stale.ok("owned") is False
    assert stale.error("extend", additional_time=100) == "LockNotOwnedError"
    assert stale.error("extend", additional_time=100, replace_ttl=True) == "LockNotOwnedError"
    assert stale.error("reacquire") == "LockNotOwnedError"
    assert stale.error("release") == "LockNotOwnedError"
    assert raw.get(NAME).decode() == theirs
    assert 0 < raw.pttl(NAME) <= 60000  # not extended by any of them
    assert other.ok("owned") is True

    before = raw.pttl(NAME)
    assert other.ok("extend", additional_time=10) is True  # its own lock, as usual
    assert before < raw.pttl(NAME) <= before + 10000
    assert other.ok("release") is None
    assert raw.get(NAME) is None
