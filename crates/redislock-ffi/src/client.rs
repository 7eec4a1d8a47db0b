//! The client handle, `redislock_client`, and its lifetime: opening one for
//! a server (`redislock_client_open`), for Redlock over several
//! (`redislock_client_open_redlock`), the process's shared clients that
//! outlive a request (`redislock_client_open_shared`,
//! `redislock_client_open_redlock_shared`), and `redislock_client_free`.

use std::collections::HashMap;
use std::ffi::c_char;
use std::sync::{LazyLock, Mutex};

use redislock::{Client, Error};

use crate::args::{out_ptr, url_list, url_str};
use crate::error::redislock_status::{self, *};
use crate::error::status;
use crate::guard::guard;

/// A connection pool and renewal thread for one Redis deployment.
///
/// Thread safety: one client may be used from many threads at once.
/// Lifetime: from `redislock_client_open` until `redislock_client_free`;
/// locks taken through it keep what they need alive, so a client may be
/// freed while its locks are still held. After `fork()` a child may keep
/// using the client: it opens its own connections.
pub struct redislock_client {
    pub(crate) client: Client,
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
