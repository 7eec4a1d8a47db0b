//! Node.js: the native addon behind `bindings/node` (`make node` builds it
//! as `bindings/node/redislock.node`; `index.js` wraps it in the public
//! API and its error classes).
//!
//! Every call that talks to Redis returns a Promise at once and runs on the
//! bindings' tokio runtime (`redislock::runtime`), so the event loop never
//! waits: a pending acquisition holds no thread and no connection (its
//! wake-up comes through the client's subscriber), only its Promise. An
//! idle client holds nothing that keeps the process alive.
//!
//! A Promise resolves either with the value or with a [`Failure`] (the
//! error's kind and its message), which `index.js` turns into its error
//! classes: a rejection from here could carry only napi's own status codes.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Either, Function, Null, Object, ToNapiValue};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Status};
use napi_derive::napi;
use tokio::sync::oneshot;

mod evloop;

use evloop::Executor;

use redislock::__private::locked;
use redislock::__private::semaphore_kind;
use redislock::__private::show_key;
use redislock::__private::Kind;
use redislock::runtime::{runtime, sole};
use redislock::{
    AcquireOptions, Client, Error, ErrorKind, Histogram, Lock, Wait, BUCKET_BOUNDS, MAX_TTL,
};

/// The crate's version (Cargo.toml's; what `redislock_version()` of the C
/// ABI returns): `index.js` refuses an addon whose version is not its
/// package.json's, so a stale addon is caught, not silently used.
#[napi]
// Called from JavaScript only: the test build registers no module.
#[cfg_attr(test, allow(dead_code))]
pub fn version() -> String {
    redislock::VERSION.to_string()
}

/// Let this thread's calls run on Node.js's own event loop (`true`) or keep
/// them on the addon's tokio runtime (`false`, the default): `index.js`
/// calls it when it loads, before any call, with what it found the runtime
/// to be (see `evloop`).
#[napi]
#[cfg_attr(test, allow(dead_code))]
pub fn set_event_loop(libuv: bool) {
    evloop::set_allowed(libuv);
}

/// What runs this thread's calls: "libuv" (the event loop) or "tokio" (the
/// addon's runtime thread).
#[napi]
#[cfg_attr(test, allow(dead_code))]
pub fn event_loop(env: &Env) -> String {
    evloop::in_use(env.raw()).to_string()
}

/// Why a call failed, as `index.js` receives it: `kind` names the error
/// class (the core's error kinds, `OutOfRange` for a number out of its
/// range, `Aborted` for a wait its AbortSignal ended, `Closed` for a call
/// on a closed client or a wait its closing ended). `cause` is what the
/// layer below reported, when there is such a thing (`cause_kind`: "io"
/// for a connection's failure, "reply" for the server's error text,
/// "protocol" for a reply the command never answers, "quorum" for the
/// Redlock nodes' outcomes, "unavailable" for a server's transient
/// state), and `addr` the server it came from.
#[napi]
pub struct Failure {
    #[napi(readonly)]
    pub kind: String,
    #[napi(readonly)]
    pub message: String,
    #[napi(readonly)]
    pub cause: Option<String>,
    #[napi(readonly)]
    pub cause_kind: Option<String>,
    #[napi(readonly)]
    pub addr: Option<String>,
}

impl Failure {
    fn new(kind: &str, message: impl Into<String>) -> Failure {
        Failure {
            kind: kind.into(),
            message: message.into(),
            cause: None,
            cause_kind: None,
            addr: None,
        }
    }

    fn caused(mut self, kind: &str, cause: &str, addr: Option<&str>) -> Failure {
        self.cause = Some(cause.to_string());
        self.cause_kind = Some(kind.to_string());
        self.addr = addr.map(str::to_string);
        self
    }

