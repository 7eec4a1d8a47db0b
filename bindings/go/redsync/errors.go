package redsync

import (
	"errors"
	"fmt"

	redislock "github.com/redislock/redislock/bindings/go"
)

// ErrFailed: Lock, LockContext, TryLock or TryLockContext did not get the
// lock. Every error of theirs matches it (errors.Is), and matches its
// cause too: redislock.ErrNotAcquired (and errors.As gives an ErrTaken)
// when the lock stayed held by another owner, redislock.ErrConnection,
// redislock.ErrNoQuorum, redislock.ErrInvalidArgument, context.Canceled...
var ErrFailed = errors.New("redsync: failed to acquire lock")

// ErrExtendFailed: Extend or ExtendContext did not extend the lock. Every
// error of theirs matches it, and its cause: redislock.ErrNotOwner when
// the lock had expired or been taken over (it is never re-created),
// redislock.ErrConnection...
var ErrExtendFailed = errors.New("redsync: failed to extend lock")

// ErrLockAlreadyExpired: Unlock or UnlockContext found the lock no longer
// this owner's (expired, and maybe taken by another owner since, whose
// lock is left alone). The error matches redislock.ErrNotOwner too.
var ErrLockAlreadyExpired = errors.New("redsync: failed to unlock, lock was already expired")

// ErrTaken: the lock was held by another owner (the whole wait, for Lock).
// A failed Lock's error gives one through errors.As, as a *ErrTaken or an
// ErrTaken. Nodes is empty: redislock reports the outcome of the majority,
// not which servers said what.
type ErrTaken struct {
	Nodes []int
}

func (err ErrTaken) Error() string {
	return fmt.Sprintf("lock already taken, locked nodes: %v", err.Nodes)
}

// ErrNodeTaken is redsync's error for one server of several holding the
// lock. This package never returns it (redislock reports the majority's
// outcome); it is here so that code naming it compiles.
type ErrNodeTaken struct {
	Node int
}

func (err ErrNodeTaken) Error() string {
	return fmt.Sprintf("node #%d: lock already taken", err.Node)
}

// RedisError is redsync's error for one server's failure. This package
// never returns it: a server's failure is a *redislock.Error
// (redislock.ErrConnection, redislock.ErrServer...) inside the call's
// error. It is here so that code naming it compiles.
type RedisError struct {
	Node int
	Err  error
}

func (err RedisError) Error() string { return fmt.Sprintf("node #%d: %s", err.Node, err.Err) }

// Unwrap is the server's error.
func (err RedisError) Unwrap() error { return err.Err }

// failure is the error of every failed call: errors.Is matches its
// redsync sentinel (ErrFailed, ErrExtendFailed, ErrLockAlreadyExpired) and
// its cause (a *redislock.Error, a context's error, a WithGenValueFunc
// error); errors.As gives an ErrTaken when the lock was held by another.
type failure struct {
	op       string
	name     string
	sentinel error // nil when the cause says it all
	cause    error
	taken    bool
}

func (e *failure) Error() string {
	s := fmt.Sprintf("redsync: %s %q", e.op, e.name)
	if e.sentinel != nil {
		s = e.sentinel.Error() + fmt.Sprintf(" (%s %q)", e.op, e.name)
	}
	return s + ": " + e.cause.Error()
}

func (e *failure) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.cause}
	}
	return []error{e.sentinel, e.cause}
}

// As gives an ErrTaken (or *ErrTaken) for a lock held by another owner.
func (e *failure) As(target any) bool {
	if !e.taken {
		return false
	}
	switch t := target.(type) {
	case *ErrTaken:
		*t = ErrTaken{}
		return true
	case **ErrTaken:
		*t = &ErrTaken{}
		return true
	}
	return false
}

// kindIs says whether err is a *redislock.Error of kind k exactly (an
// ErrUnconfirmed also matches errors.Is(err, redislock.ErrNotOwner)).
func kindIs(err error, k redislock.Kind) bool {
	var e *redislock.Error
	return errors.As(err, &e) && e.Kind == k
}
