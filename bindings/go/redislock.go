// Package redislock is redislock's Go binding: the one Redis lock that C,
// Python, PHP, Ruby, Node.js and Java programs take, over the C library
// (linked in statically by default), with the same keys, fences and
// hand-off as every other language.
//
//	c, err := redislock.Open("redis://127.0.0.1:6379/0")
//	l, err := c.Acquire(ctx, "reports", redislock.TTL(30*time.Second), redislock.Wait(10*time.Second))
//	defer l.Release(ctx)
//
// A goroutine waiting for a lock holds no OS thread and no connection: the
// wait runs on the library's runtime, and the outcome comes back through a
// channel. A context ends any wait, leaving nothing held or queued.
package redislock

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include <stdint.h>
#include <stdlib.h>
#include "redislock.h"

// The Go functions the library calls back (callbacks.go); userdata is a
// runtime/cgo.Handle, never a Go pointer.
extern void goAcquired(uintptr_t handle, int status, redislock_lock *lock);
extern void goLost(uintptr_t handle);

static void rl_acquired(void *userdata, redislock_status status, redislock_lock *lock) {
	goAcquired((uintptr_t)userdata, (int)status, lock);
}

static void rl_lost(void *userdata) { goLost((uintptr_t)userdata); }

// One entry for the five asynchronous acquisitions.
static redislock_status rl_start(int kind, const redislock_client *client,
		const uint8_t *key, size_t key_len, uint32_t limit, uint32_t permits,
		uint64_t ttl_ms, int64_t wait_ms, const uint8_t *token, size_t token_len,
		uintptr_t handle, redislock_pending **out) {
	void *ud = (void *)handle;
	switch (kind) {
	case 0:
		return redislock_acquire_start(client, key, key_len, ttl_ms, wait_ms, token, token_len, rl_acquired, ud, out);
	case 1:
		return redislock_acquire_fenced_start(client, key, key_len, ttl_ms, wait_ms, token, token_len, rl_acquired, ud, out);
	case 2:
		return redislock_acquire_semaphore_start(client, key, key_len, limit, permits, ttl_ms, wait_ms, rl_acquired, ud, out);
	case 3:
		return redislock_acquire_read_start(client, key, key_len, ttl_ms, wait_ms, rl_acquired, ud, out);
	case 4:
		return redislock_acquire_write_start(client, key, key_len, ttl_ms, wait_ms, rl_acquired, ud, out);
	}
	return REDISLOCK_INVALID_ARGUMENT;
}

static redislock_status rl_on_lost(redislock_lock *lock, uintptr_t handle) {
	return redislock_lock_on_lost(lock, rl_lost, (void *)handle);
}

