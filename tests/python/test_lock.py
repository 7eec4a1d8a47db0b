"""The Python API against a throwaway redis-server, from an installed wheel."""
import asyncio
import gc
import multiprocessing
import os
import threading
import time

import pytest
import redis

import redislock
from helpers import ReplyCutter, assert_ttl_set, info_stat, queued, wait_until, wait_until_async
from redislock import (
    Client,
    LockConnectionError,
    LockError,
    LockNotOwned,
    LockQuorumError,
    LockServerError,
    LockTimeout,
    LockUnconfirmed,
    LockWrongType,
)


def test_the_wheel_is_installed_not_the_source_tree():
    assert "site-packages" in redislock.__file__ or "dist-packages" in redislock.__file__
    assert redislock.__version__
    assert set(redislock.__all__) >= {"Client", "Lock", "LockError", "LockTimeout", "LockNotOwned",
                                      "LockWrongType", "LockQuorumError", "LockConnectionError"}


def test_exception_hierarchy():
    for exc in (LockTimeout, LockNotOwned, LockWrongType, LockQuorumError, LockConnectionError,
                LockServerError, LockUnconfirmed):
        assert issubclass(exc, LockError)
    assert issubclass(LockConnectionError, ConnectionError)
    assert LockConnectionError.__module__ == "redislock"
    # An unconfirmed release is a kind of not-owned one (DESIGN.md), and
    # still told apart.
    assert issubclass(LockUnconfirmed, LockNotOwned)
    assert not issubclass(LockNotOwned, LockUnconfirmed)


def test_an_unconfirmed_release_is_caught_as_not_owned(server, raw):
    """A release whose reply is lost with its connection is sent again; the
    second sending finds the lock no longer this owner's (the first one
    released it): LockUnconfirmed, which `except LockNotOwned` catches."""
    proxy = ReplyCutter(server.port)
    try:
        client = Client(proxy.url, command_timeout=30.0)
        # The release script is loaded (a first sending that met NOSCRIPT
        # would lose only that refusal).
        warm = client.lock("cut", ttl=10.0)
        assert warm.acquire(blocking=False)
        warm.release()

        lock = client.lock("cut", ttl=10.0)
        assert lock.acquire(blocking=False)
        proxy.arm(lock.token)
        caught = None
        try:
            lock.release()
        except LockNotOwned as e:
            caught = e
        assert proxy.cut == 1
        assert isinstance(caught, LockUnconfirmed), repr(caught)
        assert "unconfirmed" in str(caught)
        # It did take effect: the lock is free.
        assert raw.get("cut") is None
        # The client goes on: a lock that really expired is still a plain
        # LockNotOwned.
        short = client.lock("cut", ttl=0.05)
        assert short.acquire(blocking=False)
        wait_until(lambda: raw.get("cut") is None, what="the short lock to expire")
        with pytest.raises(LockNotOwned) as info:
            short.release()
        assert not isinstance(info.value, LockUnconfirmed)
    finally:
        proxy.close()


def test_the_key_holds_exactly_the_token_with_the_ttl(client, raw):
    lock = client.lock("jobs", ttl=10.0)
    assert lock.fence is None
    t = time.monotonic()
    assert lock.acquire(blocking=False)
    assert isinstance(lock.token, bytes) and len(lock.token) == 32
    assert raw.get("jobs") == lock.token
    assert_ttl_set(raw, "jobs", 10.0, since=t)
    assert isinstance(lock.fence, int) and lock.fence >= 1
    assert lock.owned() and lock.locked()
    lock.release()
    assert raw.get("jobs") is None
    assert not lock.locked() and not lock.owned()


