"""A drop-in for redis-py's ``redis.lock.Lock``, built on redislock.

Switch an application over in one line, where it takes its locks::

    from redislock.compat.redis_py import Lock
    with r.lock("reports", timeout=30, blocking_timeout=10, lock_class=Lock):
        ...

or construct it as redis-py's: ``Lock(r, "reports", timeout=30)``. The
constructor, ``acquire``/``release``/``extend``/``reacquire``/``locked``/
``owned``, the context manager, ``lock.local.token`` and the exceptions
(``redis.exceptions.LockError``, ``LockNotOwnedError``, both with
``lock_name``) are redis-py's. The key holds the token alone (``SET name
token NX PX``) and release is compare-and-delete, as with redis-py's Lock,
so processes using either class exclude each other on the same name.

What changes:

- Waiting is redislock's hand-off: a waiter is woken when the lock is
  released (in arrival order), not every ``sleep`` seconds; ``sleep`` (of
  the constructor or of ``acquire``) is checked and unused.
  ``blocking_timeout`` is the whole wait.
- ``timeout=None`` (or 0), a lock without expiry in redis-py, is a lock
  with a TTL of :data:`NO_TIMEOUT_TTL` seconds renewed in the background
  while this process holds it: it stays held as long as the holder lives,
  and frees itself when the holder dies instead of never. ``extend`` and
  ``reacquire`` treat it as redis-py 8.2 treats a key without expiry:
  with ``timeout=None`` both raise ``LockError``; with ``timeout=0``
  ``extend`` raises ``LockNotOwnedError`` and ``reacquire`` changes
  nothing and returns True (when the lock is still held).
- ``extend(t)`` adds ``t`` to the remaining time that Redis reports (one
  PTTL read, then redislock's owner-checked extend): not one atomic step,
  so the lock gets up to one round trip more than asked. As in redis-py
  8.2, times count in whole milliseconds, and a resulting TTL of zero or
  less (``extend(0, replace_ttl=True)``, ``extend(-20)``, ``reacquire()``
  with a timeout under 1 ms) leaves the expiry as it is and returns True
  once the lock is found still held (``LockNotOwnedError`` otherwise).
- ``release()`` forgets the token only once the lock is known to be
  released or not owned (as redis-py 8.2): when the connection fails it
  raises ``redis.exceptions.ConnectionError`` and keeps ``local.token``,
  so ``owned()`` tells the truth and ``release()`` can be retried (by
  compare-and-delete of the token; the background renewal of a
  ``timeout=None`` lock stops with the failed release). It does not clear
  a token that another acquirer stored in the meantime
  (``thread_local=False``, or asyncio tasks sharing one Lock).
- Every acquisition has a fencing number: :attr:`Lock.fence`.
- A Lock object dropped (garbage-collected) while held releases its lock,
  as redislock's locks do; redis-py leaves the key until it expires. Keep
  the object (or use a ``with`` block) for as long as the lock is needed.
- A Lock inherited by a forked child is inert there (it neither releases
  nor extends the parent's lock).
- ``do_acquire``/``do_release``/``do_extend``/``do_reacquire`` exist but
  call redislock; no Lua script is registered on the redis-py client.

The redislock client is derived from the redis-py client's connection
pool (host, port, db, username, password or credential provider, TLS with
``ssl_ca_certs``, Unix socket, socket timeouts) and shared by every Lock on
that pool. :func:`set_client` gives a pool an explicit ``redislock.Client``
instead (Sentinel, Cluster, Redlock, client certificates).
"""

from __future__ import annotations

import logging
import math
import ssl
import threading
import uuid
import weakref
from types import SimpleNamespace, TracebackType
from typing import Any, Dict, Literal, NoReturn, Optional, Type, Union
from urllib.parse import quote, urlencode

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError, LockNotOwnedError

import redislock

__all__ = [
    "Lock",
    "LockError",
    "LockNotOwnedError",
    "NO_TIMEOUT_TTL",
    "client_for",
    "set_client",
    "url_from_connection_kwargs",
]

logger = logging.getLogger(__name__)

Number = Union[int, float]

#: TTL in seconds of a lock made with ``timeout=None``: renewed in the
#: background while held, so it only matters when the holder dies.
NO_TIMEOUT_TTL = 30.0

_clients: "weakref.WeakKeyDictionary[Any, redislock.Client]" = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


