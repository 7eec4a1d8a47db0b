"""redislock: one Redis distributed lock shared by Rust, C, Python and PHP.

    client = redislock.Client("redis://127.0.0.1:6379/0")
    with client.lock("reports", ttl=30.0, timeout=10.0) as lock:
        write_report(fence=lock.fence)

The lock key holds the owner's token and nothing else (``SET key token NX
PX``), so processes using redis-py's ``Lock`` or the classic ``SET NX``
helper on the same name exclude us and are excluded. Waiters are handed the
lock in arrival order when it is released; every acquisition gets a fencing
number; a Lock inherited by a forked child is inert there.

Functions that must not run twice at once, in any process:

    @client.synchronized("reports:{day}", ttl=30.0, timeout=10.0)
    def make_report(day): ...

``client.stats()`` returns what the client did (a ``Stats`` dict);
``redislock.metrics`` exports it to Prometheus. ``client.doctor()`` checks
the servers for what makes a lock unsafe or slow (a ``Report``: log
``str(report)`` at start). The core's debug lines (waits, retries,
hand-offs, losses) go to the ``redislock`` logger.
"""

import functools
import inspect
from typing import Any, Callable, Optional, TypeVar, Union

from . import _native
from ._native import (
    Finding,
    Lock,
    LockConnectionError,
    LockError,
    LockNotOwned,
    LockQuorumError,
    LockServerError,
    LockTimeout,
    LockUnconfirmed,
    LockWrongType,
    Report,
    __version__,
)
from ._stats import HistogramStats, Stats

_F = TypeVar("_F", bound=Callable[..., Any])

_Name = Union[str, bytes, Callable[..., Union[str, bytes]]]


class Client(_native.Client):
    """A connection pool for one Redis deployment: ``Client(url)``, or
    ``Client([url, url, url])`` for Redlock over independent servers (a
    majority must agree; fencing numbers are advisory there). Thread-safe;
    share one per process. ``repr()`` shows the URL without its password;
    a client is not pickled, and a copy of it is the same client."""

    def synchronized(
        self,
        name: _Name,
        ttl: float = 30.0,
        timeout: Optional[float] = None,
        auto_renew: bool = True,
        on_lost: Optional[Callable[[], object]] = None,
    ) -> Callable[[_F], _F]:
        """Decorator: each call of the function holds the lock ``name``.

        ``name`` is a str or bytes, a str with ``{placeholders}`` filled from
        the call's arguments by name (``"report:{day}"``; defaults count), or
        a callable given the call's arguments that returns the name.
        ``timeout``: how long a call waits for the lock (None forever, 0
        once), then raises LockTimeout without running the function.
        ``auto_renew`` (on by default): the lock is renewed in the background
        while the function runs, so a call may outlast ``ttl``; a process that
        dies leaves the lock for at most ``ttl``. ``on_lost``: as in ``lock()``,
        run once when a call's lock is found lost while the function runs.

        Works for ``async def`` functions too (the lock is awaited, no thread
        waits). The function's result and exceptions pass through, and the
        lock is released on every way out; when the function returned but the
        lock had been lost meanwhile (expired or taken over), the release
        raises LockNotOwned. Generator functions are refused (the lock would
        be released before they run).
        """
        # Fail early on bad arguments rather than at the first call.
        if not callable(name):
            self.lock(name, ttl, timeout)

        def decorate(fn: _F) -> _F:
            if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
                raise TypeError("synchronized() cannot wrap a generator function")
            key_of = _key_function(name, fn)

            def make(args: Any, kwargs: Any) -> Lock:
                return self.lock(key_of(args, kwargs), ttl, timeout, auto_renew=auto_renew,
                                 on_lost=on_lost)

            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    lock = make(args, kwargs)
                    await lock.__aenter__()  # LockTimeout when the wait runs out
                    try:
                        result = await fn(*args, **kwargs)
                    except BaseException:
                        try:
                            await lock.release_async()
                        except LockError:
                            pass  # the function's own exception is the news
                        raise
                    await lock.release_async()
                    return result

                return async_wrapper  # type: ignore[return-value]

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                lock = make(args, kwargs)
                lock.__enter__()  # LockTimeout when the wait runs out
                try:
                    result = fn(*args, **kwargs)
                except BaseException:
                    try:
                        lock.release()
                    except LockError:
                        pass  # the function's own exception is the news
                    raise
                lock.release()
                return result

            return wrapper  # type: ignore[return-value]

        return decorate


def _key_function(name: _Name, fn: Callable[..., Any]) -> Callable[[Any, Any], Union[str, bytes]]:
    """How a call's arguments give the lock name."""
    if callable(name):
        get = name
        return lambda args, kwargs: get(*args, **kwargs)
    if isinstance(name, str) and "{" in name:
        sig = inspect.signature(fn)
        template = name

        def formatted(args: Any, kwargs: Any) -> str:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return template.format(**bound.arguments)

        return formatted
    fixed = name
    return lambda args, kwargs: fixed


__all__ = [
    "Client",
    "Finding",
    "HistogramStats",
    "Lock",
    "LockConnectionError",
    "LockError",
    "LockNotOwned",
    "LockQuorumError",
    "LockServerError",
    "LockTimeout",
    "LockUnconfirmed",
    "LockWrongType",
    "Report",
    "Stats",
    "__version__",
]
