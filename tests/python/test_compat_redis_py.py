"""redislock.compat.redis_py.Lock: redis-py's Lock API on redislock."""
import gc
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
import weakref

import pytest
import redis
from redis.connection import SSLConnection
from redis.credentials import UsernamePasswordCredentialProvider
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock as RedisPyLock

import redislock
from helpers import assert_ttl_set, info_stat, queued, wait_until, wait_until_async
from redis_server import server_bin
from redislock.compat import redis_py
from redislock.compat.redis_py import Lock, client_for, set_client, url_from_connection_kwargs


def test_lock_class_argument_and_wire_format(raw):
    lock = raw.lock("foo", timeout=10, lock_class=Lock)
    assert isinstance(lock, Lock)
    t = time.monotonic()
    assert lock.acquire(blocking=False)
    assert raw.get("foo") == lock.local.token  # the key holds the token alone
    assert_ttl_set(raw, "foo", 10.0, since=t)
    assert lock.locked() and lock.owned()
    lock.release()
    assert raw.get("foo") is None
    assert lock.local.token is None
    assert not lock.locked() and not lock.owned()


def test_constructed_directly_with_redis_py_signature(raw):
    lock = Lock(raw, "foo", timeout=5.5, sleep=0.01, blocking=True, blocking_timeout=1,
                thread_local=False, raise_on_release_error=False)
    assert lock.acquire(token="mytoken")
    assert raw.get("foo") == b"mytoken" == lock.local.token
    lock.release()


def test_excludes_redis_py_lock_both_ways_and_releases_only_its_own(raw):
    theirs = raw.lock("foo", timeout=10)  # redis-py's own Lock
    ours = raw.lock("foo", timeout=10, lock_class=Lock)
    assert isinstance(theirs, RedisPyLock)

    assert theirs.acquire(blocking=False)
    assert not ours.acquire(blocking=False)
    assert ours.locked() and not ours.owned()
    ours.local.token = b"not-the-token"  # releasing with a wrong token leaves it alone
    with pytest.raises(LockNotOwnedError):
        ours.release()
    assert raw.get("foo") == theirs.local.token
    theirs.release()

    assert ours.acquire(blocking=False)
    assert not theirs.acquire(blocking=False)
    theirs.local.token = b"not-the-token"
    with pytest.raises(LockNotOwnedError):
        theirs.release()
    assert raw.get("foo") == ours.local.token
    ours.release()
    assert raw.get("foo") is None

    # redis-py's lock waiting on ours gets it once ours is released
    ours = raw.lock("foo", timeout=10, thread_local=False, lock_class=Lock)
    assert ours.acquire(blocking=False)
    threading.Timer(0.2, ours.release).start()
    assert theirs.acquire(blocking_timeout=20)
    theirs.release()


def test_release_wakes_a_waiter_by_hand_off(raw):
    holder = raw.lock("foo", timeout=30, lock_class=Lock)
    assert holder.acquire(blocking=False)
    got = {}

    def waiter():
        # sleep=5: a polling lock would take up to 5 s to notice the release
        lock = raw.lock("foo", timeout=30, sleep=5, blocking_timeout=20, lock_class=Lock)
        ok = lock.acquire()
        got["at"] = time.monotonic()
        got["ok"] = ok
        if ok:
            lock.release()

    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: queued(raw, "foo") == 1, what="the waiter to queue")
    released_at = time.monotonic()
    holder.release()
    t.join(30)
    assert got.get("ok"), got
    # Handed over by the release, not found by a retry or a poll.
    assert client_for(raw).stats()["acquired_handed_over"] == 1
    assert got["at"] - released_at < 5.0, "not woken before a 5 s poll would have"


def test_waiter_gets_a_redis_py_lock_when_it_expires(raw):
    theirs = raw.lock("foo", timeout=0.3)
    assert theirs.acquire(blocking=False)
    ours = raw.lock("foo", timeout=5, blocking_timeout=20, lock_class=Lock)
    t0 = time.monotonic()
    assert ours.acquire()
    took = time.monotonic() - t0
    # Taken by a retry once theirs expired (nobody released it).
    assert client_for(raw).stats()["acquired_after_wait"] == 1
    assert info_stat(raw, "expired_keys") == 1
    assert took < 10, f"took {took:.3f} s, for a 0.3 s lock"
    ours.release()


