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

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use redislock::{
    AcquireOptions, Client, Error, ErrorKind, Histogram, Interrupt, Lock, Stats, Wait, MAX_KEY_LEN,
};

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

use redislock_status::*;

// Acquisitions that call back instead of blocking (redislock_acquire_start...).
mod pending;
pub use pending::*;

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
    /// The callback of `redislock_lock_on_lost`, once one was set.
    lost: Option<Arc<LostSlot>>,
}

impl redislock_lock {
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
    let mut map = redislock::__private::locked(&SHARED);
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
/// (and for Sentinel `sentinel_user`/`sentinel_password`; see
/// `docs/deployments.md`).
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
/// reached. Under Redlock the fence of a fenced acquisition
/// (`redislock_acquire_fenced`) rises above every earlier holder's (a
/// majority's counters are raised to it first); an unfenced acquisition's
/// is advisory (the servers keep separate counters).
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
fn with_interrupt(opts: AcquireOptions) -> AcquireOptions {
    match INTERRUPT.with(Cell::get) {
        Some(call) => opts.interrupt(Interrupt::new(move || call.stop())),
        None => opts,
    }
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
            unsafe { *out = Box::into_raw(Box::new(redislock_lock { lock, lost: None })) };
            Ok(())
        })())
    })
}

/// `wait_ms` in words: 0 = try once, > 0 = at most this long, < 0 = forever.
fn wait_of(wait_ms: i64) -> Wait {
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
            unsafe { *out = Box::into_raw(Box::new(redislock_lock { lock, lost: None })) };
            Ok(())
        })())
    })
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

/// Copy `bytes` into `buf`, at most `cap` of them (none when `buf` is NULL
/// or `cap` 0), and return their full length: the size-query convention of
/// every call that hands out bytes.
fn copy_out(bytes: &[u8], buf: *mut u8, cap: usize) -> usize {
    if !buf.is_null() && cap > 0 {
        let n = bytes.len().min(cap);
        // SAFETY: the caller promises `cap` writable bytes at `buf`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, n) };
    }
    bytes.len()
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

/// How many buckets each histogram of `redislock_stats` has: one per bound
/// of `redislock_stats_bucket_bound_us`, and a last one for longer times.
pub const REDISLOCK_STATS_BUCKETS: usize = 23;

const _: () = assert!(REDISLOCK_STATS_BUCKETS == redislock::BUCKETS);

/// A distribution of durations, in microseconds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct redislock_histogram {
    /// How many durations were recorded (the sum of `buckets`).
    pub count: u64,
    /// Their sum.
    pub sum_us: u64,
    /// The longest.
    pub max_us: u64,
    /// The median, estimated within its bucket (as Prometheus's
    /// `histogram_quantile`) and never above `max_us`; 0 when `count` is 0.
    pub p50_us: u64,
    /// The 90th percentile, estimated as `p50_us`.
    pub p90_us: u64,
    /// The 99th percentile, estimated as `p50_us`.
    pub p99_us: u64,
    /// How many durations fell in each bucket (not cumulative): bucket `i`
    /// holds those above the bound of bucket `i - 1` and up to
    /// `redislock_stats_bucket_bound_us(i)`; the last one, those above one
    /// hour.
    pub buckets: [u64; REDISLOCK_STATS_BUCKETS],
}

