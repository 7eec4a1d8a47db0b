"""A drop-in for ``redis.asyncio.lock.Lock``, built on redislock.

    from redislock.compat.redis_py_asyncio import Lock
    async with r.lock("reports", timeout=30, blocking_timeout=10, lock_class=Lock):
        ...

The same as :mod:`redislock.compat.redis_py` (read its notes on what
changes), with redis-py's asyncio signatures: ``acquire``, ``release``,
``extend``, ``reacquire``, ``locked``, ``owned`` are awaited, and ``async
with`` takes the lock; ``acquire`` takes redis-py 8.2's keyword-only
``sleep`` (checked, unused). Waiting never blocks the event loop and holds no
thread: the waiter is woken through redislock's subscriber connection when
the lock is released. ``owned`` and ``extend`` run redislock's blocking
call in the loop's default executor.
"""

from __future__ import annotations

import asyncio
import uuid
from types import TracebackType
from typing import Callable, Literal, Optional, Type, TypeVar, Union

from redis.exceptions import LockError, LockNotOwnedError

import redislock

from . import redis_py
from .redis_py import Number, _check_sleep, _milliseconds, _translate

__all__ = ["Lock", "LockError", "LockNotOwnedError"]

T = TypeVar("T")


async def _off_loop(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


class Lock(redis_py._Base):
    """``redis.asyncio.lock.Lock`` on redislock: ``r.lock(name,
    lock_class=Lock, ...)`` on a ``redis.asyncio.Redis``, or ``Lock(r,
    name, ...)``; arguments as :class:`redislock.compat.redis_py.Lock`."""

    async def __aenter__(self) -> "Lock":
        if await self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified", lock_name=self.name)

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        try:
            await self.release()
        except LockError as e:
            self._release_failed(e)

    async def acquire(
        self,
        blocking: Optional[bool] = None,
        blocking_timeout: Optional[Number] = None,
        token: Optional[Union[str, bytes]] = None,
        *,
        sleep: Optional[Number] = None,
    ) -> bool:
        """Take the lock; True once taken (see the sync class). ``sleep``
        (overrides the constructor's) is checked and unused."""
        _check_sleep(sleep)
        tok = uuid.uuid4().hex.encode() if token is None else self._encode(token)
        wait = self._wait(blocking, blocking_timeout)
        if await self._acquire(tok, wait):
            self.local.token = tok
            return True
        return False

    async def _acquire(self, token: bytes, wait: Optional[float]) -> bool:
        lock = self._new_lock(token)
        try:
            if wait == 0.0:
                got = await lock.acquire_async(blocking=False)
            else:
                got = await lock.acquire_async(blocking=True, timeout=wait)
        except redislock.LockWrongType:
            return False
        except redislock.LockError as e:
            _translate(e, self.name)
        if got:
            self.local.lock = lock
        return got

    async def do_acquire(self, token: Union[str, bytes]) -> bool:
        """One try with ``token`` (does not set ``local.token``)."""
        return await self._acquire(self._encode(token), 0.0)

    async def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return await self.redis.get(self.name) is not None

    async def owned(self) -> bool:
        """Whether this lock (this thread's token) holds the key."""
        token = self.local.token
        if token is None:
            return False
        held = self._held()
        if held is not None:
            try:
                return await _off_loop(held.owned)
            except redislock.LockError as e:
                _translate(e, self.name)
        return self._stores(await self.redis.get(self.name), token)

    async def release(self) -> None:
        """Release; LockError when not acquired, LockNotOwnedError when lost
        (the token is cleared after either), ConnectionError when Redis
        could not be reached (the token is kept: release again). A token
        that another task stored in this Lock meanwhile is left alone."""
        expected = self._token_to_release()
        try:
            await self.do_release(expected)
        except LockNotOwnedError:
            self._forget(expected)
            raise
        self._forget(expected)

    async def do_release(self, expected_token: Union[str, bytes]) -> None:
        token, held = self._handle_to_release(expected_token)
        try:
            if held is not None:
                await held.release_async()
                return
            released = await _off_loop(lambda: self._client.release_token(self.name, token))
        except redislock.LockError as e:
            _translate(e, self.name)
        if not released:
            self._not_owned("release")

    async def extend(self, additional_time: Number, replace_ttl: bool = False) -> Literal[True]:
        """Add ``additional_time`` seconds (or set it, ``replace_ttl``)."""
        self._check_extendable("extend")
        return await self.do_extend(additional_time, replace_ttl)

    async def do_extend(self, additional_time: Number, replace_ttl: bool) -> Literal[True]:
        ms = _milliseconds(additional_time, "additional_time")
        held = self._held_for("extend")
        if not self.timeout:
            self._no_expiry()
        if not replace_ttl:
            remaining = int(await self.redis.pttl(self.name))
            if remaining < 0:  # no key, or a key without expiry: not this lock
                self._not_owned("extend")
            ms += remaining
        return await self._set_ttl(held, ms, "extend")

    async def reacquire(self) -> Literal[True]:
        """Reset the remaining time to ``timeout``."""
        self._check_extendable("reacquire")
        return await self.do_reacquire()

    async def do_reacquire(self) -> Literal[True]:
        held = self._held_for("reacquire")
        ms = _milliseconds(self.timeout or 0, "timeout")
        return await self._set_ttl(held, ms, "reacquire")

    async def _set_ttl(self, held: "redislock.Lock", ms: int, what: str) -> Literal[True]:
        """As the sync class's: ``ms`` <= 0 leaves the expiry alone."""
        try:
            if ms <= 0:
                if not await _off_loop(held.owned):
                    self._not_owned(what)
            else:
                await _off_loop(lambda: held.extend(ms / 1000.0))
        except redislock.LockNotOwned as e:
            self._not_owned(what, e)
        except redislock.LockError as e:
            _translate(e, self.name)
        return True

    def __repr__(self) -> str:
        return f"<redislock.compat.redis_py_asyncio.Lock name={self.name!r} timeout={self.timeout!r}>"
