"""Semaphores and read-write locks from Python: `with`, `async with`,
threads and processes never holding more than the limit, no barging, a
queued writer stopping new readers, and bad arguments refused."""
import asyncio
import multiprocessing
import threading
import time

import pytest
import redis

import redislock
from helpers import DEADLINE, wait_until, wait_until_async


def queued(raw, name, kind):
    return raw.llen("{%s}:%s:queue" % (name, kind))


def nothing_left(raw, name, kind):
    return not raw.exists("{%s}:%s" % (name, kind), "{%s}:%s:info" % (name, kind),
                          "{%s}:%s:queue" % (name, kind))


def test_permits_up_to_the_limit_and_each_its_own_fence(client, raw):
    a = client.semaphore("exports", limit=2)
    b = client.semaphore("exports", limit=2)
    with a, b:
        assert a.fence < b.fence
        assert not client.semaphore("exports", limit=2).acquire(blocking=False)
        # The lock of the same name is another thing.
        with client.lock("exports", timeout=0):
            pass
    assert nothing_left(raw, "exports", "sem")


def test_threads_never_hold_more_than_the_limit(client, raw):
    inside, most, guard = [0], [0], threading.Lock()

    def work():
        sem = client.semaphore("pool", limit=3, timeout=DEADLINE)
        for _ in range(20):
            with sem:
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.001)
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert 2 <= most[0] <= 3
    assert nothing_left(raw, "pool", "sem")


def _hold(url, ready, go):
    c = redislock.Client(url)
    with c.semaphore("procs", limit=1, timeout=DEADLINE):
        ready.set()
        go.wait(DEADLINE)


def test_a_permit_held_by_another_process_excludes_until_released(server, client, raw):
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_hold, args=(server.url, ready, go))
    p.start()
    assert ready.wait(DEADLINE)
    waiter = client.semaphore("procs", limit=1, timeout=DEADLINE)
    got = []
    t = threading.Thread(target=lambda: got.append(waiter.acquire()))
    t.start()
    wait_until(lambda: queued(raw, "procs", "sem") == 1, what="the waiter to queue")
    go.set()
    t.join(DEADLINE)
    p.join(DEADLINE)
    assert got == [True] and waiter.owned()
    waiter.release()
    assert nothing_left(raw, "procs", "sem")


def test_a_queued_writer_stops_new_readers(client, raw):
    reader = client.read_lock("catalog")
    assert reader.acquire(blocking=False)
    writer = client.write_lock("catalog", timeout=DEADLINE)
    t = threading.Thread(target=writer.acquire)
    t.start()
    wait_until(lambda: queued(raw, "catalog", "rw") == 1, what="the writer to queue")
    assert not client.read_lock("catalog").acquire(blocking=False)
    reader.release()
    t.join(DEADLINE)
    assert writer.owned()
    writer.release()
    with client.read_lock("catalog", timeout=0), client.read_lock("catalog", timeout=0):
        pass
    assert nothing_left(raw, "catalog", "rw")


def test_async_with_and_a_cancelled_wait(client, raw):
    async def main():
        async with client.semaphore("aio", limit=1) as held:
            assert held.owned()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.semaphore("aio", limit=1).acquire_async(), 0.2)
            # The cancelled waiter leaves the queue in the background; a
            # release before that would hand it the permit (which it then
            # gives back).
            await wait_until_async(lambda: queued(raw, "aio", "sem") == 0,
                                   what="the cancelled waiter to leave")
        async with client.semaphore("aio", limit=1, timeout=0):
            pass

    asyncio.run(main())
    wait_until(lambda: nothing_left(raw, "aio", "sem"), what="nothing left")


@pytest.mark.parametrize("limit,permits", [(0, 1), (2, 0), (2, 3), (1_000_001, 1)])
def test_bad_limits_are_refused_before_any_io(dead_url, limit, permits):
    client = redislock.Client(dead_url)
    with pytest.raises(ValueError):
        client.semaphore("bad", limit=limit, permits=permits)


def _server_ms(raw):
    sec, usec = raw.time()
    return sec * 1000 + usec // 1000


def test_a_sigkilled_holders_permits_come_back_when_its_lease_ends(server, client, raw):
    # A process takes 2 permits of 3 with a 2 s lease and is killed; a
    # waiter for 2 permits gets them by its own retry once the lease ran out
    # on the server's clock: not before (the dead holder's permits are not
    # taken early), and not long after (nobody has to notice the death).
    code = ("import sys, time, redislock\n"
            "c = redislock.Client(sys.argv[1])\n"
            "s = c.semaphore('killed', limit=3, permits=2, ttl=2.0)\n"
            "assert s.acquire(blocking=False)\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n")
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", code, server.url], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"held\n"
        [(token, lease_end)] = raw.zrange("{killed}:sem", 0, -1, withscores=True)
        child.kill()
        assert child.wait(DEADLINE) == -9
        waiter = client.semaphore("killed", limit=3, permits=2, ttl=5.0, timeout=DEADLINE)
        assert waiter.acquire()
        entered = _server_ms(raw)
        s = client.stats()
        assert (s["acquired_after_wait"], s["acquired_handed_over"]) == (1, 0)
        assert entered >= lease_end, "the dead holder's permits were taken before its lease ended"
        assert entered - lease_end < 5000, f"{entered - lease_end} ms after the lease ended"
        # The dead holder is gone from the server's books.
        assert raw.zrange("{killed}:sem", 0, -1) == [waiter.token]
        waiter.release()
        assert nothing_left(raw, "killed", "sem")
    finally:
        child.kill()
        child.wait()


def test_over_redlock_a_semaphore_of_2_needs_every_node_and_rw_a_majority():
    from redis_server import RedisServer
    servers = [RedisServer() for _ in range(3)]
    try:
        client = redislock.Client([s.url for s in servers], node_timeout=2.0)
        a = client.semaphore("rl-sem", limit=2, ttl=10.0)
        b = client.semaphore("rl-sem", limit=2, ttl=10.0)
        assert a.acquire(blocking=False) and b.acquire(blocking=False)
        assert a.fence > 0 and b.fence > 0
        assert not client.semaphore("rl-sem", limit=2, ttl=10.0).acquire(blocking=False)
        a.release()
        b.release()
        r = client.read_lock("rl-rw", ttl=10.0)
        assert r.acquire(blocking=False)
        assert not client.write_lock("rl-rw", ttl=10.0).acquire(blocking=False)
        r.release()
        # (A release returns once a majority answered.)
        raws = [redis.Redis(port=s.port) for s in servers]
        wait_until(lambda: not any(x.exists("{rl-rw}:rw") for x in raws),
                   what="the reader released on every node")
        # One node down: the read-write lock needs a majority and still
        # works; the semaphore of 2 needs all 3 nodes.
        servers[2].stop()
        w = client.write_lock("rl-rw", ttl=10.0)
        assert w.acquire(blocking=False)
        w.release()
        with pytest.raises(redislock.LockQuorumError):
            client.semaphore("rl-down", limit=2, ttl=10.0).acquire(blocking=False)
    finally:
        for s in servers:
            s.stop()