def test_blocking_timeout_and_non_blocking(raw):
    holder = raw.lock("foo", timeout=30, lock_class=Lock)
    assert holder.acquire()
    # Upper bounds far below the 60 s sleep of a polling lock and the
    # holder's 30 s.
    lock = raw.lock("foo", timeout=30, blocking_timeout=0.3, sleep=60, lock_class=Lock)
    t0 = time.monotonic()
    assert not lock.acquire()
    took = time.monotonic() - t0
    assert 0.25 <= took < 5.0, f"a 0.3 s wait took {took:.3f} s"
    t0 = time.monotonic()
    assert not lock.acquire(blocking=False)
    assert not lock.acquire(blocking_timeout=0)
    assert not lock.acquire(blocking_timeout=-1)
    took = time.monotonic() - t0
    assert took < 5.0, f"three tries without waiting took {took:.3f} s"
    nb = raw.lock("foo", blocking=False, lock_class=Lock)
    assert not nb.acquire()
    with pytest.raises(LockError) as e:
        with raw.lock("foo", blocking_timeout=0.1, lock_class=Lock):
            pass
    assert e.value.lock_name == "foo"
    holder.release()


def test_thread_local_token(raw):
    lock = raw.lock("foo", timeout=10, lock_class=Lock)
    assert lock.acquire()
    seen = {}

    def other():
        seen["token"] = lock.local.token
        seen["owned"] = lock.owned()
        seen["fence"] = lock.fence
        try:
            lock.release()
        except LockError as e:
            seen["error"] = e

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["token"] is None and seen["owned"] is False and seen["fence"] is None
    assert isinstance(seen["error"], LockError)
    assert not isinstance(seen["error"], LockNotOwnedError)
    assert lock.owned()
    lock.release()


def test_not_thread_local_hands_the_lock_to_another_thread(raw):
    lock = raw.lock("foo", timeout=10, thread_local=False, lock_class=Lock)
    assert lock.acquire()
    token = lock.local.token
    seen = {}

    def other():
        seen["token"] = lock.local.token
        seen["owned"] = lock.owned()
        lock.release()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"token": token, "owned": True}
    assert raw.get("foo") is None


def test_extend_adds_and_replace_ttl_sets(raw):
    lock = raw.lock("foo", timeout=10, lock_class=Lock)
    t = time.monotonic()
    assert lock.acquire()
    assert lock.extend(10) is True  # 10 s more than it had left
    assert_ttl_set(raw, "foo", 20.0, since=t)
    t = time.monotonic()
    assert lock.extend(5, replace_ttl=True) is True
    assert_ttl_set(raw, "foo", 5.0, since=t)
    assert raw.pexpire("foo", 1000)
    t = time.monotonic()
    assert lock.reacquire() is True
    assert_ttl_set(raw, "foo", 10.0, since=t)
    lock.release()


def test_extend_and_reacquire_errors(raw):
    lock = raw.lock("foo", timeout=10, lock_class=Lock)
    with pytest.raises(LockError):
        lock.extend(1)
    with pytest.raises(LockError):
        lock.reacquire()
    assert lock.acquire()
    raw.set("foo", "someone-else")
    with pytest.raises(LockNotOwnedError) as e:
        lock.extend(1)
    assert e.value.lock_name == "foo"
    with pytest.raises(LockNotOwnedError):
        lock.reacquire()
    with pytest.raises(LockNotOwnedError):
        lock.release()
    assert raw.get("foo") == b"someone-else"
    assert lock.local.token is None  # cleared even though it raised, as redis-py does


def test_no_timeout_is_a_renewed_lock(raw, monkeypatch):
    # Renewed every 0.5 s: it expires only if the renewal thread stalls
    # for a whole second.
    ttl = 1.5
    monkeypatch.setattr(redis_py, "NO_TIMEOUT_TTL", ttl)
    lock = raw.lock("foo", lock_class=Lock)
    t = time.monotonic()
    assert lock.acquire()
    assert_ttl_set(raw, "foo", ttl, since=t)
    time.sleep(ttl + 0.5)  # outlives its TTL: renewed in the background
    assert raw.get("foo") == lock.local.token, "expired: not renewed"
    assert lock.owned() and not lock.lost
    with pytest.raises(LockError):
        lock.extend(10)
    with pytest.raises(LockError):
        lock.reacquire()
    lock.release()
    assert raw.get("foo") is None