/// What one client did since it was opened (or since `fork()`, in the
/// child), from `redislock_client_stats`. Handles of one shared client
/// (`redislock_client_open_shared`) share these figures.
///
/// Growth rule: fields are only ever appended, never moved or removed. A
/// program sets `size` to `sizeof(struct redislock_stats)` as it was
/// compiled, and the library fills that many bytes at most: a program built
/// against this header keeps working with later libraries, and a newer
/// program learns from `size` how much an older library filled.
///
/// Every figure is exact on its own; two of them may be a few events apart
/// when other threads use the client meanwhile.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct redislock_stats {
    /// In: the bytes the caller's struct holds. Out: the bytes filled.
    pub size: u32,
    /// Zero.
    pub reserved: u32,
    /// Acquisitions that found the lock free on their first try.
    pub acquired_at_once: u64,
    /// Acquisitions that waited and then took the lock by a retry (after an
    /// expiry, or a release by a client that does not hand over).
    pub acquired_after_wait: u64,
    /// Acquisitions that waited and were handed the lock by its releaser.
    pub acquired_handed_over: u64,
    /// Acquisitions that did not get the lock: the wait ran out, or a
    /// try-once found it held (`REDISLOCK_NOT_ACQUIRED`).
    pub acquire_timed_out: u64,
    /// Acquisitions that failed with another error (connection, quorum,
    /// server, wrong type); invalid arguments are not counted.
    pub acquire_errors: u64,
    /// Releases (by handle or by token) that released or handed over.
    pub releases_ok: u64,
    /// Releases that found the lock no longer theirs.
    pub releases_not_owner: u64,
    /// Extends by the caller (by handle or by token) that succeeded.
    pub extends_ok: u64,
    /// Extends by the caller that found the lock gone.
    pub extends_lost: u64,
    /// Background renewals that succeeded.
    pub renewals_ok: u64,
    /// Locks that background renewal found gone (or could not reach the
    /// server before their TTL ran out).
    pub renewals_lost: u64,
    /// Held locks found lost, by renewal, extend or release of the handle:
    /// each is counted once.
    pub locks_lost: u64,
    /// Releases that handed the lock straight to a waiter.
    pub handoffs_given: u64,
    /// Locks this client's waiters were handed.
    pub handoffs_received: u64,
    /// Connections that could not be opened, broke, or timed out.
    pub connection_errors: u64,
    /// Connections opened again in place of one that broke.
    pub reconnects: u64,
    /// Lock handles held right now.
    pub held_now: u64,
    /// Acquisitions waiting right now for a lock held by someone else.
    pub waiters_now: u64,
    /// How long each acquisition took, whatever its outcome.
    pub wait: redislock_histogram,
    /// How long each lock handle was held: from acquire to release, free,
    /// or until it was found lost.
    pub held: redislock_histogram,
    /// Acquisitions that took a plain lock (each acquisition counted in
    /// `acquired_at_once`, `acquired_after_wait` or `acquired_handed_over`
    /// is also counted in one of the four by kind).
    pub acquired_locks: u64,
    /// Acquisitions that took permits of a counting semaphore.
    pub acquired_semaphores: u64,
    /// Acquisitions that took the read side of a read-write lock.
    pub acquired_reads: u64,
    /// Acquisitions that took the write side of a read-write lock.
    pub acquired_writes: u64,
    /// Semaphore permits held right now (a handle of k permits counts k).
    pub permits_held_now: u64,
}

/// The bytes of `redislock_stats` up to and including `waiters_now`, its
/// first version: the least a caller may ask for.
const STATS_MIN_SIZE: usize = std::mem::offset_of!(redislock_stats, waiters_now) + 8;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn c_histogram(h: &Histogram) -> redislock_histogram {
    redislock_histogram {
        count: h.count,
        sum_us: micros(h.sum),
        max_us: micros(h.max),
        p50_us: micros(h.p50()),
        p90_us: micros(h.p90()),
        p99_us: micros(h.p99()),
        buckets: h.buckets,
    }
}

fn c_stats(s: &Stats) -> redislock_stats {
    redislock_stats {
        size: std::mem::size_of::<redislock_stats>() as u32,
        reserved: 0,
        acquired_at_once: s.acquired_at_once,
        acquired_after_wait: s.acquired_after_wait,
        acquired_handed_over: s.acquired_handed_over,
        acquire_timed_out: s.acquire_timed_out,
        acquire_errors: s.acquire_errors,
        releases_ok: s.releases_ok,
        releases_not_owner: s.releases_not_owner,
        extends_ok: s.extends_ok,
        extends_lost: s.extends_lost,
        renewals_ok: s.renewals_ok,
        renewals_lost: s.renewals_lost,
        locks_lost: s.locks_lost,
        handoffs_given: s.handoffs_given,
        handoffs_received: s.handoffs_received,
        connection_errors: s.connection_errors,
        reconnects: s.reconnects,
        held_now: s.held_now,
        waiters_now: s.waiters_now,
        wait: c_histogram(&s.wait),
        held: c_histogram(&s.held),
        acquired_locks: s.acquired_locks,
        acquired_semaphores: s.acquired_semaphores,
        acquired_reads: s.acquired_reads,
        acquired_writes: s.acquired_writes,
        permits_held_now: s.permits_held_now,
    }
}

