package redislock

/*
#include <stdbool.h>
#include <stdint.h>
#include "redislock.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
)

// Owned says whether l still holds its lock (or its semaphore permits, or
// its side of a read-write lock), asked of the server now: one round trip
// (over Redlock, of a majority). False, with no error, once it was
// released. A false answer does not close Lost.
func (l *Lock) Owned(ctx context.Context) (bool, error) {
	if ctx == nil {
		return false, invalid("a nil context")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("redislock: owned %q: %w", l.name, err)
	}
	var out C.bool
	if err := call(func() C.redislock_status { return C.redislock_status(C.redislock_lock_owned(l.h, &out)) }); err != nil {
		return false, err
	}
	return bool(out), nil
}

// IsOwnedBy says whether the lock name is held with token right now (one
// round trip; no Lock needed, as for ReleaseToken).
func (c *Client) IsOwnedBy(ctx context.Context, name string, token []byte) (bool, error) {
	var out C.bool
	err := c.byToken(ctx, name, token, func(cc *C.redislock_client, key, tok *C.uint8_t) C.redislock_status {
		return C.redislock_status(C.redislock_is_owned_by(cc, key, C.size_t(len(name)), tok, C.size_t(len(token)), &out))
	})
	if err != nil {
		return false, err
	}
	return bool(out), nil
}

// Forget frees the handle without releasing the lock: it stays held until
// its TTL runs out, or until ReleaseToken (with Token) releases it (the
// request-id pattern). Renewal stops and Lost is never closed from then on;
// a Release after it is ErrNotOwner and leaves the lock alone. Forgetting
// twice does nothing.
func (l *Lock) Forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.h
	if h == nil {
		return
	}
	if l.fence == 0 {
		l.fence = uint64(C.redislock_lock_fence_if_drawn(h))
	}
	l.h = nil
	runtime.SetFinalizer(l, nil)
	C.redislock_lock_forget(h)
	l.lostHandle.Delete()
}