def test_caller_tokens_and_byte_names(client, raw):
    lock = client.lock("order:59", ttl=5.0, token="req-59")
    assert lock.token == b"req-59"
    with lock:
        assert raw.get("order:59") == b"req-59"
    name = b"bin\x00\xff"
    token = b"tok\x00\xfe"
    with client.lock(name, ttl=5.0, token=token) as lock:
        assert lock.name == name
        assert raw.get(name) == token
        assert not client.release_token(name, b"other")
        assert client.release_token(name, token)
        assert raw.get(name) is None
        with pytest.raises(LockNotOwned):
            lock.release()
        lock.acquire()  # so that the with-block's exit has something to release
    # A str token is stored UTF-8 encoded.
    with client.lock("u", ttl=5.0, token="é") as lock:
        assert raw.get("u") == "é".encode()


def test_competing_locks_and_reacquiring_one_object(client):
    a = client.lock("shared", ttl=5.0)
    b = client.lock("shared", ttl=5.0)
    assert a.acquire(blocking=False)
    assert not b.acquire(blocking=False)
    assert not b.acquire(timeout=0)
    a.release()
    assert b.acquire(blocking=False)
    b.release()
    first = None
    for _ in range(3):  # the same object, again and again
        assert a.acquire()
        assert first is None or a.fence > first
        first = a.fence
        a.release()
    with pytest.raises(LockNotOwned):
        a.release()


def test_a_bounded_wait_keeps_its_deadline(client):
    holder = client.lock("busy", ttl=30.0)
    assert holder.acquire()
    waiter = client.lock("busy", ttl=5.0)
    # At least its timeout, and far less than the holder's 30 s TTL that a
    # wait ignoring its deadline would sit out.
    t = time.monotonic()
    assert waiter.acquire(timeout=0.4) is False
    took = time.monotonic() - t
    assert 0.35 <= took < 3.0, f"a 0.4 s wait took {took:.3f} s"
    t = time.monotonic()
    assert waiter.acquire(blocking=False) is False
    took = time.monotonic() - t
    assert took < 3.0, f"a try-once took {took:.3f} s"
    with pytest.raises(ValueError):
        waiter.acquire(blocking=False, timeout=1.0)
    holder.release()


def test_with_raises_lock_timeout_and_releases_on_exceptions(client, raw):
    with client.lock("w", ttl=30.0):
        with pytest.raises(LockTimeout) as info:
            with client.lock("w", ttl=5.0, timeout=0.2):
                pass
        assert '"w"' in str(info.value)
    assert raw.get("w") is None
    with pytest.raises(RuntimeError):
        with client.lock("w", ttl=30.0):
            raise RuntimeError("boom")
    assert raw.get("w") is None


def test_stolen_or_expired_locks_raise_and_are_never_recreated(client, raw):
    lock = client.lock("exp", ttl=0.2)
    assert lock.acquire()
    wait_until(lambda: not raw.exists("exp"), what="the 0.2 s lock to expire")
    with pytest.raises(LockNotOwned):
        lock.extend(5.0)
    assert raw.get("exp") is None, "extend re-created the key"
    assert lock.lost
    with pytest.raises(LockNotOwned):
        lock.release()
    assert raw.get("exp") is None

    lock = client.lock("stolen", ttl=30.0)
    assert lock.acquire()
    raw.set("stolen", "thief", px=60000)
    with pytest.raises(LockNotOwned):
        lock.extend(30.0)
    with pytest.raises(LockNotOwned):
        lock.release()
    assert raw.get("stolen") == b"thief"
    assert raw.pttl("stolen") > 50000


def test_extend_sets_the_remaining_time(client, raw):
    with client.lock("ext", ttl=10.0) as lock:
        t = time.monotonic()
        lock.extend(2.0)
        assert_ttl_set(raw, "ext", 2.0, since=t)
        t = time.monotonic()
        lock.extend(20.0)
        assert_ttl_set(raw, "ext", 20.0, since=t)


def test_fencing_numbers_strictly_increase(client, server):
    other = Client(server.url)
    seen = []
    for i in range(200):
        c = client if i % 2 else other
        with c.lock("fenced", ttl=5.0) as lock:
            seen.append(lock.fence)
    assert all(b > a for a, b in zip(seen, seen[1:]))


