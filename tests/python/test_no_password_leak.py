"""No object of the package shows the password of the URL it was made with:
not repr(), str(), format(), vars(), pickle, copy.copy/deepcopy, logging,
nor an exception's message or traceback. The server has two users with
passwords: a plain one, and one whose password has characters that a URL
must escape (given escaped).
"""
import asyncio
import copy
import io
import json
import logging
import pickle
import traceback
from urllib.parse import quote, quote_plus

import pytest
import redis

import redislock
from redis_server import free_port

PASSWORD = "s3cr3t-pa55"
# Escaped in URLs: '@', '/', ':', '%', '#', '+', ' '.
ESCAPED_PASSWORD = "p@ss/w:rd%#+ s3cr3t"
SENTINEL_PASSWORD = "s3cr3t-sentinel"


def _needles():
    """Every form in which a password could show, as text."""
    found = {"s3cr3t"}
    for p in (PASSWORD, ESCAPED_PASSWORD, SENTINEL_PASSWORD):
        found.update({p, quote(p, safe=""), quote_plus(p), repr(p)[1:-1], json.dumps(p)[1:-1],
                      repr(p.encode())[2:-1]})
    return sorted(found)


NEEDLES = _needles()


def url(port, user="app", password=PASSWORD, db=0):
    return f"redis://{user}:{quote(password, safe='')}@127.0.0.1:{port}/{db}"


@pytest.fixture
def users(server, raw):
    """The server, with the users app and esc (their passwords above)."""
    for user, password in (("app", PASSWORD), ("esc", ESCAPED_PASSWORD)):
        raw.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "&*", "+@all")
    return server


