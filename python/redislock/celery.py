"""Single-instance Celery tasks on redislock.

    from redislock.celery import Singleton

    @app.task(base=Singleton, lock_on=["account_id"], on_duplicate="skip")
    def sync_account(account_id, full=False): ...

While a copy of ``sync_account(42)`` runs anywhere, another copy with the
same ``account_id`` is skipped ("skip", the default), waits for the first to
finish ("wait"), or fails with ``AlreadyRunning`` ("raise").

**Where the lock is taken.** In the worker, around the task body
(``Task.__call__``), not at ``apply_async`` time. A lock taken when the
message is queued (celery-once, celery-singleton) has to outlive the time the
message sits in the queue, which nobody knows, and nobody can renew it
meanwhile; when the worker dies before running the task, or the message is
lost, the lock stays until its expiry and blocks every copy. Here the lock is
held only while the body runs, by the process that runs it, renewed in the
background (about every third of ``lock_ttl``), so a task may run for hours
with a short TTL, and a worker killed mid-task frees the lock within
``lock_ttl``. The release is owner-checked (compare-and-delete): a task that
lost its lock never deletes the lock of the copy that took over (celery-once
and celery-singleton release with a plain ``DEL``). The price: duplicates
are still queued and are dropped (or wait) when a worker picks them up.

**Losing the lock.** If the lock is lost while the task runs (Redis lost the
key, a failover, someone deleted it, the renewal could not reach Redis for a
whole TTL), another copy may start. The task is told: ``self.lock_lost()``
turns True (use ``bind=True``), and ``self.check_lock()`` raises
``LockLost`` at a checkpoint of your choosing. ``self.lock.fence`` is the
acquisition's fencing number, for storage that can reject stale writers. A
task that finishes after losing its lock keeps its result; a warning is
logged.

Options (task attributes, given to ``@app.task(...)`` or set on a subclass):

- ``lock_on``: which arguments make two calls "the same": None (default) all
  of them, by parameter name, defaults included, so ``f(1)`` and ``f(x=1)``
  are the same; a list of parameter names, ``[]`` for one copy of the task
  whatever its arguments; or a callable ``(*args, **kwargs) -> str``.
- ``lock_ttl``: seconds (default ``app.conf.redislock_lock_ttl``, else 30).
- ``limit``: how many copies may run at once (default None: one, under the
  lock). With N, each run takes one permit of a semaphore of N under the
  same name (served in arrival order, a lease per run, renewed the same
  way), and the duplicates beyond N are skipped, wait or raise as above.
- ``on_duplicate``: "skip" | "wait" | "raise" (default
  ``app.conf.redislock_on_duplicate``, else "skip"). A skipped call returns
  ``self.on_skip(...)``, by default None.
- ``lock_wait``: with "wait", the most seconds to wait (None, the default,
  waits as long as it takes), then ``redislock.LockTimeout``. A waiting task
  keeps its worker slot; the waiting is a hand-off, not polling, and the
  waiters run in arrival order.

Configuration (``app.conf``): ``redislock_url`` (else the broker URL when it
is ``redis://``, ``rediss://`` or ``unix://``, else the result backend's),
``redislock_key_prefix`` (default ``"redislock:celery:"``); the lock name is
``<prefix><task name>`` followed by ``:<param>=<json value>,...`` for the
arguments in ``lock_on`` (hashed when longer than 200 bytes).
"""

import contextvars
import hashlib
import inspect
import json
import logging
import os
import threading
from typing import Any, Dict, Optional, Tuple

from celery import Task  # type: ignore
from celery.exceptions import ImproperlyConfigured  # type: ignore

from . import Client, Lock, LockError, LockNotOwned, LockTimeout, LockUnconfirmed

__all__ = ["AlreadyRunning", "LockLost", "Singleton", "client_for"]

logger = logging.getLogger("redislock.celery")

_MODES = ("skip", "wait", "raise")
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class AlreadyRunning(LockTimeout):
    """on_duplicate="raise": another copy of the task holds the lock."""


class LockLost(LockError):
    """Raised by ``Singleton.check_lock()``: the task's lock expired or was
    taken over while it ran; another copy may be running."""


_current: "contextvars.ContextVar[Optional[Lock]]" = contextvars.ContextVar(
    "redislock_celery_lock", default=None
)
# By process and a digest of the URL: the URL itself (it may hold a
# password) is not kept here.
_clients: Dict[Tuple[int, str], Client] = {}
_clients_guard = threading.Lock()


def _redis_url(value: Any) -> Optional[str]:
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if isinstance(value, str):
        value = value.split(";")[0].strip()
        if value.startswith(_REDIS_SCHEMES):
            return value
    return None


