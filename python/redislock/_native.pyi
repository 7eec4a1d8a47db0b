"""Type stubs of the native module (checked against it by mypy's stubtest)."""

from types import TracebackType
from typing import Any, Callable, Coroutine, List, Literal, NoReturn, Optional, Type, Union, final

from typing_extensions import disjoint_base

from ._stats import Stats

__version__: str
__all__ = [
    "Client",
    "Finding",
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
    "__version__",
]

class LockError(Exception):
    """Base class of every redislock error."""

class LockTimeout(LockError):
    """The lock is held by another owner and the wait ran out."""

class LockNotOwned(LockError):
    """Release or extend of a lock that expired, was taken over, or was never acquired."""

class LockWrongType(LockError):
    """The key exists and holds something other than a lock; it was left untouched."""

class LockQuorumError(LockError):
    """Redlock: no majority of the servers could be reached."""

class LockServerError(LockError):
    """The Redis server answered with an error (authentication, permissions, ...)."""

class LockUnconfirmed(LockNotOwned):
    """A release whose outcome is unknown: the connection broke after it was sent, and when
    sent again the lock was no longer this owner's (most likely the first attempt released it)."""

class LockConnectionError(LockError, ConnectionError):
    """Redis cannot be reached, an I/O error, or a timeout (also a builtin ConnectionError)."""

@disjoint_base
class Client:
    def __new__(
        cls,
        url: Union[str, List[str]],
        *,
        connect_timeout: Optional[float] = None,
        command_timeout: Optional[float] = None,
        node_timeout: Optional[float] = None,
    ) -> "Client": ...
    def lock(
        self,
        name: Union[str, bytes],
        ttl: float = 30.0,
        timeout: Optional[float] = None,
        token: Union[str, bytes, None] = None,
        auto_renew: bool = False,
        on_lost: Optional[Callable[[], object]] = None,
        fenced: bool = False,
    ) -> "Lock": ...
    def semaphore(
        self,
        name: Union[str, bytes],
        limit: int,
        ttl: float = 30.0,
        permits: int = 1,
        token: Union[str, bytes, None] = None,
        auto_renew: bool = False,
        timeout: Optional[float] = None,
        on_lost: Optional[Callable[[], object]] = None,
    ) -> "Lock": ...
    def read_lock(
        self,
        name: Union[str, bytes],
        ttl: float = 30.0,
        token: Union[str, bytes, None] = None,
        auto_renew: bool = False,
        timeout: Optional[float] = None,
        on_lost: Optional[Callable[[], object]] = None,
    ) -> "Lock": ...
    def write_lock(
        self,
        name: Union[str, bytes],
        ttl: float = 30.0,
        token: Union[str, bytes, None] = None,
        auto_renew: bool = False,
        timeout: Optional[float] = None,
        on_lost: Optional[Callable[[], object]] = None,
    ) -> "Lock": ...
    def release_token(self, name: Union[str, bytes], token: Union[str, bytes]) -> bool: ...
    def force_release(self, name: Union[str, bytes]) -> bool: ...
    def stats(self) -> Stats: ...
    def doctor(self) -> "Report": ...
    def doctor_async(self) -> Coroutine[Any, Any, "Report"]: ...
    def __reduce__(self) -> NoReturn:
        """A client is not pickled (TypeError): open one from its URL in the other process."""
    def __copy__(self) -> "Client":
        """The same client: it is immutable and made to be shared."""
    def __deepcopy__(self, _memo: Any) -> "Client": ...

@final
class Lock:
    def acquire(self, blocking: bool = True, timeout: Optional[float] = -1.0) -> bool: ...
    def release(self) -> None: ...
    def extend(self, ttl: float) -> None: ...
    def locked(self) -> bool: ...
    def owned(self) -> bool: ...
    @property
    def lost(self) -> bool: ...
    @property
    def token(self) -> Optional[bytes]: ...
    @property
    def fence(self) -> Optional[int]:
        """The fencing number of this thread's acquisition, drawn on first access (or in the
        acquire: ``fenced=True``, semaphores, read-write locks, Redlock). After a release, the
        number drawn while it was held; LockNotOwned when it was released (or lost) before its
        fence was drawn. None only before the first acquisition."""
    @property
    def name(self) -> bytes: ...
    def __enter__(self) -> "Lock": ...
    def __exit__(
        self,
        *_exc: Any,
    ) -> bool: ...
    def acquire_async(self, blocking: bool = True, timeout: Optional[float] = -1.0) -> Coroutine[Any, Any, bool]: ...
    def release_async(self) -> Coroutine[Any, Any, None]: ...
    def __aenter__(self) -> Coroutine[Any, Any, "Lock"]: ...
    def __aexit__(self, *_exc: Any) -> Coroutine[Any, Any, bool]: ...
    def __reduce__(self) -> NoReturn:
        """A Lock is a live handle, not pickled (TypeError): pass its name and token instead."""
    def __copy__(self) -> NoReturn:
        """Nor copied (TypeError): one acquisition has one handle."""
    def __deepcopy__(self, _memo: Any) -> NoReturn: ...

@final
class Report:
    """What ``Client.doctor()`` found: every check on every server. ``str(report)`` is the
    text ``redislock doctor`` prints, ending with a ``verdict:`` line."""

    @property
    def target(self) -> str: ...
    @property
    def findings(self) -> List["Finding"]: ...
    @property
    def is_safe(self) -> bool: ...
    @property
    def worst(self) -> Literal["ok", "warning", "unsafe"]: ...

@final
class Finding:
    """One thing ``Client.doctor()`` checked on one server."""

    @property
    def severity(self) -> Literal["ok", "warning", "unsafe"]: ...
    @property
    def check(self) -> str: ...
    @property
    def server(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def fix(self) -> str: ...
