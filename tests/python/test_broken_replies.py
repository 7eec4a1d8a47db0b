"""A server that lies never talks the library into a grant (issue 51).

tests/fake/fake_redis.py serves, on one port per kind, a fake Redis that
answers the commands deciding a grant (SET ... NX ... GET and the acquire
scripts) with a broken reply of that kind: a negative length, a reply sent
twice, a frame before any command, a reply dribbled one byte at a time,
silence, garbage, a 512 MB bulk, 10,000-deep nesting, RESP3 frames, ... For
every kind, through the sync API and asyncio, a try-acquire (wait 0) and a
waiting acquire (wait 0.3 s), each on a client of its own kind with
command_timeout=1s and connect_timeout=1s, must:

1. not crash the process;
2. never return a held lock;
3. fail with the right kind of error: LockConnectionError for every kind
   but error_reply (LockServerError); a plain "not acquired" only where the
   server's reply did say "held" (EXPECTED below says which);
4. end within command_timeout + connect_timeout + wait + 1.5 s;
5. and all kinds together grow the process's RSS by less than 64 MB.

The kinds are run concurrently (a thread or a task per kind) so that the
suite takes a few seconds. The fake server uses no real server: the Valkey
pass of make test (REDIS_SERVER=...valkey-server) would only repeat this,
so it is skipped there.
"""
import asyncio
import os
import subprocess
import sys
import threading
import time

import pytest

import redislock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKE = os.path.join(ROOT, "tests", "fake", "fake_redis.py")

pytestmark = pytest.mark.skipif(
    "valkey" in os.environ.get("REDIS_SERVER", ""),
    reason="the fake server uses no real server: the Valkey pass would only repeat these tests")

COMMAND_TIMEOUT = 1.0
CONNECT_TIMEOUT = 1.0
WAIT = 0.3
SLACK = 1.5
RSS_GROWTH_MB = 64
LIFETIME = 60  # seconds: the fake server's, a watchdog

# What each call may end in, per kind: (try-acquire, waiting acquire).
# Outcomes: "connection" (LockConnectionError), "server" (LockServerError),
# "not_acquired" (a try-acquire that says the lock is held), "timeout" (a
# waiting acquire that ran out its wait). "granted" is never right.
CONNECTION = ({"connection"}, {"connection"})
EXPECTED = {
    "negative_bulk": CONNECTION,
    "negative_array": CONNECTION,
    # The first reply on a connection is a true "held"; the nil sent 5 ms
    # after it must never be read as the next command's reply. Found at once
    # (when both were read together) it is a protocol error.
    "reply_twice": ({"not_acquired", "connection"}, {"timeout", "connection"}),
    # A frame before any command is a protocol error; the replies after it
    # say "held".
    "unsolicited": ({"connection"}, {"timeout", "connection"}),
    "dribble": CONNECTION,
    "silent": CONNECTION,
    "random_bytes": CONNECTION,
    "truncated": CONNECTION,
    "huge_bulk": CONNECTION,
    "huge_array": CONNECTION,
    "deep_nesting": CONNECTION,
    "resp3": CONNECTION,
    "int_overflow": CONNECTION,
    "int_for_array": CONNECTION,
    "array_for_int": CONNECTION,
    "wrong_string": CONNECTION,
    "trailing_garbage": CONNECTION,
    "error_reply": ({"server"}, {"server"}),
    "bulk_too_long": CONNECTION,
    "close_at_once": CONNECTION,
    "empty_array": CONNECTION,
}


