//! The lock handle, `redislock_lock`, and every call on one: release and
//! extend, background renewal and whether the lock was lost, the lost
//! callback (`redislock_lock_on_lost`, which runs on the renewal thread or
//! inside a release or extend, and is refused from inside itself), freeing
//! or forgetting the handle, and what it holds: its token, its fencing
//! number, and whether the server still has it.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redislock::{Error, Lock};

use crate::args::{copy_out, non_null, out_ptr};
use crate::error::redislock_status::{self, *};
use crate::error::{fail, set_last_error, status};
use crate::guard::guard;

/// A lock held by this process.
///
/// Thread safety: a lock handle may move between threads but must be used
/// by one thread at a time. Lifetime: from a successful `redislock_acquire`
/// until `redislock_release` or `redislock_lock_free`, exactly once. A handle
/// inherited by a child through `fork()` is inert there: releasing or
/// freeing it in the child frees the child's memory and leaves the parent's
/// lock held.
pub struct redislock_lock {
    pub(crate) lock: Lock,
    /// The callback of `redislock_lock_on_lost`, once one was set.
    lost: Option<Arc<LostSlot>>,
}

impl redislock_lock {
    /// A handle for a lock just taken, with no lost callback yet.
    pub(crate) fn new(lock: Lock) -> redislock_lock {
        redislock_lock { lock, lost: None }
    }

    /// True on the thread that runs this handle's lost callback, while it
    /// runs: the calls that would free the handle or wait for the callback
    /// are refused there.
    fn in_own_callback(&self) -> bool {
        self.lost.as_ref().is_some_and(|s| s.running_here())
    }

    /// No callback runs for this handle from now on; one running on another
    /// thread has returned.
    fn clear_callback(&self) {
        if let Some(slot) = &self.lost {
            slot.set(None);
        }
    }
}

/// Release the lock and free the handle. Takes ownership of `lock`, which
/// is freed whatever the outcome. Returns `REDISLOCK_NOT_OWNER` when the
/// lock expired or was taken over (the new holder's key is left alone); its
/// lost callback, if one is set and has not run, runs then, on this thread,
/// before this returns. In a child process that inherited the handle, this
/// only frees it. Called from inside the handle's own lost callback it is
/// refused (`REDISLOCK_INVALID_ARGUMENT`) and the handle is left as it was.
#[no_mangle]
pub extern "C" fn redislock_release(lock: *mut redislock_lock) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        let handle = match non_null(lock, "lock") {
            Ok(h) => h,
            Err(e) => return fail(e),
        };
        if handle.in_own_callback() {
            return fail(inside_callback("redislock_release"));
        }
        // SAFETY: made by Box::into_raw in redislock_acquire, given back once.
        let redislock_lock { lock, lost } = *unsafe { Box::from_raw(lock) };
        let released = lock.release();
        if let Some(slot) = lost {
            slot.set(None);
        }
        status(released)
    })
}

/// Set the lock's remaining time to `ttl_ms` (not added to it). `lock`:
/// borrowed. Returns `REDISLOCK_NOT_OWNER` (and marks the lock lost) when
/// it expired or was taken over; an expired key is never re-created.
#[no_mangle]
pub extern "C" fn redislock_extend(lock: *mut redislock_lock, ttl_ms: u64) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            non_null(lock, "lock")?
                .lock
                .extend(Duration::from_millis(ttl_ms))
        })())
    })
}

/// Renew the lock in the background at about a third of its TTL until it
/// is released or freed. `lock`: borrowed. When a renewal finds the lock
/// gone, `redislock_lock_is_lost` turns true and renewal stops.
#[no_mangle]
pub extern "C" fn redislock_lock_auto_renew(lock: *mut redislock_lock) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            non_null(lock, "lock")?.lock.auto_renew();
            Ok(())
        })())
    })
}

/// Whether background renewal or an extend found the lock gone. `lock`:
/// borrowed; NULL gives false.
#[no_mangle]
pub extern "C" fn redislock_lock_is_lost(lock: *const redislock_lock) -> bool {
    guard(false, || {
        non_null(lock, "lock")
            .map(|l| l.lock.is_lost())
            .unwrap_or(false)
    })
}

/// The function `redislock_lock_on_lost` calls when the lock is found lost,
/// with the `userdata` given there.
pub type redislock_lost_fn = Option<unsafe extern "C" fn(userdata: *mut c_void)>;

/// A lost callback and its userdata.
struct LostCall {
    f: unsafe extern "C" fn(*mut c_void),
    userdata: *mut c_void,
}

