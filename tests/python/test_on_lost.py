"""on_lost=: run once per acquisition found lost, never stops renewal, and may
call back into its own Lock without a deadlock.

The scenarios that could deadlock run in a child interpreter with a time
limit: a deadlock holding the GIL would otherwise hang the whole test run.
"""
import asyncio
import gc
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from helpers import DEADLINE, wait_until, wait_until_async
from redislock import LockNotOwned

HERE = os.path.dirname(os.path.abspath(__file__))


def run_guarded(url, body, timeout=30):
    """Run `body` (with `url`, `client`, `raw` defined) in a child
    interpreter; its last stdout line is JSON, returned decoded."""
    script = textwrap.dedent("""
        import json, sys, threading, time
        import redis, redislock
        url = sys.argv[1]
        client = redislock.Client(url)
        raw = redis.Redis.from_url(url)
    """) + textwrap.dedent(body)
    try:
        proc = subprocess.run([sys.executable, "-c", script, url], capture_output=True, text=True,
                              timeout=timeout, cwd=HERE)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"deadlock: the scenario did not finish in {timeout} s\n{e.stdout}\n{e.stderr}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_renewal_finds_it_lost_and_runs_the_callback_once_on_its_thread(client, raw):
    calls = []
    fired = threading.Event()

    def on_lost():
        calls.append((threading.get_ident(), time.monotonic()))
        fired.set()

    # Renewed every 0.5 s: found lost at the next renewal.
    ttl = 1.5
    lock = client.lock("job", ttl=ttl, auto_renew=True, on_lost=on_lost)
    assert lock.acquire(blocking=False)
    stolen_at = time.monotonic()
    raw.set("job", "thief")
    assert fired.wait(DEADLINE), "on_lost did not run"
    (ident, at), = calls
    assert ident != threading.get_ident()
    assert client.stats()["renewals_lost"] == 1  # the renewal found it
    assert at - stolen_at < ttl, f"found lost {at - stolen_at:.3f} s after, not within a TTL"
    assert lock.lost
    # Finding it lost again (release, extend) does not run it again.
    with pytest.raises(LockNotOwned):
        lock.extend(5.0)
    with pytest.raises(LockNotOwned):
        lock.release()
    time.sleep(ttl / 2)
    assert len(calls) == 1
    assert raw.get("job") == b"thief"


def test_each_acquisition_registers_the_callback(client, raw):
    calls = []
    lock = client.lock("again", ttl=5.0, on_lost=lambda: calls.append(threading.get_ident()))
    for n in (1, 2):
        assert lock.acquire(blocking=False)
        raw.set("again", "thief")
        # Found by extend: on the caller's thread, before the call raises.
        with pytest.raises(LockNotOwned):
            lock.extend(5.0)
        assert calls == [threading.get_ident()] * n
        raw.delete("again")
        with pytest.raises(LockNotOwned):
            lock.release()  # lost: released nothing
        assert len(calls) == n
    # A release that finds it lost runs it too (once).
    assert lock.acquire(blocking=False)
    raw.set("again", "thief")
    with pytest.raises(LockNotOwned):
        lock.release()
    assert len(calls) == 3
    # A successful release never does.
    raw.delete("again")
    with lock:
        pass
    assert len(calls) == 3


def test_an_exception_in_the_callback_is_logged_and_renewal_goes_on(client, raw, caplog):
    caplog.set_level(logging.ERROR, logger="redislock")

    def boom():
        raise RuntimeError("boom from on_lost")

    doomed = client.lock("doomed", ttl=1.0, auto_renew=True, on_lost=boom)
    # Renewed every 0.5 s: lost only if the renewal thread stalled for 1 s.
    kept = client.lock("kept", ttl=1.5, auto_renew=True)
    assert doomed.acquire(blocking=False) and kept.acquire(blocking=False)
    raw.set("doomed", "thief")

    def logged():
        return [r for r in caplog.records if r.name == "redislock" and r.exc_info]

    wait_until(lambda: logged(), what="the callback's exception to be logged")
    record, = logged()
    assert record.levelno == logging.ERROR
    assert record.exc_info[0] is RuntimeError
    assert "boom from on_lost" in caplog.text and "Traceback" in caplog.text
    assert "doomed" in record.getMessage()
    # The same renewal thread goes on renewing the client's other lock.
    renewed = client.stats()["renewals_ok"]
    wait_until(lambda: client.stats()["renewals_ok"] >= renewed + 2,
               what="two more renewals of the other lock")
    assert not kept.lost and kept.owned()
    assert raw.pttl("kept") > 0
    kept.release()
    with pytest.raises(LockNotOwned):
        doomed.release()


