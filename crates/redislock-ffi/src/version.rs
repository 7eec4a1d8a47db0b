//! `redislock_version`: the library's version, which a PHP package or a
//! Ruby gem compares with its own before it uses the library.

use std::ffi::c_char;

/// The library's version, a static NUL-terminated string such as "0.1.0".
#[no_mangle]
pub extern "C" fn redislock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
