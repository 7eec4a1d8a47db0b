"""The core's debug lines reach Python's logging, under "redislock.*", obeying
a level set after import; the uncontended path logs nothing."""
import asyncio
import contextlib
import logging
import sys
import threading
import time

import pytest

import redislock  # imported before any level is set, as an application does
from helpers import DEADLINE, wait_until


def lines(caplog, logger=None):
    return [r for r in caplog.records
            if r.name.startswith("redislock") and (logger is None or r.name == logger)]


class Raised(Exception):
    """What a `raising_on` handler raises by default: the line's thread."""


@contextlib.contextmanager
def raising_on(text, make=lambda record: Raised(record.thread)):
    """A handler on the `redislock` logger raising `make(record)` on each
    line that contains `text` (every line for None). The line then goes no
    further: not to caplog's handler on the root logger."""
    class Raising(logging.Handler):
        def emit(self, record):
            if text is None or text in record.getMessage():
                raise make(record)

    handler = Raising()
    logger = logging.getLogger("redislock")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def test_a_wait_is_logged_once_the_level_is_set_after_import(client, caplog):
    assert redislock.Client  # the module was imported above, at collection
    holder = client.lock("report", ttl=10.0)
    assert holder.acquire(blocking=False)
    # The default level (WARNING, from the root): nothing of the wait.
    caplog.set_level(logging.DEBUG)  # caplog's handler takes everything
    logging.getLogger("redislock").setLevel(logging.NOTSET)
    logging.getLogger().setLevel(logging.WARNING)
    assert not client.lock("report", ttl=5.0).acquire(timeout=0.1)
    assert lines(caplog) == []

    # Set now, after import and after the core already logged (unseen).
    caplog.set_level(logging.DEBUG, logger="redislock")
    waiter = client.lock("report", ttl=5.0)
    assert not waiter.acquire(timeout=0.2)
    wait_lines = lines(caplog, "redislock.deploy.wait")
    assert wait_lines, caplog.text
    queued = [r for r in wait_lines if "queued to wait for it" in r.getMessage()]
    assert len(queued) == 1
    assert queued[0].levelno == logging.DEBUG
    assert 'lock="report"' in queued[0].getMessage()
    assert queued[0].thread == threading.get_ident()
    assert any("gave up waiting" in r.getMessage() for r in wait_lines)
    holder.release()

    # A level raised again silences it.
    caplog.clear()
    caplog.set_level(logging.INFO, logger="redislock")
    assert holder.acquire(blocking=False)
    assert not client.lock("report", ttl=5.0).acquire(timeout=0.1)
    assert lines(caplog) == []
    holder.release()


def test_the_uncontended_path_logs_nothing(client, caplog):
    caplog.set_level(logging.DEBUG, logger="redislock")
    for _ in range(20):
        with client.lock("free", ttl=5.0):
            pass
    assert lines(caplog) == []


def test_hand_offs_and_losses_are_logged(client, raw, caplog):
    caplog.set_level(logging.DEBUG, logger="redislock")
    holder = client.lock("relay", ttl=10.0)
    assert holder.acquire(blocking=False)
    waiter = client.lock("relay", ttl=10.0, timeout=30.0)
    t = threading.Thread(target=waiter.acquire)
    t.start()
    wait_until(lambda: client.stats()["waiters_now"] == 1, what="the thread to wait")
    holder.release()
    t.join(30)
    assert any("handed over" in r.getMessage() for r in lines(caplog, "redislock.deploy.wait"))
    waiter.release()

    lost = threading.Event()
    lock = client.lock("renewed", ttl=0.6, auto_renew=True, on_lost=lost.set)
    assert lock.acquire(blocking=False)
    raw.set("renewed", "thief")
    assert lost.wait(DEADLINE)
    renew_lines = lines(caplog, "redislock.renew")
    assert any(r.getMessage().startswith("lost:") for r in renew_lines), caplog.text
    assert all(r.thread != threading.get_ident() for r in renew_lines)


def test_a_release_to_a_waiting_thread_logs_from_its_own_thread_after_the_call(client, caplog):
    """A release that hands the lock to a thread of this process says so
    ("handed to a waiter of this process") on the releasing thread, once
    the call is back: asked from inside the call, `logging` would take the
    GIL just when the woken thread needs it. A handler raising on that
    line makes the release raise it, the lock handed over all the same."""
    caplog.set_level(logging.DEBUG, logger="redislock")
    # A second waiter, on another lock, keeps the client's waiters'
    # channel open whichever copy of the hand-off wakes the first: the
    # release then always finds the waiter in this process.
    blocker = client.lock("kept-waiting", ttl=30.0)
    assert blocker.acquire(blocking=False)
    kept = client.lock("kept-waiting", ttl=5.0, timeout=60.0)
    other = threading.Thread(target=kept.acquire, daemon=True)
    other.start()

    for raising in (False, True):
        caplog.clear()
        holder = client.lock("in-process", ttl=10.0)
        assert holder.acquire(blocking=False)
        waiter = client.lock("in-process", ttl=10.0, timeout=30.0)
        t = threading.Thread(target=waiter.acquire)
        t.start()
        wait_until(lambda: client.stats()["waiters_now"] == 2, what="both threads to wait")
        if raising:
            with raising_on("handed to a waiter of this process"), \
                    pytest.raises(Raised) as raised:
                holder.release()
            assert raised.value.args == (threading.get_ident(),)
        else:
            holder.release()
        t.join(30)
        assert not t.is_alive()
        # Handed over either way; released once.
        assert waiter.owned() and not holder.owned()
        said = [r for r in lines(caplog, "redislock.deploy.single")
                if "handed to a waiter of this process" in r.getMessage()]
        if not raising:
            assert len(said) == 1, caplog.text
            assert said[0].thread == threading.get_ident()
        waiter.release()
    blocker.release()
    other.join(30)
    assert not other.is_alive()
    kept.release()