class _Local(threading.local):
    """Per-thread token and acquisition (and the acquisition last released,
    for its fence), None in every thread until set."""

    token: Optional[bytes] = None
    lock: Optional["redislock.Lock"] = None
    released: Optional["redislock.Lock"] = None


class _Shared(SimpleNamespace):
    """The same, shared by all threads (``thread_local=False``)."""

    token: Optional[bytes] = None
    lock: Optional["redislock.Lock"] = None
    released: Optional["redislock.Lock"] = None


def _is_ssl(connection_class: Any) -> bool:
    return any(c.__name__ == "SSLConnection" for c in getattr(connection_class, "__mro__", ()))


def _cert_reqs_none(value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() == "none"
    return bool(value == ssl.CERT_NONE)


def url_from_connection_kwargs(kwargs: Dict[str, Any], connection_class: Any = None) -> str:
    """The redislock URL for a redis-py pool's ``connection_kwargs`` (and
    ``connection_class``, whose being an ``SSLConnection`` means TLS).

    ``path`` gives ``unix:///path?db=N``; otherwise ``redis://`` or
    ``rediss://`` with user, password, host, port and db;
    ``ssl_ca_certs`` becomes ``tls_ca_file``, ``socket_connect_timeout``
    and ``socket_timeout`` become ``connect_timeout`` and
    ``command_timeout``. A ``credential_provider`` is asked once. Raises
    ValueError for what redislock cannot do from a URL: TLS without
    certificate checks, client certificates.
    """
    username = kwargs.get("username")
    password = kwargs.get("password")
    provider = kwargs.get("credential_provider")
    if provider is not None:
        creds = provider.get_credentials()
        if len(creds) == 2:
            username, password = creds
        else:
            username, password = None, creds[0]
    db = int(kwargs.get("db") or 0)
    query: Dict[str, str] = {}
    connect_timeout = kwargs.get("socket_connect_timeout")
    if connect_timeout is None:
        connect_timeout = kwargs.get("socket_timeout")
    if connect_timeout:
        query["connect_timeout"] = f"{float(connect_timeout)}s"
    if kwargs.get("socket_timeout"):
        query["command_timeout"] = f"{float(kwargs['socket_timeout'])}s"

    auth = ""
    if password is not None or username:
        auth = quote(str(username or ""), safe="")
        if password is not None:
            auth += ":" + quote(str(password), safe="")
        auth += "@"

    path = kwargs.get("path")
    if path:
        query["db"] = str(db)
        return f"unix://{auth}{quote(str(path))}?{urlencode(query)}"

    tls = _is_ssl(connection_class)
    if tls:
        if _cert_reqs_none(kwargs.get("ssl_cert_reqs", "required")):
            raise ValueError(
                "redislock always checks the server's TLS certificate: give the pool "
                "ssl_ca_certs instead of ssl_cert_reqs='none'"
            )
        if kwargs.get("ssl_certfile") or kwargs.get("ssl_keyfile"):
            raise ValueError(
                "TLS client certificates cannot be derived from a redis-py pool: "
                "open a redislock.Client yourself and give it with set_client()"
            )
        if kwargs.get("ssl_ca_certs"):
            query["tls_ca_file"] = str(kwargs["ssl_ca_certs"])
    host = str(kwargs.get("host") or "localhost")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = int(kwargs.get("port") or 6379)
    scheme = "rediss" if tls else "redis"
    url = f"{scheme}://{auth}{host}:{port}/{db}"
    if query:
        url += "?" + urlencode(query)
    return url


def _pool_of(redis_client: Any) -> Any:
    pool = getattr(redis_client, "connection_pool", None)
    if pool is None or not hasattr(pool, "connection_kwargs"):
        raise TypeError(
            f"cannot derive a redislock client from {type(redis_client).__name__} "
            "(no connection_pool.connection_kwargs): open a redislock.Client "
            "and give it with redislock.compat.redis_py.set_client(r, client)"
        )
    return pool


def set_client(redis_client: Any, client: "redislock.Client") -> None:
    """Use ``client`` for every Lock made on ``redis_client``'s connection
    pool (``redis_client`` may also be the pool itself), instead of one
    derived from the pool's settings."""
    pool = redis_client if hasattr(redis_client, "connection_kwargs") else _pool_of(redis_client)
    with _clients_lock:
        _clients[pool] = client


def client_for(redis_client: Any) -> "redislock.Client":
    """The redislock client for a redis-py client: one per connection pool,
    opened on first use from the pool's connection settings."""
    pool = _pool_of(redis_client)
    with _clients_lock:
        client = _clients.get(pool)
        if client is None:
            kwargs = pool.connection_kwargs
            url = url_from_connection_kwargs(kwargs, getattr(pool, "connection_class", None))
            client = redislock.Client(url)
            _clients[pool] = client
        return client


def _milliseconds(value: Any, what: str) -> int:
    """Seconds as redis-py counts them for extend and reacquire: whole
    milliseconds, truncated. TypeError for what is not a number, ValueError
    for NaN and infinities."""
    if isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__"):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{what} must be a finite number of seconds, not {value!r}")
    return int(seconds * 1000)