    /// The failure of a call on a closed client (or of a wait its closing
    /// ended).
    fn closed(what: &str) -> Failure {
        Failure::new("Closed", format!("the client was closed {what}"))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let failure = Failure::new(kind_name(e.kind()), e.to_string());
        match &e {
            Error::Connection { addr, reason, .. } => failure.caused("io", reason, Some(addr)),
            Error::Protocol { addr, detail } => failure.caused("protocol", detail, Some(addr)),
            Error::Server { addr, message } => failure.caused("reply", message, Some(addr)),
            Error::Unavailable { addr, state, .. } => {
                failure.caused("unavailable", state, Some(addr))
            }
            Error::NoQuorum { detail, .. } => failure.caused("quorum", detail, None),
            _ => failure,
        }
    }
}

/// The name `index.js` maps onto its error classes.
fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotAcquired => "NotAcquired",
        ErrorKind::NotOwner => "NotOwner",
        ErrorKind::Connection => "Connection",
        ErrorKind::InvalidArgument => "InvalidArgument",
        ErrorKind::WrongType => "WrongType",
        ErrorKind::NoQuorum => "NoQuorum",
        ErrorKind::Server => "Server",
        ErrorKind::Internal => "Internal",
        ErrorKind::Unconfirmed => "Unconfirmed",
    }
}

type Outcome<T> = std::result::Result<T, Failure>;

/// A Promise of `work`'s outcome: polled at once on the JavaScript thread
/// and settled there (see `evloop`), or, where the event loop's libuv
/// cannot be reached, run on the runtime and settled through a
/// threadsafe function.
fn promise<'env, T, F>(env: &'env Env, work: F) -> napi::Result<Object<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = Outcome<T>> + Send + 'static,
{
    let work = evloop::caught(work, |panic| {
        Err(Failure::new(
            "Internal",
            format!("redislock panicked: {panic}"),
        ))
    });
    let Some(exec) = Executor::current(env.raw()) else {
        let (deferred, promise) = env.create_deferred()?;
        runtime().spawn(async move {
            let outcome = match work.await {
                Ok(v) => Either::A(v),
                Err(f) => Either::B(f),
            };
            deferred.resolve(move |_| Ok(outcome));
        });
        return Ok(promise);
    };
    let raw = env.raw();
    let (mut deferred, mut promise) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: a napi call on the calling environment.
    let status = unsafe { napi::sys::napi_create_promise(raw, &mut deferred, &mut promise) };
    if status != napi::sys::Status::napi_ok {
        return Err(napi::Error::new(
            Status::GenericFailure,
            "napi_create_promise failed",
        ));
    }
    exec.run_call(async move {
        let outcome = match work.await {
            Ok(v) => Either::A(v),
            Err(f) => Either::B(f),
        };
        // SAFETY: settled on the environment's thread, inside the call or
        // inside the handle and callback scopes of a run from the loop.
        unsafe {
            match ToNapiValue::to_napi_value(raw, outcome) {
                Ok(v) => napi::sys::napi_resolve_deferred(raw, deferred, v),
                Err(e) => {
                    let error = napi::JsError::from(e).into_value(raw);
                    napi::sys::napi_reject_deferred(raw, deferred, error)
                }
            };
        }
    });
    Ok(Object::from_raw(raw, promise))
}

/// A TTL in milliseconds: a whole number from 1 to 30 days (the core's
/// limit, [`MAX_TTL`]: a longer one is taken for a unit mistake).
fn ttl_arg(ms: f64) -> Outcome<Duration> {
    let max = MAX_TTL.as_millis() as f64;
    if ms.is_finite() && ms >= 1.0 && ms <= max && ms.fract() == 0.0 {
        return Ok(Duration::from_millis(ms as u64));
    }
    Err(Failure::new(
        "OutOfRange",
        format!(
            "ttl must be a whole number of milliseconds from 1 to {max} (30 days: a longer one is most \
             likely a unit mistake; a lock that must live longer is renewed, with autoRenew or extend), got {ms}"
        ),
    ))
}