@pytest.fixture(autouse=True)
def core_log():
    """Every line the core logs meanwhile (at DEBUG): none shows a password."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    logger = logging.getLogger("redislock")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield out
    logger.removeHandler(handler)
    logger.setLevel(old)
    assert_clean("the core's log lines", out.getvalue())


def assert_clean(what, text):
    if isinstance(text, bytes):
        for needle in NEEDLES:
            for encoded in {needle.encode("utf-8"), needle.encode("utf-16-le")}:
                assert encoded not in text, f"{what} shows the password ({needle!r}): {text[:2000]!r}"
        return
    for needle in NEEDLES:
        at = text.find(needle)
        assert at < 0, f"{what} shows the password ({needle!r}): ...{text[max(0, at - 300):at + 300]}..."


def _attempt(render):
    """What `render()` gives (as text or bytes), or what it raised."""
    try:
        return render()
    except Exception as e:  # noqa: BLE001 - any refusal is a rendering too
        return f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e))


def renderings(obj):
    """`obj` rendered every way Python renders an object."""
    out = {
        "repr": repr(obj),
        "str": str(obj),
        "format": format(obj, ""),
        "f-string": f"{obj!r} {obj!s}",
    }
    if hasattr(obj, "__dict__"):
        out["vars"] = _attempt(lambda: repr(vars(obj)))
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        out[f"pickle {protocol}"] = _attempt(lambda: pickle.dumps(obj, protocol))
    for how in (copy.copy, copy.deepcopy):
        out[how.__name__] = _attempt(lambda: (lambda c: f"{c!r} {c!s} {vars(c) if hasattr(c, '__dict__') else ''}")(how(obj)))
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logger = logging.getLogger("tests.no_password_leak")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("%s", obj)
        logger.warning("%r", obj)
        logger.warning(obj)
        logger.warning("with extra", extra={"thing": obj})
        if isinstance(obj, BaseException):
            logger.error("failed", exc_info=obj)
    finally:
        logger.removeHandler(handler)
    out["logging"] = log.getvalue()
    if isinstance(obj, BaseException):
        out["args"] = repr(obj.args)
        out["traceback"] = "".join(traceback.format_exception(obj))
    return out


def assert_no_leak(what, obj):
    for how, text in renderings(obj).items():
        assert_clean(f"{what}: {how}", text)


def raised(exc_type, fn):
    """The exception `fn()` raises (one of `exc_type`)."""
    with pytest.raises(exc_type) as info:
        fn()
    return info.value


def outcome(fn):
    """What `fn()` returns, or the LockError it raises."""
    try:
        return fn()
    except redislock.LockError as e:
        return e


class _Leaky:
    """What the check is checked with: an object that shows a URL."""

    def __init__(self, url):
        self.url = url

    def __repr__(self):
        return f"<_Leaky {self.url}>"


def test_the_needles_find_a_password_in_every_rendering():
    leaky = _Leaky(url(1, "esc", ESCAPED_PASSWORD))
    for how, text in renderings(leaky).items():
        with pytest.raises(AssertionError):
            assert_clean(how, text)
    for how, text in renderings(ValueError(f"cannot open {leaky.url}")).items():
        if how.startswith("pickle") or how in ("repr", "str", "format", "args", "traceback", "logging"):
            with pytest.raises(AssertionError):
                assert_clean(how, text)


def test_clients_of_every_kind_of_url(users):
    port = users.port
    escaped = quote(ESCAPED_PASSWORD, safe="")
    sentinel = quote(SENTINEL_PASSWORD, safe="")
    urls = {
        "single": url(port),
        "escaped": url(port, "esc", ESCAPED_PASSWORD),
        "password only": f"redis://:{escaped}@127.0.0.1:{port}",
        "no user name": f"redis://{escaped}@127.0.0.1:{port}",
        "tls": f"rediss://app:{PASSWORD}@127.0.0.1:{port}/0",
        "sentinel": f"redis+sentinel://app:{PASSWORD}@127.0.0.1:{port},127.0.0.1:1/mymaster"
                    f"?sentinel_user=watcher&sentinel_password={sentinel}",
        "cluster": f"rediss+cluster://esc:{escaped}@127.0.0.1:{port},127.0.0.1:1",
        "unix socket": f"unix:///tmp/redislock-none.sock?db=0&user=app&pass={escaped}",
    }
    for what, u in urls.items():
        try:
            client = redislock.Client(u)
        except ValueError as e:  # a build without TLS refuses rediss://: not with the password
            assert_no_leak(f"{what}: the refusal", e)
            continue
        assert_no_leak(what, client)
        assert "***" in repr(client), f"{what}: {client!r}"
        assert copy.copy(client) is client and copy.deepcopy({"c": client})["c"] is client
        with pytest.raises(TypeError, match="cannot pickle a redislock.Client"):
            pickle.dumps(client)
    assert repr(redislock.Client(url(port))) == f"<redislock.Client redis://app:***@127.0.0.1:{port}/0>"
    redlock = redislock.Client([url(port), url(port, "esc", ESCAPED_PASSWORD), url(free_port())])
    assert_no_leak("Redlock", redlock)
    assert f"redis://app:***@127.0.0.1:{port}/0" in repr(redlock)
    native = redislock._native.Client(url(port, "esc", ESCAPED_PASSWORD))
    assert_no_leak("the native client", native)

    for bad in (f"redis://app:{PASSWORD}@127.0.0.1:notaport/0", f"redis://app:{PASSWORD}@",
                f"redis+sentinel://app:{PASSWORD}@127.0.0.1:1", f"redis+cluster://app:{PASSWORD}@h:1#frag",
                f"redis://127.0.0.1:{port}/0?sentinel_password={sentinel}", f"ftp://app:{PASSWORD}@host/"):
        assert_no_leak("a malformed URL", raised(ValueError, lambda: redislock.Client(bad)))
        assert_no_leak("a malformed URL in a list", raised(ValueError, lambda: redislock.Client([url(port), bad])))
    assert_no_leak("a URL of the wrong type", raised(TypeError, lambda: redislock.Client([url(port), 5])))


@pytest.mark.parametrize("user,password", [("app", PASSWORD), ("esc", ESCAPED_PASSWORD)])
def test_locks_reports_stats_and_exceptions(users, raw, user, password):
    client = redislock.Client(url(users.port, user, password))
    lock = client.lock("leak:lock", ttl=10.0)
    assert_no_leak("a lock never acquired", lock)
    assert lock.acquire(blocking=False)
    assert_no_leak("a lock", lock)
    assert lock.fence > 0
    with pytest.raises(TypeError, match="cannot pickle a redislock.Lock"):
        pickle.dumps(lock)
    with pytest.raises(TypeError, match="cannot copy a redislock.Lock"):
        copy.copy(lock)
    lock.release()
    assert_no_leak("a released lock", lock)
    handles = {
        "a fenced, renewed lock": client.lock("leak:fenced", ttl=10.0, fenced=True, auto_renew=True,
                                              on_lost=lambda: None),
        "a semaphore": client.semaphore("leak:sem", limit=2, ttl=10.0),
        "a read lock": client.read_lock("leak:rw", ttl=10.0),
    }
    for what, handle in handles.items():
        assert handle.acquire(blocking=False)
        assert_no_leak(what, handle)
        handle.release()
    write = client.write_lock("leak:rw", ttl=10.0)
    with write:
        assert_no_leak("a write lock", write)

    holder = client.lock("leak:held", ttl=10.0)
    assert holder.acquire(blocking=False)
    assert_no_leak("a timeout", raised(redislock.LockTimeout, lambda: client.lock("leak:held", timeout=0).__enter__()))
    raw.delete("leak:held")
    assert_no_leak("a lost lock", raised(redislock.LockNotOwned, holder.release))
    assert_no_leak("a release without a lock", raised(redislock.LockNotOwned, holder.release))
    raw.lpush("leak:list", "x")
    assert_no_leak("a wrong type", raised(redislock.LockWrongType, lambda: client.lock("leak:list").acquire()))
    assert_no_leak("a bad argument", raised(ValueError, lambda: client.lock("leak:x", ttl=-1)))

    @client.synchronized("leak:sync", ttl=10.0)
    def work():
        raise RuntimeError("inside")

    assert_no_leak("the synchronized() function", work)
    assert_no_leak("an error through synchronized()", raised(RuntimeError, work))

    report = client.doctor()
    assert_no_leak("a doctor report", report)
    assert report.findings
    for finding in report.findings:
        assert_no_leak("a finding", finding)
    assert_no_leak("the stats", client.stats())
    assert_no_leak("the client after all that", client)

    async def asynchronous():
        lock = client.lock("leak:async", ttl=10.0)
        pending = lock.acquire_async(blocking=False)
        assert_no_leak("an awaitable acquire", pending)
        assert await pending
        assert_no_leak("a lock acquired by a task", lock)
        await lock.release_async()
        async with client.semaphore("leak:async-sem", limit=2) as permit:
            assert_no_leak("a semaphore of a task", permit)
        pending = client.doctor_async()
        assert_no_leak("an awaitable doctor()", pending)
        assert_no_leak("a report of doctor_async()", await pending)

    asyncio.run(asynchronous())


def test_connection_errors_and_refused_credentials(users):
    port = free_port()  # nobody listens there
    for u in (url(port), url(port, "esc", ESCAPED_PASSWORD), [url(port), url(free_port()), url(users.port)]):
        client = redislock.Client(u, connect_timeout=2.0)
        e = raised(redislock.LockError, lambda: client.lock("leak:down", ttl=1.0).acquire(blocking=False))
        assert isinstance(e, (redislock.LockConnectionError, redislock.LockQuorumError)), repr(e)
        assert_no_leak("a connection error", e)
        # Redlock with one server up: a report, else the error.
        assert_no_leak("doctor() of a client that cannot connect", outcome(client.doctor))
        assert_no_leak("release_token() of a client that cannot connect",
                       outcome(lambda: client.release_token("leak:down", "t")))

        async def asynchronous():
            with pytest.raises(redislock.LockError) as info:
                await client.lock("leak:down", ttl=1.0).acquire_async(blocking=False)
            return info.value

        assert_no_leak("a connection error of a task", asyncio.run(asynchronous()))
        assert_no_leak("a client that cannot connect", client)
    assert isinstance(raised(redislock.LockError, lambda: redislock.Client(url(port)).lock("x").acquire(timeout=0)),
                      redislock.LockConnectionError)
    # A wrong password: the server refuses it, and the error does not repeat it.
    wrong = redislock.Client(url(users.port, "app", PASSWORD + "-wrong-s3cr3t"))
    assert_no_leak("a refused password", raised(redislock.LockServerError, lambda: wrong.lock("leak:auth").acquire()))


def test_compat_objects(users):
    from redislock.compat import redis_py, redis_py_asyncio

    r = redis.Redis(port=users.port, username="esc", password=ESCAPED_PASSWORD)
    lock = redis_py.Lock(r, "leak:compat", timeout=10)
    assert_no_leak("a compat Lock", lock)
    assert lock.acquire(blocking=False)
    assert_no_leak("a compat Lock held", lock)
    assert_no_leak("its client", redis_py.client_for(r))
    lock.release()
    assert_no_leak("a compat Lock released", lock)
    with pytest.raises(TypeError, match="cannot pickle or copy"):
        pickle.dumps(lock)
    with pytest.raises(TypeError, match="cannot pickle or copy"):
        copy.deepcopy(lock)
    r.close()

    down = redis.Redis(port=free_port(), username="app", password=PASSWORD, socket_connect_timeout=2)
    assert_no_leak("a compat connection error",
                   raised(redis.exceptions.ConnectionError, lambda: redis_py.Lock(down, "x").acquire(blocking=False)))

    async def asynchronous():
        ra = redis.asyncio.Redis(port=users.port, username="app", password=PASSWORD)
        alock = redis_py_asyncio.Lock(ra, "leak:compat-async", timeout=10)
        assert await alock.acquire(blocking=False)
        assert_no_leak("an asyncio compat Lock", alock)
        await alock.release()
        await ra.aclose()

    asyncio.run(asynchronous())


def test_metrics_and_celery(users):
    from celery import Celery

    import redislock.celery
    from redislock.metrics import RedislockCollector

    client = redislock.Client(url(users.port, "esc", ESCAPED_PASSWORD))
    collector = RedislockCollector(client, labels={"client": "orders"})
    assert_no_leak("a metrics collector", collector)
    assert_no_leak("its samples", list(collector.collect()))

    app = Celery("leak", broker=url(users.port), backend=url(users.port))
    app.conf.redislock_url = url(users.port, "esc", ESCAPED_PASSWORD)
    celery_client = redislock.celery.client_for(app)
    assert celery_client.lock("leak:celery").acquire(blocking=False)
    assert_no_leak("Celery's client", celery_client)
    assert_no_leak("the module's clients", redislock.celery._clients)

    @app.task(base=redislock.celery.Singleton, lock_on=[])
    def job():
        return 1

    assert_no_leak("a Singleton task's lock name", job.singleton_key())
