"""Fencing numbers from shared slot counters: nothing of a lock name is
left on the server once it is released, and fences keep growing across a
restart that lost the counters."""
import asyncio
import threading

import pytest

from helpers import queued, wait_until
from redislock import LockNotOwned

MAX_FENCE = 2**53


def test_many_names_leave_only_the_slot_counters(client, raw):
    n = 2000
    for i in range(1, n + 1):
        lock = client.lock(f"order:{i}", ttl=10.0)
        assert lock.acquire(blocking=False)
        assert 0 < lock.fence < MAX_FENCE
        if i == 1:
            # Drawn and extended: the holder's fence sits beside the lock,
            # for its token.
            lock.extend(10.0)
            assert raw.get("{order:1}:meta") == b"%d:%s" % (lock.fence, lock.token)
        lock.release()
    keys = [k.decode() for k in raw.scan_iter(count=1000)]
    assert not [k for k in keys if "order:" in k]
    assert all(k.startswith("redislock:fence:{") for k in keys), keys[:10]
    assert 0 < len(keys) <= min(n, 16384)
    assert raw.dbsize() == len(keys)


def test_a_waiter_served_by_hand_off_leaves_nothing(client, raw):
    holder = client.lock("handed", ttl=10.0)
    assert holder.acquire(blocking=False)
    got = []

    def wait():
        with client.lock("handed", ttl=10.0, timeout=30.0) as lock:
            got.append(lock.fence)

    t = threading.Thread(target=wait)
    t.start()
    wait_until(lambda: queued(raw, "handed") == 1, what="the waiter to queue")
    first = holder.fence
    holder.release()
    t.join(30)
    assert got and got[0] > first, (got, first)
    assert client.stats()["acquired_handed_over"] == 1
    assert [k.decode() for k in raw.scan_iter()] == [k.decode() for k in raw.scan_iter("redislock:fence:*")]


def test_fences_grow_across_a_restart_that_lost_the_counter(server, client, raw):
    lock = client.lock("restart-me", ttl=10.0)
    assert lock.acquire(blocking=False)
    f1 = lock.fence
    lock.release()
    server.restart()
    assert raw.dbsize() == 0  # the restart kept nothing
    # The same client goes on: its pooled connection died with the server.
    lock = client.lock("restart-me", ttl=10.0)
    assert lock.acquire(blocking=False)
    f2 = lock.fence
    lock.release()
    assert f1 < f2 < MAX_FENCE
    # An evicted counter (DEL) does not send it back either.
    raw.delete(*raw.keys("redislock:fence:*"))
    with client.lock("restart-me", ttl=10.0, timeout=0) as lock:
        assert f2 < lock.fence < MAX_FENCE


def _scripts(raw):
    stats = raw.info("commandstats")
    return sum(stats.get(k, {}).get("calls", 0) for k in ("cmdstat_evalsha", "cmdstat_eval"))


def test_a_fence_is_drawn_in_the_acquire_when_fenced_and_else_once_when_read(client, raw):
    warm = client.lock("fenced:warm", ttl=10.0, fenced=True)
    with warm:
        assert warm.fence > 0
    plain_warm = client.lock("plain:warm", ttl=10.0)
    with plain_warm:
        assert plain_warm.fence > 0
    # Fenced: the acquire is one script and reading the fence costs nothing.
    fenced = client.lock("fenced", ttl=10.0, fenced=True)
    before = _scripts(raw)
    assert fenced.acquire(blocking=False)
    first = fenced.fence
    assert fenced.fence == first
    assert _scripts(raw) - before == 1
    fenced.release()
    # Plain: no script to acquire, one when the fence is first read.
    plain = client.lock("fenced", ttl=10.0)
    before = _scripts(raw)
    assert plain.acquire(blocking=False)
    assert _scripts(raw) - before == 0
    second = plain.fence
    assert second > first and plain.fence == second
    assert _scripts(raw) - before == 1
    plain.release()
    # Lost before it was read: no number.
    gone = client.lock("fenced", ttl=10.0)
    assert gone.acquire(blocking=False)
    raw.set("fenced", "thief")
    with pytest.raises(LockNotOwned):
        gone.fence
    assert gone.lost


# -- the fence after a release --------------------------------------------------


def test_before_the_first_acquisition_the_fence_is_none(client):
    assert client.lock("never", ttl=10.0).fence is None
    assert client.semaphore("never", limit=2).fence is None
    assert client.read_lock("never").fence is None