def _check_sleep(sleep: Any) -> None:
    """``sleep`` is unused (waiters are woken on release) but checked as
    redis-py's polling would use it: None or a number of seconds >= 0."""
    if sleep is None:
        return
    if isinstance(sleep, (bool, str, bytes)) or not hasattr(sleep, "__float__"):
        raise TypeError(f"sleep must be a number of seconds, not {type(sleep).__name__}")
    if not float(sleep) >= 0:  # also NaN
        raise ValueError(f"sleep must be a number of seconds >= 0, not {sleep!r}")


def _translate(e: BaseException, name: Any) -> NoReturn:
    """Raise redis-py's exception for a redislock one."""
    if isinstance(e, redislock.LockNotOwned):
        raise LockNotOwnedError(str(e), lock_name=name) from e
    if isinstance(e, redislock.LockConnectionError):
        raise RedisConnectionError(str(e)) from e
    if isinstance(e, redislock.LockError):
        raise LockError(str(e), lock_name=name) from e
    raise e


class _Base:
    """What the sync and the asyncio classes share: redis-py's constructor,
    the per-thread state, and how an acquisition is made."""

    def __init__(
        self,
        redis: Any,
        name: Any,
        timeout: Optional[Number] = None,
        sleep: Number = 0.1,
        blocking: bool = True,
        blocking_timeout: Optional[Number] = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> None:
        _check_sleep(sleep)
        self.redis = redis
        self.name = name
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.thread_local = bool(thread_local)
        self.raise_on_release_error = raise_on_release_error
        self.local: Union[_Local, _Shared] = _Local() if self.thread_local else _Shared()
        self._client = client_for(redis)

    # -- helpers ---------------------------------------------------------

    def _held(self) -> Optional["redislock.Lock"]:
        """This thread's (or, not thread-local, this object's) acquisition,
        when it is the one ``local.token`` names."""
        lock, token = self.local.lock, self.local.token
        if lock is None or token is None or lock.token != token:
            return None
        return lock

    def _encode(self, token: Union[str, bytes]) -> bytes:
        encoded: bytes = self.redis.get_encoder().encode(token)
        return encoded

    def _wait(self, blocking: Optional[bool], blocking_timeout: Optional[Number]) -> Optional[float]:
        """The wait of an acquisition in seconds (0: try once, None: forever),
        from acquire()'s arguments or the object's defaults."""
        if blocking is None:
            blocking = self.blocking
        if blocking_timeout is None:
            blocking_timeout = self.blocking_timeout
        if not blocking:
            return 0.0
        return None if blocking_timeout is None else max(0.0, float(blocking_timeout))

    def _new_lock(self, token: bytes) -> "redislock.Lock":
        """A redislock Lock for one acquisition with ``token``."""
        if self.timeout:
            return self._client.lock(self.name, ttl=float(self.timeout), token=token)
        return self._client.lock(self.name, ttl=NO_TIMEOUT_TTL, token=token, auto_renew=True)

    def _check_extendable(self, what: str) -> None:
        """redis-py's errors for extend/reacquire of an unheld or endless lock."""
        if self.local.token is None:
            raise LockError(f"Cannot {what} an unlocked lock", lock_name=self.name)
        if self.timeout is None:
            raise LockError(f"Cannot {what} a lock with no timeout", lock_name=self.name)

    def _held_for(self, what: str) -> "redislock.Lock":
        held = self._held()
        if held is None:
            raise LockError(
                f"Cannot {what} a lock this Lock object holds only by its token (a token set "
                "by hand, or kept by a release that failed): release() it, or acquire anew",
                lock_name=self.name,
            )
        return held

    def _token_to_release(self) -> Union[str, bytes]:
        """The token release() gives do_release(); LockError when none."""
        expected: Optional[Union[str, bytes]] = self.local.token
        if expected is None:
            raise LockError(
                "Cannot release a lock that's not owned or is already unlocked.",
                lock_name=self.name,
            )
        return expected

    def _handle_to_release(self, expected_token: Union[str, bytes]) -> "tuple[bytes, Optional[redislock.Lock]]":
        """The encoded token and, when this object acquired it, the
        acquisition to release (no longer kept: it gives its lock up in the
        release whatever the outcome, and a retry goes by the token)."""
        token = self._encode(expected_token)
        held = self.local.lock
        if held is not None and held.token == token:
            self.local.lock = None
            self.local.released = held
            return token, held
        released = self.local.released
        if released is None or released.token != token:
            self.local.released = None  # no fence to report for this token
        return token, None

    def _forget(self, expected_token: Union[str, bytes]) -> None:
        """After a release that left the lock not ours: forget the token,
        but only if it is still the one released (another acquirer of this
        object may have stored its own meanwhile)."""
        if self.local.token == expected_token:
            self.local.token = None
            self.local.lock = None

    def _no_expiry(self) -> NoReturn:
        """extend() of a ``timeout=0`` lock: redis-py 8.2's script finds the
        key without expiry and reports it not owned; so does this."""
        raise LockNotOwnedError(
            "Cannot extend a lock with timeout=0 (no expiry in redis-py; renewed while held here)",
            lock_name=self.name,
        )

    def _not_owned(self, what: str, cause: Optional[BaseException] = None) -> NoReturn:
        raise LockNotOwnedError(f"Cannot {what} a lock that's no longer owned", lock_name=self.name) from cause

    def _stores(self, stored: Any, token: bytes) -> bool:
        """Whether the value read from the key is ``token``."""
        if stored is not None and not isinstance(stored, bytes):
            stored = self._encode(stored)
        return bool(stored == token)

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"cannot pickle or copy a {type(self).__module__}.{type(self).__name__}: it holds "
            "live acquisitions; pass its name and token instead"
        )

    def _release_failed(self, e: LockError) -> None:
        """Leaving a ``with`` block whose release failed."""
        if self.raise_on_release_error:
            raise e
        logger.warning("Lock was unlocked or no longer owned when exiting context manager.")

    # -- redislock's extras ----------------------------------------------

    @property
    def fence(self) -> Optional[int]:
        """The fencing number of this thread's acquisition: strictly
        increasing per name, for storage to reject writes from a holder that
        lost the lock. After a release, the number drawn while it was held;
        ``LockNotOwnedError`` when it was released (or lost) before its
        fence was drawn. None before the first acquisition (and for a token
        set by hand)."""
        lock = self._held()
        if lock is None:
            lock = self.local.released
            if lock is None or self.local.token is not None:
                return None
        try:
            return lock.fence
        except redislock.LockError as e:
            _translate(e, self.name)

    @property
    def lost(self) -> bool:
        """True once background renewal (``timeout=None``) or an extend
        found the lock gone."""
        held = self._held()
        return held.lost if held is not None else False