def test_a_callback_that_calls_its_lock_on_the_renewal_thread_does_not_deadlock(server):
    out = run_guarded(server.url, """
        seen = {}
        done = threading.Event()
        def on_lost():
            seen["lost"] = lock.lost
            try:
                seen["fence"] = lock.fence
            except redislock.LockNotOwned:
                # Lost before it drew its fence: a holder that no longer
                # holds the lock gets no number.
                seen["fence"] = "not owned"
            try:
                lock.extend(5.0)
            except redislock.LockNotOwned:
                seen["extend"] = "not owned"
            try:
                lock.release()
            except redislock.LockNotOwned:
                seen["release"] = "not owned"
            seen["again"] = lock.acquire(blocking=False)   # the thief holds it
            seen["other"] = client.lock("other", ttl=5.0).acquire(blocking=False)
            done.set()
        lock = client.lock("job", ttl=1.0, auto_renew=True, on_lost=on_lost)
        assert lock.acquire(blocking=False)
        raw.set("job", "thief")
        assert done.wait(20)
        # The main thread meanwhile uses the same Lock and client.
        seen["after"] = lock.lost
        print(json.dumps(seen))
    """)
    assert out == {"lost": True, "fence": "not owned", "extend": "not owned", "release": "not owned",
                   "again": False, "other": True, "after": False}


def test_a_callback_that_releases_inside_extend_does_not_deadlock(server):
    out = run_guarded(server.url, """
        seen = {}
        def on_lost():
            seen["thread"] = threading.get_ident() == main
            seen["lost"] = lock.lost
            try:
                lock.release()
                seen["release"] = "released"
            except redislock.LockNotOwned:
                seen["release"] = "not owned"
        main = threading.get_ident()
        lock = client.lock("job", ttl=5.0, on_lost=on_lost)
        assert lock.acquire(blocking=False)
        raw.set("job", "thief")
        try:
            lock.extend(5.0)
        except redislock.LockNotOwned:
            seen["extend"] = "not owned"
        try:
            lock.fence
            seen["held"] = True
        except redislock.LockNotOwned as e:  # the callback released it, before a fence was drawn
            seen["held"] = "released before its fence was drawn" not in str(e)
        print(json.dumps(seen))
    """)
    assert out == {"thread": True, "lost": True, "release": "not owned", "extend": "not owned",
                   "held": False}


def test_other_threads_keep_running_while_the_callback_and_waits_run(server):
    # A thread blocked in acquire, one in a callback, the main one in Python
    # code: none waits for another's GIL.
    out = run_guarded(server.url, """
        holder = client.lock("busy", ttl=30.0)
        assert holder.acquire(blocking=False)
        got = []
        t = threading.Thread(target=lambda: got.append(
            client.lock("busy", ttl=5.0, timeout=20.0).acquire()))
        t.start()
        done = threading.Event()
        def on_lost():
            client.lock("busy", ttl=5.0).locked()
            done.set()
        lock = client.lock("job", ttl=0.6, auto_renew=True, on_lost=on_lost)
        assert lock.acquire(blocking=False)
        raw.set("job", "thief")
        spins = 0
        while not done.is_set():
            spins += 1
        holder.release()
        t.join(30)
        print(json.dumps({"spins": spins > 0, "got": got}))
    """)
    assert out == {"spins": True, "got": [True]}


def test_async_with_runs_the_callback_when_renewal_finds_it_lost(client, raw):
    calls = []

    async def main():
        lock = client.lock("task", ttl=1.0, auto_renew=True,
                           on_lost=lambda: calls.append(threading.get_ident()))
        with pytest.raises(LockNotOwned):
            async with lock:
                raw.set("task", "thief")
                await wait_until_async(lambda: calls, what="the renewal to find it lost")
                assert lock.lost

    asyncio.run(main())
    assert len(calls) == 1 and calls[0] != threading.get_ident()


def test_async_release_that_finds_it_lost_runs_the_callback(client, raw):
    calls = []

    async def main():
        lock = client.lock("task", ttl=5.0, on_lost=lambda: calls.append(1))
        assert await lock.acquire_async(blocking=False)
        raw.set("task", "thief")
        with pytest.raises(LockNotOwned):
            await lock.release_async()

    asyncio.run(main())
    assert calls == [1]


def test_a_lock_whose_callback_refers_to_it_is_collected_and_released(client, raw):
    def make():
        lock = client.lock("cycle", ttl=30.0, auto_renew=True, on_lost=lambda: lock.release())
        assert lock.acquire(blocking=False)

    make()
    gc.collect()
    wait_until(lambda: raw.get("cycle") is None, what="the collected lock's release")
    assert client.stats()["held_now"] == 0


def test_on_lost_must_be_callable(client):
    with pytest.raises(TypeError, match="on_lost must be callable"):
        client.lock("x", on_lost=42)
    client.lock("x", on_lost=None)


def test_synchronized_passes_on_lost(client, raw):
    calls = []

    @client.synchronized("sync-job", ttl=1.0, on_lost=lambda: calls.append(1))
    def work():
        raw.set("sync-job", "thief")
        wait_until(lambda: calls, what="on_lost")

    with pytest.raises(LockNotOwned):
        work()
    assert calls == [1]