def test_a_fence_read_while_held_is_the_fence_after_the_release(client):
    lock = client.lock("kept", ttl=10.0)
    with lock:
        drawn = lock.fence
    assert lock.fence == drawn
    assert lock.fence == drawn  # and again: from memory
    # A release that finds the lock lost keeps it too.
    assert lock.acquire(blocking=False)
    second = lock.fence
    assert second > drawn
    client.release_token("kept", lock.token)
    with pytest.raises(LockNotOwned):
        lock.release()
    assert lock.fence == second


def test_a_fence_drawn_by_the_acquire_is_the_fence_after_the_release(client, raw):
    lock = client.lock("fenced-kept", ttl=10.0, fenced=True)
    assert lock.acquire(blocking=False)
    lock.release()
    before = _scripts(raw)
    fence = lock.fence
    assert isinstance(fence, int) and 0 < fence < MAX_FENCE
    assert _scripts(raw) == before, "nothing is drawn after the release"
    with client.lock("fenced-kept", ttl=10.0, timeout=0) as later:
        assert later.fence > fence


def test_a_fence_never_drawn_while_held_is_not_owned_after_the_release(client, raw):
    lock = client.lock("undrawn", ttl=10.0)
    with lock:
        pass
    before = _scripts(raw)
    with pytest.raises(LockNotOwned, match="released before its fence was drawn"):
        lock.fence
    with pytest.raises(LockNotOwned, match="released before its fence was drawn"):
        lock.fence
    assert _scripts(raw) == before, "nothing is drawn after the release"
    # The next acquisition has its own.
    assert lock.acquire(blocking=False)
    assert lock.fence > 0
    lock.release()
    assert lock.fence > 0


@pytest.mark.parametrize("kind", ["semaphore", "read_lock", "write_lock"])
def test_semaphores_and_read_write_locks_have_their_fence_from_the_acquire(client, kind):
    def make():
        if kind == "semaphore":
            return client.semaphore("shared", limit=2, ttl=10.0)
        return getattr(client, kind)("shared", ttl=10.0)

    unread = make()
    with unread:
        pass
    fence = unread.fence
    assert isinstance(fence, int) and fence > 0
    read = make()
    with read:
        held = read.fence
    assert read.fence == held > fence


def test_each_thread_has_the_fence_of_its_own_acquisition(client):
    lock = client.lock("threads", ttl=10.0)
    fences = {}
    taken = threading.Barrier(2, timeout=30)

    def hold(name):
        assert lock.acquire(timeout=30.0)
        fences[name] = lock.fence
        lock.release()
        taken.wait()  # both released before either reads again
        fences[name + " after"] = lock.fence

    threads = [threading.Thread(target=hold, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert fences["a after"] == fences["a"] and fences["b after"] == fences["b"]
    assert fences["a"] != fences["b"]
    # A thread that took none has none.
    assert lock.fence is None


def test_a_lock_released_by_another_thread_keeps_its_fence_for_both(client):
    lock = client.lock("handed-over", ttl=10.0)
    assert lock.acquire(blocking=False)
    drawn = lock.fence
    seen = []
    t = threading.Thread(target=lambda: (lock.release(), seen.append(lock.fence)))
    t.start()
    t.join(30)
    assert seen == [drawn]
    assert lock.fence == drawn


def test_async_releases_keep_the_fence(client):
    async def main():
        lock = client.lock("async-kept", ttl=10.0)
        async with lock:
            drawn = lock.fence
        assert lock.fence == drawn
        assert await lock.acquire_async(blocking=False)
        await lock.release_async()
        with pytest.raises(LockNotOwned, match="released before its fence was drawn"):
            lock.fence
        fenced = client.lock("async-kept", ttl=10.0, fenced=True)
        assert await fenced.acquire_async(timeout=10.0)
        await fenced.release_async()
        assert fenced.fence > drawn
        permits = client.semaphore("async-kept", limit=3, ttl=10.0)
        async with permits:
            pass
        assert permits.fence > 0

    asyncio.run(main())


def test_the_redis_py_drop_in_keeps_the_fence_after_the_release(server):
    import redis
    from redis.exceptions import LockNotOwnedError

    from redislock.compat.redis_py import Lock

    r = redis.Redis(port=server.port)
    lock = r.lock("compat-kept", timeout=10, lock_class=Lock)
    assert lock.fence is None
    assert lock.acquire(blocking=False)
    drawn = lock.fence
    lock.release()
    assert lock.fence == drawn
    assert lock.acquire(blocking=False)
    lock.release()
    with pytest.raises(LockNotOwnedError, match="released before its fence was drawn"):
        lock.fence
    r.close()
