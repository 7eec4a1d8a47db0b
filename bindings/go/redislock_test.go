package redislock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func open(t testing.TB, s *testServer) *Client {
	t.Helper()
	c, err := Open(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func kindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// waitFor polls cond until it holds or 5 s have passed.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after 5 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// queueEmpty: no waiter left in the lock's queue ({K}:queue, PROTOCOL.md).
func queueEmpty(t testing.TB, s *testServer, name string) bool {
	return s.Must(t, "LLEN", "{"+name+"}:queue") == "0"
}

func TestVersion(t *testing.T) {
	if LibraryVersion() != Version {
		t.Fatalf("library %s, module %s", LibraryVersion(), Version)
	}
}

func TestAcquireRelease(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "ar", TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l.Name() != "ar" || len(l.Token()) == 0 {
		t.Fatalf("name %q token %q", l.Name(), l.Token())
	}
	if got := s.Must(t, "GET", "ar"); got != string(l.Token()) {
		t.Fatalf("the key holds %q, the lock's token is %q", got, l.Token())
	}
	if pttl, _ := strconv.Atoi(s.Must(t, "PTTL", "ar")); pttl < 9000 || pttl > 10000 {
		t.Fatalf("PTTL %d for a TTL of 10 s", pttl)
	}
	if shown := fmt.Sprintf("%v %+v %#v %s", l, l, l, l); strings.Contains(shown, string(l.Token())) {
		t.Fatalf("String() shows the token: %s", l)
	}
	token := l.Token()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Must(t, "EXISTS", "ar") != "0" {
		t.Fatal("the key outlived the release")
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a second release: %v", err)
	}
	if string(l.Token()) != string(token) {
		t.Fatal("the token changed after the release")
	}
}

func TestDefaultTTL(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	l, err := c.Acquire(context.Background(), "dt")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if pttl, _ := strconv.Atoi(s.Must(t, "PTTL", "dt")); pttl < 29000 || pttl > 30000 {
		t.Fatalf("PTTL %d with the default TTL", pttl)
	}
}

func TestTryWhileHeld(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.TryAcquire(ctx, "try")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.TryAcquire(ctx, "try", Wait(time.Hour))
	if !errors.Is(err, ErrNotAcquired) || kindOf(err) != KindNotAcquired {
		t.Fatalf("try while held: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("TryAcquire waited %v", time.Since(start))
	}
	if !strings.HasPrefix(err.Error(), "redislock: ") {
		t.Fatalf("message %q", err)
	}
	l.Release(ctx)
	l2, err := c.TryAcquire(ctx, "try")
	if err != nil {
		t.Fatal(err)
	}
	l2.Release(ctx)
}

func TestWaitRunsOut(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "wait")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	start := time.Now()
	_, err = c.Acquire(ctx, "wait", Wait(300*time.Millisecond))
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("wait ran out: %v", err)
	}
	if d := time.Since(start); d < 290*time.Millisecond || d > 3*time.Second {
		t.Fatalf("a wait of 300 ms took %v", d)
	}
	waitFor(t, "the queue is empty", func() bool { return queueEmpty(t, s, "wait") })
}

func TestWaitsUntilReleased(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "handoff")
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(300 * time.Millisecond); l.Release(ctx) }()
	start := time.Now()
	l2, err := c.Acquire(ctx, "handoff")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("got the lock after %v, before its release", d)
	}
	if s.Must(t, "GET", "handoff") != string(l2.Token()) {
		t.Fatal("the key does not hold the new owner's token")
	}
}

func TestContextEndsTheWait(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	bg := context.Background()
	holder, err := c.Acquire(bg, "ctx")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(bg)
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, err := c.Acquire(ctx, "ctx")
		if !errors.Is(err, context.Canceled) || kindOf(err) != 0 {
			t.Fatalf("cancelled wait: %v", err)
		}
		if d := time.Since(start); d < 190*time.Millisecond || d > 2*time.Second {
			t.Fatalf("cancelled after 200 ms, returned after %v", d)
		}
		waitFor(t, "the queue is empty", func() bool { return queueEmpty(t, s, "ctx") })
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		w, err := c.AcquireWrite(ctx, "ctx-rw-free") // free: taken at once
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release(bg)
		_, err = c.Acquire(ctx, "ctx", Wait(time.Hour))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("deadline: %v", err)
		}
		waitFor(t, "the queue is empty", func() bool { return queueEmpty(t, s, "ctx") })
	})
	t.Run("done already", func(t *testing.T) {
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if _, err := c.Acquire(ctx, "ctx-free"); !errors.Is(err, context.Canceled) {
			t.Fatalf("a done context: %v", err)
		}
		if s.Must(t, "EXISTS", "ctx-free") != "0" {
			t.Fatal("a done context took the lock")
		}
	})
	if err := holder.Release(bg); err != nil {
		t.Fatal(err)
	}
	// Nobody was handed the lock: the cancelled waiters left the queue.
	time.Sleep(100 * time.Millisecond)
	if s.Must(t, "EXISTS", "ctx") != "0" {
		t.Fatal("a cancelled waiter holds the lock")
	}
}

