//go:build redislock_shared

package redislock

// With -tags redislock_shared: the shared library libredislock.so, found
// by the linker on its path (CGO_LDFLAGS=-L/dir) and at run time by the
// loader (LD_LIBRARY_PATH, an rpath, or the system's library path).

// #cgo LDFLAGS: -lredislock
import "C"
