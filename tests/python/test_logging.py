"""The core's debug lines reach Python's logging, under "redislock.*", obeying
a level set after import; the uncontended path logs nothing."""
import asyncio
import logging
import threading

import redislock  # imported before any level is set, as an application does
from helpers import DEADLINE, wait_until


def lines(caplog, logger=None):
    return [r for r in caplog.records
            if r.name.startswith("redislock") and (logger is None or r.name == logger)]


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