/// A wait in milliseconds: negative or infinite waits for as long as it
/// takes, 0 tries once.
fn wait_arg(ms: f64) -> Outcome<Wait> {
    if ms.is_nan() || ms > 9_007_199_254_740_991.0 && ms.is_finite() {
        return Err(Failure::new(
            "OutOfRange",
            format!("wait must be a number of milliseconds (negative: forever), got {ms}"),
        ));
    }
    Ok(if ms < 0.0 || ms.is_infinite() {
        Wait::Forever
    } else if ms == 0.0 {
        Wait::TryOnce
    } else {
        Wait::Timeout(Duration::from_secs_f64(ms / 1000.0))
    })
}

fn bytes(v: Either<String, Buffer>) -> Vec<u8> {
    match v {
        Either::A(s) => s.into_bytes(),
        Either::B(b) => b.to_vec(),
    }
}

/// An acquisition's flags, as `index.js` passes them (one number, not an
/// object: every call reads it).
const OR_NULL: u32 = 1;
const AUTO_RENEW: u32 = 2;
const FENCED: u32 = 4;

/// The kind of lock, as `index.js` numbers it: 0 a lock, 1 a semaphore's
/// permits (`limit`, `permits`), 2 a read-write lock's read side, 3 its
/// write side.
fn kind_arg(kind: u32, limit: f64, permits: f64) -> Outcome<Kind> {
    match kind {
        0 => Ok(Kind::Lock),
        2 => Ok(Kind::Read),
        3 => Ok(Kind::Write),
        1 => {
            let count = |v: f64, what: &str| {
                if v.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&v) {
                    Ok(v as u32)
                } else {
                    Err(Failure::new(
                        "OutOfRange",
                        format!("{what} must be a whole number, got {v}"),
                    ))
                }
            };
            semaphore_kind(count(limit, "limit")?, count(permits, "permits")?)
                .map_err(|e| Failure::new("OutOfRange", e.to_string()))
        }
        other => Err(Failure::new(
            "InvalidArgument",
            format!("no kind of lock numbered {other}"),
        )),
    }
}

/// What ends a wait early: `index.js` calls `cancel()` when the caller's
/// AbortSignal fires. Dropping the wait's future lets the core take the
/// waiter out of the queue (and release a lock handed to it meanwhile).
#[napi]
pub struct Cancel {
    tx: Mutex<Option<oneshot::Sender<()>>>,
    rx: Mutex<Option<oneshot::Receiver<()>>>,
}

#[napi]
impl Cancel {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Cancel {
        let (tx, rx) = oneshot::channel();
        Cancel {
            tx: Mutex::new(Some(tx)),
            rx: Mutex::new(Some(rx)),
        }
    }

    /// End the wait this was given to (nothing once it has ended).
    #[napi]
    pub fn cancel(&self) {
        if let Some(tx) = locked(&self.tx).take() {
            let _ = tx.send(());
        }
    }
}

