//! The statuses every fallible C call returns and the message of the last
//! failure: `redislock_status` (the core's error kinds, value for value),
//! this thread's last-error buffer and the helpers that turn a core
//! `Result` into a status and a message (`fail`, `status`); and the two C
//! functions on them: `redislock_last_error` (this thread's message) and
//! `redislock_status_str` (a status in words).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};

use redislock::{Error, ErrorKind};

use crate::guard::guard;
use redislock_status::*;

/// The outcome of a call. Values are stable: new ones are only ever added
/// at the end.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redislock_status {
    /// Success.
    REDISLOCK_OK = 0,
    /// The lock is held by another owner and the wait ran out.
    REDISLOCK_NOT_ACQUIRED,
    /// Release or extend: the lock expired or was taken by another owner.
    REDISLOCK_NOT_OWNER,
    /// The server cannot be reached, an I/O error, or a timeout.
    REDISLOCK_CONNECTION,
    /// A bad argument (NULL, empty, out of range, malformed URL), rejected
    /// before any I/O.
    REDISLOCK_INVALID_ARGUMENT,
    /// The key exists and is not a lock; it was left untouched.
    REDISLOCK_WRONG_TYPE,
    /// Redlock: no majority of the servers could be reached.
    REDISLOCK_NO_QUORUM,
    /// The server answered with an error (authentication, permissions, ...).
    REDISLOCK_SERVER,
    /// A bug in redislock (a caught panic).
    REDISLOCK_INTERNAL,
    /// Release: the outcome is unknown. The connection broke after the
    /// release was sent, and when sent again the lock was no longer this
    /// owner's: most likely the first attempt released it. The handle is
    /// freed as with every release.
    REDISLOCK_UNCONFIRMED,
    /// An asynchronous acquisition was cancelled by
    /// `redislock_pending_cancel` (only its callback receives this).
    REDISLOCK_CANCELLED,
}

thread_local! {
    static LAST_ERROR: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn set_last_error(msg: &str) {
    LAST_ERROR.with(|e| {
        let mut e = e.borrow_mut();
        e.clear();
        // A NUL inside would cut the C string short: show it escaped.
        e.extend(
            msg.bytes()
                .flat_map(|b| if b == 0 { b"\\0".to_vec() } else { vec![b] }),
        );
    });
}

pub(crate) fn status_of(kind: ErrorKind) -> redislock_status {
    match kind {
        ErrorKind::NotAcquired => REDISLOCK_NOT_ACQUIRED,
        ErrorKind::NotOwner => REDISLOCK_NOT_OWNER,
        ErrorKind::Connection => REDISLOCK_CONNECTION,
        ErrorKind::InvalidArgument => REDISLOCK_INVALID_ARGUMENT,
        ErrorKind::WrongType => REDISLOCK_WRONG_TYPE,
        ErrorKind::NoQuorum => REDISLOCK_NO_QUORUM,
        ErrorKind::Server => REDISLOCK_SERVER,
        ErrorKind::Internal => REDISLOCK_INTERNAL,
        ErrorKind::Unconfirmed => REDISLOCK_UNCONFIRMED,
    }
}

/// Record `e` for `redislock_last_error` and return its status.
pub(crate) fn fail(e: Error) -> redislock_status {
    set_last_error(&e.to_string());
    status_of(e.kind())
}

pub(crate) fn status(r: Result<(), Error>) -> redislock_status {
    match r {
        Ok(()) => REDISLOCK_OK,
        Err(e) => fail(e),
    }
}

/// Copy the message of this thread's last failure into `buf` as a
/// NUL-terminated string (truncated to `cap - 1` bytes) and return the
/// message's full length without the NUL: a buffer of that length + 1
/// holds it whole. `buf` may be NULL when `cap` is 0. Returns 0 when no call
/// on this thread has failed yet.
#[no_mangle]
pub extern "C" fn redislock_last_error(buf: *mut c_char, cap: usize) -> usize {
    guard(0, || {
        LAST_ERROR.with(|e| {
            let e = e.borrow();
            if !buf.is_null() && cap > 0 {
                let n = e.len().min(cap - 1);
                // SAFETY: the caller promises `cap` writable bytes at `buf`.
                unsafe {
                    std::ptr::copy_nonoverlapping(e.as_ptr(), buf.cast::<u8>(), n);
                    *buf.add(n) = 0;
                }
            }
            e.len()
        })
    })
}

/// A static, NUL-terminated description of a status (never NULL; unknown
/// values give a description saying so). The argument is an `int` so that
/// any value, even one outside the enum, is safe to pass.
#[no_mangle]
pub extern "C" fn redislock_status_str(status: c_int) -> *const c_char {
    let s: &CStr = match status {
        0 => c"REDISLOCK_OK: success",
        1 => c"REDISLOCK_NOT_ACQUIRED: the lock is held by another owner and the wait ran out",
        2 => c"REDISLOCK_NOT_OWNER: the lock expired or was taken over by another owner",
        3 => c"REDISLOCK_CONNECTION: cannot reach the Redis server (I/O error or timeout)",
        4 => c"REDISLOCK_INVALID_ARGUMENT: a bad argument, rejected before any I/O",
        5 => c"REDISLOCK_WRONG_TYPE: the key exists and is not a lock (left untouched)",
        6 => c"REDISLOCK_NO_QUORUM: no majority of the Redlock servers could be reached",
        7 => c"REDISLOCK_SERVER: the Redis server answered with an error",
        8 => c"REDISLOCK_INTERNAL: an internal error in redislock (a bug)",
        9 => c"REDISLOCK_UNCONFIRMED: the release was sent but its outcome is unknown (the connection broke; most likely it took effect)",
        10 => c"REDISLOCK_CANCELLED: the asynchronous acquisition was cancelled",
        _ => c"unknown redislock status (not a value of redislock_status)",
    };
    s.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_status_value() {
        assert_eq!(
            status_of(ErrorKind::NotAcquired) as i32,
            ErrorKind::NotAcquired as i32
        );
        assert_eq!(
            status_of(ErrorKind::Internal) as i32,
            ErrorKind::Internal as i32
        );
        assert_eq!(status_of(ErrorKind::Server) as i32, 7);
        assert_eq!(status_of(ErrorKind::Unconfirmed) as i32, 9);
        for s in 0..=10 {
            let text = unsafe { CStr::from_ptr(redislock_status_str(s)) }
                .to_str()
                .unwrap();
            assert!(text.starts_with("REDISLOCK_"), "{text}");
        }
        let unknown = unsafe { CStr::from_ptr(redislock_status_str(99)) }
            .to_str()
            .unwrap();
        assert!(unknown.contains("unknown"));
    }
}
