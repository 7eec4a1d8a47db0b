//! The stable C ABI (`include/redislock.h`, generated from this file by
//! build.rs with cbindgen).
//!
//! Thin wrappers over the core and nothing more: every exported body runs
//! inside a panic guard (a panic becomes `REDISLOCK_INTERNAL`, or NULL/0/
//! false where a function has no status), pointers are checked by one helper,
//! outputs are written only on success, and every failure leaves a message
//! for `redislock_last_error` on the calling thread.

#![allow(non_camel_case_types)]
// These functions are called from C, where nothing can be marked `unsafe`:
// the pointer contracts are in each function's documentation instead.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use crate::{AcquireOptions, Client, Error, ErrorKind, Lock, Wait, MAX_KEY_LEN};

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
}

use redislock_status::*;

/// A connection pool and renewal thread for one Redis deployment.
///
/// Thread safety: one client may be used from many threads at once.
/// Lifetime: from `redislock_client_open` until `redislock_client_free`;
/// locks taken through it keep what they need alive, so a client may be
/// freed while its locks are still held. After `fork()` a child may keep
/// using the client: it opens its own connections.
pub struct redislock_client {
    client: Client,
}

/// A lock held by this process.
///
/// Thread safety: a lock handle may move between threads but must be used
/// by one thread at a time. Lifetime: from a successful `redislock_acquire`
/// until `redislock_release` or `redislock_lock_free`, exactly once. A handle
/// inherited by a child through `fork()` is inert there: releasing or
/// freeing it in the child frees the child's memory and leaves the parent's
/// lock held.
pub struct redislock_lock {
    lock: Lock,
}

thread_local! {
    static LAST_ERROR: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn set_last_error(msg: &str) {
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

fn status_of(kind: ErrorKind) -> redislock_status {
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
fn fail(e: Error) -> redislock_status {
    set_last_error(&e.to_string());
    status_of(e.kind())
}

fn status(r: Result<(), Error>) -> redislock_status {
    match r {
        Ok(()) => REDISLOCK_OK,
        Err(e) => fail(e),
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        String::from("unknown panic")
    }
}

/// Run `body`; a panic becomes `on_panic` and a last-error message.
fn guard<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
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

/// The one NULL check: `what` names the parameter in the message.
fn non_null<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Error> {
    // SAFETY: the caller promises that a non-NULL pointer is valid.
    unsafe { ptr.as_ref() }.ok_or_else(|| Error::InvalidArgument(format!("{what} is NULL")))
}

/// A (pointer, length) byte string; NULL only with length 0 when `optional`.
fn byte_str<'a>(
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

fn url_str<'a>(url: *const c_char, what: &str) -> Result<&'a str, Error> {
    let url = non_null(url, what)?;
    // SAFETY: non-NULL, and the caller promises a NUL-terminated string.
    unsafe { CStr::from_ptr(url) }
        .to_str()
        .map_err(|_| Error::InvalidArgument(format!("{what} is not valid UTF-8")))
}

fn out_ptr<'a, T>(out: *mut T, what: &str) -> Result<&'a mut T, Error> {
    // SAFETY: the caller promises that a non-NULL pointer is writable.
    unsafe { out.as_mut() }.ok_or_else(|| Error::InvalidArgument(format!("{what} is NULL")))
}

/// The `n` URLs at `urls`, checked.
fn url_list<'a>(urls: *const *const c_char, n: usize) -> Result<Vec<&'a str>, Error> {
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

/// The clients of `redislock_client_open_shared`, by their URL list: one
/// per list in a process, kept until it exits. A child made by `fork()`
/// inherits them and opens its own connections on first use, like any
/// client.
static SHARED: LazyLock<Mutex<HashMap<Vec<String>, Client>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The process's shared client for `urls`, made on first use.
fn shared(urls: &[&str]) -> Result<Client, Error> {
    let key: Vec<String> = urls.iter().map(|u| u.to_string()).collect();
    let mut map = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(client) = map.get(&key) {
        return Ok(client.clone());
    }
    let client = Client::redlock(urls).build()?;
    map.insert(key, client.clone());
    Ok(client)
}

/// The body of the `redislock_client_open*` functions: check `out`, make
/// the client, hand it over.
fn open_client(
    out: *mut *mut redislock_client,
    make: impl FnOnce() -> Result<Client, Error>,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let out = out_ptr(out, "out")?;
            let client = make()?;
            *out = Box::into_raw(Box::new(redislock_client { client }));
            Ok(())
        })())
    })
}

