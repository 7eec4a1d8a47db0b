//go:build !redislock_shared

package redislock

// The static library, linked into the program: one binary, no .so to
// deploy. `make go-lib` copies target/debug/libredislock.a to
// lib/<GOOS>_<GOARCH>/ (and the header to include/). What follows the
// archive is what it needs of the system (rustc --print native-static-libs).

// #cgo linux,amd64 LDFLAGS: ${SRCDIR}/lib/linux_amd64/libredislock.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
// #cgo linux,arm64 LDFLAGS: ${SRCDIR}/lib/linux_arm64/libredislock.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
// #cgo darwin,amd64 LDFLAGS: ${SRCDIR}/lib/darwin_amd64/libredislock.a -framework Security -framework CoreFoundation -liconv -lm
// #cgo darwin,arm64 LDFLAGS: ${SRCDIR}/lib/darwin_arm64/libredislock.a -framework Security -framework CoreFoundation -liconv -lm
import "C"
