// Package redsync is go-redsync/redsync/v4's Mutex API on redislock: a
// program written for redsync changes its import and the line that builds
// the Redsync, and nothing else:
//
//	c, err := redislock.Open("redis://127.0.0.1:6379/0") // or redislock.OpenRedlock(urls)
//	rs := redsync.New(c)                                 // was redsync.New(pool)
//	m := rs.NewMutex("reports", redsync.WithExpiry(10*time.Second))
//	if err := m.Lock(); err != nil { ... }
//	if ok, err := m.Unlock(); !ok || err != nil { ... }
//
// The lock is redislock's: the same key, token, fence and queue as in every
// other language, so a Go service holding it through this package excludes
// a Python, PHP or Java process holding it through theirs. A Lock that
// finds the lock held waits in the lock's queue and is handed it by the
// release (no polling); it waits as long as redsync would have retried.
//
// Where redsync's answer can pass for a success (an Unlock of an expired
// lock was (false, nil) in redsync v4 until recently) or says ErrFailed
// for every cause, this package says what happened (docs/go.md, "Coming from redsync"): an
// Unlock of an expired lock is (false, an error matching
// ErrLockAlreadyExpired and redislock.ErrNotOwner); a failed Lock's error
// matches ErrFailed and its cause (redislock.ErrConnection,
// redislock.ErrNoQuorum, a context's error...) with errors.Is.
package redsync

import (
	"time"

	redislock "github.com/redislock/redislock/bindings/go"
)

// The defaults of a Mutex, redsync's.
const (
	// DefaultExpiry is the lock's TTL unless WithExpiry says otherwise.
	DefaultExpiry = 8 * time.Second
	// DefaultTries is the number of tries Lock makes unless WithTries says
	// otherwise.
	DefaultTries = 32
	// DefaultRetryDelay is the delay between two tries unless WithRetryDelay
	// or WithRetryDelayFunc says otherwise: the mean of redsync's random 50
	// to 250 ms (the randomness spreads pollers apart; a queue needs none).
	DefaultRetryDelay = 150 * time.Millisecond
	// DefaultDriftFactor is the share of the expiry Until keeps in reserve
	// for clock drift.
	DefaultDriftFactor = 0.01
	// DefaultTimeoutFactor: see WithTimeoutFactor.
	DefaultTimeoutFactor = 0.05
)

// Redsync makes Mutexes over one redislock Client (a single server, a
// Sentinel or Cluster deployment, or Redlock's independent servers).
type Redsync struct {
	client *redislock.Client
}

// New returns a Redsync whose Mutexes lock through client. redsync's New
// takes one pool per server; here one Client covers them all
// (redislock.OpenRedlock for several independent servers). Closing the
// client is the caller's business.
func New(client *redislock.Client) *Redsync {
	return &Redsync{client: client}
}

// NewMutex returns a Mutex for the lock name (the Redis key, as in every
// language of redislock). Options are applied in order; they are checked
// when the Mutex is used (a bad one is an error of Lock, before any I/O).
func (r *Redsync) NewMutex(name string, options ...Option) *Mutex {
	m := &Mutex{
		name:          name,
		expiry:        DefaultExpiry,
		tries:         DefaultTries,
		constDelay:    DefaultRetryDelay,
		hasConstDelay: true,
		driftFactor:   DefaultDriftFactor,
		timeoutFactor: DefaultTimeoutFactor,
	}
	if r != nil {
		m.client = r.client
	}
	for _, o := range options {
		if o != nil {
			o.Apply(m)
		}
	}
	return m
}

// An Option configures a Mutex.
type Option interface {
	Apply(*Mutex)
}

// OptionFunc is a function that configures a Mutex.
type OptionFunc func(*Mutex)

// Apply calls f(mutex).
func (f OptionFunc) Apply(mutex *Mutex) { f(mutex) }

// A DelayFunc is the delay before try number tries (2, 3, ...; its
// argument counts the tries already made).
type DelayFunc func(tries int) time.Duration

// WithExpiry sets the lock's TTL (DefaultExpiry, 8 s): 1 ms to 30 days, whole
// milliseconds.
func WithExpiry(expiry time.Duration) Option {
	return OptionFunc(func(m *Mutex) { m.expiry = expiry })
}

