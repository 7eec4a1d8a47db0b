"""One process of a fleet in the middle of a rollout, for test_rollout_python.py.

    python rollout_peer.py PORT CLASS NAME

CLASS is ``redis-py`` (redis-py's own ``redis.lock.Lock``) or ``compat``
(``redislock.compat.redis_py.Lock``). The process holds one Lock object for
NAME on a redis-py client of 127.0.0.1:PORT and runs the commands it reads,
one JSON object a line on stdin, answering each with one JSON line on
stdout: ``{"ok": result}`` or ``{"error": exception class name, "lock_name":
...}`` for redis-py's LockError and its subclasses.

Commands: ``{"op": "new", ...Lock keyword arguments}`` (answers the class's
module), ``{"op": "acquire", ...}``, ``{"op": "release"}``, ``{"op":
"extend", ...}``, ``{"op": "reacquire"}``, ``{"op": "owned"}``, ``{"op":
"token"}`` (this process's token, as text, or null).
"""
import json
import sys

import redis
from redis.exceptions import LockError


def main() -> None:
    port, kind, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if kind == "redis-py":
        from redis.lock import Lock
    elif kind == "compat":
        from redislock.compat.redis_py import Lock
    else:
        raise SystemExit(f"rollout_peer: unknown class {kind!r}")
    r = redis.Redis(host="127.0.0.1", port=port)
    lock = None
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd.pop("op")
        try:
            if op == "new":
                lock = Lock(r, name, **cmd)
                out = type(lock).__module__
            elif op == "acquire":
                out = lock.acquire(**cmd)
            elif op == "release":
                out = lock.release()
            elif op == "extend":
                out = lock.extend(**cmd)
            elif op == "reacquire":
                out = lock.reacquire()
            elif op == "owned":
                out = lock.owned()
            elif op == "token":
                token = lock.local.token
                out = None if token is None else token.decode()
            else:
                raise SystemExit(f"rollout_peer: unknown command {op!r}")
            reply = {"ok": out}
        except LockError as e:
            reply = {"error": type(e).__name__, "lock_name": e.lock_name}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
