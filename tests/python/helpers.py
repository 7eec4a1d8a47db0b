"""What the tests wait for and how they read the server, in one place.

The rule these serve: a test never races the code it tests. It waits for
the event it expects, with a deadline generous for a busy machine (the
tests are quick when all goes well), and it reads the mechanism (the
server's keys, TTLs and INFO, the client's own statistics) rather than
the wall clock.
"""
import asyncio
import os
import sys
import time
from typing import Any, Callable

# How long a test waits for something that should happen at once or nearly:
# far beyond what a loaded machine takes, and still quick to fail.
DEADLINE = 20.0


def wait_until(predicate: Callable[[], Any], timeout: float = DEADLINE,
               what: str = "the condition", interval: float = 0.01) -> Any:
    """Poll `predicate` until it returns something true, and return that.
    Fails after `timeout` seconds, naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what} " \
                                            f"(last seen: {value!r})"
        time.sleep(interval)


async def wait_until_async(predicate: Callable[[], Any], timeout: float = DEADLINE,
                           what: str = "the condition", interval: float = 0.01) -> Any:
    """wait_until for a coroutine: the loop keeps running while it polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what} " \
                                            f"(last seen: {value!r})"
        await asyncio.sleep(interval)


def info_stat(raw, field: str, section: str = "stats") -> int:
    """A counter of the server's INFO (e.g. expired_keys, evicted_keys)."""
    return int(raw.info(section)[field])


def queued(raw, name: str) -> int:
    """How many waiters a single-server lock has in its queue on the server."""
    return raw.llen("{%s}:queue" % name)


def assert_ttl_set(raw, key, ttl: float, since: float) -> int:
    """The key's TTL is `ttl` seconds, set by an operation that started at
    `since` (time.monotonic()): PTTL is at most `ttl`, and less only by the
    time that has passed since then, however long that was. Returns PTTL."""
    pttl = raw.pttl(key)
    elapsed_ms = (time.monotonic() - since) * 1000
    top = round(ttl * 1000)
    # 2 ms: the server counts whole milliseconds, twice.
    assert top - elapsed_ms - 2 <= pttl <= top, \
        f"PTTL of {key!r} is {pttl} ms: expected {top} ms less the {elapsed_ms:.0f} ms since it was set"
    return pttl


# The proxy that cuts a reply (tests/fake/reply_cutter.py), shared with the
# PHP suite.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fake"))
from reply_cutter import ReplyCutter  # noqa: E402
