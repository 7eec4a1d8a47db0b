#!/usr/bin/env python3
"""One semaphore worker process (started by semaphore.py, not by hand).

    python3 semaphore_worker.py IMPL LIMIT TTL_S POLL_MS

IMPL: redislock  client.semaphore(name, limit, ttl) of this project, blocking
                 acquire (acquire(blocking=True, timeout=-1)), reused per cycle
      ria        the "Redis in Action" section 6.3 fair semaphore over redis-py,
                 written here from the book's description: a ZSET of holders
                 scored by client time, a counter and an owner ZSET scored by
                 the counter; a holder is in when its rank in the owner ZSET
                 is below the limit. The book leaves waiting to the caller:
                 retried every POLL_MS.

Same protocol as contended_worker.py: prints "ready", reads "START_NS END_NS"
(CLOCK_MONOTONIC), loops acquire -> critical section -> release until END_NS,
prints {"call", "acq", "rel": [...], "noslot": n}. The critical section (see
semaphore.py): LPOP a slot token, GET + SET that slot's counter (non-atomic),
RPUSH the token back; an empty slot list means more holders than the limit.
"""
import json
import sys
import time
import uuid

import redis

from common import HOST, PORT

SEM_KEY = "bench:sem"
SLOTS_KEY = "bench:sem:slots"
COUNTER_KEY = "bench:sem:counter:"


def make_ria(r, limit, ttl_s, poll_s):
    """Redis in Action 6.3.2 (fair semaphore, MULTI/EXEC pipelines as in the
    book) without the lock of 6.3.4, plus the caller's retry loop."""
    owner, ctr = SEM_KEY + ":owner", SEM_KEY + ":counter"
    held = []

    def try_once():
        ident = str(uuid.uuid4())
        now = time.time()
        p = r.pipeline(transaction=True)
        p.zremrangebyscore(SEM_KEY, "-inf", now - ttl_s)       # drop expired holders
        p.zinterstore(owner, {owner: 1, SEM_KEY: 0})          # ... from the owner ZSET too
        p.incr(ctr)
        seq = p.execute()[-1]
        p.zadd(SEM_KEY, {ident: now})
        p.zadd(owner, {ident: seq})
        p.zrank(owner, ident)
        if p.execute()[-1] < limit:
            return ident
        p.zrem(SEM_KEY, ident)                                # lost: take the entry back
        p.zrem(owner, ident)
        p.execute()
        return None

    def acquire():
        while True:
            ident = try_once()
            if ident is not None:
                held.append(ident)
                return True
            time.sleep(poll_s)

    def release():
        ident = held.pop()
        p = r.pipeline(transaction=True)
        p.zrem(SEM_KEY, ident)
        p.zrem(owner, ident)
        p.execute()
    return acquire, release


def make_sem(impl, r, limit, ttl_s, poll_s):
    if impl == "redislock":
        import redislock
        client = redislock.Client("redis://%s:%d/0" % (HOST, PORT))
        sem = client.semaphore(SEM_KEY, limit=limit, ttl=ttl_s)
        return (lambda: sem.acquire(blocking=True, timeout=-1)), sem.release
    if impl == "ria":
        return make_ria(r, limit, ttl_s, poll_s)
    raise SystemExit("unknown impl " + impl)


def main():
    impl, limit, ttl_s, poll_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    r = redis.Redis(host=HOST, port=PORT)        # the lock's connection (ria)
    data = redis.Redis(host=HOST, port=PORT)     # the critical section's
    r.ping()
    data.ping()
    acquire, release = make_sem(impl, r, limit, ttl_s, poll_ms / 1000.0)
    print("ready", flush=True)
    start_ns, end_ns = map(int, sys.stdin.readline().split())
    clock = time.monotonic_ns
    while clock() < start_ns:
        time.sleep(0.0005)

    call, acq, rel, noslot = [], [], [], 0
    while True:
        t_call = clock()
        acquire()
        t_acq = clock()
        if t_acq >= end_ns:
            release()
            break
        slot = data.lpop(SLOTS_KEY)
        if slot is None:                          # more holders than the limit
            noslot += 1
        else:
            key = COUNTER_KEY + slot.decode()
            v = int(data.get(key) or 0)           # deliberately non-atomic
            data.set(key, v + 1)
            data.rpush(SLOTS_KEY, slot)
        t_rel = clock()
        release()
        call.append(t_call)
        acq.append(t_acq)
        rel.append(t_rel)
    print(json.dumps({"call": call, "acq": acq, "rel": rel, "noslot": noslot}), flush=True)


if __name__ == "__main__":
    main()