impl Cancel {
    /// A future that completes when `cancel()` is called, never otherwise
    /// (not when this object is collected).
    fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let rx = locked(&self.rx).take();
        async move {
            let sent = match rx {
                Some(rx) => rx.await.is_ok(),
                None => false,
            };
            if !sent {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// `work`'s output, or None if `stop` completes first.
async fn first<T>(work: impl Future<Output = T>, stop: impl Future<Output = ()>) -> Option<T> {
    let (mut work, mut stop) = (std::pin::pin!(work), std::pin::pin!(stop));
    std::future::poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        work.as_mut().poll(cx).map(Some)
    })
    .await
}

/// `Client#stats()`, before `index.js` puts the counters at the top (in
/// camelCase): their names, in the core's order, and their values.
#[napi(object)]
pub struct StatsJs {
    pub names: Vec<String>,
    pub values: Vec<f64>,
    pub wait: HistogramJs,
    pub held: HistogramJs,
}

/// A histogram of durations, in milliseconds: its buckets (not cumulative)
/// and their upper bounds, so that an exporter needs nothing else.
#[napi(object)]
pub struct HistogramJs {
    pub count: f64,
    pub sum: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub buckets: Vec<f64>,
    pub bounds: Vec<f64>,
}

impl From<&Histogram> for HistogramJs {
    fn from(h: &Histogram) -> HistogramJs {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        HistogramJs {
            count: h.count as f64,
            sum: ms(h.sum),
            max: ms(h.max),
            p50: ms(h.p50()),
            p90: ms(h.p90()),
            p99: ms(h.p99()),
            buckets: h.buckets.iter().map(|&b| b as f64).collect(),
            bounds: BUCKET_BOUNDS.iter().map(|&b| ms(b)).collect(),
        }
    }
}

/// `Client#doctor()`: the core's [`Report`](redislock::Report), as a plain
/// object (`text` is its `Display`, what `redislock doctor` prints).
#[napi(object)]
pub struct DoctorReportJs {
    pub target: String,
    pub safe: bool,
    /// "ok", "warning" or "unsafe".
    pub worst: String,
    pub findings: Vec<DoctorFindingJs>,
    pub text: String,
}

/// One [`Finding`](redislock::Finding) of a report.
#[napi(object)]
pub struct DoctorFindingJs {
    /// "ok", "warning" or "unsafe".
    pub severity: String,
    pub check: String,
    pub server: String,
    pub message: String,
    pub fix: String,
}

impl From<redislock::Report> for DoctorReportJs {
    fn from(r: redislock::Report) -> DoctorReportJs {
        DoctorReportJs {
            safe: r.is_safe(),
            worst: r.worst().as_str().to_string(),
            text: r.to_string(),
            findings: r
                .findings
                .into_iter()
                .map(|f| DoctorFindingJs {
                    severity: f.severity.as_str().to_string(),
                    check: f.check.to_string(),
                    server: f.server,
                    message: f.message,
                    fix: f.fix,
                })
                .collect(),
            target: r.target,
        }
    }
}

/// A client: `new Client(url | urls)` in `index.js`. `close()` lets go of
/// the core's client (its connections close once the calls in flight and
/// the locks it handed out are done with them) and ends the waits.
#[napi]
pub struct NativeClient {
    client: Mutex<Option<Client>>,
    /// Turned true by `close()`: every wait in flight watches it.
    closed: tokio::sync::watch::Sender<bool>,
    /// The statistics as they were when the client was closed.
    last_stats: Mutex<Option<redislock::Stats>>,
    addr: String,
}

#[napi]
impl NativeClient {
    /// Throws an `InvalidArg` error for a bad URL (a `TypeError` to the
    /// caller); nothing is connected yet. The timeouts, in whole
    /// milliseconds (`index.js` checks them: 1 to an hour), win over the
    /// URL's `connect_timeout`, `command_timeout` and `node_timeout`.
    #[napi(constructor)]
    pub fn new(
        urls: Either<String, Vec<String>>,
        connect_timeout_ms: Option<u32>,
        command_timeout_ms: Option<u32>,
        node_timeout_ms: Option<u32>,
    ) -> napi::Result<NativeClient> {
        let mut builder = match urls {
            Either::A(url) => Client::builder(&url),
            Either::B(urls) => Client::redlock(urls),
        };
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        if let Some(v) = connect_timeout_ms {
            builder = builder.connect_timeout(ms(v));
        }
        if let Some(v) = command_timeout_ms {
            builder = builder.command_timeout(ms(v));
        }
        if let Some(v) = node_timeout_ms {
            builder = builder.node_timeout(ms(v));
        }
        builder
            .build()
            .map(|client| NativeClient {
                addr: client.addr(),
                client: Mutex::new(Some(client)),
                closed: tokio::sync::watch::channel(false).0,
                last_stats: Mutex::new(None),
            })
            .map_err(|e| napi::Error::new(Status::InvalidArg, e.to_string()))
    }

    /// The core's client, or the failure of a call made after `close()`.
    fn client(&self, what: &str) -> Outcome<Client> {
        let client = locked(&self.client).clone();
        match client {
            Some(client) if !*self.closed.borrow() => Ok(client),
            _ => Err(Failure::closed(&format!("before this {what} was made"))),
        }
    }

