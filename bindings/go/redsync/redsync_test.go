package redsync

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	redislock "github.com/redislock/redislock/bindings/go"
)

func newRedsync(t testing.TB, s *testServer) *Redsync {
	t.Helper()
	c, err := redislock.Open(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return New(c)
}

func pttl(t testing.TB, s *testServer, key string) int {
	t.Helper()
	n, err := strconv.Atoi(s.Must(t, "PTTL", key))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// isTaken: the error of a lock held by another owner, as redsync's users
// test for it (errors.As with an ErrTaken or a *ErrTaken) and as
// redislock's do.
func isTaken(err error) bool {
	var v ErrTaken
	var p *ErrTaken
	return errors.As(err, &v) && errors.As(err, &p) && p != nil &&
		errors.Is(err, ErrFailed) && errors.Is(err, redislock.ErrNotAcquired)
}

func TestLockUnlock(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	m := rs.NewMutex("lu")
	if m.Name() != "lu" || m.Value() != "" || !m.Until().IsZero() {
		t.Fatalf("before Lock: name %q value %q until %v", m.Name(), m.Value(), m.Until())
	}
	before := time.Now()
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if len(m.Value()) != 32 || s.Must(t, "GET", "lu") != m.Value() {
		t.Fatalf("Value %q, the key holds %q", m.Value(), s.Must(t, "GET", "lu"))
	}
	if p := pttl(t, s, "lu"); p < 7000 || p > 8000 {
		t.Fatalf("PTTL %d for the default expiry of 8 s", p)
	}
	drift := time.Duration(float64(DefaultExpiry) * DefaultDriftFactor)
	if u := m.Until(); u.Before(before.Add(DefaultExpiry-drift)) || u.After(after.Add(DefaultExpiry-drift)) {
		t.Fatalf("Until %v, not between %v and %v", u, before.Add(DefaultExpiry-drift), after.Add(DefaultExpiry-drift))
	}
	if ok, err := m.Valid(); !ok || err != nil {
		t.Fatalf("Valid while held: %v, %v", ok, err)
	}
	if ok, err := m.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock: %v, %v", ok, err)
	}
	if got := s.Must(t, "GET", "lu"); got != "<nil>" {
		t.Fatalf("the key holds %q after Unlock", got)
	}
	if ok, err := m.ValidContext(context.Background()); ok || err != nil {
		t.Fatalf("Valid after Unlock: %v, %v", ok, err)
	}
	// A second Unlock is a failure, never a success.
	if ok, err := m.Unlock(); ok || !errors.Is(err, redislock.ErrNotOwner) {
		t.Fatalf("second Unlock: %v, %v", ok, err)
	}
	// Lock again, with the context variants.
	if err := m.LockContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.UnlockContext(context.Background()); !ok || err != nil {
		t.Fatalf("UnlockContext: %v, %v", ok, err)
	}
}

func TestTryLock(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	m1, m2 := rs.NewMutex("try"), rs.NewMutex("try")
	if err := m1.TryLock(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := m2.TryLock()
	if !isTaken(err) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("TryLock waited %v", d)
	}
	if m2.Value() != "" {
		t.Fatalf("a failed TryLock set Value %q", m2.Value())
	}
	if ok, err := m1.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock: %v, %v", ok, err)
	}
	if err := m2.TryLockContext(context.Background()); err != nil {
		t.Fatalf("TryLock of a free lock: %v", err)
	}
	m2.Unlock()
}