/// Read the client's statistics.
///
/// `client`: borrowed. `out`: borrowed; the caller sets `out->size` to
/// `sizeof(struct redislock_stats)` first. The library then writes at most
/// `out->size` bytes (whole fields only) and sets `out->size` to the number
/// of bytes it filled: the whole struct as this library knows it, or the
/// caller's shorter struct (see the growth rule at `redislock_stats`).
/// Reading costs a few dozen atomic loads and no I/O.
///
/// Returns `REDISLOCK_INVALID_ARGUMENT`, and writes nothing, when a pointer
/// is NULL or `out->size` is smaller than the first version of the struct
/// (up to and including `waiters_now`).
#[no_mangle]
pub extern "C" fn redislock_client_stats(
    client: *const redislock_client,
    out: *mut redislock_stats,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let client = non_null(client, "client")?;
            if out.is_null() {
                return Err(Error::InvalidArgument("out is NULL".into()));
            }
            // Only `size` is read through `out`: the caller's struct may be
            // shorter than this one.
            // SAFETY: non-NULL, and the caller promises a readable `size`.
            let size = unsafe { std::ptr::addr_of!((*out).size).read_unaligned() } as usize;
            if size < STATS_MIN_SIZE {
                return Err(Error::InvalidArgument(format!(
                    "out->size is {size}: set it to sizeof(struct redislock_stats) before the call \
                     (at least {STATS_MIN_SIZE} bytes)"
                )));
            }
            let mut stats = c_stats(&client.client.stats());
            // Every field after the first two is 8 bytes long, as they are.
            let filled = size.min(std::mem::size_of::<redislock_stats>()) / 8 * 8;
            stats.size = filled as u32;
            // SAFETY: the caller promises `size` writable bytes at `out`,
            // and `filled` is at most that and at most our struct's size.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (&raw const stats).cast::<u8>(),
                    out.cast::<u8>(),
                    filled,
                )
            };
            Ok(())
        })())
    })
}

/// The upper bound, in microseconds, of bucket `i` of a
/// `redislock_histogram` (50 for bucket 0 up to 3,600,000,000, one hour, for bucket
/// `REDISLOCK_STATS_BUCKETS - 2`), and `UINT64_MAX` for the last bucket,
/// which has none, and beyond.
#[no_mangle]
pub extern "C" fn redislock_stats_bucket_bound_us(i: usize) -> u64 {
    guard(u64::MAX, || {
        redislock::BUCKET_BOUNDS
            .get(i)
            .map_or(u64::MAX, |&bound| micros(bound))
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
        redislock::__private::locked(&SEEN).insert(tag.to_vec())
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
        10 => c"REDISLOCK_CANCELLED: the asynchronous acquisition was cancelled",
        _ => c"unknown redislock status (not a value of redislock_status)",
    };
    s.as_ptr()
}

/// How much a finding of `redislock_doctor` matters. Values are stable:
/// new ones are only ever added at the end.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redislock_severity {
    /// Checked, and nothing to change.
    REDISLOCK_SEVERITY_OK = 0,
    /// Safe as the server runs now, but slow, or unsafe after a rare
    /// failure (a restart, a failover), or the check could not be made.
    REDISLOCK_SEVERITY_WARNING = 1,
    /// Locks can have two owners in normal operation, fencing numbers can
    /// go backwards, or locks cannot be used at all.
    REDISLOCK_SEVERITY_UNSAFE = 2,
}

/// One finding of `redislock_doctor`: one check on one server. Every
/// string is NUL-terminated UTF-8, owned by the report and valid until
/// `redislock_report_free`; `fix` is "" when nothing needs to change.
///
/// Growth rule: fields are only ever appended. The library allocates the
/// struct and a program reads the fields it knows, so a program built
/// against this header keeps working with later libraries.
#[repr(C)]
#[derive(Debug)]
pub struct redislock_finding {
    /// How much it matters.
    pub severity: redislock_severity,
    /// Which check (`eviction`, `scripting`, `time`, `pubsub`,
    /// `persistence`, `replication`, `clients`, `cluster`, `latency`, …):
    /// stable names, to match on.
    pub check: *const c_char,
    /// The server (`host:port` or socket path, never credentials).
    pub server: *const c_char,
    /// What was found, and why it matters for a lock.
    pub message: *const c_char,
    /// What to change.
    pub fix: *const c_char,
}

/// What `redislock_doctor` found: a list of findings and the text
/// `redislock doctor` prints. Owned by the caller; free it with
/// `redislock_report_free`. Read-only: may be read from several threads.
pub struct redislock_report {
    findings: Vec<redislock_finding>,
    /// Where the findings' pointers point.
    _strings: Vec<std::ffi::CString>,
    text: std::ffi::CString,
    safe: bool,
}

