"""Drop-in replacements for other Python lock APIs, built on redislock.

- :mod:`redislock.compat.redis_py`: ``Lock`` for ``redis.Redis.lock(...,
  lock_class=Lock)`` (redis-py's ``redis.lock.Lock``).
- :mod:`redislock.compat.redis_py_asyncio`: the same for ``redis.asyncio``.

The submodules import redis-py; this package does not, so ``import
redislock`` never needs it.
"""
