//! The C ABI's inputs, fuzzed: every exported `redislock_*` function called
//! with arbitrary lengths, NULL pointers (where the header allows one and
//! where it does not), huge lengths with NULL or with a short buffer (the
//! header promises a length over the maximum is refused before anything is
//! read), NUL and non-UTF-8 bytes, zero, huge and "negative" (wrapped)
//! TTLs, and URLs that are not URLs. Every call must return, with exactly
//! the status its arguments call for (`REDISLOCK_INVALID_ARGUMENT` and a
//! message for a bad one), outputs untouched on failure, against a
//! throwaway redis-server where a server is needed.
//!
//! The functions are called through their C ABI (`extern "C"`, as exported
//! by the library and declared in include/redislock.h). Cases per property:
//! `REDISLOCK_FUZZ_CASES` (2000 by default; a quarter of that for those
//! that talk to the server). Failing seeds are kept in
//! `target/proptest-regressions/c_abi_fuzz/` and tried first next time.

use super::common;

use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::path::PathBuf;
use std::ptr::{null, null_mut, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::redislock_status;
use crate::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{
    Config, FileFailurePersistence, TestCaseError, TestCaseResult, TestError, TestRunner,
};
use redislock::MAX_KEY_LEN;

use common::Server;

/// The longest TTL accepted, in ms (30 days).
const MAX_TTL_MS: u64 = redislock::MAX_TTL.as_millis() as u64;

// ---------------------------------------------------------------------
// Running

fn cases() -> u32 {
    std::env::var("REDISLOCK_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// Cases for a property that does round trips to the server.
fn server_cases() -> u32 {
    (cases() / 4).max(1)
}

fn regressions(name: &str) -> &'static str {
    let exe = std::env::current_exe().unwrap_or_default();
    let target = exe
        .ancestors()
        .nth(3)
        .unwrap_or(std::path::Path::new("target"));
    let file: PathBuf = target
        .join("proptest-regressions")
        .join("c_abi_fuzz")
        .join(format!("{name}.txt"));
    Box::leak(file.to_string_lossy().into_owned().into_boxed_str())
}

fn run<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> TestCaseResult,
) {
    let config = Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions(name)))),
        ..Config::default()
    };
    match TestRunner::new(config).run(&strategy, test) {
        Ok(()) => {}
        Err(TestError::Abort(why)) => panic!("{name}: aborted: {why}"),
        Err(TestError::Fail(why, input)) => {
            panic!("{name}: {why}\n    minimal input: {input:?}")
        }
    }
}

// ---------------------------------------------------------------------
// Arguments

/// A (pointer, length) argument: NULL or some bytes, and the length the
/// call is told, which is not always theirs.
#[derive(Clone)]
struct Arg {
    bytes: Option<Vec<u8>>,
    len: usize,
}

impl fmt::Debug for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.bytes {
            None => write!(f, "NULL, {}", self.len),
            Some(b) if b.len() > 64 => write!(f, "<{} bytes>, {}", b.len(), self.len),
            Some(b) => write!(f, "b\"{}\", {}", b.escape_ascii(), self.len),
        }
    }
}

impl Arg {
    fn ptr(&self) -> *const u8 {
        self.bytes.as_ref().map_or(null(), |b| b.as_ptr())
    }

    /// The bytes, when the call must take them: not NULL, told their own
    /// length, 1 to MAX_KEY_LEN bytes.
    fn valid(&self) -> Option<&[u8]> {
        self.bytes
            .as_deref()
            .filter(|b| b.len() == self.len && (1..=MAX_KEY_LEN).contains(&b.len()))
    }

    fn is_null_and_empty(&self) -> bool {
        self.bytes.is_none() && self.len == 0
    }

    /// A copy made unique when valid (a key that must be free, a tag never
    /// seen): a suffix, or the last bytes replaced when there is no room.
    fn unique(&self) -> Arg {
        static N: AtomicU64 = AtomicU64::new(0);
        let Some(b) = self.valid() else {
            return self.clone();
        };
        let suffix = format!("\0#{}", N.fetch_add(1, Ordering::Relaxed));
        let mut b = b.to_vec();
        if b.len() + suffix.len() > MAX_KEY_LEN {
            b.truncate(MAX_KEY_LEN - suffix.len());
        }
        b.extend_from_slice(suffix.as_bytes());
        Arg {
            len: b.len(),
            bytes: Some(b),
        }
    }
}