def test_release_errors_and_context_manager(raw, caplog):
    lock = raw.lock("foo", lock_class=Lock)
    with pytest.raises(LockError) as e:
        lock.release()
    assert isinstance(e.value, ValueError)  # redis-py's LockError is a ValueError too
    assert not isinstance(e.value, LockNotOwnedError)

    with raw.lock("foo", timeout=10, lock_class=Lock) as held:
        assert raw.get("foo") == held.local.token
    assert raw.get("foo") is None

    def expired():
        wait_until(lambda: not raw.exists("foo"), what="the 0.1 s lock to expire")

    with pytest.raises(LockNotOwnedError):
        with raw.lock("foo", timeout=0.1, lock_class=Lock):
            expired()
    with caplog.at_level(logging.WARNING):
        with raw.lock("foo", timeout=0.1, raise_on_release_error=False, lock_class=Lock):
            expired()
    assert "no longer owned" in caplog.text


def test_token_set_by_hand_releases_by_compare_and_delete(raw):
    a = raw.lock("foo", timeout=10, lock_class=Lock)
    assert a.acquire()
    b = raw.lock("foo", timeout=10, lock_class=Lock)
    b.local.token = a.local.token  # e.g. a token passed to another process
    assert b.owned()
    b.release()
    assert raw.get("foo") is None


def test_fence_increases(raw):
    lock = raw.lock("foo", timeout=10, lock_class=Lock)
    assert lock.fence is None
    fences = []
    for _ in range(3):
        assert lock.acquire()
        fences.append(lock.fence)
        lock.release()
    assert all(isinstance(f, int) for f in fences)
    assert fences == sorted(set(fences))


def test_decode_responses_client(server):
    r = redis.Redis(port=server.port, decode_responses=True)
    lock = r.lock("foo", timeout=10, lock_class=Lock)
    assert lock.acquire(token="tok")
    assert lock.local.token == b"tok" and r.get("foo") == "tok"
    assert lock.owned()
    lock.release()
    r.close()


def test_password_and_db_are_derived(server, raw):
    raw.config_set("requirepass", "s3cr:t/pw")
    try:
        r = redis.Redis(port=server.port, password="s3cr:t/pw", db=3)
        lock = r.lock("foo", timeout=10, lock_class=Lock)
        assert lock.acquire()
        assert r.get("foo") == lock.local.token
        r0 = redis.Redis(port=server.port, password="s3cr:t/pw", db=0)
        assert r0.get("foo") is None
        lock.release()
        wrong = redis.Redis(port=server.port, password="wrong")
        with pytest.raises(Exception):
            wrong.lock("foo", lock_class=Lock).acquire(blocking=False)
    finally:
        redis.Redis(port=server.port, password="s3cr:t/pw").config_set("requirepass", "")