    /// A future that completes when `close()` is called (never if the
    /// client is collected first: its waits then go on).
    fn closing(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut closed = self.closed.subscribe();
        async move {
            if closed.wait_for(|c| *c).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// End the waits in flight (they fail with `Closed`) and refuse the
    /// calls made from now on. Idempotent. `index.js` calls `dispose()`
    /// once the waits have settled.
    #[napi]
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Let go of the core's client, keeping its statistics as they are
    /// now: its connections close once the calls still in flight and the
    /// locks it handed out are done with them. Its locks stay held and
    /// usable; nothing is released. Only after `close()`.
    #[napi]
    pub fn dispose(&self) {
        if !*self.closed.borrow() {
            return;
        }
        let client = locked(&self.client).take();
        if let Some(client) = client {
            *locked(&self.last_stats) = Some(client.stats());
        }
    }

    /// True once `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// A Promise of a lock, a semaphore's permits or a read-write lock's
    /// side (`null` when `OR_NULL` is set and it stayed held by others).
    /// `ttl` and `wait` in milliseconds (`wait` negative: forever);
    /// `flags`: `OR_NULL | AUTO_RENEW | FENCED`; `kind`: see `kind_arg`;
    /// `token`: the caller's own (none: 128 random bits).
    #[allow(clippy::too_many_arguments)]
    #[napi(ts_return_type = "Promise<NativeLock | null | Failure>")]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        name: Either<String, Buffer>,
        ttl: f64,
        wait: f64,
        flags: u32,
        kind: u32,
        limit: f64,
        permits: f64,
        token: Option<Either<String, Buffer>>,
        cancel: Option<&Cancel>,
    ) -> napi::Result<Object<'env>> {
        let client = self.client("acquisition");
        let closing = self.closing();
        let name = bytes(name);
        let token = token.map(bytes);
        let stopped = cancel.map(Cancel::stopped);
        promise(env, async move {
            let client = client?;
            let kind = kind_arg(kind, limit, permits)?;
            let mut opts = AcquireOptions::new(ttl_arg(ttl)?)
                .wait(wait_arg(wait)?)
                .auto_renew(flags & AUTO_RENEW != 0)
                // The shared kinds always draw theirs (as in Python).
                .fenced(flags & FENCED != 0 || kind != Kind::Lock);
            if let Some(token) = token {
                opts = opts.token(token);
            }
            let acquired = client.acquire_as_async(&name, kind, opts);
            let acquired = first(
                async move {
                    match stopped {
                        None => Some(acquired.await),
                        Some(stopped) => first(acquired, stopped).await,
                    }
                },
                closing,
            );
            let acquired = match acquired.await {
                Some(Some(r)) => r,
                Some(None) => return Err(Failure::new("Aborted", "the wait was aborted")),
                None => {
                    return Err(Failure::closed(&format!(
                        "while this acquisition waited for {}",
                        show_key(&name)
                    )))
                }
            };
            match acquired {
                Ok(lock) => Ok(Either::A(NativeLock::new(lock))),
                Err(e) if flags & OR_NULL != 0 && e.kind() == ErrorKind::NotAcquired => {
                    Ok(Either::B(Null))
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    /// Release the lock `name` if `token` holds it: a Promise of whether it did.
    #[napi(ts_return_type = "Promise<boolean | Failure>")]
    pub fn release_token<'env>(
        &self,
        env: &'env Env,
        name: Either<String, Buffer>,
        token: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
        let client = self.client("releaseToken");
        let (name, token) = (bytes(name), bytes(token));
        promise(env, async move {
            Ok(client?.release_token_async(&name, &token).await?)
        })
    }

    /// Take the lock `name` from whoever holds it (the operator's unlock;
    /// `Client::force_release`, on a blocking thread of the runtime, never
    /// on the event loop's): a Promise of whether a holder was removed.
    #[napi(ts_return_type = "Promise<boolean | Failure>")]
    pub fn force_release<'env>(
        &self,
        env: &'env Env,
        name: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
        let client = self.client("forceRelease");
        let name = bytes(name);
        promise(env, async move {
            let client = client?;
            let r = tokio::task::spawn_blocking(move || client.force_release(&name))
                .await
                .map_err(|e| {
                    Failure::new("Internal", format!("force_release did not finish: {e}"))
                })?;
            Ok(r?)
        })
    }

    /// The core's checks of every server this client's locks may reach
    /// (`Client::doctor`, which blocks: it runs on a blocking thread of the
    /// runtime, never on the event loop's).
    #[napi(ts_return_type = "Promise<DoctorReportJs | Failure>")]
    pub fn doctor<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let client = self.client("doctor");
        promise(env, async move {
            let client = client?;
            let r = tokio::task::spawn_blocking(move || client.doctor())
                .await
                .map_err(|e| Failure::new("Internal", format!("doctor did not finish: {e}")))?;
            Ok(DoctorReportJs::from(r?))
        })
    }

    /// What this client did: the core's counters (by their names) and the
    /// wait and hold histograms, in milliseconds (once closed: as they were
    /// then).
    #[napi]
    pub fn stats(&self) -> StatsJs {
        let s = match locked(&self.client).as_ref() {
            Some(client) => client.stats(),
            None => locked(&self.last_stats).clone().unwrap_or_default(),
        };
        let (names, values) = s
            .counters()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v as f64))
            .unzip();
        StatsJs {
            names,
            values,
            wait: HistogramJs::from(&s.wait),
            held: HistogramJs::from(&s.held),
        }
    }

