"""Fencing numbers from shared slot counters: nothing of a lock name is
left on the server once it is released, and fences keep growing across a
restart that lost the counters."""
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