/// Open a client for one Redis server.
///
/// `url`: borrowed, NUL-terminated UTF-8: `redis://[user:password@]host:port[/db]`,
/// `rediss://...` (TLS), `unix:///path.sock[?db=N]`,
/// `redis+sentinel://[user:password@]host:port[,...]/service` or
/// `redis+cluster://[user:password@]host:port[,...]` (`rediss+` for TLS),
/// optionally with `?connect_timeout=2s&command_timeout=2s&tls_ca_file=/path.pem`
/// (and for Sentinel `sentinel_user`/`sentinel_password`; see the README).
/// `out`: on success receives a new client, owned by the caller, to be
/// freed with `redislock_client_free`; untouched on failure.
///
/// Validates the URL but does not connect: connection errors surface on
/// the first operation.
#[no_mangle]
pub extern "C" fn redislock_client_open(
    url: *const c_char,
    out: *mut *mut redislock_client,
) -> redislock_status {
    open_client(out, || Client::open(url_str(url, "url")?))
}

/// Open a client over `n` independent servers (Redlock).
///
/// `urls`: borrowed array of `n` NUL-terminated URLs, each as for
/// `redislock_client_open`. `out`: as for `redislock_client_open`. With
/// `n == 1` this is a single-server client. With more, a lock is held when a
/// majority (n/2+1) of the servers agreed within its validity; release and
/// extend go to every server; `REDISLOCK_NO_QUORUM` when no majority can be
/// reached. Fencing numbers are advisory under Redlock (the servers keep
/// separate counters).
#[no_mangle]
pub extern "C" fn redislock_client_open_redlock(
    urls: *const *const c_char,
    n: usize,
    out: *mut *mut redislock_client,
) -> redislock_status {
    open_client(out, || Client::redlock(url_list(urls, n)?).build())
}

/// The process's shared client for `url`: every call with the same URL
/// string returns a handle to the same connections, opened on first use and
/// kept open until the process exits (what a php-fpm worker needs to keep
/// its connections from one request to the next). `url` and `out` as for
/// `redislock_client_open`. Free each handle with `redislock_client_free`:
/// that frees the handle, not the shared connections. After `fork()` the
/// child's shared client opens its own connections.
#[no_mangle]
pub extern "C" fn redislock_client_open_shared(
    url: *const c_char,
    out: *mut *mut redislock_client,
) -> redislock_status {
    open_client(out, || shared(&[url_str(url, "url")?]))
}

/// `redislock_client_open_shared` over `n` independent servers (Redlock):
/// one shared client per list of URLs (the same URLs in the same order).
#[no_mangle]
pub extern "C" fn redislock_client_open_redlock_shared(
    urls: *const *const c_char,
    n: usize,
    out: *mut *mut redislock_client,
) -> redislock_status {
    open_client(out, || shared(&url_list(urls, n)?))
}

/// Free a client. Takes ownership of `client`; NULL is a no-op. Locks
/// still held through it stay valid.
#[no_mangle]
pub extern "C" fn redislock_client_free(client: *mut redislock_client) {
    guard((), || {
        if !client.is_null() {
            // SAFETY: made by Box::into_raw in redislock_client_open, freed once.
            drop(unsafe { Box::from_raw(client) });
        }
    })
}