    /// The server's (or the first node's) address, without credentials.
    #[napi(getter)]
    pub fn addr(&self) -> String {
        self.addr.clone()
    }
}

/// A held lock. The core handle is shared with the calls in flight on it
/// and taken back whole by `release`.
#[napi]
pub struct NativeLock {
    held: Mutex<Option<Arc<Lock>>>,
    token: Vec<u8>,
    /// The fencing number once drawn (kept after the release).
    drawn: Arc<Mutex<Option<i64>>>,
    /// Found lost before or by its release (the handle is gone then).
    lost_at_release: Arc<AtomicBool>,
    /// Let go by `forget()`: never released by this handle.
    forgotten: AtomicBool,
}

impl NativeLock {
    fn new(lock: Lock) -> NativeLock {
        NativeLock {
            token: lock.token().to_vec(),
            drawn: Arc::new(Mutex::new(
                lock.fence_if_drawn().and_then(|f| i64::try_from(f).ok()),
            )),
            held: Mutex::new(Some(Arc::new(lock))),
            lost_at_release: Arc::default(),
            forgotten: AtomicBool::new(false),
        }
    }

    fn current(&self) -> Outcome<Arc<Lock>> {
        locked(&self.held).clone().ok_or_else(|| {
            Failure::new(
                "NotOwner",
                if self.forgotten.load(Ordering::Relaxed) {
                    "this lock was forgotten (it stays held until its TTL runs out, or \
                     releaseToken releases it)"
                } else {
                    "this lock was already released"
                },
            )
        })
    }
}

#[napi]
impl NativeLock {
    #[napi(getter)]
    pub fn token(&self) -> Buffer {
        self.token.clone().into()
    }

    /// The fencing number if one was drawn (by the acquisition, or by
    /// `draw_fence`, or by the core meanwhile), else null.
    #[napi(getter)]
    pub fn fence(&self) -> Option<i64> {
        let mut drawn = locked(&self.drawn);
        if drawn.is_none() {
            if let Some(lock) = locked(&self.held).as_ref() {
                *drawn = lock.fence_if_drawn().and_then(|f| i64::try_from(f).ok());
            }
        }
        *drawn
    }

    /// True once renewal, an extend or a release found the lock gone.
    #[napi(getter)]
    pub fn lost(&self) -> bool {
        self.lost_at_release.load(Ordering::Relaxed)
            || locked(&self.held).as_ref().is_some_and(|l| l.is_lost())
    }