// SAFETY: the caller of redislock_lock_on_lost promises that the callback
// may run on another thread with this userdata (see its documentation).
unsafe impl Send for LostCall {}

/// The lost callback of one handle, shared with the closure the core runs
/// when the lock is found lost. The mutex is held while the callback runs:
/// freeing the handle (or replacing the callback) waits for a callback
/// running on another thread, and no callback starts after that.
#[derive(Default)]
struct LostSlot(Mutex<Option<LostCall>>);

thread_local! {
    /// The slot whose callback runs on this thread right now.
    static RUNNING: Cell<*const LostSlot> = const { Cell::new(std::ptr::null()) };
}

impl LostSlot {
    fn set(&self, call: Option<LostCall>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = call;
    }

    /// Run the callback if one is set, once.
    fn run(&self) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(call) = slot.take() {
            let outer = RUNNING.replace(self);
            // SAFETY: the caller of redislock_lock_on_lost promised that
            // `f(userdata)` may be called until the handle is freed, and
            // freeing it waits for this mutex.
            unsafe { (call.f)(call.userdata) };
            RUNNING.set(outer);
        }
    }

    fn running_here(&self) -> bool {
        std::ptr::eq(RUNNING.get(), self)
    }
}

/// The error of a call on a handle from inside its own lost callback.
fn inside_callback(what: &str) -> Error {
    Error::InvalidArgument(format!(
        "{what} was called on a lock from inside that lock's own lost callback, which is not \
         allowed (the handle is left as it was): release or free it after the callback returned"
    ))
}

/// Have `callback(userdata)` called once when the lock is found lost
/// (expired or taken by another owner), replacing a callback set before.
///
/// `lock`: borrowed. `callback`: NULL removes the callback set before.
/// `userdata`: passed to the callback as is; it must stay valid until the
/// handle is released, freed or forgotten, or until another call here
/// replaces the callback.
///
/// Where it runs:
/// - on the client's renewal thread, when background renewal
///   (`redislock_lock_auto_renew`) finds the lock gone: the callback must
///   then be thread-safe, and short, since the client's other locks are not
///   renewed while it runs;
/// - on the calling thread, inside `redislock_extend` or `redislock_release`
///   of this handle, before it returns `REDISLOCK_NOT_OWNER`;
/// - at once, on this thread, before this returns, when the lock is already
///   known lost.
///
/// It runs at most once per call of this function, never after the handle
/// was released (successfully or not), freed or forgotten: those calls, and
/// a call here, wait for a callback running on another thread to return.
/// So the callback must not wait for the thread that releases or frees the
/// handle (a mutex that thread holds around the release, a join).
///
/// Inside the callback: the lock handle may only be read, with
/// `redislock_lock_is_lost`, `redislock_lock_token` and
/// `redislock_lock_fence`. `redislock_release`, `redislock_lock_free`,
/// `redislock_lock_forget` and this function on the same handle are refused
/// there (`REDISLOCK_INVALID_ARGUMENT`, or nothing for the functions without
/// a status) and leave the handle as it was: release or free it afterwards,
/// on its owner's thread. Other handles and clients may be used as usual.
///
/// Not called in a child process for a lock its parent holds.
#[no_mangle]
pub extern "C" fn redislock_lock_on_lost(
    lock: *mut redislock_lock,
    callback: redislock_lost_fn,
    userdata: *mut c_void,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let handle = out_ptr(lock, "lock")?;
            if handle.in_own_callback() {
                return Err(inside_callback("redislock_lock_on_lost"));
            }
            let slot = handle.lost.get_or_insert_with(Default::default).clone();
            let call = callback.map(|f| LostCall { f, userdata });
            let set = call.is_some();
            slot.set(call);
            if set {
                handle.lock.on_lost(move || slot.run());
            }
            Ok(())
        })())
    })
}

/// Release the lock if still held (best effort, errors ignored) and free the
/// handle. Takes ownership of `lock`; NULL is a no-op. In a child process
/// that inherited the handle, this only frees it. Its lost callback never
/// runs from here on. Called from inside the handle's own lost callback it
/// does nothing (the handle is left as it was).
#[no_mangle]
pub extern "C" fn redislock_lock_free(lock: *mut redislock_lock) {
    guard((), || {
        let Some(handle) = take_handle(lock, "redislock_lock_free") else {
            return;
        };
        handle.clear_callback();
        drop(handle);
    })
}

