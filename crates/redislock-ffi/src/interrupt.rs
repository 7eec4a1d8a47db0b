//! The interrupt check of blocking waits: `redislock_set_interrupt` installs,
//! per thread, a function that every acquire's wait on that thread calls
//! about every 100 ms and that ends the wait when it returns nonzero (what
//! keeps a language runtime's threads interruptible), and `with_interrupt`
//! adds it to an acquisition's options.

use std::cell::Cell;
use std::ffi::{c_int, c_void};

use redislock::{AcquireOptions, Interrupt};

use crate::guard::guard;

/// The check `redislock_set_interrupt` installs: nonzero ends the wait.
pub type redislock_interrupt_fn = Option<unsafe extern "C" fn(userdata: *mut c_void) -> c_int>;

/// An interrupt check and its userdata.
#[derive(Clone, Copy)]
struct InterruptCall {
    f: unsafe extern "C" fn(*mut c_void) -> c_int,
    userdata: *mut c_void,
}

// SAFETY: the check is only called by waits started on the thread that
// installed it, on that thread (the blocking calls run there), as
// redislock_set_interrupt documents.
unsafe impl Send for InterruptCall {}

unsafe impl Sync for InterruptCall {}

impl InterruptCall {
    fn stop(&self) -> bool {
        // SAFETY: the caller of redislock_set_interrupt promised that
        // `f(userdata)` may be called by this thread's waits.
        unsafe { (self.f)(self.userdata) != 0 }
    }
}

thread_local! {
    /// The check installed on this thread by `redislock_set_interrupt`.
    static INTERRUPT: Cell<Option<InterruptCall>> = const { Cell::new(None) };
}

/// Have every wait of an acquire that this thread starts from now on call
/// `check(userdata)` about every 100 ms, and give up when it returns
/// nonzero: the waiter leaves the queue and the call returns
/// `REDISLOCK_NOT_ACQUIRED` (or `REDISLOCK_OK` when the lock was handed to
/// it meanwhile: it then holds it). For a language runtime whose threads
/// must stay interruptible (Ruby's `Thread#raise` and `Timeout`, a signal
/// flag) while a call waits without its interpreter lock. `check` is
/// called on this thread, inside the acquire, with nothing of the
/// library's locked; it must be quick and must not call this library.
/// NULL removes the check. `userdata`: passed as is; it must stay valid
/// while a wait of this thread may call it.
#[no_mangle]
pub extern "C" fn redislock_set_interrupt(check: redislock_interrupt_fn, userdata: *mut c_void) {
    guard((), || {
        INTERRUPT.with(|i| i.set(check.map(|f| InterruptCall { f, userdata })));
    })
}

/// `opts` with the interrupt check this thread installed, if any.
pub(crate) fn with_interrupt(opts: AcquireOptions) -> AcquireOptions {
    match INTERRUPT.with(Cell::get) {
        Some(call) => opts.interrupt(Interrupt::new(move || call.stop())),
        None => opts,
    }
}
