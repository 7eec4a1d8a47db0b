//! Locking helpers.
//!
//! redislock uses the standard library's `Mutex` and `Condvar` rather than
//! parking_lot's on purpose: on Linux they are plain futex words with no
//! process-wide state, so a child process after `fork()` can keep using the
//! ones it inherited. parking_lot keeps a global table of parked threads,
//! which in a child still lists the parent's threads (seen here as a panic in
//! the child's renewal thread). A poisoned mutex is used as is: every
//! critical section leaves its data consistent.

use std::sync::{Mutex, MutexGuard};

/// Lock `m`, ignoring poisoning.
pub(crate) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