/// `s` as a C string (a NUL inside, which no server message should hold,
/// becomes `\0`).
fn c_string(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

fn c_report(report: &redislock::Report) -> redislock_report {
    let mut strings = Vec::new();
    let mut keep = |s: &str| {
        let c = c_string(s);
        let ptr = c.as_ptr();
        strings.push(c);
        ptr
    };
    let findings = report
        .findings
        .iter()
        .map(|f| redislock_finding {
            severity: match f.severity {
                redislock::Severity::Ok => redislock_severity::REDISLOCK_SEVERITY_OK,
                redislock::Severity::Warning => redislock_severity::REDISLOCK_SEVERITY_WARNING,
                redislock::Severity::Unsafe => redislock_severity::REDISLOCK_SEVERITY_UNSAFE,
            },
            check: keep(f.check),
            server: keep(&f.server),
            message: keep(&f.message),
            fix: keep(&f.fix),
        })
        .collect();
    redislock_report {
        findings,
        _strings: strings,
        text: c_string(&report.to_string()),
        safe: report.is_safe(),
    }
}

/// Check every server `client`'s locks may reach for what makes a lock
/// unsafe or slow (eviction policy, scripting, `TIME` and pub/sub refused,
/// persistence, replicas without `min-replicas-to-write`, `maxclients`
/// headroom, cluster state, Sentinel quorum, round trip) and run one lock
/// cycle; the same checks as `redislock doctor`. A few round trips per
/// server; nothing is left on the server.
///
/// `client`: borrowed. `out`: on success receives a new report owned by
/// the caller (free it with `redislock_report_free`); untouched on failure.
/// Returns `REDISLOCK_OK` whatever was found (see
/// `redislock_report_is_safe`), `REDISLOCK_CONNECTION` when the server (or
/// every sentinel, or every cluster node) cannot be reached,
/// `REDISLOCK_NO_QUORUM` when a majority of Redlock servers cannot, and
/// `REDISLOCK_SERVER` when it refuses the credentials.
#[no_mangle]
pub extern "C" fn redislock_doctor(
    client: *const redislock_client,
    out: *mut *mut redislock_report,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let client = non_null(client, "client")?;
            let out = out_ptr(out, "out")?;
            let report = client.client.doctor()?;
            *out = Box::into_raw(Box::new(c_report(&report)));
            Ok(())
        })())
    })
}

/// How many findings `report` holds (0 when it is NULL).
#[no_mangle]
pub extern "C" fn redislock_report_count(report: *const redislock_report) -> usize {
    guard(0, || {
        non_null(report, "report").map_or(0, |r| r.findings.len())
    })
}

/// Finding `i` (from 0) of `report`, borrowed from it; NULL when `report`
/// is NULL or `i` is out of range.
#[no_mangle]
pub extern "C" fn redislock_report_finding(
    report: *const redislock_report,
    i: usize,
) -> *const redislock_finding {
    guard(std::ptr::null(), || {
        non_null(report, "report")
            .ok()
            .and_then(|r| r.findings.get(i))
            .map_or(std::ptr::null(), |f| f as *const redislock_finding)
    })
}

/// True when no finding of `report` is `REDISLOCK_SEVERITY_UNSAFE` (false
/// when `report` is NULL): what `redislock doctor`'s exit status 0 means.
#[no_mangle]
pub extern "C" fn redislock_report_is_safe(report: *const redislock_report) -> bool {
    guard(false, || non_null(report, "report").is_ok_and(|r| r.safe))
}

/// The report as `redislock doctor` prints it: one line per finding, each
/// fix on the next line, then a verdict line. Borrowed from `report`
/// (NUL-terminated UTF-8); NULL when `report` is NULL.
#[no_mangle]
pub extern "C" fn redislock_report_text(report: *const redislock_report) -> *const c_char {
    guard(std::ptr::null(), || {
        non_null(report, "report").map_or(std::ptr::null(), |r| r.text.as_ptr())
    })
}

/// Free a report and every string of its findings. NULL is a no-op.
#[no_mangle]
pub extern "C" fn redislock_report_free(report: *mut redislock_report) {
    guard((), || {
        if !report.is_null() {
            // SAFETY: made by Box::into_raw in redislock_doctor, freed once.
            drop(unsafe { Box::from_raw(report) });
        }
    })
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
    fn the_stats_struct_keeps_its_first_layout() {
        // The first version's fields: appending is fine, moving is not.
        assert_eq!(STATS_MIN_SIZE, 8 + 18 * 8);
        assert_eq!(std::mem::offset_of!(redislock_stats, wait), STATS_MIN_SIZE);
        assert_eq!(std::mem::size_of::<redislock_histogram>(), 8 * (6 + 23));
        assert_eq!(redislock_stats_bucket_bound_us(0), 50);
        assert_eq!(redislock_stats_bucket_bound_us(21), 3_600_000_000);
        assert_eq!(redislock_stats_bucket_bound_us(22), u64::MAX);
        assert_eq!(redislock_stats_bucket_bound_us(usize::MAX), u64::MAX);
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

// The Rust-side tests of the C functions, kept in tests/abi (outside the
// library's sources) and compiled as unit tests: this crate makes only a C
// library, so an integration test would have nothing to link.
#[cfg(test)]
#[path = "../tests/abi/mod.rs"]
mod abi_tests;
