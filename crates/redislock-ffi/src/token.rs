//! The calls that need no lock handle: those by key and token (the
//! request-id pattern: `redislock_fence_token`, `redislock_release_token`,
//! `redislock_extend_token`, `redislock_is_owned_by`) and the operator's
//! `redislock_force_release`; and, between them in the header, whose order
//! follows this file's, the two that show a URL or a client for a log line
//! without its password (`redislock_redact_url`, `redislock_client_addr`).

use std::ffi::c_char;
use std::time::Duration;

use redislock::{Client, Error};

use crate::args::{byte_str, copy_out, non_null, out_ptr};
use crate::client::redislock_client;
use crate::error::redislock_status::{self, *};
use crate::error::status;
use crate::guard::guard;

/// The fencing number of the lock `key` held with `token`, into `out` (no
/// handle needed, as for `redislock_release_token`): the one already drawn
/// for this holder, or one drawn now with a check that `token` holds the
/// lock. All pointers borrowed. Returns `REDISLOCK_NOT_OWNER` when it does
/// not hold it; `out` is untouched on failure.
#[no_mangle]
pub extern "C" fn redislock_fence_token(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    token: *const u8,
    token_len: usize,
    out: *mut u64,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let (client, key, token) = by_token((client, key, key_len, token, token_len))?;
            let out = out_ptr(out, "out")?;
            match client.fence_token(key, token)? {
                Some(f) => {
                    *out = f;
                    Ok(())
                }
                None => Err(Error::NotOwner {
                    key: redislock::__private::show_key(key),
                }),
            }
        })())
    })
}

/// The arguments of a call by token: client, key and its length, token
/// and its length.
type TokenArgs = (*const redislock_client, *const u8, usize, *const u8, usize);

/// The checked client, key and token of a call by token.
fn by_token<'a>(
    (client, key, key_len, token, token_len): TokenArgs,
) -> Result<(&'a Client, &'a [u8], &'a [u8]), Error> {
    let client = &non_null(client, "client")?.client;
    let key = byte_str(key, key_len, "key", false)?.unwrap_or_default();
    let token = byte_str(token, token_len, "token", false)?.unwrap_or_default();
    Ok((client, key, token))
}

/// A call by token that says whether `token` held the lock: false is
/// `REDISLOCK_NOT_OWNER`.
fn owner_call(
    args: TokenArgs,
    op: impl FnOnce(&Client, &[u8], &[u8]) -> Result<bool, Error>,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let (client, key, token) = by_token(args)?;
            if op(client, key, token)? {
                Ok(())
            } else {
                Err(Error::NotOwner {
                    key: redislock::__private::show_key(key),
                })
            }
        })())
    })
}

/// Release the lock `key` if it holds `token` (the request-id pattern, no
/// handle needed). All pointers borrowed. Returns `REDISLOCK_NOT_OWNER`
/// when it does not (expired, or another owner); nothing is changed then.
#[no_mangle]
pub extern "C" fn redislock_release_token(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    token: *const u8,
    token_len: usize,
) -> redislock_status {
    owner_call((client, key, key_len, token, token_len), |c, k, t| {
        c.release_token(k, t)
    })
}

/// Take the lock `key` from whoever holds it (an operator's unlock: the one
/// path that removes a lock without its token) and hand it to the oldest
/// live waiter at once, as a release would; the fence counter is left
/// alone, so later fences stay above the broken holder's. Only the plain
/// lock `key`, never a semaphore or read-write lock of that name.
/// `removed`, when not NULL, receives whether a holder was removed (false:
/// nobody held it). `REDISLOCK_WRONG_TYPE` for a key of another type, which
/// is left alone. All pointers borrowed.
#[no_mangle]
pub extern "C" fn redislock_force_release(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    removed: *mut bool,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let client = &non_null(client, "client")?.client;
            let key = byte_str(key, key_len, "key", false)?.unwrap_or_default();
            let was = client.force_release(key)?;
            if !removed.is_null() {
                // SAFETY: the caller promises a writable bool when not NULL.
                unsafe { *removed = was };
            }
            Ok(())
        })())
    })
}

/// Copy `url` with its password replaced by `***` (the user info's
/// password, and every query parameter whose name holds `pass`) into `buf`
/// as UTF-8 (not NUL-terminated), at most `cap` bytes, and return its full
/// length: call with `cap` 0 to learn the size. What a binding shows of a
/// URL (a `var_dump`, a log line), the same rule in every language. `url`:
/// NUL-terminated, borrowed; NULL gives 0.
#[no_mangle]
pub extern "C" fn redislock_redact_url(url: *const c_char, buf: *mut c_char, cap: usize) -> usize {
    guard(0, || {
        if url.is_null() {
            return 0;
        }
        // SAFETY: the caller promises a NUL-terminated string when not NULL.
        let url = unsafe { std::ffi::CStr::from_ptr(url) }.to_string_lossy();
        copy_out(
            redislock::redact_url(&url).as_bytes(),
            buf.cast::<u8>(),
            cap,
        )
    })
}

/// Copy where the client connects (host:port of each server, for a log
/// line; never a user name or password) into `buf` as UTF-8 (not
/// NUL-terminated), at most `cap` bytes, and return its full length: call
/// with `cap` 0 to learn the size. `client`: borrowed; NULL gives 0.
#[no_mangle]
pub extern "C" fn redislock_client_addr(
    client: *const redislock_client,
    buf: *mut c_char,
    cap: usize,
) -> usize {
    guard(0, || {
        let Ok(c) = non_null(client, "client") else {
            return 0;
        };
        copy_out(c.client.addr().as_bytes(), buf.cast::<u8>(), cap)
    })
}

/// Set the remaining time of the lock `key` to `ttl_ms` if it holds `token`
/// (no handle needed). All pointers borrowed. Returns `REDISLOCK_NOT_OWNER`
/// when it does not (expired, or another owner): an expired lock is never
/// re-created.
#[no_mangle]
pub extern "C" fn redislock_extend_token(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    token: *const u8,
    token_len: usize,
    ttl_ms: u64,
) -> redislock_status {
    owner_call((client, key, key_len, token, token_len), |c, k, t| {
        c.extend_token(k, t, Duration::from_millis(ttl_ms))
    })
}

/// Whether the lock `key` holds `token` right now (one round trip). All
/// pointers borrowed; `out` receives the answer on success.
#[no_mangle]
pub extern "C" fn redislock_is_owned_by(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    token: *const u8,
    token_len: usize,
    out: *mut bool,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let out = out_ptr(out, "out")?;
            let (client, key, token) = by_token((client, key, key_len, token, token_len))?;
            *out = client.is_owned_by(key, token)?;
            Ok(())
        })())
    })
}
