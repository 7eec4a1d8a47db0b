"""Fencing numbers from shared slot counters: nothing of a lock name is
left on the server once it is released, and fences keep growing across a
restart that lost the counters."""
import threading

from helpers import queued, wait_until

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
