"""asyncio without threads: waiting tasks hold no executor thread and no
connection of their own, cancellation leaves the queue (and releases a lock
handed over at that moment), and a forked child never uses its parent's
runtime."""
import asyncio
import os
import subprocess
import sys
import time

import pytest
import redis

import redislock
from helpers import DEADLINE, queued, wait_until_async


def connections(raw):
    me = raw.client_id()
    return [c for c in raw.client_list() if int(c["id"]) != me]


async def wait_for(check, what="the condition", timeout=DEADLINE):
    await wait_until_async(check, timeout=timeout, what=what)


def test_every_wait_mode(client, raw):
    async def main():
        lock = client.lock("m", ttl=10.0)
        assert await lock.acquire_async(blocking=False)
        other = client.lock("m", ttl=10.0)
        assert not await other.acquire_async(blocking=False)
        t = time.monotonic()
        assert not await other.acquire_async(timeout=0.3)
        assert time.monotonic() - t >= 0.3
        assert queued(raw, "m") == 0
        waiter = asyncio.create_task(other.acquire_async(timeout=None))
        await wait_for(lambda: queued(raw, "m") == 1)
        first = lock.fence
        await lock.release_async()
        assert await waiter
        assert other.fence > first
        with pytest.raises(redislock.LockTimeout):
            async with client.lock("m", ttl=1.0, timeout=0.1):
                pass
        await other.release_async()
        async with client.lock("m", ttl=5.0, timeout=0) as held:
            assert held.fence is not None
            assert raw.get("m") == held.token
        assert raw.get("m") is None
        with pytest.raises(redislock.LockNotOwned):
            await held.release_async()

    asyncio.run(main())


def test_a_thousand_waiting_tasks_leave_free_locks_free(client, raw, server):
    """The issue's starvation: with more waiting tasks than executor threads,
    a free lock must still be taken at once, over a handful of connections."""
    holders = [client.lock("h%d" % i, ttl=60.0) for i in range(100)]
    for h in holders:
        assert h.acquire(blocking=False)

    async def main():
        tasks = [
            asyncio.create_task(
                client.lock("h%d" % (i % 100), ttl=10.0, timeout=120.0).acquire_async()
            )
            for i in range(1000)
        ]
        await wait_for(lambda: sum(queued(raw, "h%d" % i) for i in range(100)) == 1000,
                       "the 1000 tasks to queue", timeout=60)
        t = time.monotonic()
        async with client.lock("free", ttl=5.0, timeout=0):
            took = time.monotonic() - t
        n = len(connections(raw))
        for h in holders:
            h.release()
        results = await asyncio.gather(*tasks)
        return took, n, results

    took, n, results = asyncio.run(main())
    # Starved, it would wait for the waiters' 120 s.
    assert took < 5.0, f"a free lock took {took:.3f} s"
    assert n <= 4, n
    assert all(results)


