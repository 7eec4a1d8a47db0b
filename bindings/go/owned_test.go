package redislock

import (
	"context"
	"testing"
	"time"
)

func TestOwnedAndIsOwnedBy(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "owned", TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Owned(ctx); err != nil || !ok {
		t.Fatalf("Owned of a held lock: %v, %v", ok, err)
	}
	if ok, err := c.IsOwnedBy(ctx, "owned", l.Token()); err != nil || !ok {
		t.Fatalf("IsOwnedBy with its token: %v, %v", ok, err)
	}
	if ok, err := c.IsOwnedBy(ctx, "owned", []byte("someone else")); err != nil || ok {
		t.Fatalf("IsOwnedBy with another token: %v, %v", ok, err)
	}
	s.Must(t, "DEL", "owned") // as if it had expired
	if ok, err := l.Owned(ctx); err != nil || ok {
		t.Fatalf("Owned of a lock whose key is gone: %v, %v", ok, err)
	}
	l.Release(ctx)
	if ok, err := l.Owned(ctx); err != nil || ok {
		t.Fatalf("Owned after the release: %v, %v", ok, err)
	}
	if _, err := c.IsOwnedBy(ctx, "", []byte("t")); kindOf(err) != KindInvalidArgument {
		t.Fatalf("an empty name: %v", err)
	}
}

func TestForget(t *testing.T) {
	s := startServer(t)
	c := open(t, s)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "forget", TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	token := l.Token()
	l.Forget()
	l.Forget()
	if got := s.Must(t, "GET", "forget"); got != string(token) {
		t.Fatalf("the key holds %q after Forget, not the token", got)
	}
	if err := l.Release(ctx); kindOf(err) != KindNotOwner {
		t.Fatalf("Release after Forget: %v", err)
	}
	if got := s.Must(t, "GET", "forget"); got != string(token) {
		t.Fatal("Release after Forget released the lock")
	}
	if ok, err := l.Owned(ctx); ok || err != nil {
		t.Fatalf("Owned after Forget: %v, %v", ok, err)
	}
	if err := c.ReleaseToken(ctx, "forget", token); err != nil {
		t.Fatal(err)
	}
}
