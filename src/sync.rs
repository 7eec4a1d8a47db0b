//! Locking helpers.
//!
//! redislock uses the standard library's `Mutex` and `Condvar` rather than
//! parking_lot's on purpose: on Linux they are plain futex words with no
//! process-wide state, so a child process after `fork()` can keep using the
//! ones it inherited. parking_lot keeps a global table of parked threads,
//! which in a child still lists the parent's threads (seen here as a panic in
//! the child's renewal thread). A poisoned mutex is used as is: every
//! critical section leaves its data consistent.
//!
//! [`pid`] is the process id, cached: the fork checks ask for it on every
//! operation, and `getpid()` is a system call each time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, Once};

static PID: AtomicU32 = AtomicU32::new(0);

extern "C" fn forget_pid() {
    PID.store(0, Ordering::Relaxed);
}

/// This process's id. Cached until a `fork()` (a `pthread_atfork` child
/// handler clears it in the child).
pub(crate) fn pid() -> u32 {
    let p = PID.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: registers a handler that only stores to an atomic; it
        // runs in the child right after fork(), where that is allowed.
        unsafe { libc::pthread_atfork(None, None, Some(forget_pid)) };
    });
    let p = std::process::id();
    PID.store(p, Ordering::Relaxed);
    p
}

/// Lock `m`, ignoring poisoning.
pub(crate) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Block every signal in the calling thread (a library thread: see
/// [`spawn_quiet`]).
#[cfg_attr(not(feature = "python"), allow(dead_code))]
pub(crate) fn block_signals() {
    // SAFETY: sigfillset/pthread_sigmask on a local, initialised set.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Start a library thread with every signal blocked in it, so that a
/// process's signals go to the caller's own threads (a C program waiting
/// for EINTR in its main thread, Python's handlers) and never to ours.
pub(crate) fn spawn_quiet(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    // The new thread inherits the mask in force when it is created.
    // SAFETY: sigfillset/pthread_sigmask on local, initialised sets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let spawned = std::thread::Builder::new().name(name.into()).spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned
    }
}
