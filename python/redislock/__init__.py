"""redislock: one Redis distributed lock shared by Rust, C, Python and PHP.

    client = redislock.Client("redis://127.0.0.1:6379/0")
    with client.lock("reports", ttl=30.0, timeout=10.0) as lock:
        write_report(fence=lock.fence)

The lock key holds the owner's token and nothing else (``SET key token NX
PX``), so processes using redis-py's ``Lock`` or the classic ``SET NX``
helper on the same name exclude us and are excluded. Waiters are handed the
lock in arrival order when it is released; every acquisition gets a fencing
number; a Lock inherited by a forked child is inert there.
"""

from ._native import (
    Client,
    Lock,
    LockConnectionError,
    LockError,
    LockNotOwned,
    LockQuorumError,
    LockServerError,
    LockTimeout,
    LockUnconfirmed,
    LockWrongType,
    __version__,
)

__all__ = [
    "Client",
    "Lock",
    "LockConnectionError",
    "LockError",
    "LockNotOwned",
    "LockQuorumError",
    "LockServerError",
    "LockTimeout",
    "LockUnconfirmed",
    "LockWrongType",
    "__version__",
]
