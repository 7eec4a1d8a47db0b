//! The checks of what C passes in and the copy of what it gets back: the
//! one NULL check (`non_null`, `out_ptr`), byte strings with a length
//! (`byte_str`, at most `MAX_KEY_LEN` bytes, checked before anything is
//! read), NUL-terminated URLs and URL lists, each failure an
//! `Error::InvalidArgument` naming the parameter; and `copy_out`, the
//! size-query convention of every call that hands out bytes.

use std::ffi::{c_char, CStr};

use redislock::{Error, MAX_KEY_LEN};

/// The one NULL check: `what` names the parameter in the message.
pub(crate) fn non_null<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Error> {
    // SAFETY: the caller promises that a non-NULL pointer is valid.
    unsafe { ptr.as_ref() }.ok_or_else(|| Error::InvalidArgument(format!("{what} is NULL")))
}

/// A (pointer, length) byte string; NULL only with length 0 when `optional`.
pub(crate) fn byte_str<'a>(
    ptr: *const u8,
    len: usize,
    what: &str,
    optional: bool,
) -> Result<Option<&'a [u8]>, Error> {
    if ptr.is_null() {
        return if len == 0 && optional {
            Ok(None)
        } else if len == 0 {
            Err(Error::InvalidArgument(format!("{what} is NULL")))
        } else {
            Err(Error::InvalidArgument(format!(
                "{what} is NULL but its length is {len}"
            )))
        };
    }
    if len > MAX_KEY_LEN {
        // Checked before the slice is made: the length may be garbage.
        return Err(Error::InvalidArgument(format!(
            "{what} is {len} bytes long; at most {MAX_KEY_LEN} are accepted"
        )));
    }
    // SAFETY: non-NULL, and the caller promises `len` readable bytes.
    Ok(Some(unsafe { std::slice::from_raw_parts(ptr, len) }))
}

pub(crate) fn url_str<'a>(url: *const c_char, what: &str) -> Result<&'a str, Error> {
    let url = non_null(url, what)?;
    // SAFETY: non-NULL, and the caller promises a NUL-terminated string.
    unsafe { CStr::from_ptr(url) }
        .to_str()
        .map_err(|_| Error::InvalidArgument(format!("{what} is not valid UTF-8")))
}

pub(crate) fn out_ptr<'a, T>(out: *mut T, what: &str) -> Result<&'a mut T, Error> {
    // SAFETY: the caller promises that a non-NULL pointer is writable.
    unsafe { out.as_mut() }.ok_or_else(|| Error::InvalidArgument(format!("{what} is NULL")))
}

/// The `n` URLs at `urls`, checked.
pub(crate) fn url_list<'a>(urls: *const *const c_char, n: usize) -> Result<Vec<&'a str>, Error> {
    non_null(urls, "urls")?;
    if n == 0 {
        return Err(Error::InvalidArgument(
            "n is 0: give at least one URL".into(),
        ));
    }
    if n > 1024 {
        return Err(Error::InvalidArgument(format!(
            "n is {n}: at most 1024 servers"
        )));
    }
    // SAFETY: non-NULL with `n` elements, as the caller promises.
    let ptrs = unsafe { std::slice::from_raw_parts(urls, n) };
    ptrs.iter()
        .enumerate()
        .map(|(i, &u)| url_str(u, &format!("urls[{i}]")))
        .collect()
}

/// Copy `bytes` into `buf`, at most `cap` of them (none when `buf` is NULL
/// or `cap` 0), and return their full length: the size-query convention of
/// every call that hands out bytes.
pub(crate) fn copy_out(bytes: &[u8], buf: *mut u8, cap: usize) -> usize {
    if !buf.is_null() && cap > 0 {
        let n = bytes.len().min(cap);
        // SAFETY: the caller promises `cap` writable bytes at `buf`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, n) };
    }
    bytes.len()
}
