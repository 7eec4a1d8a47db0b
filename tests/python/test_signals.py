"""Signals never turn into false errors, and Ctrl-C still stops a wait."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis

import redislock


def release_later(lock, delay):
    t = threading.Timer(delay, lock.release)
    t.start()
    return t


@pytest.mark.parametrize("restart", [False, True])
def test_a_wait_rides_out_signals_with_a_handler(client, restart):
    seen = []
    old = signal.signal(signal.SIGALRM, lambda *_: seen.append(1))
    signal.siginterrupt(signal.SIGALRM, not restart)
    holder = client.lock("sig", ttl=10.0)
    assert holder.acquire(blocking=False)
    first = holder.fence
    timer = release_later(holder, 0.5)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        lock = client.lock("sig", ttl=10.0)
        assert lock.acquire(timeout=10)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        timer.join()
    assert len(seen) > 5  # the signals did arrive during the wait
    assert lock.fence > first
    lock.release()


def test_ctrl_c_stops_a_wait_promptly_and_leaves_nothing_held(client, raw):
    holder = client.lock("ctrl-c", ttl=10.0)
    assert holder.acquire(blocking=False)
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    lock = client.lock("ctrl-c", ttl=10.0)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        lock.acquire(timeout=10)
    assert time.monotonic() - started < 2
    assert not lock.owned()
    holder.release()
    # The interrupted waiter left the queue: nobody was handed the lock.
    assert raw.get("ctrl-c") is None
    assert not raw.exists("{ctrl-c}:queue")


WAITER = """
import sys, redislock
lock = redislock.Client(sys.argv[1]).lock("stopped", ttl=10.0)
sys.exit(0 if lock.acquire(timeout=30) else 3)
"""


def test_a_stopped_and_continued_waiter_still_gets_the_lock(server, client, raw):
    holder = client.lock("stopped", ttl=30.0)
    assert holder.acquire(blocking=False)
    proc = subprocess.Popen([sys.executable, "-c", WAITER, server.url], stderr=subprocess.PIPE)
    for _ in range(500):
        if raw.exists("{stopped}:queue"):
            break
        time.sleep(0.01)
    for _ in range(5):
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.05)
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    holder.release()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()


@pytest.mark.parametrize("restart", [False, True])
def test_a_release_held_up_by_the_server_rides_out_signals(server, client, raw, restart):
    """The release waits for its reply on the same connection all along
    (it is not given up and sent again) and reports its true outcome."""
    old = signal.signal(signal.SIGALRM, lambda *_: None)
    signal.siginterrupt(signal.SIGALRM, not restart)
    # Python runs the handler once after the call; the wakeup fd gets a
    # byte from the C-level handler for every signal that arrived.
    r, w = os.pipe()
    os.set_blocking(w, False)
    old_fd = signal.set_wakeup_fd(w)
    lock = client.lock("sig-release", ttl=10.0)
    assert lock.acquire(blocking=False)
    watcher = redis.Redis(port=server.port)

    def held_up():
        return sorted(c["id"] for c in watcher.client_list()
                      if c["cmd"] == "evalsha" and "b" in c["flags"])

    seen_ids = []

    def watch():
        for _ in range(1000):
            if held_up():
                break
            time.sleep(0.01)
        seen_ids.append(held_up())
        time.sleep(0.5)
        seen_ids.append(held_up())
        watcher.execute_command("CLIENT", "UNPAUSE")

    watcher.execute_command("CLIENT", "PAUSE", 10000, "WRITE")
    t = threading.Thread(target=watch)
    t.start()
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        lock.release()  # no exception: released
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        signal.set_wakeup_fd(old_fd)
        t.join()
    assert seen_ids[0] and seen_ids[0] == seen_ids[1]
    os.set_blocking(r, False)
    arrived = len(os.read(r, 4096))
    os.close(r)
    os.close(w)
    assert arrived > 5, arrived
    assert raw.get("sig-release") is None
    watcher.close()