// A cancel at the very moment of a hand-off: either the waiter returns the
// lock, or an error and nothing stays held or queued.
func TestCancelAtTheHandOff(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	bg := context.Background()
	got := 0
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("race-%d", i)
		holder, err := c.Acquire(bg, name)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		res := make(chan error, 1)
		go func() {
			l, err := c.Acquire(ctx, name)
			if err == nil {
				got++
				err = l.Release(bg)
			}
			res <- err
		}()
		waitFor(t, "the waiter is queued", func() bool { return !queueEmpty(t, s, name) })
		time.AfterFunc(time.Duration(i%5)*100*time.Microsecond, cancel)
		if err := holder.Release(bg); err != nil {
			t.Fatal(err)
		}
		if err := <-res; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", i, err)
		}
		waitFor(t, "nothing held nor queued", func() bool {
			return s.Must(t, "EXISTS", name, "{"+name+"}:queue") == "0"
		})
		cancel()
	}
	t.Logf("the waiter got the lock in %d of 40 rounds, the cancel won the others", got)
}

func TestFenceIncreases(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l1, err := c.Acquire(ctx, "fence")
	if err != nil {
		t.Fatal(err)
	}
	f1, err := l1.Fence(ctx)
	if err != nil || f1 == 0 {
		t.Fatalf("fence %d: %v", f1, err)
	}
	if now := uint64(time.Now().UnixMicro()); f1 < now-60_000_000 || f1 > now+60_000_000 {
		t.Fatalf("fence %d is not the server's clock in µs (%d)", f1, now)
	}
	l1.Release(ctx)
	if again, err := l1.Fence(ctx); err != nil || again != f1 {
		t.Fatalf("the fence after the release: %d, %v", again, err)
	}
	l2, err := c.Acquire(ctx, "fence", Fenced())
	if err != nil {
		t.Fatal(err)
	}
	f2, err := l2.Fence(ctx)
	if err != nil || f2 <= f1 {
		t.Fatalf("second fence %d after %d: %v", f2, f1, err)
	}
	l2.Release(ctx)
	l3, err := c.Acquire(ctx, "fence")
	if err != nil {
		t.Fatal(err)
	}
	l3.Release(ctx)
	if _, err := l3.Fence(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a fence first read after the release: %v", err)
	}
}

func TestExtend(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "extend", TTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl, _ := strconv.Atoi(s.Must(t, "PTTL", "extend")); pttl < 19000 {
		t.Fatalf("PTTL %d after extending to 20 s", pttl)
	}
}

func TestNotOwnerAfterExpiry(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "expiry", TTL(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lock expired", func() bool { return s.Must(t, "EXISTS", "expiry") == "0" })
	other, err := c.TryAcquire(ctx, "expiry")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	if err := l.Extend(ctx, time.Second); !errors.Is(err, ErrNotOwner) || kindOf(err) != KindNotOwner {
		t.Fatalf("extend after expiry: %v", err)
	}
	select {
	case <-l.Lost():
	case <-time.After(time.Second):
		t.Fatal("Lost() not closed after a failed extend")
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("release after expiry: %v", err)
	}
	if s.Must(t, "GET", "expiry") != string(other.Token()) {
		t.Fatal("the release touched the new owner's lock")
	}
}

func TestWrongType(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	s.Must(t, "RPUSH", "wt", "x")
	_, err := c.TryAcquire(context.Background(), "wt")
	if !errors.Is(err, ErrWrongType) {
		t.Fatalf("a list: %v", err)
	}
	if s.Must(t, "LLEN", "wt") != "1" {
		t.Fatal("the list was touched")
	}
}

func deadURL(t testing.TB) string {
	return fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t))
}

