package redislock

import (
	"testing"

	"github.com/redislock/redislock/bindings/go/internal/testserver"
)

// The tests' throwaway redis-server (internal/testserver, shared with the
// redsync package's tests).
type testServer = testserver.Server

func startServer(t testing.TB) *testServer { t.Helper(); return testserver.Start(t) }

func freePort(t testing.TB) int { return testserver.FreePort(t) }
