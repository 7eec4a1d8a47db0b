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
from helpers import queued, wait_until


def in_thread(body):
    """Run `body` on a thread; its exception, if any, lands in the list."""
    errors = []

    def run():
        try:
            body()
        except BaseException as e:  # reported by the test, not lost in the thread
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, errors


@pytest.mark.parametrize("restart", [False, True])
def test_a_wait_rides_out_signals_with_a_handler(client, raw, restart):
    seen = []
    old = signal.signal(signal.SIGALRM, lambda *_: seen.append(1))
    signal.siginterrupt(signal.SIGALRM, not restart)
    holder = client.lock("sig", ttl=60.0)
    assert holder.acquire(blocking=False)
    first = holder.fence
    # The main thread waits behind another waiter: it does not retry before
    # the holder's TTL, so no retry's log line calls into Python, and only
    # the wait itself can run the handler.
    ahead, got = client.lock("sig", ttl=10.0), []

    def wait_ahead():
        got.append(ahead.acquire(timeout=60))
        ahead.release()

    t_ahead, errors_ahead = in_thread(wait_ahead)
    wait_until(lambda: queued(raw, "sig") == 1, what="the other waiter to queue")

    def signal_then_release():
        # Signals every 20 ms from the moment the main thread waits; the
        # holder lets go once the handler ran a few times during the wait.
        try:
            wait_until(lambda: queued(raw, "sig") == 2, what="the main thread to wait")
            signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
            wait_until(lambda: len(seen) > 5, what="the handler to run during the wait")
        finally:
            holder.release()

    t, errors = in_thread(signal_then_release)
    try:
        lock = client.lock("sig", ttl=10.0)
        assert lock.acquire(timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        t.join(30)
        t_ahead.join(30)
    assert not errors + errors_ahead, errors + errors_ahead
    assert got == [True]
    assert len(seen) > 5  # the signals did arrive during the wait
    assert lock.fence > first
    lock.release()


def test_ctrl_c_stops_a_wait_promptly_and_leaves_nothing_held(client, raw):
    # Python's own Ctrl-C handler, which it does not install when started
    # with SIGINT ignored (a background job of a non-interactive shell).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ctrl_c_stops_a_wait(client, raw)
    finally:
        signal.signal(signal.SIGINT, previous)


def ctrl_c_stops_a_wait(client, raw):
    holder = client.lock("ctrl-c", ttl=10.0)
    assert holder.acquire(blocking=False)
    sent = []

    def interrupt():
        wait_until(lambda: client.stats()["waiters_now"] == 1, what="the main thread to wait")
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    t, errors = in_thread(interrupt)
    lock = client.lock("ctrl-c", ttl=10.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            lock.acquire(timeout=30)
        took = time.monotonic() - sent[0]
    finally:
        t.join(30)
    assert not errors, errors
    # Far sooner than the 30 s that a wait deaf to Ctrl-C would run.
    assert took < 10, f"Ctrl-C ended the wait {took:.3f} s after it came"
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
    wait_until(lambda: queued(raw, "stopped") == 1 or proc.poll() is not None,
               what="the waiter process to queue")
    assert proc.poll() is None, proc.communicate()[1].decode()
    for _ in range(5):  # stopped and continued as it waits
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
    os.set_blocking(r, False)
    old_fd = signal.set_wakeup_fd(w)
    lock = client.lock("sig-release", ttl=10.0)
    assert lock.acquire(blocking=False)
    watcher = redis.Redis(port=server.port)

    def held_up():
        return sorted(c["id"] for c in watcher.client_list()
                      if c["cmd"] == "evalsha" and "b" in c["flags"])

    seen_ids = []
    arrived = [0]

    def drain():
        try:
            arrived[0] += len(os.read(r, 4096))
        except BlockingIOError:
            pass
        return arrived[0]

    def watch():
        try:
            seen_ids.append(wait_until(held_up, what="the release to be held up by the pause"))
            drain()
            arrived[0] = 0  # from now on the release is known to be held up
            wait_until(lambda: drain() > 5, what="signals while the release is held up")
            seen_ids.append(held_up())
        finally:
            watcher.execute_command("CLIENT", "UNPAUSE")

    # Long: the watcher ends the pause itself.
    watcher.execute_command("CLIENT", "PAUSE", 60000, "WRITE")
    t, errors = in_thread(watch)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        lock.release()  # no exception: released
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        signal.set_wakeup_fd(old_fd)
        t.join(60)
    os.close(r)
    os.close(w)
    assert not errors, errors
    # The same connection all along, its reply awaited through the signals.
    assert seen_ids[0] and seen_ids[0] == seen_ids[1], seen_ids
    assert arrived[0] > 5, arrived
    assert raw.get("sig-release") is None
    watcher.close()
