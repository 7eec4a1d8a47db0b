package redislock

/*
#include <stdint.h>
#include "redislock.h"
*/
import "C"

import (
	"context"
	"fmt"
	"log"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
)

// Lock is a held lock (or semaphore permits, or a read-write lock's read
// or write side). It may be used from any goroutine. Release it when done;
// a Lock that becomes unreachable while held is released by a finalizer as
// a last resort, and that is logged.
type Lock struct {
	mu         sync.Mutex
	h          *C.redislock_lock // nil once released
	name       string
	token      []byte
	kind       kind
	fence      uint64 // 0 until drawn
	lost       *lostState
	lostHandle cgo.Handle
}

// lostState is closed when the library finds the lock lost.
type lostState struct {
	once sync.Once
	ch   chan struct{}
	mu   sync.Mutex
	fns  []func()
}

func newLostState() *lostState { return &lostState{ch: make(chan struct{})} }

func (s *lostState) fire() {
	s.once.Do(func() {
		close(s.ch)
		s.mu.Lock()
		fns := s.fns
		s.fns = nil
		s.mu.Unlock()
		for _, f := range fns {
			f()
		}
	})
}

// Name is the lock's name.
func (l *Lock) Name() string { return l.name }

// Token is the lock's token (a copy): random unless given with Token. It
// stays readable after the release.
func (l *Lock) Token() []byte { return append([]byte(nil), l.token...) }

// String names the lock, never its token.
func (l *Lock) String() string { return fmt.Sprintf("redislock.Lock(%s %q)", l.kind, l.name) }

// GoString is String, for %#v: the token is never shown.
func (l *Lock) GoString() string { return l.String() }

// Lost is closed when the library finds the lock lost: a background
// renewal (AutoRenew, WithLock), an Extend or a Release found it expired or
// taken by another owner.
func (l *Lock) Lost() <-chan struct{} { return l.lost.ch }

// Fence is the lock's fencing number: strictly greater than any number
// handed out before for this name to an earlier holder (about 1.8e15, the
// server's clock in microseconds or more: compare fences, do not count
// them). Drawn from the server on the first call, with a check that the lock
// is still held (one round trip; Fenced draws it in the acquisition); later
// calls, also after the release, answer from memory. ErrNotOwner when the
// lock was lost, or released, before its fence was drawn.
func (l *Lock) Fence(ctx context.Context) (uint64, error) {
	if ctx == nil {
		return 0, invalid("a nil context")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fence != 0 {
		return l.fence, nil
	}
	if l.h == nil {
		return 0, newError(KindNotOwner, fmt.Sprintf("%s was released before its fence was drawn", l))
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("redislock: fence of %q: %w", l.name, err)
	}
	var f C.uint64_t
	if err := call(func() C.redislock_status { return C.redislock_status(C.redislock_lock_draw_fence(l.h, &f)) }); err != nil {
		return 0, err
	}
	l.fence = uint64(f)
	return l.fence, nil
}

// Extend sets the lock's remaining time to ttl (not added to it), 1 ms to
// 30 days. ErrNotOwner (and Lost closed) when it expired or was taken over:
// an expired lock is never re-created.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return invalid("a nil context")
	}
	if ttl < time.Millisecond || ttl > MaxTTL {
		return invalid(fmt.Sprintf("TTL %v is out of range (1ms to %v)", ttl, MaxTTL))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		return newError(KindNotOwner, fmt.Sprintf("%s was released", l))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redislock: extend %q: %w", l.name, err)
	}
	return call(func() C.redislock_status {
		return C.redislock_status(C.redislock_extend(l.h, C.uint64_t(ttl/time.Millisecond)))
	})
}

// Release releases the lock (handing it to the oldest waiter). It releases
// even when ctx is done already: a lock is never left held because a
// request was cancelled (ctx is for a future wait; the call is one round
// trip, bounded by the client's command_timeout). ErrNotOwner when the lock
// had expired or been taken over (the new holder's lock is left alone), or
// on a second call; ErrUnconfirmed (also an ErrNotOwner) when the outcome is
// unknown.
func (l *Lock) Release(ctx context.Context) error {
	if ctx == nil {
		return invalid("a nil context")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.h
	if h == nil {
		return newError(KindNotOwner, fmt.Sprintf("%s was released already", l))
	}
	if l.fence == 0 {
		l.fence = uint64(C.redislock_lock_fence_if_drawn(h))
	}
	l.h = nil
	runtime.SetFinalizer(l, nil)
	// The handle is freed whatever the outcome; the lost callback may run
	// inside, on this thread, and never after.
	err := call(func() C.redislock_status { return C.redislock_status(C.redislock_release(h)) })
	l.lostHandle.Delete()
	return err
}

// finalizeLock releases a lock nobody can release any more.
func finalizeLock(l *Lock) {
	h, handle := l.h, l.lostHandle
	if h == nil {
		return
	}
	l.h = nil
	log.Printf("redislock: %s became unreachable while held: released by its finalizer (release locks when done)", l)
	go func() {
		C.redislock_lock_free(h)
		handle.Delete()
	}()
}

// WithLock takes the lock name (as Acquire, with opts), renews it in the
// background while fn runs, and releases it after. fn's context is
// cancelled when the lock is found lost (and with ctx); then WithLock
// returns fn's error, or ErrNotOwner when fn returned nil. The release
// runs even when ctx is done.
func (c *Client) WithLock(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...Option) error {
	if fn == nil {
		return invalid("a nil function")
	}
	l, err := c.Acquire(ctx, name, append(append([]Option(nil), opts...), AutoRenew())...)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The cause of fn's cancellation (context.Cause(ctx)) when the lock is
	// lost; the closure keeps no reference to l.
	lostErr := newError(KindNotOwner, fmt.Sprintf("%s was lost while held", l))
	l.lost.mu.Lock()
	l.lost.fns = append(l.lost.fns, func() { cancel(lostErr) })
	l.lost.mu.Unlock()
	select {
	case <-l.lost.ch: // lost before the function was registered
		cancel(lostErr)
	default:
	}
	ferr := fn(lctx)
	rerr := l.Release(context.WithoutCancel(ctx))
	if ferr != nil {
		return ferr
	}
	return rerr
}