func TestDeadServer(t *testing.T) {
	c, err := Open(deadURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.TryAcquire(ctx, "dead"); !errors.Is(err, ErrConnection) {
		t.Fatalf("try: %v", err)
	}
	if _, err := c.Acquire(ctx, "dead", Wait(time.Second)); !errors.Is(err, ErrConnection) {
		t.Fatalf("acquire: %v", err)
	}
	if err := c.ReleaseToken(ctx, "dead", []byte("t")); !errors.Is(err, ErrConnection) {
		t.Fatalf("release by token: %v", err)
	}
}

// Every bad argument is refused before any I/O: against a dead server, the
// error is ErrInvalidArgument, never ErrConnection.
func TestBadArgumentsBeforeIO(t *testing.T) {
	c, err := Open(deadURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var nilCtx context.Context
	cases := map[string]func() error{
		"empty name":        func() error { _, err := c.Acquire(ctx, ""); return err },
		"long name":         func() error { _, err := c.Acquire(ctx, strings.Repeat("n", 64*1024+1)); return err },
		"TTL 0":             func() error { _, err := c.Acquire(ctx, "x", TTL(0)); return err },
		"TTL 999µs":         func() error { _, err := c.TryAcquire(ctx, "x", TTL(999*time.Microsecond)); return err },
		"TTL 31 days":       func() error { _, err := c.Acquire(ctx, "x", TTL(31*24*time.Hour)); return err },
		"negative wait":     func() error { _, err := c.Acquire(ctx, "x", Wait(-time.Second)); return err },
		"empty token":       func() error { _, err := c.Acquire(ctx, "x", Token(nil)); return err },
		"nil option":        func() error { _, err := c.Acquire(ctx, "x", nil); return err },
		"nil context":       func() error { _, err := c.Acquire(nilCtx, "x"); return err },
		"semaphore token":   func() error { _, err := c.AcquireSemaphore(ctx, "x", 2, Token([]byte("t"))); return err },
		"semaphore limit 0": func() error { _, err := c.AcquireSemaphore(ctx, "x", 0); return err },
		"permits > limit":   func() error { _, err := c.AcquireSemaphore(ctx, "x", 2, Permits(3)); return err },
		"permits on a lock": func() error { _, err := c.Acquire(ctx, "x", Permits(1)); return err },
		"fenced read":       func() error { _, err := c.AcquireRead(ctx, "x", Fenced()); return err },
		"release no token":  func() error { return c.ReleaseToken(ctx, "x", nil) },
		"extend token TTL":  func() error { return c.ExtendToken(ctx, "x", []byte("t"), 0) },
		"WithLock nil fn":   func() error { return c.WithLock(ctx, "x", nil) },
		"bad URL":           func() error { _, err := Open("http://user:hunter2@127.0.0.1:1/"); return err },
		"NUL in URL":        func() error { _, err := Open("redis://127.0.0.1:1/\x00"); return err },
		"no Redlock URL":    func() error { _, err := OpenRedlock(nil); return err },
		"bad timeout":       func() error { _, err := Open("redis://127.0.0.1:1/?command_timeout=0s"); return err },
	}
	for name, f := range cases {
		err := f()
		if !errors.Is(err, ErrInvalidArgument) || kindOf(err) != KindInvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the password is in the message: %v", name, err)
		}
	}
	c.Close()
	if _, err := c.TryAcquire(ctx, "x"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a closed client: %v", err)
	}
}

func TestNoPasswordInClient(t *testing.T) {
	c, err := Open("redis://user:hunter2@127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s := fmt.Sprintf("%v %+v %#v %s", c, c, c, c.String()); strings.Contains(s, "hunter2") || !strings.Contains(s, "127.0.0.1:1") {
		t.Fatalf("the client shows as %s", s)
	}
	_, err = c.TryAcquire(context.Background(), "x")
	if !errors.Is(err, ErrConnection) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("%v", err)
	}
}