func TestExtend(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	m := rs.NewMutex("ext", WithExpiry(time.Second), WithSetNXOnExtend())
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	until := m.Until()
	time.Sleep(400 * time.Millisecond)
	if ok, err := m.Extend(); !ok || err != nil {
		t.Fatalf("Extend: %v, %v", ok, err)
	}
	if p := pttl(t, s, "ext"); p < 900 {
		t.Fatalf("PTTL %d after Extend to 1 s", p)
	}
	if !m.Until().After(until.Add(300 * time.Millisecond)) {
		t.Fatalf("Until %v after Extend, %v before", m.Until(), until)
	}
	// The key gone (expired): Extend fails and does not re-create it,
	// WithSetNXOnExtend or not.
	s.Must(t, "DEL", "ext")
	ok, err := m.ExtendContext(context.Background())
	if ok || !errors.Is(err, ErrExtendFailed) || !errors.Is(err, redislock.ErrNotOwner) {
		t.Fatalf("Extend of an expired lock: %v, %v", ok, err)
	}
	if got := s.Must(t, "EXISTS", "ext"); got != "0" {
		t.Fatal("Extend re-created an expired lock")
	}
	if ok, err := m.Unlock(); ok || !errors.Is(err, ErrLockAlreadyExpired) {
		t.Fatalf("Unlock after a failed Extend: %v, %v", ok, err)
	}
}

// The Unlock of an expired lock (redsync v4 said (false, nil) until
// recently: a nil error) is a failure with an error, whether the key is
// gone or taken by another owner, whose lock is left alone.
func TestUnlockExpired(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	m := rs.NewMutex("exp", WithExpiry(100*time.Millisecond))
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if ok, err := m.Valid(); ok || err != nil {
		t.Fatalf("Valid of an expired lock: %v, %v", ok, err)
	}
	ok, err := m.Unlock()
	if ok || !errors.Is(err, ErrLockAlreadyExpired) || !errors.Is(err, redislock.ErrNotOwner) {
		t.Fatalf("Unlock of an expired lock: %v, %v", ok, err)
	}
	if errors.Is(err, ErrFailed) {
		t.Fatalf("an Unlock error matching ErrFailed (a Lock's): %v", err)
	}

	// Expired and taken by another owner.
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	other := rs.NewMutex("exp", WithExpiry(10*time.Second))
	if err := other.TryLock(); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Unlock(); ok || !errors.Is(err, ErrLockAlreadyExpired) {
		t.Fatalf("Unlock of a lock taken over: %v, %v", ok, err)
	}
	if got := s.Must(t, "GET", "exp"); got != other.Value() {
		t.Fatalf("the other owner's lock was touched: the key holds %q", got)
	}
	if ok, err := other.Unlock(); !ok || err != nil {
		t.Fatalf("the other owner's Unlock: %v, %v", ok, err)
	}
}