def test_a_release_wakes_a_waiter_long_before_the_ttl(client, raw):
    holder = client.lock("wake", ttl=30.0)
    assert holder.acquire()
    got = {}

    def wait():
        lock = client.lock("wake", ttl=30.0)
        got["ok"] = lock.acquire(timeout=20)
        got["at"] = time.monotonic()
        lock.release()

    t = threading.Thread(target=wait)
    t.start()
    wait_until(lambda: queued(raw, "wake") == 1, what="the waiter to queue")
    released = time.monotonic()
    holder.release()
    t.join(30)
    assert got.get("ok"), got
    # Woken by the release's hand-off, not by a retry of its own.
    assert client.stats()["acquired_handed_over"] == 1, client.stats()
    assert got["at"] - released < 10.0, "not woken long before the holder's 30 s TTL"


def test_a_foreign_release_is_noticed(client, raw):
    raw.set("foreign", "other", px=30000, nx=True)
    got = {}

    def wait():
        lock = client.lock("foreign", ttl=5.0)
        got["ok"] = lock.acquire(timeout=20)
        got["at"] = time.monotonic()
        lock.release()

    t = threading.Thread(target=wait)
    t.start()
    wait_until(lambda: queued(raw, "foreign") == 1, what="the waiter to queue")
    time.sleep(0.5)  # the waiter backs off meanwhile: its retries grow apart
    deleted = time.monotonic()
    raw.delete("foreign")  # a plain DEL: nobody announces it
    t.join(30)
    assert got.get("ok"), got
    # Taken by a retry, long before the 30 s that the other's key had left.
    assert client.stats()["acquired_after_wait"] == 1, client.stats()
    assert got["at"] - deleted < 10.0, "the DEL was noticed only near the key's expiry"


def test_redis_py_lock_and_redislock_exclude_each_other(client, raw):
    theirs = raw.lock("interop", timeout=5)
    assert theirs.acquire(blocking=False)
    ours = client.lock("interop", ttl=5.0)
    assert not ours.acquire(blocking=False)
    theirs.release()
    assert ours.acquire(blocking=False)
    assert not raw.lock("interop", timeout=5).acquire(blocking=False)
    ours.release()


def test_the_gil_is_released_while_waiting(client, raw):
    holder = client.lock("gil", ttl=30.0)
    assert holder.acquire()
    # The waiter watched waits behind another one: it does not retry before
    # the holder's TTL, so no retry's log line runs Python (which would let
    # this thread in now and then even if the wait held the GIL).
    ahead, first = client.lock("gil", ttl=5.0), []

    def wait_ahead():
        first.append(ahead.acquire(timeout=30.0))
        ahead.release()

    t_ahead = threading.Thread(target=wait_ahead)
    t_ahead.start()
    wait_until(lambda: queued(raw, "gil") == 1 or first, what="the first waiter to queue")
    waiter = client.lock("gil", ttl=5.0)
    result = []
    t = threading.Thread(target=lambda: result.append(waiter.acquire(timeout=10.0)))
    t.start()
    wait_until(lambda: queued(raw, "gil") == 2 or result, what="the second waiter to queue")
    # This thread runs Python while the other waits. A wait holding the GIL
    # would let it run only once the wait was over (10 s, timed out).
    ticks = 0
    while ticks < 1000000:
        ticks += 1
    assert not result, "the wait ended before this thread could run: it held the GIL"
    holder.release()
    t.join(30)
    t_ahead.join(30)
    assert first == [True] and result == [True]
    waiter.release()


