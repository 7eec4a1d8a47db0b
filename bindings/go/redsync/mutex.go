package redsync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	redislock "github.com/redislock/redislock/bindings/go"
)

// maxDelays bounds how many delays a DelayFunc is asked for in one Lock.
const maxDelays = 1_000_000

// A Mutex is a distributed mutual exclusion lock: redislock's lock under
// redsync's API. Its methods may be called from several goroutines, but, as
// with redsync, one Mutex stands for one owner: goroutines that exclude
// each other each make their own Mutex of the same name.
type Mutex struct {
	client *redislock.Client
	name   string

	// Options.
	expiry        time.Duration
	tries         int
	delayFunc     DelayFunc
	constDelay    time.Duration
	hasConstDelay bool
	driftFactor   float64
	timeoutFactor float64
	genValueFunc  func() (string, error)
	fixedValue    string
	hasFixedValue bool
	failFast      bool // accepted, no effect (WithFailFast)
	shuffle       bool // accepted, no effect (WithShufflePools)
	setNXOnExtend bool // accepted, deliberately no effect (WithSetNXOnExtend)

	mu    sync.Mutex
	value string
	until time.Time
	lock  *redislock.Lock // the handle of the last Lock, until Unlock
}

// Name is the lock's name (the Redis key).
func (m *Mutex) Name() string { return m.name }

// Value is the lock's token: empty until a Lock succeeds, unless WithValue
// gave one. It stays readable after Unlock.
func (m *Mutex) Value() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.value
}

// Until is when the lock acquired (or extended) last expires at the
// latest, drift allowed for (WithDriftFactor); the zero time before the
// first Lock.
func (m *Mutex) Until() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.until
}

// TryLock takes the lock if it is free, without waiting.
func (m *Mutex) TryLock() error { return m.TryLockContext(context.Background()) }

// TryLockContext takes the lock if it is free, without waiting: an error
// matching ErrFailed and redislock.ErrNotAcquired (errors.As: ErrTaken)
// while another owner holds it.
func (m *Mutex) TryLockContext(ctx context.Context) error { return m.lockContext(ctx, 1) }

// Lock takes the lock, waiting as long as redsync would have retried (see
// WithTries). As with redsync, call it again after an error to try again.
func (m *Mutex) Lock() error { return m.LockContext(context.Background()) }

// LockContext takes the lock, waiting in its queue for up to the sum of
// the retry delays between WithTries tries; the release of the holder hands
// it over at once. Its error matches ErrFailed and its cause:
// redislock.ErrNotAcquired (errors.As: ErrTaken) when the wait ran out,
// ctx's error when ctx ended the wait (nothing is then left held or
// queued), redislock.ErrConnection, redislock.ErrNoQuorum...
func (m *Mutex) LockContext(ctx context.Context) error { return m.lockContext(ctx, m.tries) }

func (m *Mutex) fail(op string, sentinel, cause error) error {
	return &failure{op: op, name: m.name, sentinel: sentinel, cause: cause}
}

// wait is what redsync would sleep between tries tries.
func (m *Mutex) wait(tries int) time.Duration {
	const most = redislock.MaxTTL * 10 // longer than any TTL: "until released"
	if tries <= 1 {
		return 0
	}
	if m.hasConstDelay {
		d := m.constDelay
		if d <= 0 {
			return 0
		}
		if time.Duration(tries-1) > most/d {
			return most
		}
		return time.Duration(tries-1) * d
	}
	var total time.Duration
	for i := 1; i < tries && i <= maxDelays; i++ {
		if d := m.delayFunc(i); d > 0 {
			if d >= most-total {
				return most
			}
			total += d
		}
	}
	return total
}

func (m *Mutex) lockContext(ctx context.Context, tries int) error {
	const op = "lock"
	if ctx == nil {
		ctx = context.Background()
	}
	if tries < 1 {
		return m.fail(op, ErrFailed, fmt.Errorf("WithTries(%d): at least one try: %w", tries, redislock.ErrInvalidArgument))
	}
	if m.driftFactor < 0 || m.driftFactor >= 1 {
		return m.fail(op, ErrFailed, fmt.Errorf("WithDriftFactor(%v): 0 to below 1: %w", m.driftFactor, redislock.ErrInvalidArgument))
	}
	opts := []redislock.Option{redislock.TTL(m.expiry), redislock.Wait(m.wait(tries))}
	var value string
	switch {
	case m.hasFixedValue:
		value = m.fixedValue
	case m.genValueFunc != nil:
		v, err := m.genValueFunc()
		if err != nil {
			return m.fail(op, ErrFailed, err)
		}
		value = v
	}
	if m.hasFixedValue || m.genValueFunc != nil {
		if value == "" {
			return m.fail(op, ErrFailed, fmt.Errorf("an empty value: %w", redislock.ErrInvalidArgument))
		}
		opts = append(opts, redislock.Token([]byte(value)))
	}

	start := time.Now()
	l, err := m.client.Acquire(ctx, m.name, opts...)
	if err != nil {
		f := &failure{op: op, name: m.name, sentinel: ErrFailed, cause: err}
		f.taken = errors.Is(err, redislock.ErrNotAcquired)
		return f
	}
	// Until counts from the start of the call: the server set the TTL at
	// or after it. After a long wait, an extend counts it from now.
	base := start
	if threshold := time.Duration(float64(m.expiry) * m.timeoutFactor); m.timeoutFactor > 0 && time.Since(start) > threshold {
		t := time.Now()
		switch err := l.Extend(context.WithoutCancel(ctx), m.expiry); {
		case err == nil:
			base = t
		case errors.Is(err, redislock.ErrNotOwner):
			l.Release(context.WithoutCancel(ctx))
			return m.fail(op, ErrFailed, err)
		}
	}
	m.mu.Lock()
	old := m.lock
	m.lock = l
	m.value = string(l.Token())
	m.until = base.Add(m.expiry - time.Duration(float64(m.expiry)*m.driftFactor))
	m.mu.Unlock()
	if old != nil {
		// The handle of an earlier Lock, never unlocked: its lock is gone
		// (this Lock took the key), so it is freed, never released: with
		// the same token (WithValue), a release would release this lock.
		old.Forget()
	}
	return nil
}

