//! The blocking acquisitions, which return once the wait ended: the lock
//! (`redislock_acquire`, with a caller's token or none, and
//! `redislock_acquire_fenced`), the counting semaphore
//! (`redislock_acquire_semaphore`) and the two sides of a read-write lock
//! (`redislock_acquire_read`, `redislock_acquire_write`). Each checks its
//! arguments, waits as `wait_ms` says, under this thread's interrupt check
//! (`interrupt.rs`), and hands out a lock handle (`lock.rs`).

use std::time::Duration;

use redislock::{AcquireOptions, Client, Error, Lock, Wait};

use crate::args::{byte_str, non_null};
use crate::client::redislock_client;
use crate::error::redislock_status::{self, *};
use crate::error::status;
use crate::guard::guard;
use crate::interrupt::with_interrupt;
use crate::lock::redislock_lock;

/// Take the lock `key`.
///
/// `client`: borrowed. `key`/`key_len`: borrowed bytes (NUL and non-UTF-8
/// bytes allowed), not empty. `ttl_ms`: how long the lock lives unless
/// extended, 1 ms to 30 days. `wait_ms`: 0 = try once, > 0 = wait at most
/// this long, < 0 = wait forever (for the lock; a dead server still fails).
/// `token`/`token_len`: borrowed caller token, or NULL and 0 for 128 random
/// bits. `out`: on success receives a new lock handle owned by the caller
/// (give it back with `redislock_release` or `redislock_lock_free`);
/// untouched on failure. With a caller token, `out` may be NULL: no handle
/// is made (nothing renews the lock, and `redislock_release_token` or the
/// TTL ends it), as with `redislock_lock_forget` right after the acquire.
///
/// Returns `REDISLOCK_NOT_ACQUIRED` when the wait ran out and
/// `REDISLOCK_WRONG_TYPE` when the key holds something else (untouched).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn redislock_acquire(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    ttl_ms: u64,
    wait_ms: i64,
    token: *const u8,
    token_len: usize,
    out: *mut *mut redislock_lock,
) -> redislock_status {
    let args = (client, key, key_len, ttl_ms, wait_ms, token, token_len);
    acquire(args, false, out)
}

/// `redislock_acquire`, drawing the fencing number in the acquire itself:
/// `redislock_lock_fence` then answers from memory. Use it when every
/// holder passes its fence on (the plain acquire draws it on the first
/// `redislock_lock_fence`, one more round trip). Same arguments and
/// returns as `redislock_acquire`; a fence counter of another type is
/// `REDISLOCK_WRONG_TYPE`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn redislock_acquire_fenced(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    ttl_ms: u64,
    wait_ms: i64,
    token: *const u8,
    token_len: usize,
    out: *mut *mut redislock_lock,
) -> redislock_status {
    let args = (client, key, key_len, ttl_ms, wait_ms, token, token_len);
    acquire(args, true, out)
}

/// Take `permits` of the counting semaphore `key`, which admits `limit`
/// permits in all (this call's limit, 1 to 1,000,000; `permits` 1 to
/// `limit`). Holders are served in arrival order with no barging; each has
/// its own lease of `ttl_ms`, token and fence, and its handle is a lock
/// handle like any other (release, extend, renew, fence, token). `key`,
/// `ttl_ms`, `wait_ms` and `out` (not NULL) as for `redislock_acquire`. A
/// semaphore never collides with the lock of the same name. Over Redlock a
/// holder needs floor(N*L/(L+1))+1 of the N nodes for a limit L > 1 (all of
/// them once L >= N-1), a majority for L = 1; waiters retry there.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn redislock_acquire_semaphore(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    limit: u32,
    permits: u32,
    ttl_ms: u64,
    wait_ms: i64,
    out: *mut *mut redislock_lock,
) -> redislock_status {
    acquire_shared((client, key, key_len, ttl_ms, wait_ms), out, |c, k, o| {
        c.acquire_semaphore(k, limit, permits, o)
    })
}