class Lock(_Base):
    """redis-py's ``Lock`` on redislock: ``r.lock(name, lock_class=Lock,
    ...)`` or ``Lock(r, name, ...)``, with redis-py's arguments.

    ``timeout``: the lock's TTL in seconds (None: renewed in the background
    while held, see :data:`NO_TIMEOUT_TTL`). ``sleep``: accepted, unused
    (waiters are woken on release). ``blocking``, ``blocking_timeout``: the
    defaults of :meth:`acquire`. ``thread_local``: keep the token (and the
    acquisition) per thread, as redis-py does. ``raise_on_release_error``:
    whether leaving a ``with`` block raises when the lock was lost.
    """

    # -- redis-py's API --------------------------------------------------

    def __enter__(self) -> "Lock":
        if self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified", lock_name=self.name)

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        try:
            self.release()
        except LockError as e:
            self._release_failed(e)

    def acquire(
        self,
        sleep: Optional[Number] = None,
        blocking: Optional[bool] = None,
        blocking_timeout: Optional[Number] = None,
        token: Optional[Union[str, bytes]] = None,
    ) -> bool:
        """Take the lock; True once taken. ``blocking=False`` tries once;
        ``blocking_timeout`` bounds the wait in seconds (None: forever).
        ``token``: the value stored under the key (default: a random
        one). ``sleep`` (overrides the constructor's) is checked and
        unused: a waiter is woken when the lock is released."""
        _check_sleep(sleep)
        tok = uuid.uuid4().hex.encode() if token is None else self._encode(token)
        wait = self._wait(blocking, blocking_timeout)
        if self._acquire(tok, wait):
            self.local.token = tok
            return True
        return False

    def _acquire(self, token: bytes, wait: Optional[float]) -> bool:
        lock = self._new_lock(token)
        try:
            got = lock.acquire(blocking=True, timeout=wait) if wait != 0.0 else lock.acquire(blocking=False)
        except redislock.LockWrongType:
            return False  # redis-py's SET NX would not take it either
        except redislock.LockError as e:
            _translate(e, self.name)
        if got:
            self.local.lock = lock
        return got

    def do_acquire(self, token: Union[str, bytes]) -> bool:
        """One try with ``token`` (redis-py's hook; does not set
        ``local.token``, :meth:`acquire` does)."""
        return self._acquire(self._encode(token), 0.0)

    def locked(self) -> bool:
        """Whether anyone holds the lock (asks Redis)."""
        try:
            return self._client.lock(self.name).locked()
        except redislock.LockError as e:
            _translate(e, self.name)

    def owned(self) -> bool:
        """Whether this lock (this thread's token) holds the key (asks Redis)."""
        token = self.local.token
        if token is None:
            return False
        held = self._held()
        try:
            if held is not None:
                return held.owned()
        except redislock.LockError as e:
            _translate(e, self.name)
        # A token set by hand (``lock.local.token = ...``): compare it.
        return self._stores(self.redis.get(self.name), token)

    def release(self) -> None:
        """Release; LockError when not acquired, LockNotOwnedError when the
        lock expired or was taken over (the token is cleared after either),
        ConnectionError when Redis could not be reached (the token is kept:
        call release() again)."""
        expected = self._token_to_release()
        try:
            self.do_release(expected)
        except LockNotOwnedError:
            self._forget(expected)
            raise
        self._forget(expected)

    def do_release(self, expected_token: Union[str, bytes]) -> None:
        """Release the key if it holds ``expected_token`` (through this
        object's acquisition when it made it, else compare-and-delete);
        LockNotOwnedError otherwise."""
        token, held = self._handle_to_release(expected_token)
        try:
            if held is not None:
                held.release()
                return
            released = self._client.release_token(self.name, token)
        except redislock.LockError as e:
            _translate(e, self.name)
        if not released:
            self._not_owned("release")

    def extend(self, additional_time: Number, replace_ttl: bool = False) -> Literal[True]:
        """Add ``additional_time`` seconds to the remaining time (or, with
        ``replace_ttl``, set the remaining time to it)."""
        self._check_extendable("extend")
        return self.do_extend(additional_time, replace_ttl)

    def do_extend(self, additional_time: Number, replace_ttl: bool) -> Literal[True]:
        ms = _milliseconds(additional_time, "additional_time")
        held = self._held_for("extend")
        if not self.timeout:
            self._no_expiry()
        if not replace_ttl:
            remaining = int(self.redis.pttl(self.name))
            if remaining < 0:  # no key, or a key without expiry: not this lock
                self._not_owned("extend")
            ms += remaining
        return self._set_ttl(held, ms, "extend")

    def reacquire(self) -> Literal[True]:
        """Reset the remaining time to ``timeout``."""
        self._check_extendable("reacquire")
        return self.do_reacquire()

    def do_reacquire(self) -> Literal[True]:
        held = self._held_for("reacquire")
        ms = _milliseconds(self.timeout or 0, "timeout")
        return self._set_ttl(held, ms, "reacquire")

    def _set_ttl(self, held: "redislock.Lock", ms: int, what: str) -> Literal[True]:
        """Set the remaining time to ``ms``; one that is not positive leaves
        the expiry alone once the lock is found still held (redis-py 8.2)."""
        try:
            if ms <= 0:
                if not held.owned():
                    self._not_owned(what)
            else:
                held.extend(ms / 1000.0)
        except redislock.LockNotOwned as e:
            self._not_owned(what, e)
        except redislock.LockError as e:
            _translate(e, self.name)
        return True

    def __repr__(self) -> str:
        return f"<redislock.compat.redis_py.Lock name={self.name!r} timeout={self.timeout!r}>"