func TestErrorKinds(t *testing.T) {
	u := &Error{Kind: KindUnconfirmed, message: "x"}
	if !errors.Is(u, ErrUnconfirmed) || !errors.Is(u, ErrNotOwner) || errors.Is(u, ErrNotAcquired) {
		t.Fatal("an unconfirmed release is an ErrUnconfirmed and an ErrNotOwner only")
	}
	if errors.Is(ErrNotOwner, u) || errors.Is(&Error{Kind: KindNotOwner}, ErrUnconfirmed) {
		t.Fatal("a not-owner is not unconfirmed")
	}
	wrapped := fmt.Errorf("context: %w", &Error{Kind: KindConnection, message: "m"})
	var e *Error
	if !errors.As(wrapped, &e) || e.Kind != KindConnection || e.Kind.String() != "connection" {
		t.Fatal("errors.As")
	}
}

func TestWithLockRenews(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ran := false
	err := c.WithLock(context.Background(), "scoped", func(ctx context.Context) error {
		ran = true
		select {
		case <-ctx.Done():
			return fmt.Errorf("cancelled while held: %v", context.Cause(ctx))
		case <-time.After(time.Second):
		}
		if s.Must(t, "EXISTS", "scoped") != "1" {
			return errors.New("the lock expired while the function ran")
		}
		return nil
	}, TTL(300*time.Millisecond))
	if err != nil || !ran {
		t.Fatal(err)
	}
	if s.Must(t, "EXISTS", "scoped") != "0" {
		t.Fatal("not released after the function")
	}
	// The function's error comes back, and the lock is released.
	mine := errors.New("mine")
	if err := c.WithLock(context.Background(), "scoped", func(context.Context) error { return mine }); err != mine {
		t.Fatalf("the function's error: %v", err)
	}
	if s.Must(t, "EXISTS", "scoped") != "0" {
		t.Fatal("not released after a failing function")
	}
}

func TestWithLockLost(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	err := c.WithLock(context.Background(), "lost", func(ctx context.Context) error {
		s.Must(t, "DEL", "lost")
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), ErrNotOwner) {
				return fmt.Errorf("cause %v", context.Cause(ctx))
			}
			return nil
		case <-time.After(3 * time.Second):
			return errors.New("the context was not cancelled when the lock was lost")
		}
	}, TTL(300*time.Millisecond))
	if !errors.Is(err, ErrNotOwner) {
		t.Fatalf("WithLock of a lost lock: %v", err)
	}
}