/// Keys, tokens, tags: honest byte strings (NUL, non-UTF-8, empty, the
/// longest accepted, one more), a short buffer with a length over the
/// maximum, and NULL with any length.
fn arg() -> impl Strategy<Value = Arg> {
    let honest = |b: Vec<u8>| Arg {
        len: b.len(),
        bytes: Some(b),
    };
    prop_oneof![
        8 => vec(any::<u8>(), 0..40).prop_map(honest),
        1 => prop_oneof![Just(MAX_KEY_LEN), Just(MAX_KEY_LEN + 1)].prop_map(move |n| honest(vec![b'k'; n])),
        2 => (vec(any::<u8>(), 0..8), prop_oneof![MAX_KEY_LEN + 1..=usize::MAX, Just(usize::MAX)])
            .prop_map(|(b, len)| Arg { bytes: Some(b), len }),
        3 => prop_oneof![Just(0usize), Just(1), 2..100usize, Just(usize::MAX), any::<usize>()]
            .prop_map(|len| Arg { bytes: None, len }),
    ]
}

/// TTLs in ms: 0, valid ones, the longest, one more, huge, and negative
/// numbers as a C caller's `uint64_t` receives them.
fn ttl() -> impl Strategy<Value = u64> {
    prop_oneof![
        1 => Just(0u64),
        6 => 1u64..100_000,
        1 => Just(MAX_TTL_MS),
        1 => Just(MAX_TTL_MS + 1),
        1 => any::<u64>(),
        1 => Just(u64::MAX),
        1 => (-1000i64..0).prop_map(|n| n as u64),
    ]
}

fn ttl_ok(ttl: u64) -> bool {
    (1..=MAX_TTL_MS).contains(&ttl)
}

/// Waits: try once, a bounded wait, forever (the keys are free: nothing
/// waits).
fn wait() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        1i64..5000,
        Just(i64::MAX),
        Just(-1i64),
        i64::MIN..0
    ]
}

