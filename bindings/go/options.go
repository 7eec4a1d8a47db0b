package redislock

import (
	"fmt"
	"time"
)

// DefaultTTL is the TTL of an acquisition that names none, as in every
// language of redislock.
const DefaultTTL = 30 * time.Second

// MaxTTL is the longest TTL (and Extend) the library takes.
const MaxTTL = 30 * 24 * time.Hour

// An Option changes one acquisition: TTL, Wait, AutoRenew, Fenced, Token,
// Permits.
type Option func(*options)

type options struct {
	ttl       time.Duration
	wait      time.Duration
	hasWait   bool
	autoRenew bool
	fenced    bool
	token     []byte
	hasToken  bool
	permits   int
	hasPerm   bool
}

// TTL is how long the lock lives unless extended or renewed: 1 ms to 30
// days, whole milliseconds (DefaultTTL when not given).
func TTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// Wait bounds the wait for the lock: ErrNotAcquired when it runs out;
// Wait(0) tries once. Without it Acquire waits until the lock is free or
// its context is done. TryAcquire ignores it.
func Wait(d time.Duration) Option { return func(o *options) { o.wait, o.hasWait = d, true } }

// AutoRenew has the library extend the lock in the background every third
// of its TTL until it is released; Lock.Lost is closed if a renewal finds
// it gone. WithLock always renews.
func AutoRenew() Option { return func(o *options) { o.autoRenew = true } }

// Fenced draws the fencing number in the acquisition itself, so that
// Lock.Fence answers without a round trip. Plain locks only.
func Fenced() Option { return func(o *options) { o.fenced = true } }

// Token makes the lock's token the caller's (1 to 64 KiB) instead of
// 128 random bits, for ReleaseToken and the other by-token calls. Plain
// locks only.
func Token(t []byte) Option {
	return func(o *options) { o.token, o.hasToken = append([]byte(nil), t...), true }
}

// Permits is how many permits of a semaphore AcquireSemaphore takes (1 by
// default, at most its limit).
func Permits(n int) Option { return func(o *options) { o.permits, o.hasPerm = n, true } }

type kind int

const (
	kindLock kind = iota
	kindFenced
	kindSemaphore
	kindRead
	kindWrite
)

func (k kind) String() string {
	switch k {
	case kindSemaphore:
		return "semaphore"
	case kindRead:
		return "read lock"
	case kindWrite:
		return "write lock"
	}
	return "lock"
}

// parse applies opts and checks them, before any I/O.
func parse(k kind, name string, opts []Option) (*options, error) {
	o := &options{ttl: DefaultTTL, permits: 1}
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("a nil Option")
		}
		opt(o)
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if o.ttl < time.Millisecond || o.ttl > MaxTTL {
		return nil, invalid(fmt.Sprintf("TTL %v is out of range (1ms to %v)", o.ttl, MaxTTL))
	}
	if o.hasWait && o.wait < 0 {
		return nil, invalid(fmt.Sprintf("Wait %v is negative (Wait(0) tries once)", o.wait))
	}
	if k != kindLock && (o.hasToken || o.fenced) {
		return nil, invalid("Token and Fenced apply to plain locks, not to a " + k.String())
	}
	if o.hasToken && (len(o.token) == 0 || len(o.token) > maxKeyLen) {
		return nil, invalid(fmt.Sprintf("a token of %d bytes (1 to %d)", len(o.token), maxKeyLen))
	}
	if k != kindSemaphore && o.hasPerm {
		return nil, invalid("Permits applies to semaphores only")
	}
	return o, nil
}

// waitMs is the C API's wait: -1 forever, 0 once, else milliseconds
// (rounded up).
func (o *options) waitMs() int64 {
	if !o.hasWait {
		return -1
	}
	return int64((o.wait + time.Millisecond - 1) / time.Millisecond)
}

// maxKeyLen is the longest name (and token) the library takes.
const maxKeyLen = 64 * 1024

func checkName(name string) error {
	if name == "" {
		return invalid("the lock name is empty")
	}
	if len(name) > maxKeyLen {
		return invalid(fmt.Sprintf("the lock name is %d bytes long; at most %d are accepted", len(name), maxKeyLen))
	}
	return nil
}