func TestWithValue(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	m := rs.NewMutex("val", WithValue("request-1"))
	if m.Value() != "request-1" {
		t.Fatalf("Value before Lock: %q", m.Value())
	}
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	if m.Value() != "request-1" || s.Must(t, "GET", "val") != "request-1" {
		t.Fatalf("Value %q, the key holds %q", m.Value(), s.Must(t, "GET", "val"))
	}
	// Handed over: another Mutex with the value extends and unlocks it.
	other := rs.NewMutex("val", WithValue("request-1"), WithExpiry(5*time.Second))
	if ok, err := other.Valid(); !ok || err != nil {
		t.Fatalf("Valid with the value: %v, %v", ok, err)
	}
	if ok, err := other.Extend(); !ok || err != nil {
		t.Fatalf("Extend with the value: %v, %v", ok, err)
	}
	if p := pttl(t, s, "val"); p < 4000 {
		t.Fatalf("PTTL %d after Extend to 5 s", p)
	}
	if ok, err := other.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock with the value: %v, %v", ok, err)
	}
	if ok, err := m.Unlock(); ok || !errors.Is(err, ErrLockAlreadyExpired) {
		t.Fatalf("Unlock of a lock released by another Mutex: %v, %v", ok, err)
	}
	// Locked again without an Unlock once the first lock expired: the
	// first handle is freed, never released (its token is this lock's).
	again := rs.NewMutex("val-again", WithValue("request-2"), WithExpiry(100*time.Millisecond))
	for i := 0; i < 2; i++ {
		if err := again.Lock(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if ok, err := again.Unlock(); ok || !errors.Is(err, ErrLockAlreadyExpired) {
		t.Fatalf("Unlock of the expired lock: %v, %v", ok, err)
	}
	again = rs.NewMutex("val-again", WithValue("request-2"), WithExpiry(10*time.Second))
	if err := again.Lock(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	time.Sleep(100 * time.Millisecond)
	if got := s.Must(t, "GET", "val-again"); got != "request-2" {
		t.Fatalf("the lock was released behind its holder's back: the key holds %q", got)
	}
	if ok, err := again.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock: %v, %v", ok, err)
	}
	// Neither locked nor valued: nothing to unlock.
	if ok, err := rs.NewMutex("val").Unlock(); ok || !errors.Is(err, redislock.ErrNotOwner) {
		t.Fatalf("Unlock of a Mutex never locked: %v, %v", ok, err)
	}
}

func TestWithGenValueFunc(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	n := 0
	m := rs.NewMutex("gen", WithGenValueFunc(func() (string, error) { n++; return "gen-" + strconv.Itoa(n), nil }))
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	if m.Value() != "gen-1" || s.Must(t, "GET", "gen") != "gen-1" {
		t.Fatalf("Value %q", m.Value())
	}
	m.Unlock()
	boom := errors.New("no entropy")
	bad := rs.NewMutex("gen", WithGenValueFunc(func() (string, error) { return "", boom }))
	if err := bad.Lock(); !errors.Is(err, ErrFailed) || !errors.Is(err, boom) {
		t.Fatalf("a failing WithGenValueFunc: %v", err)
	}
	empty := rs.NewMutex("gen", WithGenValueFunc(func() (string, error) { return "", nil }))
	if err := empty.Lock(); !errors.Is(err, ErrFailed) || !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Fatalf("an empty generated value: %v", err)
	}
}

func TestWithExpiry(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	m := rs.NewMutex("expiry", WithExpiry(2500*time.Millisecond), WithDriftFactor(0.1),
		WithFailFast(true), WithShufflePools(true), WithTimeoutFactor(0.05))
	start := time.Now()
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	if p := pttl(t, s, "expiry"); p < 2000 || p > 2500 {
		t.Fatalf("PTTL %d for WithExpiry(2.5s)", p)
	}
	if u := m.Until(); u.Before(start.Add(2250*time.Millisecond)) || u.After(time.Now().Add(2250*time.Millisecond)) {
		t.Fatalf("Until %v: not start + 2.5 s - 10%%", u.Sub(start))
	}
	m.Unlock()
	// Bad values fail before any I/O.
	for _, o := range []Option{WithExpiry(0), WithExpiry(-time.Second), WithTries(0), WithDriftFactor(1.5)} {
		if err := rs.NewMutex("expiry", o).Lock(); !errors.Is(err, ErrFailed) || !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Fatalf("a bad option: %v", err)
		}
	}
}