def client_for(app: Any) -> Client:
    """The redislock Client of ``app`` in this process (one per process and
    URL, made after a fork, never inherited)."""
    conf = app.conf
    url = conf.get("redislock_url") or _redis_url(conf.broker_url) or _redis_url(conf.result_backend)
    if not url:
        raise ImproperlyConfigured(
            "redislock.celery: set app.conf.redislock_url (the broker is not Redis)"
        )
    key = (os.getpid(), hashlib.sha256(url.encode()).hexdigest())
    with _clients_guard:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = Client(url)
        return client


def _value(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), default=repr)


class Singleton(Task):
    """Base class of tasks of which one copy (per key) runs at a time.
    See the module's documentation."""

    lock_on: Any = None
    lock_ttl: Optional[float] = None
    on_duplicate: Optional[str] = None
    lock_wait: Optional[float] = None
    limit: Optional[int] = None

    # -- what the running task can ask --------------------------------------

    @property
    def lock(self) -> Optional[Lock]:
        """The lock of the call running in this thread (None outside one)."""
        return _current.get()

    def lock_lost(self) -> bool:
        """True once the running call's lock was found expired or taken over."""
        lock = _current.get()
        return lock is not None and lock.lost

    def check_lock(self) -> None:
        """Raise LockLost when the running call's lock was lost."""
        if self.lock_lost():
            raise LockLost(f"task {self.name}: lock lost, another copy may be running")

    # -- hooks -----------------------------------------------------------------

    def singleton_key(self, args: Any = (), kwargs: Any = None) -> str:
        """The lock name of a call with these arguments."""
        kwargs = dict(kwargs or {})
        prefix = self.app.conf.get("redislock_key_prefix") or "redislock:celery:"
        on = self.lock_on
        if inspect.ismethod(on) and on.__self__ is self:
            on = on.__func__  # a function given as lock_on= became a method
        if callable(on):
            part = str(on(*args, **kwargs))
        else:
            try:
                bound = inspect.signature(self.run).bind(*args, **kwargs)
                bound.apply_defaults()
                arguments = dict(bound.arguments)
            except TypeError:  # a wrong call: key it as given, run() will raise
                arguments = {"*args": list(args), "**kwargs": kwargs}
            if on is not None:
                if isinstance(on, str):
                    on = [on]
                missing = [n for n in on if n not in arguments]
                if missing:
                    raise ValueError(f"task {self.name}: lock_on names unknown parameters {missing}")
                arguments = {n: arguments[n] for n in on}
            part = ",".join(f"{n}={_value(arguments[n])}" for n in sorted(arguments))
        if len(part.encode()) > 200:
            part = "sha256=" + hashlib.sha256(part.encode()).hexdigest()
        return f"{prefix}{self.name}:{part}" if part else f"{prefix}{self.name}"

    def on_skip(self, key: str, args: Any, kwargs: Any) -> Any:
        """Called instead of the body when on_duplicate="skip" and another
        copy holds ``key``; its return value is the task's result."""
        logger.info("task %s[%s] skipped: %s is held", self.name, self.request.id, key)
        return None

    # -- the wrapping ----------------------------------------------------------

    def _mode(self) -> str:
        mode = self.on_duplicate or self.app.conf.get("redislock_on_duplicate") or "skip"
        if mode not in _MODES:
            raise ValueError(f"task {self.name}: on_duplicate must be one of {_MODES}, not {mode!r}")
        return str(mode)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        mode = self._mode()
        key = self.singleton_key(args, kwargs)
        ttl = self.lock_ttl or self.app.conf.get("redislock_lock_ttl") or 30.0
        timeout = self.lock_wait if mode == "wait" else 0.0
        client = client_for(self.app)
        limit = getattr(self, "limit", None)
        if limit is None:
            lock = client.lock(key, ttl=float(ttl), timeout=timeout, auto_renew=True)
        else:
            lock = client.semaphore(key, limit=int(limit), ttl=float(ttl), timeout=timeout,
                                    auto_renew=True)
        if not lock.acquire():
            if mode == "skip":
                return self.on_skip(key, args, kwargs)
            if mode == "raise":
                raise AlreadyRunning(f"task {self.name}: {key} is held by another copy")
            raise LockTimeout(f"task {self.name}: {key} still held after {timeout} s")
        reset = _current.set(lock)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            _current.reset(reset)
            try:
                lock.release()
            except LockError as e:
                # LockUnconfirmed is a kind of LockNotOwned, but the lock
                # was most likely released: only the release's reply was lost.
                if isinstance(e, LockNotOwned) and not isinstance(e, LockUnconfirmed):
                    logger.warning(
                        "task %s[%s]: lock %s was lost while it ran; another copy may have run",
                        self.name, self.request.id, key,
                    )
                else:
                    logger.warning(
                        "task %s[%s]: releasing %s failed (%s); it expires within %s s",
                        self.name, self.request.id, key, e, ttl,
                    )