static redislock_status rl_open_redlock(char **urls, size_t n, redislock_client **out) {
	return redislock_client_open_redlock((const char *const *)urls, n, out);
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

func init() {
	if v := C.GoString(C.redislock_version()); v != Version {
		panic(fmt.Sprintf("redislock: the C library is version %s, this Go module %s: link the library of the same release", v, Version))
	}
}

// LibraryVersion is the version of the C library linked in (equal to
// Version: the package checks it at init).
func LibraryVersion() string { return C.GoString(C.redislock_version()) }

// lastError is the message of this thread's last failure: call it on the
// thread of the failed call (runtime.LockOSThread around both).
func lastError() string {
	n := C.redislock_last_error(nil, 0)
	if n == 0 {
		return ""
	}
	buf := make([]byte, n+1)
	C.redislock_last_error((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	return string(buf[:n])
}

// statusError turns a failure status and its message into an *Error.
func statusError(st C.redislock_status, msg string) error {
	var k Kind
	switch st {
	case C.REDISLOCK_OK:
		return nil
	case C.REDISLOCK_NOT_ACQUIRED:
		k = KindNotAcquired
	case C.REDISLOCK_NOT_OWNER:
		k = KindNotOwner
	case C.REDISLOCK_CONNECTION:
		k = KindConnection
	case C.REDISLOCK_INVALID_ARGUMENT:
		k = KindInvalidArgument
	case C.REDISLOCK_WRONG_TYPE:
		k = KindWrongType
	case C.REDISLOCK_NO_QUORUM:
		k = KindNoQuorum
	case C.REDISLOCK_SERVER:
		k = KindServer
	case C.REDISLOCK_UNCONFIRMED:
		k = KindUnconfirmed
	default:
		k = KindInternal
	}
	if msg == "" {
		msg = C.GoString(C.redislock_status_str(C.int(st)))
	}
	return newError(k, msg)
}

// call runs f, a C call returning a status, and turns a failure into an
// error with its message, read on the same thread.
func call(f func() C.redislock_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := f()
	if st == C.REDISLOCK_OK {
		return nil
	}
	return statusError(st, lastError())
}

// Client is a connection pool for one Redis deployment (or several
// servers, with Redlock). It may be used from many goroutines at once.
// Close it when done; locks taken through it stay valid.
type Client struct {
	mu   sync.RWMutex
	c    *C.redislock_client
	addr string
}

// Open opens a client for one deployment: redis://[user:password@]host:port[/db],
// rediss://, unix:///path.sock, redis+sentinel://, redis+cluster://, with
// ?connect_timeout=2s&command_timeout=2s (docs/deployments.md). It checks
// the URL but does not connect: a dead server is ErrConnection at the
// first call.
func Open(url string) (*Client, error) {
	curl, err := cString(url)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(curl))
	var out *C.redislock_client
	if err := call(func() C.redislock_status { return C.redislock_status(C.redislock_client_open(curl, &out)) }); err != nil {
		return nil, err
	}
	return newClient(out), nil
}

// OpenRedlock opens a client over independent servers (Redlock): a lock is
// held when a majority of them agreed; ErrNoQuorum when no majority can be
// reached.
func OpenRedlock(urls []string) (*Client, error) {
	if len(urls) == 0 {
		return nil, invalid("OpenRedlock needs at least one URL")
	}
	// The array of C strings in C memory (cgo's rule: C gets no Go pointer
	// to Go pointers).
	arr := unsafe.Slice((**C.char)(C.calloc(C.size_t(len(urls)), C.size_t(unsafe.Sizeof((*C.char)(nil))))), len(urls))
	defer C.free(unsafe.Pointer(&arr[0]))
	defer func() {
		for _, p := range arr {
			C.free(unsafe.Pointer(p))
		}
	}()
	for i, u := range urls {
		p, err := cString(u)
		if err != nil {
			return nil, err
		}
		arr[i] = p
	}
	var out *C.redislock_client
	if err := call(func() C.redislock_status {
		return C.rl_open_redlock(&arr[0], C.size_t(len(urls)), &out)
	}); err != nil {
		return nil, err
	}
	return newClient(out), nil
}

func cString(s string) (*C.char, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return nil, invalid("a URL must not contain a NUL byte")
		}
	}
	return C.CString(s), nil
}

func newClient(c *C.redislock_client) *Client {
	n := C.redislock_client_addr(c, nil, 0)
	buf := make([]byte, n+1)
	n = C.redislock_client_addr(c, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	cl := &Client{c: c, addr: string(buf[:n])}
	runtime.SetFinalizer(cl, (*Client).Close)
	return cl
}

// Close frees the client's connections. Locks taken through it stay held
// and valid; calls through a closed client are ErrInvalidArgument.
// Closing twice does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		C.redislock_client_free(c.c)
		c.c = nil
		runtime.SetFinalizer(c, nil)
	}
	return nil
}

// String says where the client connects (host:port of each server, never
// a user name or password).
func (c *Client) String() string { return "redislock.Client(" + c.addr + ")" }

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// with runs f with the client's handle, read-locked against Close.
func (c *Client) with(f func(*C.redislock_client) error) error {
	if c == nil {
		return invalid("a nil *Client")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.c == nil {
		return invalid("the client is closed")
	}
	return f(c.c)
}

// Acquire takes the lock name. Without Wait it waits until the lock is free
// or ctx is done (its error then, errors.Is(err, context.Canceled) or
// DeadlineExceeded, with nothing left held or queued); Wait(d) bounds the
// wait (ErrNotAcquired when it runs out). TTL defaults to DefaultTTL.
func (c *Client) Acquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return c.acquire(ctx, kindLock, name, 0, opts, false)
}

