"""The behaviour table's scenarios in Python (tests/behaviour/run.py runs
it and says what each line means)."""
import math
import os
import sys
import time

import redislock

URL = os.environ["BEHAVIOUR_URL"]


def ask(question):
    print("? " + question, flush=True)
    return sys.stdin.readline().strip()


def pttl(key):
    return int(ask("pttl " + key))


def chain(e):
    """The library's classes from its base down to e's, or e's class."""
    if not isinstance(e, redislock.LockError):
        return type(e).__name__
    return " ⊃ ".join(c.__name__ for c in reversed(type(e).__mro__) if issubclass(c, redislock.LockError))


def say(id_, value):
    print(f"{id_}\t{value}", flush=True)


def gone(key):
    deadline = time.monotonic() + 10
    while pttl(key) != -2:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{key} still there after 10 s")
        time.sleep(0.05)


def scenario(fn):
    id_ = fn.__name__.replace("_", "-")
    try:
        value = fn(redislock.Client(URL))
    except Exception as e:  # noqa: BLE001 - the outcome is what is printed
        value = chain(e)
    say(id_, value)


@scenario
def ttl_default(client):
    with client.lock("behaviour:ttl-default"):
        return f"{math.ceil(pttl('behaviour:ttl-default') / 1000)} s"


@scenario
def ttl_unit(client):
    with client.lock("behaviour:ttl-unit", ttl=2):
        left = pttl("behaviour:ttl-unit")
    return "s" if 1000 < left <= 2000 else f"PTTL {left}"


@scenario
def wait_default(client):
    holder = client.lock("behaviour:wait-default", ttl=1.0)
    holder.acquire()
    started = time.monotonic()
    lock = client.lock("behaviour:wait-default")
    got = lock.acquire()
    waited = time.monotonic() - started
    if got:
        lock.release()
    return "waits" if got and waited >= 0.5 else f"{got} after {waited:.1f} s"


@scenario
def try_held(client):
    with client.lock("behaviour:try-held"):
        return client.lock("behaviour:try-held").acquire(blocking=False)


@scenario
def wait_timeout(client):
    with client.lock("behaviour:wait-timeout"):
        with client.lock("behaviour:wait-timeout", timeout=0.2):
            return "acquired"


@scenario
def release_expired(client):
    lock = client.lock("behaviour:release-expired", ttl=0.2)
    lock.acquire()
    gone("behaviour:release-expired")
    with client.lock("behaviour:release-expired", timeout=0):
        lock.release()
    return "released"


@scenario
def unconfirmed(client):
    lock = redislock.Client(os.environ["BEHAVIOUR_CUTTER"]).lock("behaviour:unconfirmed", token="behaviour-unconfirmed")
    lock.acquire()
    ask("arm behaviour-unconfirmed")
    try:
        lock.release()
    except redislock.LockNotOwned as e:
        return chain(e)
    except redislock.LockError as e:
        return "not caught as not-owned: " + chain(e)
    return "released"


@scenario
def fence_first(client):
    with client.lock("behaviour:fence-first") as lock:
        fence = lock.fence
    return "server µs" if abs(fence - time.time() * 1e6) < 60e6 else fence


@scenario
def fence_after_release(client):
    lock = client.lock("behaviour:fence-after-release")
    lock.acquire()
    lock.release()
    return lock.fence


@scenario
def fence_read_after_release(client):
    lock = client.lock("behaviour:fence-read-after-release")
    lock.acquire()
    fence = lock.fence
    lock.release()
    return "same" if lock.fence == fence else lock.fence


@scenario
def token_after_release(client):
    lock = client.lock("behaviour:token-after-release")
    lock.acquire()
    token = lock.token
    lock.release()
    return "same" if lock.token == token else lock.token


@scenario
def name(client):
    with client.lock("behaviour:name") as lock:
        return type(lock.name).__name__


@scenario
def scoped_renews(client):
    @client.synchronized("behaviour:scoped-renews", ttl=0.3)
    def work():
        time.sleep(0.9)
        return pttl("behaviour:scoped-renews")

    left = work()
    return "renewed" if left > 0 else f"PTTL {left} at the end of the work"


def silent(client, url, **timeouts):
    started = time.monotonic()
    try:
        redislock.Client(url, **timeouts).lock("behaviour:timeout", timeout=0).acquire()
        return "acquired"
    except Exception as e:  # noqa: BLE001
        took = time.monotonic() - started
        return chain(e) if took < 1.9 else f"after {took:.1f} s: {chain(e)}"


@scenario
def timeout_option(client):
    return silent(client, os.environ["BEHAVIOUR_SILENT"], connect_timeout=0.3, command_timeout=0.3)


@scenario
def timeout_url(client):
    return silent(client, os.environ["BEHAVIOUR_SILENT"] + "?connect_timeout=300ms&command_timeout=300ms")


@scenario
def timeout_both(client):
    return silent(
        client,
        os.environ["BEHAVIOUR_SILENT"] + "?connect_timeout=5s&command_timeout=5s",
        connect_timeout=0.3,
        command_timeout=0.3,
    )


@scenario
def bad_ttl(client):
    client.lock("behaviour:bad-ttl", ttl=0).acquire()
    return "acquired"


@scenario
def wrong_type(client):
    client.lock("behaviour:wrong-type").acquire(blocking=False)
    return "acquired"


@scenario
def no_server(client):
    redislock.Client(os.environ["BEHAVIOUR_DEAD"]).lock("behaviour:no-server").acquire(blocking=False)
    return "acquired"
