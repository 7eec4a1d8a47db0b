package redislock

// The functions the C library calls, on its own threads (the async
// runtime's for an acquisition's outcome, the renewal thread or the
// caller's for a lost lock). Each is quick and never blocks. Their
// userdata is a runtime/cgo.Handle: no Go pointer is ever kept by C.

/*
#include <stdint.h>
#include "redislock.h"
*/
import "C"

import "runtime/cgo"

//export goAcquired
func goAcquired(handle C.uintptr_t, status C.int, lock *C.redislock_lock) {
	out := outcome{status: C.redislock_status(status), lock: lock}
	if out.status != C.REDISLOCK_OK {
		// This thread's last error is this failure's message.
		out.msg = lastError()
	}
	// Buffered, one outcome per handle: never blocks.
	cgo.Handle(handle).Value().(chan outcome) <- out
}

//export goLost
func goLost(handle C.uintptr_t) {
	cgo.Handle(handle).Value().(*lostState).fire()
}