// TryAcquire takes the lock name if it is free, never waiting:
// ErrNotAcquired while another owner holds it.
func (c *Client) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return c.acquire(ctx, kindLock, name, 0, opts, true)
}

// AcquireSemaphore takes Permits(n) (default 1) of the counting semaphore
// name, which admits limit permits in all (1 to 1,000,000); holders are
// served in arrival order. Waiting as for Acquire; the Lock it returns is
// released, extended and renewed like any other.
func (c *Client) AcquireSemaphore(ctx context.Context, name string, limit int, opts ...Option) (*Lock, error) {
	if limit < 1 || limit > 1_000_000 {
		return nil, invalid(fmt.Sprintf("a semaphore limit of %d (1 to 1000000)", limit))
	}
	return c.acquire(ctx, kindSemaphore, name, limit, opts, false)
}

// AcquireRead takes the read-write lock name shared: with other readers,
// while no writer holds it or waits for it. Waiting as for Acquire.
func (c *Client) AcquireRead(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return c.acquire(ctx, kindRead, name, 0, opts, false)
}

// AcquireWrite takes the read-write lock name exclusively. Waiting as for
// Acquire.
func (c *Client) AcquireWrite(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return c.acquire(ctx, kindWrite, name, 0, opts, false)
}

// outcome is what the library's callback hands to the waiting goroutine.
type outcome struct {
	status C.redislock_status
	lock   *C.redislock_lock
	msg    string
}

func (c *Client) acquire(ctx context.Context, k kind, name string, limit int, opts []Option, try bool) (*Lock, error) {
	if ctx == nil {
		return nil, invalid("a nil context")
	}
	o, err := parse(k, name, opts)
	if err != nil {
		return nil, err
	}
	if o.permits < 1 || (k == kindSemaphore && o.permits > limit) {
		return nil, invalid(fmt.Sprintf("%d permits of a semaphore of %d (1 to the limit)", o.permits, limit))
	}
	if k == kindLock && o.fenced {
		k = kindFenced
	}
	wait := o.waitMs()
	if try {
		wait = 0
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redislock: acquire %q: %w", name, err)
	}

	// The callback sends the outcome here, from the library's thread: a
	// buffered channel, so that it never blocks.
	done := make(chan outcome, 1)
	h := cgo.NewHandle(done)
	defer h.Delete()
	var pending *C.redislock_pending
	err = c.with(func(cc *C.redislock_client) error {
		key := unsafe.Pointer(unsafe.StringData(name))
		var tok unsafe.Pointer
		if len(o.token) > 0 {
			tok = unsafe.Pointer(&o.token[0])
		}
		return call(func() C.redislock_status {
			return C.rl_start(C.int(k), cc, (*C.uint8_t)(key), C.size_t(len(name)),
				C.uint32_t(limit), C.uint32_t(o.permits), C.uint64_t(o.ttl/time.Millisecond), C.int64_t(wait),
				(*C.uint8_t)(tok), C.size_t(len(o.token)), C.uintptr_t(h), &pending)
		})
	})
	if err != nil {
		return nil, err
	}
	defer C.redislock_pending_free(pending)

	var out outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		// Either the cancel wins (the callback reports CANCELLED, the
		// waiter leaves the queue, a lock handed over meanwhile is
		// released by the library), or the outcome was decided first: a
		// lock it delivers is released here, since the caller gave up.
		C.redislock_pending_cancel(pending)
		out = <-done
		if out.lock != nil {
			C.redislock_release(out.lock)
		}
		return nil, fmt.Errorf("redislock: acquire %q: %w", name, ctx.Err())
	}
	if out.status != C.REDISLOCK_OK {
		return nil, statusError(out.status, out.msg)
	}
	return c.newLock(out.lock, k, name, o)
}