/// Take the lock `key`.
///
/// `client`: borrowed. `key`/`key_len`: borrowed bytes (NUL and non-UTF-8
/// bytes allowed), not empty. `ttl_ms`: how long the lock lives unless
/// extended, 1 ms to 30 days. `wait_ms`: 0 = try once, > 0 = wait at most
/// this long, < 0 = wait forever (for the lock; a dead server still fails).
/// `token`/`token_len`: borrowed caller token, or NULL and 0 for 128 random
/// bits. `out`: on success receives a new lock handle owned by the caller
/// (give it back with `redislock_release` or `redislock_lock_free`);
/// untouched on failure.
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
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let client = non_null(client, "client")?;
            let out = out_ptr(out, "out")?;
            let key = byte_str(key, key_len, "key", false)?.unwrap_or_default();
            let token = byte_str(token, token_len, "token", true)?;
            let wait = match wait_ms {
                0 => Wait::TryOnce,
                ms if ms > 0 => Wait::Timeout(Duration::from_millis(ms as u64)),
                _ => Wait::Forever,
            };
            let mut opts = AcquireOptions::new(Duration::from_millis(ttl_ms)).wait(wait);
            if let Some(t) = token {
                opts = opts.token(t);
            }
            let lock = client.client.acquire_with(key, opts)?;
            *out = Box::into_raw(Box::new(redislock_lock { lock }));
            Ok(())
        })())
    })
}

/// Release the lock and free the handle. Takes ownership of `lock`, which
/// is freed whatever the outcome. Returns `REDISLOCK_NOT_OWNER` when the
/// lock expired or was taken over (the new holder's key is left alone). In
/// a child process that inherited the handle, this only frees it.
#[no_mangle]
pub extern "C" fn redislock_release(lock: *mut redislock_lock) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        if lock.is_null() {
            return fail(Error::InvalidArgument("lock is NULL".into()));
        }
        // SAFETY: made by Box::into_raw in redislock_acquire, given back once.
        let lock = unsafe { Box::from_raw(lock) };
        status(lock.lock.release())
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

/// Release the lock if still held (best effort, errors ignored) and free the
/// handle. Takes ownership of `lock`; NULL is a no-op. In a child process
/// that inherited the handle, this only frees it.
#[no_mangle]
pub extern "C" fn redislock_lock_free(lock: *mut redislock_lock) {
    guard((), || {
        if !lock.is_null() {
            // SAFETY: made by Box::into_raw in redislock_acquire, given back once.
            drop(unsafe { Box::from_raw(lock) });
        }
    })
}

/// Free the handle without releasing the lock: it stays held on the server
/// until its TTL runs out or `redislock_release_token` releases it (the
/// request-id pattern). Background renewal stops. Takes ownership of
/// `lock`; NULL is a no-op.
#[no_mangle]
pub extern "C" fn redislock_lock_forget(lock: *mut redislock_lock) {
    guard((), || {
        if !lock.is_null() {
            // SAFETY: made by Box::into_raw in redislock_acquire, given back once.
            unsafe { Box::from_raw(lock) }.lock.forget();
        }
    })
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
        let token = l.lock.token();
        if !buf.is_null() && cap > 0 {
            let n = token.len().min(cap);
            // SAFETY: the caller promises `cap` writable bytes at `buf`.
            unsafe { std::ptr::copy_nonoverlapping(token.as_ptr(), buf, n) };
        }
        token.len()
    })
}

/// The lock's fencing number: strictly greater than any number handed out
/// before for this lock name, and below 2^53. It is the server's clock in
/// microseconds or more (about 1.8e15), so it also grows across a restart
/// that lost the counter: compare fences, do not count them. `lock`:
/// borrowed; NULL gives 0.
#[no_mangle]
pub extern "C" fn redislock_lock_fence(lock: *const redislock_lock) -> u64 {
    guard(0, || {
        non_null(lock, "lock").map(|l| l.lock.fence()).unwrap_or(0)
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
                    key: crate::error::show_key(key),
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

/// True the first time this process calls it with `tag`, false after (for
/// bindings that log a hint once per process, such as a php-fpm worker
/// loading the declarations in every request). `tag`: borrowed bytes.
#[no_mangle]
pub extern "C" fn redislock_first_time(tag: *const u8, tag_len: usize) -> bool {
    static SEEN: LazyLock<Mutex<HashSet<Vec<u8>>>> = LazyLock::new(Default::default);
    guard(false, || {
        let Ok(Some(tag)) = byte_str(tag, tag_len, "tag", false) else {
            return false;
        };
        SEEN.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tag.to_vec())
    })
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
        _ => c"unknown redislock status (not a value of redislock_status)",
    };
    s.as_ptr()
}

/// The library's version, a static NUL-terminated string such as "0.1.0".
#[no_mangle]
pub extern "C" fn redislock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for s in 0..=9 {
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