/// Take the read-write lock `key` shared: any number of readers hold it at
/// once while no writer holds it or waits for it (a queued writer stops new
/// readers). Arguments as for `redislock_acquire_semaphore`.
#[no_mangle]
pub extern "C" fn redislock_acquire_read(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    ttl_ms: u64,
    wait_ms: i64,
    out: *mut *mut redislock_lock,
) -> redislock_status {
    acquire_shared((client, key, key_len, ttl_ms, wait_ms), out, |c, k, o| {
        c.acquire_read(k, o)
    })
}

/// Take the read-write lock `key` exclusively: once nobody holds it and
/// nobody queued earlier waits. Arguments as for `redislock_acquire_read`.
#[no_mangle]
pub extern "C" fn redislock_acquire_write(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    ttl_ms: u64,
    wait_ms: i64,
    out: *mut *mut redislock_lock,
) -> redislock_status {
    acquire_shared((client, key, key_len, ttl_ms, wait_ms), out, |c, k, o| {
        c.acquire_write(k, o)
    })
}

/// The acquires of semaphores and read-write locks: the checks, the wait,
/// then `take` makes the handle.
fn acquire_shared(
    (client, key, key_len, ttl_ms, wait_ms): (*const redislock_client, *const u8, usize, u64, i64),
    out: *mut *mut redislock_lock,
    take: impl FnOnce(&Client, &[u8], AcquireOptions) -> Result<Lock, Error>,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let client = non_null(client, "client")?;
            let key = byte_str(key, key_len, "key", false)?.unwrap_or_default();
            if out.is_null() {
                return Err(Error::InvalidArgument(
                    "out is NULL: nobody could release what it takes".into(),
                ));
            }
            let opts = with_interrupt(
                AcquireOptions::new(Duration::from_millis(ttl_ms)).wait(wait_of(wait_ms)),
            );
            let lock = take(&client.client, key, opts)?;
            // SAFETY: not NULL (above); the caller promises it is writable.
            unsafe { *out = Box::into_raw(Box::new(redislock_lock::new(lock))) };
            Ok(())
        })())
    })
}

/// `wait_ms` in words: 0 = try once, > 0 = at most this long, < 0 = forever.
pub(crate) fn wait_of(wait_ms: i64) -> Wait {
    match wait_ms {
        0 => Wait::TryOnce,
        ms if ms > 0 => Wait::Timeout(Duration::from_millis(ms as u64)),
        _ => Wait::Forever,
    }
}

/// The arguments of an acquire: client, key and its length, TTL, wait,
/// token and its length.
type AcquireArgs = (
    *const redislock_client,
    *const u8,
    usize,
    u64,
    i64,
    *const u8,
    usize,
);

fn acquire(
    (client, key, key_len, ttl_ms, wait_ms, token, token_len): AcquireArgs,
    fenced: bool,
    out: *mut *mut redislock_lock,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let client = non_null(client, "client")?;
            let key = byte_str(key, key_len, "key", false)?.unwrap_or_default();
            let token = byte_str(token, token_len, "token", true)?;
            if out.is_null() && token.is_none() {
                return Err(Error::InvalidArgument(
                    "out is NULL without a token: nobody could release the lock".into(),
                ));
            }
            let mut opts = with_interrupt(
                AcquireOptions::new(Duration::from_millis(ttl_ms))
                    .wait(wait_of(wait_ms))
                    .fenced(fenced),
            );
            if let Some(t) = token {
                opts = opts.token(t);
            }
            if out.is_null() {
                redislock::__private::acquire_without_handle(&client.client, key, &opts)?;
                return Ok(());
            }
            let lock = client.client.acquire_with(key, opts)?;
            // SAFETY: not NULL (above); the caller promises it is writable.
            unsafe { *out = Box::into_raw(Box::new(redislock_lock::new(lock))) };
            Ok(())
        })())
    })
}