// take hands the current handle over to Unlock (nil when there is none).
func (m *Mutex) take() (*redislock.Lock, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.lock
	m.lock = nil
	return l, m.value
}

// Unlock releases the lock (handing it to the oldest waiter).
func (m *Mutex) Unlock() (bool, error) { return m.UnlockContext(context.Background()) }

// UnlockContext releases the lock (handing it to the oldest waiter): (true,
// nil). When the lock was no longer this owner's (it expired, and another
// owner may hold it now, whose lock is left alone), (false, an error
// matching ErrLockAlreadyExpired and redislock.ErrNotOwner): redsync
// reports that as a success. The release runs even when ctx is done.
// Without a Lock, it releases the lock held with WithValue's value.
func (m *Mutex) UnlockContext(ctx context.Context) (bool, error) {
	const op = "unlock"
	if ctx == nil {
		ctx = context.Background()
	}
	l, value := m.take()
	var err error
	switch {
	case l != nil:
		err = l.Release(ctx)
	case value != "":
		err = m.client.ReleaseToken(context.WithoutCancel(ctx), m.name, []byte(value))
	default:
		return false, m.fail(op, nil, fmt.Errorf("not locked by this Mutex: %w", redislock.ErrNotOwner))
	}
	if err == nil {
		return true, nil
	}
	if kindIs(err, redislock.KindNotOwner) {
		return false, m.fail(op, ErrLockAlreadyExpired, err)
	}
	return false, m.fail(op, nil, err)
}

// Extend sets the lock's remaining time back to its expiry.
func (m *Mutex) Extend() (bool, error) { return m.ExtendContext(context.Background()) }

// ExtendContext sets the lock's remaining time back to its expiry (not
// added to it), and Until with it: (true, nil). (false, an error matching
// ErrExtendFailed and its cause) otherwise: redislock.ErrNotOwner when the
// lock had expired or been taken over, which is never re-created (see
// WithSetNXOnExtend). Without a Lock, it extends the lock held with
// WithValue's value.
func (m *Mutex) ExtendContext(ctx context.Context) (bool, error) {
	const op = "extend"
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	l, value := m.lock, m.value
	m.mu.Unlock()
	start := time.Now()
	var err error
	switch {
	case l != nil:
		err = l.Extend(ctx, m.expiry)
	case value != "":
		err = m.client.ExtendToken(ctx, m.name, []byte(value), m.expiry)
	default:
		err = fmt.Errorf("not locked by this Mutex: %w", redislock.ErrNotOwner)
	}
	if err != nil {
		return false, m.fail(op, ErrExtendFailed, err)
	}
	m.mu.Lock()
	if m.lock == l {
		m.until = start.Add(m.expiry - time.Duration(float64(m.expiry)*m.driftFactor))
	}
	m.mu.Unlock()
	return true, nil
}

// Valid says whether the lock is still held by this Mutex, asked of the
// server now (one round trip).
//
// Deprecated: as in redsync, the answer may be stale by the time it is
// read; use Until, or Extend, which fails when the lock is gone.
func (m *Mutex) Valid() (bool, error) { return m.ValidContext(context.Background()) }

// ValidContext says whether the lock is still held by this Mutex (by
// WithValue's value, without a Lock), asked of the server now: false, with
// no error, once it expired or was released.
//
// Deprecated: see Valid.
func (m *Mutex) ValidContext(ctx context.Context) (bool, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	l, value := m.lock, m.value
	m.mu.Unlock()
	var ok bool
	var err error
	switch {
	case l != nil:
		ok, err = l.Owned(ctx)
	case value != "":
		ok, err = m.client.IsOwnedBy(ctx, m.name, []byte(value))
	default:
		return false, nil
	}
	if err != nil {
		return false, m.fail("valid", nil, err)
	}
	return ok, nil
}
