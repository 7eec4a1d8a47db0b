"""Python threads waiting on one lock share the client's one subscriber
connection, and each still gets the lock once, handed over in turn."""
import threading
import time


def pubsub_clients(raw):
    return [c for c in raw.client_list() if int(c.get("sub", 0)) > 0 or "P" in c["flags"]]


def test_waiting_threads_share_one_subscriber(client, raw):
    n = 50
    holder = client.lock("shared", ttl=30.0, timeout=0)
    assert holder.acquire()
    fences, errors = [], []

    def wait():
        try:
            lock = client.lock("shared", ttl=30.0, timeout=60.0)
            assert lock.acquire()
            fences.append(lock.fence)
            lock.release()
        except Exception as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=wait) for _ in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while raw.llen("{shared}:queue") < n:
        assert time.monotonic() < deadline, "the threads did not all queue"
        time.sleep(0.05)
    assert len(pubsub_clients(raw)) == 1
    holder.release()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(fences) == n
    assert fences == sorted(fences) and len(set(fences)) == n
    assert raw.keys("*shared*") == []
    assert len(pubsub_clients(raw)) == 1