@pytest.fixture
def unix_server():
    d = tempfile.mkdtemp(prefix="redislock-unix-")
    path = os.path.join(d, "redis.sock")
    proc = subprocess.Popen(
        [server_bin(), "--port", "0", "--unixsocket", path,
         "--save", "", "--appendonly", "no", "--dir", d, "--daemonize", "no"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                if redis.Redis(unix_socket_path=path, socket_timeout=1).ping():
                    break
            except (redis.exceptions.ConnectionError, FileNotFoundError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield path
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def test_unix_socket_is_derived(unix_server):
    r = redis.Redis(unix_socket_path=unix_server, db=2)
    assert client_for(r) is client_for(r)
    lock = r.lock("foo", timeout=10, lock_class=Lock)
    assert lock.acquire()
    assert r.get("foo") == lock.local.token
    lock.release()
    assert r.get("foo") is None


def test_url_builder():
    u = url_from_connection_kwargs
    assert u({"host": "h", "port": 7000, "db": 2}) == "redis://h:7000/2"
    # Unset host and port: redis-py's own defaults.
    assert u({}) == f"redis://localhost:{redis.connection.Connection().port}/0"
    assert u({"host": "h", "port": 1, "password": "p@ss/w:rd"}) == "redis://:p%40ss%2Fw%3Ard@h:1/0"
    assert u({"host": "h", "port": 1, "username": "bob", "password": "x"}) == "redis://bob:x@h:1/0"
    assert u({"host": "::1", "port": 1}) == "redis://[::1]:1/0"
    assert u({"host": "h", "port": 1, "socket_timeout": 2, "socket_connect_timeout": 0.5}) == \
        "redis://h:1/0?connect_timeout=0.5s&command_timeout=2.0s"
    assert u({"path": "/run/redis/redis.sock", "db": 4, "password": "p"}) == \
        "unix://:p@/run/redis/redis.sock?db=4"
    assert u({"host": "h", "port": 1,
              "credential_provider": UsernamePasswordCredentialProvider("al", "pw")}) == \
        "redis://al:pw@h:1/0"
    tls = {"host": "h", "port": 6380, "ssl_ca_certs": "/etc/ca.pem", "ssl_cert_reqs": "required"}
    assert u(tls, SSLConnection) == "rediss://h:6380/0?tls_ca_file=%2Fetc%2Fca.pem"
    assert u({"host": "h", "port": 6380}, SSLConnection) == "rediss://h:6380/0"
    with pytest.raises(ValueError):
        u({"host": "h", "ssl_cert_reqs": "none"}, SSLConnection)
    with pytest.raises(ValueError):
        u({"host": "h", "ssl_certfile": "c.pem", "ssl_keyfile": "k.pem"}, SSLConnection)
    # every URL it builds is one redislock accepts (opening does no I/O)
    redislock.Client(u({"host": "h", "port": 1, "password": "p@ss/w:rd", "db": 3}))
    redislock.Client(u({"path": "/tmp/x.sock", "db": 4}))


def test_tls_pool_is_derived_as_rediss():
    pool = redis.ConnectionPool(connection_class=SSLConnection, host="127.0.0.1", port=1,
                                ssl_cert_reqs="required")
    assert url_from_connection_kwargs(pool.connection_kwargs, pool.connection_class) == \
        "rediss://127.0.0.1:1/0"
    r = redis.Redis(host="127.0.0.1", port=1, ssl=True)
    assert url_from_connection_kwargs(r.connection_pool.connection_kwargs,
                                      r.connection_pool.connection_class).startswith("rediss://")


def test_one_client_per_pool(server):
    r1 = redis.Redis(port=server.port)
    r2 = redis.Redis(connection_pool=r1.connection_pool)
    other = redis.Redis(port=server.port)
    assert client_for(r1) is client_for(r2) is client_for(r1.client())
    assert client_for(other) is not client_for(r1)
    a = r1.lock("foo", lock_class=Lock)
    assert a._client is client_for(r1)
    gone = weakref.ref(other.connection_pool)
    del a, other
    gc.collect()
    assert gone() is None  # weakly keyed by the pool: the cache does not keep it
    assert r1.connection_pool in redis_py._clients


def test_set_client_overrides_derivation(server):
    r = redis.Redis(host="does-not-resolve.invalid", port=1)
    mine = redislock.Client(server.url)
    set_client(r, mine)
    assert client_for(r) is mine
    lock = r.lock("foo", timeout=5, lock_class=Lock)
    assert lock.acquire(blocking=False)
    assert redis.Redis(port=server.port).get("foo") == lock.local.token
    lock.release()


def test_cluster_client_without_pool_is_refused():
    class NoPool:
        pass

    with pytest.raises(TypeError, match="set_client"):
        Lock(NoPool(), "foo")


# -- redis.asyncio (pytest-asyncio is not needed: each test runs its own loop) --

def test_asyncio_lock_class_hand_off_and_errors(server, raw):
    import asyncio

    import redis.asyncio as aredis

    from redislock.compat.redis_py_asyncio import Lock as ALock

    async def main():
        r = aredis.Redis(port=server.port)
        holder = r.lock("foo", timeout=30, lock_class=ALock)
        assert isinstance(holder, ALock)
        assert await holder.acquire(blocking=False)
        assert await r.get("foo") == holder.local.token
        assert await holder.locked() and await holder.owned()
        assert isinstance(holder.fence, int)

        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async def waiter():
            lock = r.lock("foo", timeout=30, sleep=5, blocking_timeout=20, lock_class=ALock)
            assert await lock.acquire()
            got = time.monotonic()
            await lock.release()
            return got

        t = asyncio.create_task(ticker())
        w = asyncio.create_task(waiter())
        await wait_until_async(lambda: queued(raw, "foo") == 1 or w.done(), what="the waiter to queue")
        # A wait that blocked the loop would end (timed out) before the
        # ticker ticked again.
        start = ticks
        await wait_until_async(lambda: ticks > start + 10 or w.done(), what="ticks while it waits")
        assert not w.done(), "the wait blocked the loop"
        released = time.monotonic()
        await holder.release()
        assert await w - released < 5.0, "not woken before a 5 s poll would have"
        assert client_for(r).stats()["acquired_handed_over"] == 1  # by the release
        t.cancel()

        lock = r.lock("foo", timeout=10, lock_class=ALock)
        with pytest.raises(LockError):
            await lock.release()
        since = time.monotonic()
        assert await lock.acquire()
        assert await lock.extend(10) is True
        assert_ttl_set(raw, "foo", 20.0, since)
        since = time.monotonic()
        assert await lock.reacquire() is True
        assert_ttl_set(raw, "foo", 10.0, since)
        await r.set("foo", "other")
        with pytest.raises(LockNotOwnedError):
            await lock.release()
        await r.delete("foo")

        with pytest.raises(LockError):
            await r.set("foo", "x")
            async with r.lock("foo", blocking_timeout=0.1, lock_class=ALock):
                pass
        await r.delete("foo")
        async with r.lock("foo", timeout=10, lock_class=ALock) as held:
            assert await r.get("foo") == held.local.token
        assert await r.get("foo") is None
        await r.aclose()

    asyncio.run(main())


# -- redis-py 8.2's behaviours ----------------------------------------------

def _drop_paused_commands(raw) -> None:
    """While writes are paused (CLIENT PAUSE WRITE): close every other
    client's connection, which drops the commands waiting there (a timed-out
    release may still be waiting on a connection the client keeps), and
    wait until the server has none left, so that nothing runs on unpause:
    the release was lost on the way, as in a network failure."""
    me = raw.client_id()
    for c in raw.client_list():
        if int(c["id"]) != me:
            raw.client_kill_filter(_id=int(c["id"]))
    wait_until(lambda: int(raw.info("clients")["blocked_clients"]) == 0,
               what="the paused release to be dropped")


def test_release_that_cannot_reach_redis_keeps_the_token_for_a_retry(server, raw):
    # Writes are paused on the server: the release's command waits there
    # until the client gives up (socket_timeout 0.5 s is its command
    # timeout); then it is dropped.
    r = redis.Redis(port=server.port, socket_timeout=0.5)
    lock = r.lock("foo", timeout=60, lock_class=Lock)
    assert lock.acquire(blocking=False)
    token = lock.local.token
    raw.client_pause(60000, all=False)
    try:
        with pytest.raises(redis.exceptions.ConnectionError) as e:
            lock.release()
        assert isinstance(e.value.__cause__, redislock.LockConnectionError)  # ours underneath
        _drop_paused_commands(raw)
    finally:
        raw.client_unpause()
    assert raw.get("foo") == token  # still held in Redis ...
    assert lock.local.token == token  # ... and still known to the caller
    assert lock.owned() and lock.locked()
    with pytest.raises(LockError, match="release"):  # the acquisition's handle was given up
        lock.extend(10)
    lock.release()  # the retry: compare-and-delete of the token
    assert raw.get("foo") is None and lock.local.token is None
    with pytest.raises(LockError):
        lock.release()


def test_extend_and_reacquire_to_zero_or_less_keep_the_expiry(raw):
    lock = raw.lock("foo", timeout=10, lock_class=Lock)
    assert lock.acquire(blocking=False)
    assert raw.pexpire("foo", 5000)  # a TTL none of the calls below would set
    for call in (lambda: lock.extend(0, replace_ttl=True), lambda: lock.extend(-1, replace_ttl=True),
                 lambda: lock.extend(-20), lambda: lock.extend(0.0004, replace_ttl=True)):
        assert call() is True
        assert 0 < raw.pttl("foo") <= 5000
        assert raw.get("foo") == lock.local.token
    # A negative time whose sum is still positive shortens the lock, as in
    # redis-py (PTTL + additional_time).
    assert lock.extend(-4) is True
    assert 0 < raw.pttl("foo") <= 1000
    # Not held any more: the same calls say so.
    raw.set("foo", "someone-else")
    with pytest.raises(LockNotOwnedError) as e:
        lock.extend(0, replace_ttl=True)
    assert e.value.lock_name == "foo"
    with pytest.raises(LockNotOwnedError):
        lock.extend(-20)
    raw.delete("foo")


def test_timeout_zero_extend_is_not_owned_and_reacquire_keeps_it(raw):
    # redis-py 8.2 on a timeout=0 lock (a key without expiry there):
    # extend raises LockNotOwnedError, reacquire returns True and changes
    # nothing. Here the lock is renewed in the background meanwhile.
    lock = raw.lock("foo", timeout=0, lock_class=Lock)
    assert lock.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):
        lock.extend(0, replace_ttl=True)
    with pytest.raises(LockNotOwnedError):
        lock.extend(10)
    assert lock.reacquire() is True
    assert raw.get("foo") == lock.local.token and lock.owned()
    assert raw.pttl("foo") > 0  # renewed, never without expiry
    lock.release()
    assert raw.get("foo") is None


def test_bad_times_are_typed_errors(raw):
    lock = raw.lock("foo", timeout=10, lock_class=Lock)
    with pytest.raises(TypeError, match="sleep"):
        Lock(raw, "foo", sleep="0.1")
    with pytest.raises(ValueError, match="sleep"):
        Lock(raw, "foo", sleep=-1)
    with pytest.raises(TypeError, match="sleep"):
        lock.acquire(sleep="0.1")
    with pytest.raises(ValueError, match="sleep"):
        lock.acquire(sleep=float("nan"))
    assert raw.get("foo") is None  # nothing was tried
    assert lock.acquire(sleep=0.01, blocking=False)  # taken, and unused
    for bad, kind in (("1", TypeError), (None, TypeError), (True, TypeError),
                      (float("nan"), ValueError), (float("inf"), ValueError)):
        with pytest.raises(kind, match="additional_time"):
            lock.extend(bad)
    assert raw.get("foo") == lock.local.token
    lock.release()


def test_asyncio_sleep_keyword_release_retry_and_zero_extend(server, raw):
    import asyncio

    import redis.asyncio as aredis

    from redislock.compat.redis_py_asyncio import Lock as ALock

    async def main():
        r = aredis.Redis(port=server.port, socket_timeout=0.5)
        lock = r.lock("foo", timeout=60, sleep=0.5, lock_class=ALock)
        with pytest.raises(TypeError, match="sleep"):
            await lock.acquire(sleep="x")
        assert await lock.acquire(False, sleep=0.01)  # blocking stays the first positional
        token = lock.local.token
        raw.pexpire("foo", 5000)
        assert await lock.extend(0, replace_ttl=True) is True
        assert await lock.extend(-20) is True
        assert 0 < raw.pttl("foo") <= 5000

        raw.client_pause(60000, all=False)
        try:
            with pytest.raises(redis.exceptions.ConnectionError):
                await lock.release()
            _drop_paused_commands(raw)
        finally:
            raw.client_unpause()
        assert lock.local.token == token and raw.get("foo") == token
        assert await lock.owned()
        await lock.release()
        assert raw.get("foo") is None and lock.local.token is None

        zero = r.lock("foo", timeout=0, lock_class=ALock)
        assert await zero.acquire(blocking=False)
        with pytest.raises(LockNotOwnedError):
            await zero.extend(1)
        assert await zero.reacquire() is True
        await zero.release()
        await r.aclose()

    asyncio.run(main())
