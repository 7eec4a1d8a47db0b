//! The panic guard every exported function runs in: `guard` catches a
//! panic in the body and turns it into the function's value for failure
//! (`REDISLOCK_INTERNAL`, or NULL/0/false where a function has no status)
//! and a last-error message, so that no panic crosses into C.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::set_last_error;

pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        String::from("unknown panic")
    }
}

/// Run `body`; a panic becomes `on_panic` and a last-error message.
pub(crate) fn guard<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(p) => {
            set_last_error(&format!(
                "internal error in redislock (please report it): panic: {}",
                panic_message(p.as_ref())
            ));
            on_panic
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::{c_char, CStr};

    use super::*;
    use crate::error::redislock_last_error;
    use crate::error::redislock_status::{self, *};

    #[test]
    fn a_panic_becomes_internal_with_a_message() {
        let s = guard(REDISLOCK_INTERNAL, || -> redislock_status {
            panic!("boom")
        });
        assert_eq!(s, REDISLOCK_INTERNAL);
        let mut buf = [0 as c_char; 128];
        let n = redislock_last_error(buf.as_mut_ptr(), buf.len());
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(n, msg.len());
        assert!(msg.contains("panic: boom"), "{msg}");
    }
}