/// Free the handle without releasing the lock: it stays held on the server
/// until its TTL runs out or `redislock_release_token` releases it (the
/// request-id pattern). Background renewal stops, and the lost callback
/// never runs from here on. Takes ownership of `lock`; NULL is a no-op.
/// Called from inside the handle's own lost callback it does nothing.
#[no_mangle]
pub extern "C" fn redislock_lock_forget(lock: *mut redislock_lock) {
    guard((), || {
        let Some(handle) = take_handle(lock, "redislock_lock_forget") else {
            return;
        };
        handle.clear_callback();
        handle.lock.forget();
    })
}

/// The handle `lock` given back by a function that frees it without a
/// status (`what`); None for NULL, and for a call from inside the handle's
/// own lost callback (refused: a message is left for `redislock_last_error`).
fn take_handle(lock: *mut redislock_lock, what: &str) -> Option<Box<redislock_lock>> {
    let handle = non_null(lock, "lock").ok()?;
    if handle.in_own_callback() {
        set_last_error(&inside_callback(what).to_string());
        return None;
    }
    // SAFETY: made by Box::into_raw in redislock_acquire, given back once.
    Some(unsafe { Box::from_raw(lock) })
}

/// Copy the lock's token (binary, not NUL-terminated) into `buf`, at most
/// `cap` bytes, and return its full length: call with `cap` 0 to learn the
/// size. `lock`: borrowed; NULL gives 0. `buf`: borrowed, may be NULL when
/// `cap` is 0.
#[no_mangle]
pub extern "C" fn redislock_lock_token(
    lock: *const redislock_lock,
    buf: *mut u8,
    cap: usize,
) -> usize {
    guard(0, || {
        let Ok(l) = non_null(lock, "lock") else {
            return 0;
        };
        copy_out(l.lock.token(), buf, cap)
    })
}

/// The lock's fencing number: strictly greater than any number handed out
/// before for this lock name to an earlier holder, and below 2^53. It is
/// the server's clock in microseconds or more (about 1.8e15), so it also
/// grows across a restart that lost the counter: compare fences, do not
/// count them. Drawn on the first call, with a check that the lock is still
/// held (one round trip; later calls answer from memory; a lock taken with
/// `redislock_acquire_fenced` has it already). 0 when it cannot be had:
/// the lock expired or was taken over (it is then lost), the server could
/// not be reached, or `lock` is NULL; `redislock_last_error` says which.
/// `lock`: borrowed.
#[no_mangle]
pub extern "C" fn redislock_lock_fence(lock: *const redislock_lock) -> u64 {
    guard(0, || {
        match non_null(lock, "lock").and_then(|l| l.lock.fence()) {
            Ok(f) => f,
            Err(e) => {
                fail(e);
                0
            }
        }
    })
}

/// The lock's fencing number if one was drawn already (by a fenced
/// acquire, a hand-off, or `redislock_lock_fence`), else 0; never does I/O,
/// never sets the last error. A binding reads it before a release to keep
/// the fence for later reads. `lock`: borrowed; NULL gives 0.
#[no_mangle]
pub extern "C" fn redislock_lock_fence_if_drawn(lock: *const redislock_lock) -> u64 {
    guard(0, || {
        non_null(lock, "lock").map_or(0, |l| l.lock.fence_if_drawn().unwrap_or(0))
    })
}

/// The lock's fencing number into `out`, as `redislock_lock_fence` gives
/// it, with a status: `REDISLOCK_NOT_OWNER` when the lock expired or was
/// taken over before its fence was drawn (it is then lost),
/// `REDISLOCK_CONNECTION` and the others as for any call. `lock`:
/// borrowed; `out` untouched on failure.
#[no_mangle]
pub extern "C" fn redislock_lock_draw_fence(
    lock: *const redislock_lock,
    out: *mut u64,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let lock = non_null(lock, "lock")?;
            let out = out_ptr(out, "out")?;
            *out = lock.lock.fence()?;
            Ok(())
        })())
    })
}

/// Whether the lock (or the semaphore permits, or the read or write side)
/// is still held by this handle, asked of the server now (one round trip;
/// over Redlock, of a majority): `*out` is true or false. It does not mark
/// the handle lost. `lock`: borrowed; `out` untouched on failure.
#[no_mangle]
pub extern "C" fn redislock_lock_owned(
    lock: *const redislock_lock,
    out: *mut bool,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let lock = non_null(lock, "lock")?;
            let out = out_ptr(out, "out")?;
            *out = lock.lock.owned()?;
            Ok(())
        })())
    })
}