def kinds():
    out = subprocess.run([sys.executable, FAKE, "--list"], check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return out.split()


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.fixture(scope="module")
def fake():
    """One fake server process, one port per kind: {kind: port}. It exits
    by itself after LIFETIME seconds, which ends any call still hung on it."""
    proc = subprocess.Popen([sys.executable, FAKE, "--all", "--lifetime", str(LIFETIME)],
                            stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        ports = {}
        for line in proc.stdout:
            if line.strip() == "ready":
                break
            kind, port = line.split()
            ports[kind] = int(port)
        assert ports, "the fake server printed no ports"
        yield ports
    finally:
        proc.kill()
        proc.wait()


def url(port: int) -> str:
    return (f"redis://127.0.0.1:{port}/0?command_timeout={COMMAND_TIMEOUT:g}s"
            f"&connect_timeout={CONNECT_TIMEOUT:g}s")


def outcome(result, waiting: bool, exc=None) -> str:
    if exc is None:
        if result is True:
            return "granted"
        return "timeout" if waiting else "not_acquired"
    if isinstance(exc, redislock.LockConnectionError):
        return "connection"
    if isinstance(exc, redislock.LockServerError):
        return "server"
    if isinstance(exc, redislock.LockTimeout):
        return "timeout"
    return type(exc).__name__


def judge(kind, call, result, elapsed, wait):
    """The failures of one call, as lines."""
    exp = EXPECTED[kind][0 if wait == 0 else 1]
    out, message = result
    bad = []
    if out == "granted":
        bad.append(f"{kind} {call}: GRANTED a lock the server never gave")
    elif out not in exp:
        bad.append(f"{kind} {call}: {out} (expected {' or '.join(sorted(exp))}): {message}")
    bound = COMMAND_TIMEOUT + CONNECT_TIMEOUT + wait + SLACK
    if elapsed > bound:
        bad.append(f"{kind} {call}: took {elapsed:.2f} s (bound {bound:.1f} s)")
    return bad


def run_sync(kind, port):
    """(call, (outcome, message), elapsed, wait) for a try-acquire, then a
    waiting acquire, on a client of this kind's own."""
    client = redislock.Client(url(port))
    results = []
    for n, wait in enumerate((0, WAIT)):
        lock = client.lock(f"k:{kind}:{n}", ttl=10.0)
        t = time.monotonic()
        try:
            got = lock.acquire(blocking=True, timeout=wait) if wait else lock.acquire(blocking=False)
            res = (outcome(got, wait != 0), "")
        except Exception as e:  # noqa: BLE001 - every exception is an outcome here
            res = (outcome(None, wait != 0, e), str(e))
        elapsed = time.monotonic() - t
        if res[0] == "granted":
            try:
                lock.release()
            except Exception:  # noqa: BLE001
                pass
        results.append(("try-acquire" if wait == 0 else "acquire(wait=0.3)", res, elapsed, wait))
        time.sleep(0.05)  # a leftover frame is there when the next call is sent
    return results


async def run_async(kind, port):
    client = redislock.Client(url(port))
    results = []
    for n, wait in enumerate((0, WAIT)):
        lock = client.lock(f"k:{kind}:{n}", ttl=10.0)
        t = time.monotonic()
        try:
            if wait:
                got = await lock.acquire_async(blocking=True, timeout=wait)
            else:
                got = await lock.acquire_async(blocking=False)
            res = (outcome(got, wait != 0), "")
        except Exception as e:  # noqa: BLE001
            res = (outcome(None, wait != 0, e), str(e))
        elapsed = time.monotonic() - t
        if res[0] == "granted":
            try:
                await lock.release_async()
            except Exception:  # noqa: BLE001
                pass
        results.append(("async try-acquire" if wait == 0 else "async acquire(wait=0.3)",
                        res, elapsed, wait))
        await asyncio.sleep(0.05)
    return results


class Results(dict):
    """{(api, kind): [(call, result, elapsed, wait)]}, shown short in a
    failing test's report."""
    rss_growth_kb = 0

    def __repr__(self):
        return f"<the outcomes of {len(self)} clients>"


@pytest.fixture(scope="module")
def results(fake):
    """Every kind through the sync API (a thread per kind) and asyncio (a
    task per kind), at once: {(api, kind): [(call, result, elapsed, wait)]},
    with the RSS growth in kB."""
    before = rss_kb()
    out = Results()

    def one(kind):
        try:
            out[("sync", kind)] = run_sync(kind, fake[kind])
        except BaseException as e:  # noqa: BLE001 - reported by the test
            out[("sync", kind)] = [("sync", (f"{type(e).__name__}: {e}", ""), 0.0, 0)]

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in EXPECTED if k in fake]
    for t in threads:
        t.start()

    async def every():
        names = [k for k in EXPECTED if k in fake]
        got = await asyncio.gather(*(run_async(k, fake[k]) for k in names), return_exceptions=True)
        for k, r in zip(names, got):
            if isinstance(r, BaseException):
                r = [("async", (f"{type(r).__name__}: {r}", ""), 0.0, 0)]
            out[("asyncio", k)] = r

    asyncio.run(every())
    for t in threads:
        t.join(60)
    out.rss_growth_kb = rss_kb() - before
    return out


def test_every_kind_the_fake_server_has_is_in_the_table():
    assert kinds() == list(EXPECTED), \
        "tests/fake/fake_redis.py --list and EXPECTED differ: give each new kind its expected outcome"


@pytest.mark.parametrize("api", ["sync", "asyncio"])
@pytest.mark.parametrize("kind", list(EXPECTED))
def test_a_broken_reply_is_never_a_grant(results, api, kind):
    assert (api, kind) in results, f"{kind} did not finish"
    failures = []
    for call, res, elapsed, wait in results[(api, kind)]:
        failures += judge(kind, call, res, elapsed, wait)
    assert not failures, "; ".join(failures)


def test_no_unbounded_memory(results):
    grown_kb = results.rss_growth_kb
    assert grown_kb < RSS_GROWTH_MB * 1024, \
        f"RSS grew by {grown_kb / 1024:.0f} MB over every kind (bound {RSS_GROWTH_MB} MB)"