def test_asyncio_keeps_running_while_a_task_awaits_the_lock(client):
    holder = client.lock("aio", ttl=30.0)
    assert holder.acquire()

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        lock = client.lock("aio", ttl=5.0, timeout=10.0)

        async def take():
            async with lock as held:
                assert held.fence is not None
            return True

        task = asyncio.create_task(take())
        await wait_until_async(lambda: client.stats()["waiters_now"] == 1 or task.done(),
                               what="the task to wait")
        # A wait that blocked the loop would end (timed out) before the
        # ticker ticked again.
        start = ticks
        await wait_until_async(lambda: ticks >= start + 20 or task.done(),
                               what="20 ticks while the task waits")
        assert not task.done(), f"the wait ended after {ticks - start} ticks: it blocked the loop"
        holder.release()
        assert await task
        assert client.stats()["acquired_handed_over"] == 1
        assert await lock.acquire_async(timeout=10)
        await lock.release_async()
        tick.cancel()

    asyncio.run(main())


def _count_worker(url, rounds):
    import redis as r
    import redislock as rl
    c = rl.Client(url)
    raw = r.Redis.from_url(url)
    lock = c.lock("mp", ttl=5.0)
    for _ in range(rounds):
        with lock:
            v = int(raw.get("mp:counter") or 0)
            raw.set("mp:counter", v + 1)


def test_six_processes_and_eight_threads_keep_a_counter_exact(server, raw):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_count_worker, args=(server.url, 40)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert int(raw.get("mp:counter")) == 240

    raw.delete("mp:counter")
    client = Client(server.url)
    shared = client.lock("mp", ttl=5.0)  # one object shared by the threads
    errors = []

    def work():
        try:
            for _ in range(40):
                with shared:
                    v = int(raw.get("mp:counter") or 0)
                    raw.set("mp:counter", v + 1)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert int(raw.get("mp:counter")) == 320


def test_a_forked_child_uses_the_client_and_spares_the_parent_lock(client, raw):
    lock = client.lock("parent", ttl=30.0)
    assert lock.acquire()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with client.lock("child", ttl=5.0, timeout=5.0) as mine:
                ok = mine.owned()
            del lock          # garbage-collected in the child: inert
            gc.collect()
            code = 0 if ok and raw.get("parent") is not None else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lock.owned(), "the child released the parent's lock"
    lock.release()


def test_garbage_collection_releases_a_held_lock(client, raw):
    lock = client.lock("gc", ttl=30.0)
    assert lock.acquire()
    assert raw.get("gc") is not None
    del lock
    gc.collect()
    assert raw.get("gc") is None


def test_auto_renew_keeps_a_short_lock_and_reports_a_stolen_one(client, raw):
    # Renewed every 0.5 s: it is lost only if the renewal thread stalls for
    # a whole second.
    ttl = 1.5
    lock = client.lock("renew", ttl=ttl, auto_renew=True)
    assert lock.acquire()
    time.sleep(ttl + 0.5)  # it outlives its TTL...
    assert raw.get("renew") == lock.token, "expired: not renewed"
    assert lock.owned() and not lock.lost
    assert client.stats()["renewals_ok"] >= 1  # ...by renewals
    raw.set("renew", "thief", px=60000)
    wait_until(lambda: lock.lost, what="the renewal to find the lock stolen")
    assert raw.get("renew") == b"thief"
    with pytest.raises(LockNotOwned):
        lock.release()


def test_wrong_type_is_reported_and_left_alone(client, raw):
    raw.hset("h", "f", "v")
    with pytest.raises(LockWrongType) as info:
        client.lock("h", ttl=5.0).acquire(blocking=False)
    assert "hash" in str(info.value)
    assert raw.hget("h", "f") == b"v"


@pytest.mark.parametrize("kwargs", [
    {"ttl": 0}, {"ttl": -1.0}, {"ttl": float("nan")}, {"ttl": float("inf")}, {"ttl": 1e-6},
    {"ttl": 10.0 ** 12}, {"timeout": -1.0}, {"timeout": float("nan")}, {"token": ""}, {"token": b""},
])
def test_bad_arguments_raise_value_error_before_any_io(dead_url, kwargs):
    client = Client(dead_url)  # nothing listens: I/O would be a connection error
    with pytest.raises(ValueError):
        client.lock("k", **kwargs)