// newLock wraps a handle the library delivered.
func (c *Client) newLock(h *C.redislock_lock, k kind, name string, o *options) (*Lock, error) {
	n := C.redislock_lock_token(h, nil, 0)
	token := make([]byte, n)
	if n > 0 {
		C.redislock_lock_token(h, (*C.uint8_t)(unsafe.Pointer(&token[0])), n)
	}
	l := &Lock{h: h, name: name, token: token, kind: k, lost: newLostState()}
	l.fence = uint64(C.redislock_lock_fence_if_drawn(h))
	l.lostHandle = cgo.NewHandle(l.lost)
	if err := call(func() C.redislock_status { return C.rl_on_lost(h, C.uintptr_t(l.lostHandle)) }); err != nil {
		C.redislock_lock_free(h)
		l.lostHandle.Delete()
		return nil, err
	}
	if o.autoRenew {
		if err := call(func() C.redislock_status { return C.redislock_status(C.redislock_lock_auto_renew(h)) }); err != nil {
			C.redislock_lock_free(h)
			l.lostHandle.Delete()
			return nil, err
		}
	}
	runtime.SetFinalizer(l, finalizeLock)
	return l, nil
}

// ReleaseToken releases the lock name if token holds it (the request-id
// pattern: no Lock needed); ErrNotOwner when it does not (nothing is
// changed then).
func (c *Client) ReleaseToken(ctx context.Context, name string, token []byte) error {
	return c.byToken(ctx, name, token, func(cc *C.redislock_client, key, tok *C.uint8_t) C.redislock_status {
		return C.redislock_status(C.redislock_release_token(cc, key, C.size_t(len(name)), tok, C.size_t(len(token))))
	})
}

// ExtendToken sets the remaining time of the lock name to ttl if token
// holds it; ErrNotOwner when it does not (an expired lock is never
// re-created).
func (c *Client) ExtendToken(ctx context.Context, name string, token []byte, ttl time.Duration) error {
	if ttl < time.Millisecond || ttl > MaxTTL {
		return invalid(fmt.Sprintf("TTL %v is out of range (1ms to %v)", ttl, MaxTTL))
	}
	return c.byToken(ctx, name, token, func(cc *C.redislock_client, key, tok *C.uint8_t) C.redislock_status {
		return C.redislock_status(C.redislock_extend_token(cc, key, C.size_t(len(name)), tok, C.size_t(len(token)), C.uint64_t(ttl/time.Millisecond)))
	})
}

// FenceToken is the fencing number of the lock name held with token;
// ErrNotOwner when token does not hold it.
func (c *Client) FenceToken(ctx context.Context, name string, token []byte) (uint64, error) {
	var fence C.uint64_t
	err := c.byToken(ctx, name, token, func(cc *C.redislock_client, key, tok *C.uint8_t) C.redislock_status {
		return C.redislock_status(C.redislock_fence_token(cc, key, C.size_t(len(name)), tok, C.size_t(len(token)), &fence))
	})
	return uint64(fence), err
}

func (c *Client) byToken(ctx context.Context, name string, token []byte,
	f func(cc *C.redislock_client, key, tok *C.uint8_t) C.redislock_status) error {
	if ctx == nil {
		return invalid("a nil context")
	}
	if err := checkName(name); err != nil {
		return err
	}
	if len(token) == 0 || len(token) > maxKeyLen {
		return invalid(fmt.Sprintf("a token of %d bytes (1 to %d)", len(token), maxKeyLen))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redislock: %q: %w", name, err)
	}
	return c.with(func(cc *C.redislock_client) error {
		key := (*C.uint8_t)(unsafe.Pointer(unsafe.StringData(name)))
		tok := (*C.uint8_t)(unsafe.Pointer(&token[0]))
		return call(func() C.redislock_status { return f(cc, key, tok) })
	})
}