    /// True while this handle has not been released.
    #[napi(getter)]
    pub fn held(&self) -> bool {
        locked(&self.held).is_some()
    }

    #[napi(ts_return_type = "Promise<undefined | Failure>")]
    pub fn extend<'env>(&self, env: &'env Env, ttl: f64) -> napi::Result<Object<'env>> {
        let lock = self.current();
        promise(env, async move {
            let lock = lock?;
            Ok(lock.extend_async(ttl_arg(ttl)?).await?)
        })
    }

    #[napi(ts_return_type = "Promise<undefined | Failure>")]
    pub fn release<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let lock = self.current();
        if let Ok(lock) = &lock {
            self.lost_at_release
                .store(lock.is_lost(), Ordering::Relaxed);
            *locked(&self.held) = None;
        }
        let lost_at_release = self.lost_at_release.clone();
        promise(env, async move {
            let released = sole(lock?).await.release_async().await;
            if matches!(&released, Err(e) if e.kind() == ErrorKind::NotOwner) {
                lost_at_release.store(true, Ordering::Relaxed);
            }
            Ok(released?)
        })
    }

    /// Let go of the handle without releasing the lock: it stays held on
    /// the server until its TTL runs out (or a release by token); renewal
    /// stops, and neither this handle nor its collection releases it. No
    /// I/O. Nothing once released or forgotten.
    #[napi]
    pub fn forget(&self) {
        let Some(lock) = locked(&self.held).take() else {
            return;
        };
        self.forgotten.store(true, Ordering::Relaxed);
        match Arc::try_unwrap(lock) {
            Ok(lock) => lock.forget(),
            // A call in flight (an extend, an owned) still borrows it.
            Err(shared) => drop(runtime().spawn(async move { sole(shared).await.forget() })),
        }
    }

    /// The fencing number, drawn now if the acquisition did not draw it
    /// (one round trip, which checks that the lock is still held:
    /// `NotOwner` otherwise); the same number on every later call, also
    /// after the release.
    #[napi(ts_return_type = "Promise<number | Failure>")]
    pub fn draw_fence<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let lock = self.current();
        let known = *locked(&self.drawn);
        let drawn = self.drawn.clone();
        promise(env, async move {
            if let Some(f) = known {
                return Ok(f);
            }
            let f = lock?.fence_async().await?;
            let f = i64::try_from(f)
                .map_err(|_| Failure::new("Internal", format!("fence {f} is beyond 2^63")))?;
            *locked(&drawn) = Some(f);
            Ok(f)
        })
    }

    /// Whether the server still names this handle the owner.
    #[napi(ts_return_type = "Promise<boolean | Failure>")]
    pub fn owned<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let lock = self.current();
        promise(env, async move {
            match lock {
                Ok(lock) => Ok(lock.owned_async().await?),
                Err(_) => Ok(false),
            }
        })
    }

    /// Call `callback(id)` on the JavaScript thread when the lock is found
    /// lost (at once if it is lost already), never if it is released or
    /// forgotten first. The callback is held by a weak threadsafe function:
    /// it keeps neither the process alive nor, since `index.js` passes a
    /// function that holds no lock, the handle from being collected. A
    /// second call replaces the first.
    #[napi]
    pub fn watch_lost(&self, id: f64, callback: Function<f64, ()>) -> napi::Result<()> {
        let Some(lock) = locked(&self.held).clone() else {
            return Ok(());
        };
        let tsfn = callback
            .build_threadsafe_function::<f64>()
            .weak::<true>()
            .callee_handled::<false>()
            .build()?;
        lock.on_lost(move || {
            tsfn.call(id, ThreadsafeFunctionCallMode::NonBlocking);
        });
        Ok(())
    }
}

impl Drop for NativeLock {
    /// A handle collected while held is released in the background, on the
    /// runtime: a finalizer must not wait for the network.
    fn drop(&mut self) {
        let held = self
            .held
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(lock) = held {
            let _on_runtime = runtime().enter();
            drop(lock);
        }
    }
}