def test_cancelling_a_waiting_task_leaves_the_queue(client, raw):
    holder = client.lock("cx", ttl=60.0)
    assert holder.acquire(blocking=False)

    async def main():
        lock = client.lock("cx", ttl=10.0, timeout=None)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(lock.acquire_async(), 0.3)
        await wait_for(lambda: queued(raw, "cx") == 0)
        task = asyncio.create_task(lock.acquire_async())
        await wait_for(lambda: queued(raw, "cx") == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_for(lambda: queued(raw, "cx") == 0)

    asyncio.run(main())
    holder.release()
    # Nobody was handed the lock: it is free, not held until its TTL.
    assert raw.exists("cx") == 0
    assert raw.keys("*cx*") == []


def test_a_task_cancelled_before_its_first_step_never_queues(client, raw):
    holder = client.lock("cb", ttl=60.0)
    assert holder.acquire(blocking=False)

    async def main():
        for timeout in (None, 5.0):
            lock = client.lock("cb", ttl=10.0, timeout=timeout)
            task = asyncio.create_task(lock.acquire_async())
            task.cancel()  # before the task ran at all
            with pytest.raises(asyncio.CancelledError):
                await task
            assert queued(raw, "cb") == 0
        # Nor does one that is never awaited, or is closed unawaited.
        lock = client.lock("cb", ttl=10.0, timeout=None)
        lock.acquire_async().close()
        unawaited = lock.acquire_async()
        del unawaited
        await asyncio.sleep(0.2)
        assert queued(raw, "cb") == 0

    asyncio.run(main())
    holder.release()
    assert raw.keys("*cb*") == []


def test_asyncio_timeout_leaves_the_queue(client, raw):
    if not hasattr(asyncio, "timeout"):
        pytest.skip("asyncio.timeout is Python 3.11+")
    holder = client.lock("at", ttl=60.0)
    assert holder.acquire(blocking=False)

    async def main():
        lock = client.lock("at", ttl=10.0, timeout=None)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                async with lock:
                    pass
        await wait_for(lambda: queued(raw, "at") == 0)

    asyncio.run(main())
    holder.release()
    assert raw.keys("*at*") == []


def test_an_awaitable_made_outside_a_loop_runs_in_asyncio_run(client, raw):
    lock = client.lock("ol", ttl=10.0)
    assert asyncio.run(lock.acquire_async(blocking=False))
    assert raw.get("ol") == lock.token
    asyncio.run(lock.release_async())
    assert raw.exists("ol") == 0
    # Awaiting twice is an error, as for a coroutine.
    again = lock.acquire_async(blocking=False)

    async def twice():
        assert await again
        await again

    with pytest.raises(RuntimeError):
        asyncio.run(twice())
    lock.release()


def test_tasks_waiting_through_a_server_restart_are_all_served(server, raw):
    # Waiters come back within the connect timeout: generous, for a restart
    # on a busy machine.
    client = redislock.Client(server.url + "?connect_timeout=20s")
    holder = client.lock("rs", ttl=60.0)
    assert holder.acquire(blocking=False)
    order = []

    async def one(i):
        async with client.lock("rs", ttl=10.0, timeout=60.0):
            order.append(i)
            await asyncio.sleep(0.002)

    async def main():
        tasks = [asyncio.create_task(one(i)) for i in range(20)]
        await wait_for(lambda: queued(raw, "rs") == 20)
        await asyncio.to_thread(server.restart)
        await asyncio.gather(*tasks)

    asyncio.run(main())
    # Its key went with the restart. (Its pooled connection died with the
    # server, so the release may have to say it cannot tell whether its
    # first send arrived.)
    with pytest.raises((redislock.LockNotOwned, redislock.LockUnconfirmed)):
        holder.release()
    assert sorted(order) == list(range(20))
    assert raw.keys("*rs*") == []


def test_a_task_cancelled_at_hand_off_releases_what_it_was_handed(client, raw):
    async def main():
        for i in range(30):
            holder = client.lock("ho", ttl=60.0)
            assert await holder.acquire_async(blocking=False)
            lock = client.lock("ho", ttl=60.0, timeout=None)
            task = asyncio.create_task(lock.acquire_async())
            await wait_for(lambda: queued(raw, "ho") == 1)
            if i % 2:
                await holder.release_async()
                await asyncio.sleep(i * 0.0001)
                task.cancel()
            else:
                task.cancel()
                await asyncio.sleep(i * 0.0001)
                await holder.release_async()
            try:
                if await task:
                    await lock.release_async()
            except asyncio.CancelledError:
                pass
            await wait_for(lambda: raw.keys("*ho*") == [])

    asyncio.run(main())


def test_the_loop_never_blocks_while_tasks_wait(client, raw):
    holder = client.lock("busy", ttl=30.0)
    assert holder.acquire()

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        tick = asyncio.create_task(ticker())
        waiters = [
            asyncio.create_task(client.lock("busy", ttl=5.0, timeout=30.0).acquire_async())
            for _ in range(50)
        ]
        await wait_for(lambda: queued(raw, "busy") == 50 or any(w.done() for w in waiters),
                       "the 50 tasks to queue")
        # A wait that blocked the loop would end (timed out) before the
        # ticker ticked again.
        start = ticks
        await wait_for(lambda: ticks >= start + 50 or any(w.done() for w in waiters),
                       "50 ticks while the tasks wait")
        assert not any(w.done() for w in waiters), f"a wait ended after {ticks - start} ticks"
        holder.release()
        # Each releases as soon as it has the lock: a chain of hand-offs.
        for w in asyncio.as_completed(waiters):
            assert await w
        tick.cancel()

    # The waiters' locks are released when their Lock objects go.
    asyncio.run(main())
    assert client.stats()["acquired_handed_over"] == 50


def test_a_forked_child_makes_its_own_runtime(client, raw):
    """The parent's runtime, reader thread and connections serve an async
    waiter; a child forked meanwhile acquires and releases asynchronously
    on its own."""
    holder = client.lock("fk", ttl=30.0)
    assert holder.acquire()

    async def parent_waits():
        return await client.lock("fk", ttl=5.0, timeout=20.0).acquire_async()

    async def child_work():
        async with client.lock("fk-child", ttl=5.0, timeout=5.0) as l:
            assert l.fence is not None
        lock = client.lock("fk", ttl=5.0)
        return await lock.acquire_async(blocking=False)

    async def main():
        task = asyncio.create_task(parent_waits())
        await wait_for(lambda: queued(raw, "fk") == 1)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                # The parent holds "fk"; the child sees it held.
                code = 0 if asyncio.run(child_work()) is False else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        holder.release()
        return os.waitstatus_to_exitcode(status), await task

    code, got = asyncio.run(main())
    assert code == 0
    assert got
    assert raw.get("fk-child") is None


EXIT_SCRIPT = """
import asyncio, sys, redislock
client = redislock.Client(sys.argv[1])
with client.lock("exit", ttl=30.0, timeout=10.0) as lock:
    assert lock.fence
async def main():
    for _ in range(3):
        async with client.lock("exit", ttl=30.0, timeout=10.0, fenced=True) as lock:
            assert lock.fence
asyncio.run(main())
"""


def test_the_interpreter_exits_cleanly_after_asyncio_calls(server):
    """The runtime's threads finish with Python (an asyncio future's result,
    its loop's references) after the awaiting code has moved on. One still
    at it when the interpreter finalized was ended by CPython in the middle
    of Rust code, which then freed Python objects without the GIL: a
    SIGSEGV or an abort at exit, in 15 of 100 runs of the README's example
    on a busy machine. The module's atexit callback stops them first."""
    runs, at_once = 32, 4
    failed = []
    for _ in range(runs // at_once):
        procs = [subprocess.Popen([sys.executable, "-c", EXIT_SCRIPT, server.url],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(at_once)]
        for p in procs:
            out, err = p.communicate(timeout=120)
            if p.returncode != 0:
                failed.append(f"exit status {p.returncode}: {err.decode(errors='replace')[-400:]}")
    assert not failed, f"{len(failed)} of {runs} runs did not exit cleanly:\n" + "\n".join(failed)
