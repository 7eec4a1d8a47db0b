package redislock

// Kind says what went wrong: one per failure status of the C library.
type Kind int

// The kinds of Error. Each has a sentinel error for errors.Is.
const (
	// KindNotAcquired: the lock is held by another owner and the wait ran
	// out (or a try found it held).
	KindNotAcquired Kind = iota + 1
	// KindNotOwner: a release, extend or fence found the lock expired or
	// taken by another owner.
	KindNotOwner
	// KindUnconfirmed: a release whose outcome is unknown (the connection
	// broke after it was sent; most likely it released). Also a NotOwner.
	KindUnconfirmed
	// KindNoQuorum: Redlock, no majority of the servers could be reached.
	KindNoQuorum
	// KindConnection: a server could not be reached, an I/O error, a timeout.
	KindConnection
	// KindWrongType: the key holds something else; it was left untouched.
	KindWrongType
	// KindServer: the server answered with an error (authentication, ACL…).
	KindServer
	// KindInvalidArgument: a bad argument, refused before any I/O.
	KindInvalidArgument
	// KindInternal: a bug in redislock.
	KindInternal
)

var kindNames = map[Kind]string{
	KindNotAcquired:     "not acquired",
	KindNotOwner:        "not owner",
	KindUnconfirmed:     "unconfirmed",
	KindNoQuorum:        "no quorum",
	KindConnection:      "connection",
	KindWrongType:       "wrong type",
	KindServer:          "server",
	KindInvalidArgument: "invalid argument",
	KindInternal:        "internal",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "unknown"
}

// Error is every failure of this package but a context's: errors.As(err,
// &e) gives its Kind, and errors.Is(err, ErrNotOwner) and the other
// sentinels match it by kind. Its message comes from the library and never
// holds a password.
type Error struct {
	Kind     Kind
	message  string
	sentinel bool
}

func (e *Error) Error() string { return "redislock: " + e.message }

// Is makes errors.Is(err, ErrX) true for every Error of ErrX's kind, and
// errors.Is(err, ErrNotOwner) true for an ErrUnconfirmed.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || !t.sentinel {
		return false
	}
	return t.Kind == e.Kind || (t.Kind == KindNotOwner && e.Kind == KindUnconfirmed)
}

func sentinel(k Kind, msg string) *Error { return &Error{Kind: k, message: msg, sentinel: true} }

// The sentinels, for errors.Is.
var (
	ErrNotAcquired     = sentinel(KindNotAcquired, "the lock is held by another owner")
	ErrNotOwner        = sentinel(KindNotOwner, "the lock is no longer held by this owner")
	ErrUnconfirmed     = sentinel(KindUnconfirmed, "the release's outcome is unknown")
	ErrNoQuorum        = sentinel(KindNoQuorum, "no majority of the servers could be reached")
	ErrConnection      = sentinel(KindConnection, "the server could not be reached")
	ErrWrongType       = sentinel(KindWrongType, "the key holds something other than a lock")
	ErrServer          = sentinel(KindServer, "the server answered with an error")
	ErrInvalidArgument = sentinel(KindInvalidArgument, "invalid argument")
	ErrInternal        = sentinel(KindInternal, "internal error")
)

func newError(k Kind, msg string) error { return &Error{Kind: k, message: msg} }

func invalid(msg string) error { return newError(KindInvalidArgument, msg) }