/// The last error of this thread.
fn last_error() -> String {
    let n = redislock_last_error(null_mut(), 0);
    let mut buf = vec![0 as c_char; n + 1];
    let again = redislock_last_error(buf.as_mut_ptr(), buf.len());
    assert_eq!(again, n);
    // SAFETY: NUL-terminated by redislock_last_error.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// `got` is `want`; an invalid argument leaves a message.
fn expect(what: &str, got: redislock_status, want: redislock_status) -> TestCaseResult {
    prop_assert_eq!(got, want, "{}: {}", what, last_error());
    if want == REDISLOCK_INVALID_ARGUMENT {
        prop_assert!(!last_error().is_empty(), "{what}: no message");
    }
    Ok(())
}

/// A place a handle is written to, and a value it holds until then.
fn sentinel<T>() -> *mut T {
    NonNull::<T>::dangling().as_ptr()
}

/// A client of a throwaway server.
struct Fixture {
    _server: Server,
    client: *mut redislock_client,
}

impl Fixture {
    fn new() -> Fixture {
        let server = Server::start();
        let url = CString::new(server.url()).unwrap();
        let mut client = null_mut();
        assert_eq!(
            redislock_client_open(url.as_ptr(), &mut client),
            REDISLOCK_OK
        );
        Fixture {
            _server: server,
            client,
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        redislock_client_free(self.client);
    }
}

/// The client, or NULL now and then.
fn client_or_null(f: &Fixture, null_client: bool) -> *const redislock_client {
    if null_client {
        null()
    } else {
        f.client
    }
}

/// The full token a handle holds, read with a size query first, and again
/// into a buffer of `cap` bytes.
fn token_of(lock: *const redislock_lock, cap: usize) -> Result<Vec<u8>, TestCaseError> {
    let n = redislock_lock_token(lock, null_mut(), 0);
    let mut small = vec![0u8; cap];
    let ptr = if cap == 0 {
        null_mut()
    } else {
        small.as_mut_ptr()
    };
    prop_assert_eq!(redislock_lock_token(lock, ptr, cap), n);
    let mut full = vec![0u8; n];
    prop_assert_eq!(redislock_lock_token(lock, full.as_mut_ptr(), n), n);
    prop_assert_eq!(&small[..cap.min(n)], &full[..cap.min(n)]);
    Ok(full)
}

// ---------------------------------------------------------------------
// Acquires

#[derive(Clone, Debug)]
struct AcquireCase {
    null_client: bool,
    key: Arg,
    ttl: u64,
    wait: i64,
    token: Arg,
    null_out: bool,
    fenced: bool,
    extend_to: u64,
    cap: usize,
}

fn acquire_case() -> impl Strategy<Value = AcquireCase> {
    let token = prop_oneof![
        2 => Just(Arg { bytes: None, len: 0 }),
        3 => arg(),
    ];
    (
        prop::bool::weighted(0.05),
        arg(),
        ttl(),
        wait(),
        token,
        prop::bool::weighted(0.2),
        any::<bool>(),
        ttl(),
        0usize..48,
    )
        .prop_map(
            |(null_client, key, ttl, wait, token, null_out, fenced, extend_to, cap)| AcquireCase {
                null_client,
                key,
                ttl,
                wait,
                token,
                null_out,
                fenced,
                extend_to,
                cap,
            },
        )
}

/// `redislock_acquire` and `_fenced` take a free lock exactly when every
/// argument is good, and refuse it with `REDISLOCK_INVALID_ARGUMENT`
/// otherwise, leaving `out` untouched; the handle then answers for its
/// token, fence and extend (bad TTLs refused), and is released.
fn acquires(f: &Fixture, c: AcquireCase) -> TestCaseResult {
    let key = c.key.unique();
    let token_ok = c.token.is_null_and_empty() || c.token.valid().is_some();
    let good = !c.null_client
        && key.valid().is_some()
        && token_ok
        && !(c.null_out && c.token.is_null_and_empty())
        && ttl_ok(c.ttl);
    let mut lock: *mut redislock_lock = sentinel();
    let out = if c.null_out { null_mut() } else { &mut lock };
    let call = if c.fenced {
        redislock_acquire_fenced
    } else {
        redislock_acquire
    };
    let got = call(
        client_or_null(f, c.null_client),
        key.ptr(),
        key.len,
        c.ttl,
        c.wait,
        c.token.ptr(),
        c.token.len,
        out,
    );
    let want = if good {
        REDISLOCK_OK
    } else {
        REDISLOCK_INVALID_ARGUMENT
    };
    expect("acquire", got, want)?;
    if !good || c.null_out {
        prop_assert_eq!(lock, sentinel(), "out was written on a failure");
    }
    if !good {
        return Ok(());
    }
    let Some(k) = key.valid() else {
        return Ok(());
    };
    if c.null_out {
        // No handle: the token releases it (or it expired already).
        let t = c.token.valid().unwrap_or_default();
        let released = redislock_release_token(f.client, k.as_ptr(), k.len(), t.as_ptr(), t.len());
        prop_assert!(
            matches!(released, REDISLOCK_OK | REDISLOCK_NOT_OWNER),
            "release by token: {released:?}"
        );
        return Ok(());
    }
    let token = token_of(lock, c.cap)?;
    match c.token.valid() {
        Some(t) => prop_assert_eq!(&token[..], t),
        None => prop_assert_eq!(token.len(), 32),
    }
    if c.fenced {
        prop_assert!(redislock_lock_fence_if_drawn(lock) > 0);
    }
    let extended = redislock_extend(lock, c.extend_to);
    if ttl_ok(c.extend_to) {
        // A lock of a few ms may be gone already.
        prop_assert!(
            matches!(extended, REDISLOCK_OK | REDISLOCK_NOT_OWNER),
            "extend: {extended:?}: {}",
            last_error()
        );
    } else {
        expect("extend", extended, REDISLOCK_INVALID_ARGUMENT)?;
    }
    let released = redislock_release(lock);
    prop_assert!(
        matches!(released, REDISLOCK_OK | REDISLOCK_NOT_OWNER),
        "release: {released:?}: {}",
        last_error()
    );
    Ok(())
}

#[test]
fn acquire_arguments() {
    let f = Fixture::new();
    run("acquire", server_cases(), acquire_case(), |c| {
        acquires(&f, c)
    });
    // Refused arguments are not counted as errors.
    let mut stats = stats_struct(std::mem::size_of::<redislock_stats>() as u32);
    assert_eq!(redislock_client_stats(f.client, &mut stats), REDISLOCK_OK);
    assert_eq!(stats.acquire_errors, 0);
    assert_eq!(stats.held_now, 0);
}

#[derive(Clone, Debug)]
struct SharedCase {
    kind: u8,
    null_client: bool,
    key: Arg,
    limit: u32,
    permits: u32,
    ttl: u64,
    wait: i64,
    null_out: bool,
}

/// Semaphores (`limit`, `permits`), readers and writers: the same rules,
/// and `out` may never be NULL.
fn shared_case() -> impl Strategy<Value = SharedCase> {
    let count = || {
        prop_oneof![
            Just(0u32),
            Just(1),
            2u32..10,
            Just(1_000_000),
            Just(1_000_001),
            any::<u32>()
        ]
    };
    (
        select(&b"srw"[..]),
        prop::bool::weighted(0.05),
        arg(),
        count(),
        count(),
        ttl(),
        wait(),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(kind, null_client, key, limit, permits, ttl, wait, null_out)| SharedCase {
                kind,
                null_client,
                key,
                limit,
                permits,
                ttl,
                wait,
                null_out,
            },
        )
}

fn shared_acquires(f: &Fixture, c: SharedCase) -> TestCaseResult {
    let key = c.key.unique();
    let counts_ok = c.kind != b's'
        || ((1..=1_000_000).contains(&c.limit) && (1..=c.limit).contains(&c.permits));
    let good = !c.null_client && key.valid().is_some() && !c.null_out && ttl_ok(c.ttl) && counts_ok;
    let mut lock: *mut redislock_lock = sentinel();
    let out = if c.null_out { null_mut() } else { &mut lock };
    let client = client_or_null(f, c.null_client);
    let got = match c.kind {
        b's' => redislock_acquire_semaphore(
            client,
            key.ptr(),
            key.len,
            c.limit,
            c.permits,
            c.ttl,
            c.wait,
            out,
        ),
        b'r' => redislock_acquire_read(client, key.ptr(), key.len, c.ttl, c.wait, out),
        _ => redislock_acquire_write(client, key.ptr(), key.len, c.ttl, c.wait, out),
    };
    let want = if good {
        REDISLOCK_OK
    } else {
        REDISLOCK_INVALID_ARGUMENT
    };
    expect("acquire", got, want)?;
    if !good {
        prop_assert_eq!(lock, sentinel(), "out was written on a failure");
        return Ok(());
    }
    prop_assert!(redislock_lock_fence_if_drawn(lock) > 0);
    let released = redislock_release(lock);
    prop_assert!(
        matches!(released, REDISLOCK_OK | REDISLOCK_NOT_OWNER),
        "release: {released:?}: {}",
        last_error()
    );
    Ok(())
}

#[test]
fn semaphore_read_and_write_arguments() {
    let f = Fixture::new();
    run("shared", server_cases(), shared_case(), |c| {
        shared_acquires(&f, c)
    });
}

// ---------------------------------------------------------------------
// Calls by token

#[derive(Clone, Debug)]
struct TokenCase {
    call: u8,
    null_client: bool,
    key: Arg,
    token: Arg,
    ttl: u64,
    null_out: bool,
}

fn token_case() -> impl Strategy<Value = TokenCase> {
    (
        select(&b"reofx"[..]),
        prop::bool::weighted(0.05),
        arg(),
        arg(),
        ttl(),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(call, null_client, key, token, ttl, null_out)| TokenCase {
            call,
            null_client,
            key,
            token,
            ttl,
            null_out,
        })
}

/// Release, extend, ownership, fence by token and forced release, on a
/// lock nobody holds: refused arguments, or the answer for a free lock.
fn token_calls(f: &Fixture, c: TokenCase) -> TestCaseResult {
    let key = c.key.unique();
    let client = client_or_null(f, c.null_client);
    let args_ok = !c.null_client && key.valid().is_some();
    let token_ok = args_ok && c.token.valid().is_some();
    let (k, kl, t, tl) = (key.ptr(), key.len, c.token.ptr(), c.token.len);
    match c.call {
        b'r' => {
            let want = if token_ok {
                REDISLOCK_NOT_OWNER
            } else {
                REDISLOCK_INVALID_ARGUMENT
            };
            expect(
                "release_token",
                redislock_release_token(client, k, kl, t, tl),
                want,
            )?;
        }
        b'e' => {
            let want = if token_ok && ttl_ok(c.ttl) {
                REDISLOCK_NOT_OWNER
            } else {
                REDISLOCK_INVALID_ARGUMENT
            };
            expect(
                "extend_token",
                redislock_extend_token(client, k, kl, t, tl, c.ttl),
                want,
            )?;
        }
        b'o' => {
            let mut owned = true;
            let out: *mut bool = if c.null_out { null_mut() } else { &mut owned };
            let good = token_ok && !c.null_out;
            let want = if good {
                REDISLOCK_OK
            } else {
                REDISLOCK_INVALID_ARGUMENT
            };
            expect(
                "is_owned_by",
                redislock_is_owned_by(client, k, kl, t, tl, out),
                want,
            )?;
            prop_assert_eq!(owned, !good, "out: {}", owned);
        }
        b'f' => {
            let mut fence = 7u64;
            let out: *mut u64 = if c.null_out { null_mut() } else { &mut fence };
            let want = if token_ok && !c.null_out {
                REDISLOCK_NOT_OWNER
            } else {
                REDISLOCK_INVALID_ARGUMENT
            };
            expect(
                "fence_token",
                redislock_fence_token(client, k, kl, t, tl, out),
                want,
            )?;
            prop_assert_eq!(fence, 7, "out was written on a failure");
        }
        _ => {
            let mut removed = true;
            let out: *mut bool = if c.null_out { null_mut() } else { &mut removed };
            let want = if args_ok {
                REDISLOCK_OK
            } else {
                REDISLOCK_INVALID_ARGUMENT
            };
            expect(
                "force_release",
                redislock_force_release(client, k, kl, out),
                want,
            )?;
            prop_assert_eq!(removed, !args_ok || c.null_out, "removed: {}", removed);
        }
    }
    Ok(())
}

#[test]
fn by_token_arguments() {
    let f = Fixture::new();
    run("by_token", server_cases(), token_case(), |c| {
        token_calls(&f, c)
    });
}

// ---------------------------------------------------------------------
// Clients

/// URLs: pieces of real ones put together, and anything (non-UTF-8 too).
fn url() -> impl Strategy<Value = Vec<u8>> {
    let scheme = select(
        &[
            "redis://",
            "rediss://",
            "unix://",
            "redis+sentinel://",
            "redis+cluster://",
            "rediss+sentinel://",
            "rediss+cluster://",
            "http://",
            "redis:",
            "",
        ][..],
    );
    let auth = select(&["", "user:secret@", ":secret@", "user@", "@", "a:b:c@"][..]);
    let host = select(
        &[
            "127.0.0.1",
            "localhost",
            "[::1]",
            "",
            "host name",
            "a,b",
            "127.0.0.1,127.0.0.2",
            "/tmp/x.sock",
        ][..],
    );
    let port = select(&[":1", ":0", ":65535", ":99999", ":", ":-1", ":x"][..]);
    let path = select(&["", "/", "/0", "/15", "/99999999999", "/x", "/service", "//"][..]);
    let query = select(
        &[
            "",
            "?connect_timeout=2s",
            "?command_timeout=0",
            "?command_timeout=-1s",
            "?connect_timeout=x",
            "?connect_timeout=99999999999999999999d",
            "?tls_ca_file=/nonexistent.pem",
            "?db=3",
            "?db=x",
            "?unknown=1",
            "?sentinel_password=p&sentinel_user=u",
            "?&&=",
            "?%zz",
        ][..],
    );
    let pieces = (scheme, auth, host, port, path, query)
        .prop_map(|(a, b, c, d, e, f)| format!("{a}{b}{c}{d}{e}{f}").into_bytes());
    let mangled = (
        pieces.clone(),
        any::<prop::sample::Index>(),
        vec(any::<u8>(), 1..4),
    )
        .prop_map(|(mut u, at, bytes)| {
            let at = at.index(u.len() + 1);
            u.splice(at..at, bytes);
            u
        });
    prop_oneof![4 => pieces, 2 => mangled, 1 => vec(any::<u8>(), 0..40)]
        .prop_map(|u| u.into_iter().filter(|&b| b != 0).collect())
}

#[derive(Clone, Debug)]
struct OpenCase {
    url: Option<CString>,
    null_out: bool,
    cap: usize,
}

fn open_case() -> impl Strategy<Value = OpenCase> {
    (
        prop_oneof![1 => Just(None), 12 => url().prop_map(|u| CString::new(u).ok())],
        prop::bool::weighted(0.05),
        0usize..64,
    )
        .prop_map(|(url, null_out, cap)| OpenCase { url, null_out, cap })
}

/// `redislock_client_open` validates without connecting: OK or
/// `REDISLOCK_INVALID_ARGUMENT`, never anything else; `out` is written on
/// success only. `redislock_redact_url` takes the same strings.
fn opens(c: OpenCase) -> TestCaseResult {
    let url = c.url.as_ref().map_or(null(), |u| u.as_ptr());
    let mut client: *mut redislock_client = sentinel();
    let out = if c.null_out { null_mut() } else { &mut client };
    let got = redislock_client_open(url, out);
    if url.is_null() || c.null_out {
        expect("open", got, REDISLOCK_INVALID_ARGUMENT)?;
    } else {
        prop_assert!(
            matches!(got, REDISLOCK_OK | REDISLOCK_INVALID_ARGUMENT),
            "open: {got:?}: {}",
            last_error()
        );
    }
    if got == REDISLOCK_OK {
        let n = redislock_client_addr(client, null_mut(), 0);
        let mut addr = vec![0 as c_char; c.cap];
        let ptr = if c.cap == 0 {
            null_mut()
        } else {
            addr.as_mut_ptr()
        };
        prop_assert_eq!(redislock_client_addr(client, ptr, c.cap), n);
        redislock_client_free(client);
    } else {
        expect("open", got, REDISLOCK_INVALID_ARGUMENT)?;
        prop_assert_eq!(client, sentinel(), "out was written on a failure");
    }
    // The redacted URL: a size query, then any buffer.
    let n = redislock_redact_url(url, null_mut(), 0);
    let mut buf = vec![0x55u8; c.cap + 1];
    let ptr = if c.cap == 0 {
        null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    prop_assert_eq!(redislock_redact_url(url, ptr, c.cap), n);
    prop_assert_eq!(buf[c.cap], 0x55, "written past cap");
    if url.is_null() {
        prop_assert_eq!(n, 0);
    } else {
        let mut full = vec![0u8; n];
        redislock_redact_url(url, full.as_mut_ptr().cast(), n);
        prop_assert!(std::str::from_utf8(&full).is_ok(), "not UTF-8: {:?}", full);
        // Whatever the URL (a "scheme" that is no scheme included), the
        // password never shows.
        let shown = String::from_utf8_lossy(&full);
        prop_assert!(!shown.contains("secret"), "a password shown: {}", shown);
    }
    Ok(())
}

#[test]
fn client_urls() {
    run("open", cases(), open_case(), opens);
}

#[derive(Clone, Debug)]
struct RedlockCase {
    urls: Vec<Option<CString>>,
    n: usize,
    null_urls: bool,
    null_out: bool,
}

fn redlock_case() -> impl Strategy<Value = RedlockCase> {
    let one = prop_oneof![
        1 => Just(None),
        3 => Just(Some(CString::new("redis://127.0.0.1:1").unwrap())),
        3 => url().prop_map(|u| CString::new(u).ok()),
    ];
    (
        vec(one, 0..5),
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.05),
    )
        .prop_flat_map(|(urls, null_urls, null_out)| {
            let len = urls.len();
            // The count told: theirs, 0, or over the maximum (refused
            // before the array is read).
            let n = prop_oneof![4 => Just(len), 1 => Just(0usize), 1 => 1025usize..=usize::MAX];
            (Just(urls), n, Just(null_urls), Just(null_out))
        })
        .prop_map(|(urls, n, null_urls, null_out)| RedlockCase {
            urls,
            n,
            null_urls,
            null_out,
        })
}

fn redlocks(c: RedlockCase) -> TestCaseResult {
    let ptrs: Vec<*const c_char> = c
        .urls
        .iter()
        .map(|u| u.as_ref().map_or(null(), |u| u.as_ptr()))
        .collect();
    let urls = if c.null_urls { null() } else { ptrs.as_ptr() };
    let mut client: *mut redislock_client = sentinel();
    let out = if c.null_out { null_mut() } else { &mut client };
    let got = redislock_client_open_redlock(urls, c.n, out);
    let refused =
        c.null_urls || c.null_out || c.n == 0 || c.n > 1024 || c.urls.iter().any(Option::is_none);
    if refused {
        expect("open_redlock", got, REDISLOCK_INVALID_ARGUMENT)?;
    } else {
        prop_assert!(
            matches!(got, REDISLOCK_OK | REDISLOCK_INVALID_ARGUMENT),
            "open_redlock: {got:?}: {}",
            last_error()
        );
    }
    if got == REDISLOCK_OK {
        redislock_client_free(client);
    } else {
        prop_assert_eq!(client, sentinel(), "out was written on a failure");
    }
    Ok(())
}

#[test]
fn redlock_url_lists() {
    run("redlock", cases(), redlock_case(), redlocks);
}

// ---------------------------------------------------------------------
// Everything else

fn stats_struct(size: u32) -> redislock_stats {
    // SAFETY: a plain C struct of integers: all zeroes is a valid value.
    let mut s: redislock_stats = unsafe { std::mem::zeroed() };
    s.size = size;
    s
}

/// The least `out->size` accepted: the fields up to `waiters_now`.
const STATS_MIN_SIZE: u32 = 8 + 18 * 8;

#[derive(Clone, Debug)]
enum Misc {
    Stats(u32),
    Bound(usize),
    FirstTime(Arg),
    LastError(usize),
    StatusStr(i32),
}

fn misc() -> impl Strategy<Value = Misc> {
    prop_oneof![
        prop_oneof![
            0u32..400,
            Just(STATS_MIN_SIZE),
            Just(STATS_MIN_SIZE - 1),
            any::<u32>()
        ]
        .prop_map(Misc::Stats),
        prop_oneof![0usize..30, any::<usize>()].prop_map(Misc::Bound),
        arg().prop_map(Misc::FirstTime),
        (0usize..300).prop_map(Misc::LastError),
        any::<i32>().prop_map(Misc::StatusStr),
    ]
}

fn miscellany(client: *const redislock_client, m: Misc) -> TestCaseResult {
    match m {
        Misc::Stats(size) => {
            let mut s = stats_struct(size);
            let got = redislock_client_stats(client, &mut s);
            if size < STATS_MIN_SIZE {
                expect("stats", got, REDISLOCK_INVALID_ARGUMENT)?;
                prop_assert_eq!(s.size, size, "written on a failure");
            } else {
                expect("stats", got, REDISLOCK_OK)?;
                let whole = std::mem::size_of::<redislock_stats>() as u32;
                prop_assert_eq!(s.size, size.min(whole) / 8 * 8);
            }
            let mut s = stats_struct(size);
            expect(
                "stats",
                redislock_client_stats(null(), &mut s),
                REDISLOCK_INVALID_ARGUMENT,
            )?;
            expect(
                "stats",
                redislock_client_stats(client, null_mut()),
                REDISLOCK_INVALID_ARGUMENT,
            )?;
        }
        Misc::Bound(i) => {
            let b = redislock_stats_bucket_bound_us(i);
            if i + 1 < REDISLOCK_STATS_BUCKETS {
                prop_assert!(b < redislock_stats_bucket_bound_us(i + 1));
            } else {
                prop_assert_eq!(b, u64::MAX);
            }
        }
        Misc::FirstTime(tag) => {
            // Any bytes up to the maximum are a tag, none too (the empty
            // one: true on its first call in the process only).
            let tag = tag.unique();
            let first = redislock_first_time(tag.ptr(), tag.len);
            if tag.valid().is_some() {
                prop_assert!(first, "a tag never seen");
            } else if tag.bytes.is_none() || tag.len > MAX_KEY_LEN {
                prop_assert!(!first, "refused, yet true");
            }
            prop_assert!(!redislock_first_time(tag.ptr(), tag.len));
        }
        Misc::LastError(cap) => {
            let n = redislock_last_error(null_mut(), 0);
            let mut buf = vec![0x55 as c_char; cap + 1];
            let ptr = if cap == 0 {
                null_mut()
            } else {
                buf.as_mut_ptr()
            };
            prop_assert_eq!(redislock_last_error(ptr, cap), n);
            prop_assert_eq!(buf[cap], 0x55, "written past cap");
            if cap > 0 {
                prop_assert_eq!(buf[n.min(cap - 1)], 0, "not NUL-terminated");
            }
        }
        Misc::StatusStr(s) => {
            let p = redislock_status_str(s);
            prop_assert!(!p.is_null());
            // SAFETY: a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(p) }.to_str();
            prop_assert!(
                matches!(text, Ok(t) if t.starts_with("REDISLOCK_") == (0..=9).contains(&s))
            );
        }
    }
    Ok(())
}

#[test]
fn stats_tags_errors_and_statuses() {
    // Opening does not connect: no server needed.
    let url = CString::new("redis://127.0.0.1:1").unwrap();
    let mut client = null_mut();
    assert_eq!(
        redislock_client_open(url.as_ptr(), &mut client),
        REDISLOCK_OK
    );
    run("misc", cases(), misc(), |m| miscellany(client, m));
    redislock_client_free(client);
}

/// NULL wherever a pointer is taken, once each: refused with a status, or
/// the documented no-op, 0, false or NULL.
#[test]
fn null_handles_clients_and_reports() {
    let invalid = REDISLOCK_INVALID_ARGUMENT;
    let u = CString::new("redis://127.0.0.1:1").unwrap();
    let mut c = null_mut();
    assert_eq!(redislock_client_open(null(), &mut c), invalid);
    assert_eq!(redislock_client_open(u.as_ptr(), null_mut()), invalid);
    assert_eq!(redislock_client_open_shared(null(), &mut c), invalid);
    assert_eq!(
        redislock_client_open_shared(u.as_ptr(), null_mut()),
        invalid
    );
    assert_eq!(
        redislock_client_open_redlock_shared(null(), 1, &mut c),
        invalid
    );
    assert_eq!(
        redislock_client_open_redlock_shared(&u.as_ptr(), 0, &mut c),
        invalid
    );
    assert_eq!(
        redislock_client_open_redlock_shared(&u.as_ptr(), usize::MAX, &mut c),
        invalid
    );
    assert_eq!(
        redislock_client_open_redlock_shared(&null(), 1, &mut c),
        invalid
    );
    assert!(c.is_null(), "out was written on a failure");
    let bad = CString::new(vec![b'r', 0xff, 0xfe]).unwrap();
    assert_eq!(redislock_client_open(bad.as_ptr(), &mut c), invalid);
    assert_eq!(redislock_client_open_shared(bad.as_ptr(), &mut c), invalid);
    redislock_client_free(null_mut());

    let lock: *mut redislock_lock = null_mut();
    assert_eq!(redislock_release(lock), invalid);
    assert_eq!(redislock_extend(lock, 1000), invalid);
    assert_eq!(redislock_lock_auto_renew(lock), invalid);
    assert_eq!(redislock_lock_on_lost(lock, None, null_mut()), invalid);
    assert!(!redislock_lock_is_lost(lock));
    assert_eq!(redislock_lock_token(lock, null_mut(), 0), 0);
    assert_eq!(redislock_lock_fence(lock), 0);
    assert!(!last_error().is_empty());
    assert_eq!(redislock_lock_fence_if_drawn(lock), 0);
    let (mut fence, mut owned) = (7u64, true);
    assert_eq!(redislock_lock_draw_fence(lock, &mut fence), invalid);
    assert_eq!(redislock_lock_owned(lock, &mut owned), invalid);
    assert_eq!((fence, owned), (7, true));
    redislock_lock_free(lock);
    redislock_lock_forget(lock);

    assert_eq!(redislock_client_addr(null(), null_mut(), 0), 0);
    let mut report = null_mut();
    assert_eq!(redislock_doctor(null(), &mut report), invalid);
    assert!(report.is_null());
    assert_eq!(redislock_report_count(null()), 0);
    assert!(redislock_report_finding(null(), 0).is_null());
    assert!(redislock_report_finding(null(), usize::MAX).is_null());
    assert!(!redislock_report_is_safe(null()));
    assert!(redislock_report_text(null()).is_null());
    redislock_report_free(null_mut());
    redislock_set_interrupt(None, null_mut());
    // SAFETY: a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(redislock_version()) };
    assert!(version.to_str().is_ok_and(|v| !v.is_empty()));
}

/// The handle's own calls with NULL outputs, and a client's doctor with a
/// NULL report, against a server: refused, the handle still good.
#[test]
fn null_outputs_on_a_held_lock() {
    let f = Fixture::new();
    let invalid = REDISLOCK_INVALID_ARGUMENT;
    let mut lock = null_mut();
    let key = b"c-abi-fuzz:\0\xff";
    let s = redislock_acquire(
        f.client,
        key.as_ptr(),
        key.len(),
        10_000,
        0,
        null(),
        0,
        &mut lock,
    );
    assert_eq!(s, REDISLOCK_OK, "{}", last_error());
    assert_eq!(redislock_lock_draw_fence(lock, null_mut()), invalid);
    assert_eq!(redislock_lock_owned(lock, null_mut()), invalid);
    assert_eq!(redislock_doctor(f.client, null_mut()), invalid);
    for ttl in [0, MAX_TTL_MS + 1, u64::MAX, -1i64 as u64] {
        assert_eq!(redislock_extend(lock, ttl), invalid, "ttl {ttl}");
    }
    assert!(!redislock_lock_is_lost(lock));
    let mut owned = false;
    assert_eq!(redislock_lock_owned(lock, &mut owned), REDISLOCK_OK);
    assert!(owned);
    let mut fence = 0;
    assert_eq!(redislock_lock_draw_fence(lock, &mut fence), REDISLOCK_OK);
    assert!(fence > 0);
    assert_eq!(redislock_release(lock), REDISLOCK_OK);
}