def test_a_handler_raising_on_the_hand_off_line_releases_the_lock_again(client, caplog):
    """A handler raising on the waiter's line of its hand-off makes the
    acquire raise it, and the lock it was handed is released again, not
    left held by nobody."""
    caplog.set_level(logging.DEBUG, logger="redislock")
    holder = client.lock("raising-handed", ttl=30.0)
    assert holder.acquire(blocking=False)

    got = []

    def wait():
        try:
            got.append(client.lock("raising-handed", ttl=30.0, timeout=30.0).acquire())
        except Raised as e:
            got.append(e)

    with raising_on("handed over by its releaser"):
        t = threading.Thread(target=wait)
        t.start()
        wait_until(lambda: client.stats()["waiters_now"] == 1, what="the thread to wait")
        holder.release()
        t.join(30)
        assert not t.is_alive()
    assert len(got) == 1 and isinstance(got[0], Raised), got
    assert got[0].args == (t.ident,)
    probe = client.lock("raising-handed", ttl=5.0)
    wait_until(lambda: not probe.locked(), what="the lock handed over to be released again")
    assert probe.acquire(blocking=False)
    probe.release()


def test_a_level_set_while_a_call_waits_reaches_its_later_lines(client, caplog):
    """A call asks `logging` once per logger and level, and asks again a
    second later: its hand-off line follows a level set during the wait."""
    caplog.set_level(logging.DEBUG)  # caplog's handler takes everything
    logging.getLogger("redislock").setLevel(logging.NOTSET)
    logging.getLogger().setLevel(logging.WARNING)
    holder = client.lock("late-level", ttl=10.0)
    assert holder.acquire(blocking=False)
    waiter = client.lock("late-level", ttl=10.0, timeout=30.0)
    t = threading.Thread(target=waiter.acquire)
    t.start()
    wait_until(lambda: client.stats()["waiters_now"] == 1, what="the thread to wait")
    assert lines(caplog) == []          # "queued" was not wanted then
    caplog.set_level(logging.DEBUG, logger="redislock")
    time.sleep(1.2)                      # past the second an answer is used for
    holder.release()
    t.join(30)
    assert not t.is_alive()
    handed = [r for r in lines(caplog, "redislock.deploy.wait") if "handed over" in r.getMessage()]
    assert len(handed) == 1, caplog.text
    waiter.release()


def test_asyncio_waits_are_logged_from_the_runtime(client, caplog):
    caplog.set_level(logging.DEBUG, logger="redislock")
    holder = client.lock("async-report", ttl=10.0)
    assert holder.acquire(blocking=False)

    async def main():
        return await client.lock("async-report", ttl=5.0).acquire_async(timeout=0.2)

    assert asyncio.run(main()) is False
    queued = [r for r in lines(caplog, "redislock.deploy.wait")
              if "queued to wait for it" in r.getMessage()]
    assert len(queued) == 1 and queued[0].thread != threading.get_ident()
    holder.release()


def test_an_exception_raised_inside_a_log_line_is_what_the_call_raises(client, caplog):
    """A log line of a wait runs Python on the waiting thread: a signal
    handler (Ctrl-C) or a logging handler that raises there makes the wait
    raise that exception, at once, instead of waiting out its timeout and
    then failing as a SystemError ("returned a result with an exception
    set")."""
    caplog.set_level(logging.DEBUG, logger="redislock")
    holder = client.lock("raising", ttl=30.0)
    assert holder.acquire(blocking=False)

    class Interrupted(Exception):
        pass

    with raising_on("queued to wait for it", lambda _: Interrupted("raised inside a log line")):
        started = time.monotonic()
        with pytest.raises(Interrupted):
            client.lock("raising", ttl=5.0).acquire(timeout=20.0)
        assert time.monotonic() - started < 10.0, "the wait ran on to its timeout"
    # It left the queue: the release frees the lock instead of handing it over.
    assert client.stats()["waiters_now"] == 0
    holder.release()
    assert not holder.locked()


def test_an_exception_raised_inside_a_log_line_of_a_library_thread_is_unraisable(
        client, raw, monkeypatch, caplog):
    """On the renewal thread nothing can raise it: it goes to
    sys.unraisablehook, and the thread goes on."""
    caplog.set_level(logging.DEBUG, logger="redislock")
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))

    with raising_on(None, lambda r: RuntimeError(f"raised inside {r.getMessage()!r}")):
        lost = client.lock("stolen", ttl=1.5, auto_renew=True)
        assert lost.acquire(blocking=False)
        raw.set("stolen", "thief")  # renewal finds it lost, and logs so
        wait_until(lambda: lost.lost, what="renewal to find the lock lost")
        wait_until(lambda: seen, what="the exception to reach sys.unraisablehook")
        assert isinstance(seen[0], RuntimeError), seen
        # Renewal goes on for other locks.
        kept = client.lock("kept", ttl=1.5, auto_renew=True)
        assert kept.acquire(blocking=False)
        renewed = client.stats()["renewals_ok"]
        wait_until(lambda: client.stats()["renewals_ok"] > renewed, what="another renewal")
        kept.release()
