"""@client.synchronized(...): the decorator form of the lock."""
import asyncio
import threading
import time

import pytest

import redislock


def test_exclusion_across_threads_and_result(client):
    inside = []
    overlaps = []
    guard = threading.Lock()

    @client.synchronized("sync:excl", ttl=5.0)
    def work(i):
        with guard:
            inside.append(i)
            if len(inside) > 1:
                overlaps.append(list(inside))
        time.sleep(0.02)
        with guard:
            inside.remove(i)
        return i * 2

    results = {}

    def run(i):
        results[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert overlaps == []
    assert results == {i: i * 2 for i in range(8)}
    assert work.__name__ == "work"  # functools.wraps


def test_exception_passes_through_and_releases(client, raw):
    class Boom(Exception):
        pass

    @client.synchronized("sync:boom")
    def fail():
        assert raw.exists("sync:boom")
        raise Boom("x")

    with pytest.raises(Boom):
        fail()
    assert not raw.exists("sync:boom")
    # The lock is free again: a try-once acquisition gets it.
    lock = client.lock("sync:boom", timeout=0)
    assert lock.acquire()
    lock.release()


def test_timeout_raises_lock_timeout(client):
    holder = client.lock("sync:busy", ttl=10.0)
    assert holder.acquire()
    called = []

    @client.synchronized("sync:busy", timeout=0.2)
    def f():
        called.append(1)

    t0 = time.monotonic()
    with pytest.raises(redislock.LockTimeout):
        f()
    assert time.monotonic() - t0 < 5
    assert called == []
    holder.release()
    f()
    assert called == [1]


def test_name_from_arguments(client, raw):
    seen = []

    @client.synchronized("sync:day:{day}:{kind}")
    def report(day, kind="full"):
        seen.append([k.decode() for k in raw.keys("sync:day:*")])
        return day

    assert report("mon") == "mon"
    assert report(day="tue", kind="short") == "tue"
    assert seen == [["sync:day:mon:full"], ["sync:day:tue:short"]]

    @client.synchronized(lambda a, b: f"sync:sum:{a + b}")
    def add(a, b):
        seen.append([k.decode() for k in raw.keys("sync:sum:*")])

    add(1, 2)
    assert seen[-1] == ["sync:sum:3"]
    assert raw.keys("sync:*") == []


def test_renewed_beyond_ttl(client, raw):
    # Renewed every 0.5 s: it expires only if the renewal thread stalls
    # for a whole second.
    ttl = 1.5

    @client.synchronized("sync:long", ttl=ttl)
    def long():
        time.sleep(ttl + 0.5)
        return raw.exists("sync:long"), client.stats()["renewals_ok"]

    exists, renewals = long()
    assert exists == 1, "expired: auto_renew did not keep it past its TTL"
    assert renewals >= 1
    assert not raw.exists("sync:long")


def test_lost_lock_is_reported_on_return(client, raw):
    @client.synchronized("sync:lost", ttl=5.0, auto_renew=False)
    def f():
        raw.delete("sync:lost")
        return 1

    with pytest.raises(redislock.LockNotOwned):
        f()


def test_generator_function_refused(client):
    with pytest.raises(TypeError):
        @client.synchronized("sync:gen")
        def gen():
            yield 1


def test_async_function(client, raw):
    inside = []
    overlaps = []

    @client.synchronized("sync:async", ttl=5.0, timeout=10.0)
    async def work(i):
        inside.append(i)
        if len(inside) > 1:
            overlaps.append(list(inside))
        await asyncio.sleep(0.02)
        inside.remove(i)
        return i + 100

    async def main():
        return await asyncio.gather(*(work(i) for i in range(6)))

    assert asyncio.run(main()) == [i + 100 for i in range(6)]
    assert overlaps == []
    assert not raw.exists("sync:async")


def test_async_exception_and_timeout(client, raw):
    @client.synchronized("sync:aboom")
    async def fail():
        raise KeyError("k")

    with pytest.raises(KeyError):
        asyncio.run(fail())
    assert not raw.exists("sync:aboom")

    holder = client.lock("sync:abusy", ttl=10.0)
    assert holder.acquire()

    @client.synchronized("sync:abusy", timeout=0.2)
    async def busy():
        return 1

    with pytest.raises(redislock.LockTimeout):
        asyncio.run(busy())
    holder.release()
    assert asyncio.run(busy()) == 1


def test_client_is_still_a_native_client(client):
    assert isinstance(client, redislock._native.Client)
    assert repr(client).startswith("<redislock.Client")