// WithTries sets how many tries Lock makes (DefaultTries, 32): Lock waits
// as long as redsync would have slept between them, the sum of the retry
// delays of tries 2 to tries, so WithTries(1) is TryLock. At least 1.
func WithTries(tries int) Option {
	return OptionFunc(func(m *Mutex) { m.tries = tries })
}

// WithRetryDelay sets the delay between two tries (DefaultRetryDelay): with
// WithTries(n), Lock waits up to (n-1) × delay for the lock, and takes it
// the moment it is released within that time.
func WithRetryDelay(delay time.Duration) Option {
	return OptionFunc(func(m *Mutex) {
		m.delayFunc, m.constDelay, m.hasConstDelay = nil, delay, true
	})
}

// WithRetryDelayFunc sets the delay before each try: Lock waits up to
// delayFunc(1) + ... + delayFunc(tries-1) (negative delays count as 0;
// the function is asked for at most the first million delays).
func WithRetryDelayFunc(delayFunc DelayFunc) Option {
	return OptionFunc(func(m *Mutex) {
		m.delayFunc, m.hasConstDelay = delayFunc, delayFunc == nil
		if delayFunc == nil {
			m.constDelay = DefaultRetryDelay
		}
	})
}

// WithDriftFactor sets the share of the expiry that Until keeps in reserve
// for clock drift (DefaultDriftFactor, 0.01): Until is the acquisition's
// start + expiry - expiry × factor. It changes nothing on the server.
func WithDriftFactor(factor float64) Option {
	return OptionFunc(func(m *Mutex) { m.driftFactor = factor })
}

// WithTimeoutFactor: redsync bounds each try's round trips to expiry ×
// factor; here the client's command_timeout (in its URL) bounds every
// round trip. The factor has one use left: a Lock that waited longer than
// expiry × factor for the lock extends it once on getting it, so that
// Until counts from the hand-off rather than from the start of the wait
// (0 or less: never).
func WithTimeoutFactor(factor float64) Option {
	return OptionFunc(func(m *Mutex) { m.timeoutFactor = factor })
}

// WithGenValueFunc sets the function that makes the lock's token (its
// value) at each Lock, in place of redislock's 128 random bits (32 hex
// characters). Its error fails the Lock (matching ErrFailed and that
// error); an empty value is refused. Two owners must never get the same
// value. It replaces a WithValue given before it.
func WithGenValueFunc(genValueFunc func() (string, error)) Option {
	return OptionFunc(func(m *Mutex) {
		m.genValueFunc, m.fixedValue, m.hasFixedValue = genValueFunc, "", false
	})
}

// WithValue sets the lock's token (its value; "" sets none). Before any Lock, Unlock,
// Extend and Valid act on the lock held with this token, the way redsync
// hands a lock over to another process ("transfers" it); a Lock takes the
// lock with this token (redsync would draw a new one). It replaces a
// WithGenValueFunc given before it.
func WithValue(v string) Option {
	return OptionFunc(func(m *Mutex) {
		m.fixedValue, m.hasFixedValue, m.genValueFunc = v, v != "", nil
		m.value = v
	})
}

// WithFailFast is accepted and has no effect: redsync waits for every
// server's reply unless told to stop at the first majority; redislock's
// Redlock already decides as soon as a majority has answered, and a single
// server (or Sentinel, Cluster) has one answer to wait for.
func WithFailFast(b bool) Option {
	return OptionFunc(func(m *Mutex) { m.failFast = b })
}

// WithShufflePools is accepted and has no effect: there are no pools to
// shuffle; the Client talks to its servers, all of them at once under
// Redlock.
func WithShufflePools(b bool) Option {
	return OptionFunc(func(m *Mutex) { m.shuffle = b })
}

// WithSetNXOnExtend is accepted and deliberately has no effect: redsync
// re-creates the key when an Extend finds it gone, but a lock that expired
// may have been taken and released by another owner meanwhile, and
// re-creating it would let two owners believe they held it. An Extend of
// an expired lock fails (ErrExtendFailed, redislock.ErrNotOwner); take the
// lock again with Lock.
func WithSetNXOnExtend() Option {
	return OptionFunc(func(m *Mutex) { m.setNXOnExtend = true })
}