// Lock waits as long as redsync would have retried: (tries-1) × delay.
func TestTriesAndRetryDelay(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	holder := rs.NewMutex("tries")
	if err := holder.Lock(); err != nil {
		t.Fatal(err)
	}
	m := rs.NewMutex("tries", WithTries(5), WithRetryDelay(100*time.Millisecond))
	start := time.Now()
	err := m.Lock()
	d := time.Since(start)
	if !isTaken(err) {
		t.Fatalf("Lock of a held lock: %v", err)
	}
	if d < 380*time.Millisecond || d > 2*time.Second {
		t.Fatalf("WithTries(5), WithRetryDelay(100ms): failed after %v, not about 400 ms", d)
	}
	// WithRetryDelayFunc: asked for the delays before tries 2 to 4.
	var asked []int
	f := rs.NewMutex("tries", WithTries(4), WithRetryDelayFunc(func(i int) time.Duration {
		asked = append(asked, i)
		return time.Duration(i) * 50 * time.Millisecond
	}))
	start = time.Now()
	err = f.Lock()
	d = time.Since(start)
	if !isTaken(err) || len(asked) != 3 || asked[0] != 1 || asked[2] != 3 {
		t.Fatalf("WithRetryDelayFunc: %v, asked %v", err, asked)
	}
	if d < 280*time.Millisecond || d > 2*time.Second {
		t.Fatalf("delays of 50+100+150 ms: failed after %v", d)
	}
	// Released within the wait: handed over at once, no polling.
	w := rs.NewMutex("tries", WithTries(50), WithRetryDelay(100*time.Millisecond))
	go func() {
		time.Sleep(600 * time.Millisecond)
		holder.Unlock()
	}()
	start = time.Now()
	if err := w.Lock(); err != nil {
		t.Fatalf("Lock while the holder releases: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("handed over after %v", d)
	}
	// It waited longer than expiry × timeout factor (8 s × 0.05 = 400 ms):
	// Until counts from the hand-off, not from the start of the wait.
	if u := m.Until(); !u.IsZero() {
		t.Fatalf("a failed Lock set Until %v", u)
	}
	if u := w.Until(); u.Before(start.Add(500*time.Millisecond + DefaultExpiry - 100*time.Millisecond)) {
		t.Fatalf("Until %v after a wait of 600 ms, from its start", u.Sub(start))
	}
	w.Unlock()
}

func TestLockContextCancelled(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	holder := rs.NewMutex("ctx")
	if err := holder.Lock(); err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock()
	m := rs.NewMutex("ctx", WithTries(100), WithRetryDelay(100*time.Millisecond)) // a wait of 9.9 s
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := m.LockContext(ctx)
	if !errors.Is(err, ErrFailed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext cancelled: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancelled after 200 ms, returned after %v", d)
	}
	// The waiter leaves the queue (the library's cancel, a moment after).
	deadline := time.Now().Add(5 * time.Second)
	for s.Must(t, "LLEN", "{ctx}:queue") != "0" {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled waiter is still queued after 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if err := m.LockContext(ctx); !errors.Is(err, ErrFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext past its deadline: %v", err)
	}
}

// The cause of a failure: a server that cannot be reached is
// ErrConnection, and still ErrFailed, not a lock taken.
func TestFailureCause(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	s.Cmd.Process.Kill()
	<-s.Exited
	m := rs.NewMutex("down", WithTries(2), WithRetryDelay(10*time.Millisecond))
	err := m.Lock()
	var taken *ErrTaken
	if !errors.Is(err, ErrFailed) || !errors.Is(err, redislock.ErrConnection) || errors.As(err, &taken) {
		t.Fatalf("Lock with the server down: %v", err)
	}
}

// 100 goroutines, each with its own Mutex, add one to a counter they read
// and write apart: the lock alone serialises them.
func TestCounter(t *testing.T) {
	s := startServer(t)
	rs := newRedsync(t, s)
	holder := rs.NewMutex("counter")
	if err := holder.Lock(); err != nil {
		t.Fatal(err)
	}
	const n = 100
	var counter int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := rs.NewMutex("counter", WithTries(1000), WithRetryDelay(60*time.Millisecond)) // a minute
			if err := m.Lock(); err != nil {
				failed.Add(1)
				t.Error(err)
				return
			}
			v := atomic.LoadInt64(&counter)
			time.Sleep(time.Millisecond)
			atomic.StoreInt64(&counter, v+1)
			if ok, err := m.Unlock(); !ok || err != nil {
				failed.Add(1)
				t.Error(ok, err)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Must(t, "LLEN", "{counter}:queue") != strconv.Itoa(n) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	holder.Unlock()
	wg.Wait()
	if got := atomic.LoadInt64(&counter); got != n || failed.Load() != 0 {
		t.Fatalf("counter %d after %d increments (%d failed)", got, n, failed.Load())
	}
}