def test_bad_names_urls_and_types(dead_url):
    client = Client(dead_url)
    with pytest.raises(ValueError):
        client.lock("")
    with pytest.raises(ValueError):
        client.lock(b"x" * 70000)
    with pytest.raises(TypeError):
        client.lock(42)
    with pytest.raises(TypeError):
        client.lock("k", token=3)
    for url in ["", "not a url", "http://127.0.0.1:1", "redis://127.0.0.1:99999", []]:
        with pytest.raises(ValueError):
            Client(url)
    with pytest.raises(TypeError):
        Client(3)
    with pytest.raises(ValueError):
        Client(dead_url, connect_timeout=-1)


def test_a_dead_server_raises_lock_connection_error_quickly(dead_url):
    client = Client(dead_url)
    t = time.monotonic()
    with pytest.raises(LockConnectionError) as info:
        client.lock("k", ttl=5.0, timeout=2.0).acquire()
    assert time.monotonic() - t < 5.0
    assert isinstance(info.value, ConnectionError)
    assert "127.0.0.1" in str(info.value)
    with pytest.raises(ConnectionError):
        with client.lock("k", ttl=5.0):
            pass


def test_redlock_over_three_servers(dead_url):
    from redis_server import RedisServer
    servers = [RedisServer() for _ in range(3)]
    try:
        urls = [s.url for s in servers]
        raws = [redis.Redis(port=s.port) for s in servers]
        # A per-node timeout above the default (a tenth of the TTL: 1 s
        # here): slow nodes are not what this test is about.
        client = Client(urls, node_timeout=2.0)
        with client.lock("rl", ttl=10.0, timeout=10.0) as lock:
            # Each call returns once a majority answered: the last node may
            # be written a moment later.
            wait_until(lambda: all(r.get("rl") == lock.token for r in raws),
                       what="every node to hold the token")
            assert isinstance(lock.fence, int)
            assert not client.lock("rl", timeout=0).acquire()
            t = time.monotonic()
            lock.extend(20.0)
            wait_until(lambda: all(r.pttl("rl") > 10000 for r in raws),
                       what="every node to be extended")
            for r in raws:
                assert_ttl_set(r, "rl", 20.0, since=t)
        wait_until(lambda: all(r.get("rl") is None for r in raws), what="every node to be released")
        # Released, not expired (the wait above is as long as the TTL).
        expired = [info_stat(r, "expired_keys") for r in raws]
        assert expired == [0, 0, 0], f"keys expired on the nodes instead of being released: {expired}"
        # One of three down: still a majority.
        with Client([urls[0], urls[1], dead_url], node_timeout=2.0).lock("rl", ttl=5.0, timeout=10.0):
            pass
        # Two of three down: no quorum.
        with pytest.raises(LockQuorumError):
            Client([urls[0], dead_url, dead_url]).lock("rl", ttl=5.0, timeout=1.0).acquire()
        for r in raws:
            r.close()
    finally:
        for s in servers:
            s.stop()


def test_force_release_hands_a_crashed_holders_lock_to_the_waiter(client, raw):
    held = client.lock("stuck", ttl=600.0, fenced=True)
    held.acquire()
    broken = held.fence
    result = {}

    def waiter():
        with client.lock("stuck", ttl=30.0, timeout=60.0) as lock:
            result["fence"] = lock.fence

    before = client.stats()
    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: queued(raw, "stuck") == 1, what="the waiter to queue")
    assert client.force_release("stuck")
    t.join(60)
    assert not t.is_alive()
    after = client.stats()
    assert after["acquired_handed_over"] - before["acquired_handed_over"] == 1, "handed over, not found free"
    assert result["fence"] > broken, "fences stay monotonic"
    with pytest.raises(LockNotOwned):
        held.release()
    assert not client.force_release("stuck"), "nobody holds it"
    raw.rpush("stuck", "x")
    with pytest.raises(LockWrongType):
        client.force_release("stuck")
    assert raw.lrange("stuck", 0, -1) == [b"x"]
    with pytest.raises(ValueError):
        client.force_release("")