func TestSemaphore(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	a, err := c.AcquireSemaphore(ctx, "sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.AcquireSemaphore(ctx, "sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireSemaphore(ctx, "sem", 2, Wait(0)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a third taker: %v", err)
	}
	third := make(chan *Lock)
	go func() {
		l, err := c.AcquireSemaphore(ctx, "sem", 2, Wait(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		third <- l
	}()
	time.Sleep(200 * time.Millisecond)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-third
	if l == nil {
		t.FailNow()
	}
	if f, err := l.Fence(ctx); err != nil || f == 0 {
		t.Fatalf("a permit's fence: %d %v", f, err)
	}
	b.Release(ctx)
	l.Release(ctx)
	both, err := c.AcquireSemaphore(ctx, "sem", 2, Permits(2), Wait(0))
	if err != nil {
		t.Fatalf("both permits once free: %v", err)
	}
	both.Release(ctx)
}

func TestReadWrite(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	r1, err := c.AcquireRead(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.AcquireRead(ctx, "rw", Wait(0))
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if _, err := c.AcquireWrite(ctx, "rw", Wait(100*time.Millisecond)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a writer while read: %v", err)
	}
	r1.Release(ctx)
	r2.Release(ctx)
	w, err := c.AcquireWrite(ctx, "rw", Wait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireRead(ctx, "rw", Wait(0)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a reader while written: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestByToken(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "bytoken", Token([]byte("request-42")))
	if err != nil {
		t.Fatal(err)
	}
	if string(l.Token()) != "request-42" || s.Must(t, "GET", "bytoken") != "request-42" {
		t.Fatal("the caller's token is not the lock's")
	}
	if err := c.ExtendToken(ctx, "bytoken", []byte("request-42"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if f, err := c.FenceToken(ctx, "bytoken", []byte("request-42")); err != nil || f == 0 {
		t.Fatalf("fence by token: %d %v", f, err)
	}
	if err := c.ReleaseToken(ctx, "bytoken", []byte("someone-else")); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("another token: %v", err)
	}
	if err := c.ReleaseToken(ctx, "bytoken", []byte("request-42")); err != nil {
		t.Fatal(err)
	}
	if s.Must(t, "EXISTS", "bytoken") != "0" {
		t.Fatal("not released")
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("the handle's release after the token's: %v", err)
	}
}

func TestFinalizerReleases(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	func() {
		if _, err := c.Acquire(context.Background(), "forgotten"); err != nil {
			t.Fatal(err)
		}
	}()
	waitFor(t, "the finalizer released the lock", func() bool {
		runtime.GC()
		return s.Must(t, "EXISTS", "forgotten") == "0"
	})
}

func threads(t testing.TB) int {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}

// 1,000 goroutines take one lock in turn, each adding one to a counter by a
// read and a write that only the lock keeps apart; while they all wait, the
// process has a handful of OS threads and connections, not one per waiter.
func TestThousandGoroutines(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	bg := context.Background()
	const n = 1000
	before := threads(t)
	holder, err := c.Acquire(bg, "counter")
	if err != nil {
		t.Fatal(err)
	}
	var counter int64 // read and written apart: the lock alone serialises
	var wg sync.WaitGroup
	var failed atomic.Int64
	ctx, cancel := context.WithTimeout(bg, 5*time.Minute)
	defer cancel()
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctx, "counter", TTL(30*time.Second))
			if err != nil {
				failed.Add(1)
				t.Error(err)
				return
			}
			v := atomic.LoadInt64(&counter)
			runtime.Gosched()
			atomic.StoreInt64(&counter, v+1)
			if err := l.Release(bg); err != nil {
				failed.Add(1)
				t.Error(err)
			}
		}()
	}
	// Every waiter queued on the server, and counted by the client (its
	// count follows the server's reply, a moment later).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		queue := s.Must(t, "LLEN", "{counter}:queue")
		if queue == strconv.Itoa(n) && st.WaitersNow == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s of %d waiters queued, %d counted by the client", queue, n, st.WaitersNow)
		}
		time.Sleep(20 * time.Millisecond)
	}
	queued := time.Since(start)
	waiting := threads(t)
	clients := 0
	for _, line := range strings.Split(s.Must(t, "INFO", "clients"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_clients:"); ok {
			clients, _ = strconv.Atoi(v)
		}
	}
	t.Logf("%d goroutines waiting (queued in %v): %d OS threads (%d before), %d connections to the server",
		n, queued.Round(time.Millisecond), waiting, before, clients)
	if waiting > 64 {
		t.Errorf("%d OS threads while %d goroutines wait", waiting, n)
	}
	if clients > 32 {
		t.Errorf("%d connections while %d goroutines wait", clients, n)
	}
	start = time.Now()
	if err := holder.Release(bg); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("%d hand-offs in %v", n, time.Since(start).Round(time.Millisecond))
	if got := atomic.LoadInt64(&counter); got != n-failed.Load() || failed.Load() != 0 {
		t.Fatalf("counter %d after %d increments (%d failed)", got, n, failed.Load())
	}
}

func TestRedlock(t *testing.T) {
	servers := []*testServer{startServer(t), startServer(t), startServer(t)}
	urls := []string{servers[0].URL(), servers[1].URL(), servers[2].URL()}
	c, err := OpenRedlock(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.Acquire(ctx, "redlock", Fenced())
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		if s.Must(t, "GET", "redlock") != string(l.Token()) {
			t.Fatalf("server %d does not hold the lock", i)
		}
	}
	if _, err := c.TryAcquire(ctx, "redlock"); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("while held: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// One node down: a majority is left.
	servers[2].Kill()
	l, err = c.Acquire(ctx, "redlock", Wait(5*time.Second))
	if err != nil {
		t.Fatalf("with a node down: %v", err)
	}
	l.Release(ctx)
	// Two down: no majority.
	servers[1].Kill()
	if _, err := c.TryAcquire(ctx, "redlock"); !errors.Is(err, ErrNoQuorum) || kindOf(err) != KindNoQuorum {
		t.Fatalf("with two nodes of three down: %v", err)
	}
}

// A Lock may be used from any goroutine: fences, extends and one release
// at once from many, under the race detector.
func TestLockFromManyGoroutines(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var released, notOwner atomic.Int64
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l.Fence(ctx)
			l.Extend(ctx, 10*time.Second)
			_ = l.Token()
			switch err := l.Release(ctx); {
			case err == nil:
				released.Add(1)
			case errors.Is(err, ErrNotOwner):
				notOwner.Add(1)
			default:
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if released.Load() != 1 || notOwner.Load() != 19 {
		t.Fatalf("%d releases, %d not-owner", released.Load(), notOwner.Load())
	}
}

// Every kind of wait ends with its context and leaves its queue empty.
func TestContextEndsEveryWait(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	bg := context.Background()
	type acquireFn func(ctx context.Context, opts ...Option) (*Lock, error)
	kinds := []struct {
		name  string
		queue string
		hold  acquireFn
		wait  acquireFn
	}{
		{"lock", "{k-lock}:queue",
			func(ctx context.Context, o ...Option) (*Lock, error) { return c.Acquire(ctx, "k-lock", o...) },
			func(ctx context.Context, o ...Option) (*Lock, error) { return c.Acquire(ctx, "k-lock", o...) }},
		{"fenced lock", "{k-fenced}:queue",
			func(ctx context.Context, o ...Option) (*Lock, error) { return c.Acquire(ctx, "k-fenced", o...) },
			func(ctx context.Context, o ...Option) (*Lock, error) {
				return c.Acquire(ctx, "k-fenced", append(o, Fenced())...)
			}},
		{"semaphore", "{k-sem}:sem:queue",
			func(ctx context.Context, o ...Option) (*Lock, error) {
				return c.AcquireSemaphore(ctx, "k-sem", 1, o...)
			},
			func(ctx context.Context, o ...Option) (*Lock, error) {
				return c.AcquireSemaphore(ctx, "k-sem", 1, o...)
			}},
		{"read behind a writer", "{k-rw}:rw:queue",
			func(ctx context.Context, o ...Option) (*Lock, error) { return c.AcquireWrite(ctx, "k-rw", o...) },
			func(ctx context.Context, o ...Option) (*Lock, error) { return c.AcquireRead(ctx, "k-rw", o...) }},
		{"write behind a reader", "{k-wr}:rw:queue",
			func(ctx context.Context, o ...Option) (*Lock, error) { return c.AcquireRead(ctx, "k-wr", o...) },
			func(ctx context.Context, o ...Option) (*Lock, error) { return c.AcquireWrite(ctx, "k-wr", o...) }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			holder, err := k.hold(bg)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Release(bg)
			for _, deadline := range []bool{true, false} {
				want := context.Canceled
				ctx, cancel := context.WithCancel(bg)
				if deadline {
					want = context.DeadlineExceeded
					ctx, cancel = context.WithTimeout(bg, time.Second)
				}
				res := make(chan error, 1)
				go func() { _, err := k.wait(ctx, Wait(time.Minute)); res <- err }()
				// Queued first (the key names of PROTOCOL.md), then ended.
				waitFor(t, k.queue+" has the waiter", func() bool { return s.Must(t, "LLEN", k.queue) == "1" })
				if !deadline {
					cancel()
				}
				err := <-res
				cancel()
				if !errors.Is(err, want) {
					t.Fatalf("want %v, got %v", want, err)
				}
				waitFor(t, k.queue+" is empty", func() bool { return s.Must(t, "LLEN", k.queue) == "0" })
			}
		})
	}
}

func TestStatsAndDoctor(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "stats")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, "stats"); !errors.Is(err, ErrNotAcquired) {
		t.Fatal(err)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.AcquiredAtOnce != 1 || st.AcquireTimedOut != 1 || st.HeldNow != 1 || st.AcquiredLocks != 1 || st.Wait.Count != 2 {
		t.Fatalf("stats %+v", st)
	}
	if len(st.Wait.Buckets) != 23 || StatsBucketBound(0) != 50*time.Microsecond || StatsBucketBound(22) != -1 {
		t.Fatalf("buckets %d, bounds %v %v", len(st.Wait.Buckets), StatsBucketBound(0), StatsBucketBound(22))
	}
	l.Release(ctx)
	if st, _ := c.Stats(); st.ReleasesOK != 1 || st.HeldNow != 0 || st.Held.Count != 1 {
		t.Fatalf("after the release: %+v", st)
	}
	rep, err := c.Doctor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) == 0 || rep.Text == "" || rep.Findings[0].Server == "" {
		t.Fatalf("report %+v", rep)
	}
	dead, _ := Open(deadURL(t))
	defer dead.Close()
	if _, err := dead.Doctor(ctx); !errors.Is(err, ErrConnection) {
		t.Fatalf("doctor of a dead server: %v", err)
	}
}
