//! The Python module `redislock._native` (pyo3), re-exported by the
//! `redislock` package in `python/redislock/`.
//!
//! Thin wrappers over the core: arguments become owned Rust values, then
//! the GIL is released around every call that may touch the network. The
//! async methods await the core's async operations on a runtime of this
//! module's own (`aio`): no thread is held while a task waits. No protocol
//! or timing logic lives here.
//!
//! The GIL is never held while waiting for something that may need it:
//! the core's threads take it to log (the core's debug lines go to
//! Python's `logging`, see [`forward_logs`]) and to run `on_lost`
//! callbacks (`lost`), so every call into the core that may block runs
//! detached, and no mutex of this module is held across such a call.

mod aio;
mod doctor;
mod lost;
mod stats;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::{PyConnectionError, PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};
use pyo3::{IntoPyObjectExt, PyTraverseError, PyVisit};

use lost::{deferring, fire_all, Notice};

use redislock::__private::locked;
use redislock::__private::Kind;
use redislock::runtime::sole;
use redislock::{
    AcquireOptions, Client as CoreClient, Error, ErrorKind, Interrupt, Lock as CoreLock, Wait,
};

create_exception!(
    redislock,
    LockError,
    PyException,
    "Base class of every redislock error."
);
create_exception!(
    redislock,
    LockTimeout,
    LockError,
    "The lock is held by another owner and the wait ran out."
);
create_exception!(
    redislock,
    LockNotOwned,
    LockError,
    "Release or extend of a lock that expired, was taken over, or was never acquired."
);
create_exception!(
    redislock,
    LockWrongType,
    LockError,
    "The key exists and holds something other than a lock; it was left untouched."
);
create_exception!(
    redislock,
    LockQuorumError,
    LockError,
    "Redlock: no majority of the servers could be reached."
);
create_exception!(
    redislock,
    LockUnconfirmed,
    LockNotOwned,
    "A release whose outcome is unknown: the connection broke after it was sent, and when \
     sent again the lock was no longer this owner's (most likely the first attempt released it)."
);
create_exception!(
    redislock,
    LockServerError,
    LockError,
    "The Redis server answered with an error (authentication, permissions, ...)."
);

/// `LockConnectionError(LockError, ConnectionError)`: made at import time,
/// since a class with two bases cannot come from `create_exception!`.
static CONNECTION_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn connection_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    CONNECTION_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(
                py,
                [py.get_type::<LockError>().into_any(), py.get_type::<PyConnectionError>().into_any()],
            )?;
            let ns = PyDict::new(py);
            ns.set_item("__module__", "redislock")?;
            ns.set_item(
                "__doc__",
                "Redis cannot be reached, an I/O error, or a timeout (also a builtin ConnectionError).",
            )?;
            let cls = py.get_type::<PyType>().call1(("LockConnectionError", bases, ns))?;
            Ok(cls.cast_into::<PyType>()?.unbind())
        })
        .map(|t| t.bind(py))
}

thread_local! {
    /// Set while this thread runs a call of the core without the GIL (see
    /// [`detached`]).
    static IN_CALL: Cell<bool> = const { Cell::new(false) };
    /// The first exception raised inside a log line of that call.
    static RAISED: RefCell<Option<PyErr>> = const { RefCell::new(None) };
    /// What `logging` answered in that call when asked whether a logger
    /// takes a level (see [`Logs`]).
    static ASKED: RefCell<Vec<Asked>> = const { RefCell::new(Vec::new()) };
    /// The core's lines held back on this thread, while a
    /// [`holding_lines`] call runs.
    static HELD_LINES: RefCell<Option<Vec<HeldLine>>> = const { RefCell::new(None) };
}

/// One answer of `logging`: a core module (its `'static` path, by
/// address), a level, whether that logger takes it, and when it was asked.
struct Asked {
    target: usize,
    level: log::Level,
    enabled: bool,
    at: Instant,
}

/// How long an answer of `logging` is used within one call: a level set
/// while a call waits applies to its lines after this at the latest.
const ASKED_FOR: Duration = Duration::from_secs(1);

/// `py.detach(f)`, then the exception raised inside one of the core's log
/// lines meanwhile, if any. Those lines reach `logging` on the calling
/// thread (see [`Logs`]): a signal handler that runs there (Ctrl-C's
/// KeyboardInterrupt) or a logging handler that raises makes the call
/// raise it, once `f` is done. A value made meanwhile (a lock) is dropped.
fn detached<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: pyo3::marker::Ungil + FnOnce() -> T,
    T: pyo3::marker::Ungil,
{
    let outer = IN_CALL.replace(true);
    // A call asks `logging` afresh (a level set before it is obeyed).
    ASKED.with(|a| a.borrow_mut().clear());
    let r = py.detach(f);
    IN_CALL.set(outer);
    match take_raised() {
        Some(e) => {
            drop(r);
            Err(e)
        }
        None => Ok(r),
    }
}

/// The exception a log line of this thread's call raised, if any.
fn take_raised() -> Option<PyErr> {
    RAISED.with(|r| r.borrow_mut().take())
}

/// Acquire with the GIL released. While it waits, Python's pending signal
/// handlers run between the slices of the wait (at least every 100 ms, and
/// at once when a signal arrives): an exception they raise, such as
/// KeyboardInterrupt, ends the wait and is what the call raises (a lock
/// handed over in that very moment is released again).
fn acquire_interruptibly(
    py: Python<'_>,
    client: &CoreClient,
    name: &[u8],
    kind: Kind,
    opts: AcquireOptions,
) -> PyResult<Result<CoreLock, Error>> {
    let raised: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
    let stash = Arc::clone(&raised);
    let opts = opts.interrupt(Interrupt::new(move || {
        Python::attach(|py| {
            // A handler that ran inside a log line of this wait raised
            // already (see `detached`); otherwise one may be pending.
            match take_raised().map_or_else(|| py.check_signals(), Err) {
                Ok(()) => false,
                Err(e) => {
                    *locked(&stash) = Some(e);
                    true
                }
            }
        })
    }));
    let r = detached(py, || client.acquire_as(name, kind, opts));
    let pending = locked(&raised).take();
    match pending {
        Some(e) => Err(e),
        None => r,
    }
}

/// The Python exception for a core error, with the core's message.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    match e.kind() {
        ErrorKind::NotAcquired => LockTimeout::new_err(msg),
        ErrorKind::NotOwner => LockNotOwned::new_err(msg),
        ErrorKind::Connection => match connection_error_type(py) {
            Ok(t) => PyErr::from_type(t.clone(), (msg,)),
            Err(e) => e,
        },
        ErrorKind::InvalidArgument => PyValueError::new_err(msg),
        ErrorKind::WrongType => LockWrongType::new_err(msg),
        ErrorKind::NoQuorum => LockQuorumError::new_err(msg),
        ErrorKind::Server => LockServerError::new_err(msg),
        ErrorKind::Internal => LockError::new_err(msg),
        ErrorKind::Unconfirmed => LockUnconfirmed::new_err(msg),
    }
}

/// A name or token: `bytes` as is, `str` encoded as UTF-8.
fn bytes_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(s.to_cow()?.as_bytes().to_vec())
    } else {
        Err(PyTypeError::new_err(format!(
            "{what} must be str or bytes, not {}",
            obj.get_type().name()?
        )))
    }
}

/// Seconds as a float, finite and not negative.
fn seconds(v: f64, what: &str) -> PyResult<Duration> {
    if !v.is_finite() || v < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be a finite number of seconds >= 0, got {v}"
        )));
    }
    Duration::try_from_secs_f64(v)
        .map_err(|_| PyValueError::new_err(format!("{what} is out of range: {v}")))
}

/// A wait in seconds: `None` forever, 0 once, > 0 a deadline.
fn wait_arg(timeout: Option<f64>) -> PyResult<Wait> {
    Ok(match timeout {
        None => Wait::Forever,
        Some(0.0) => Wait::TryOnce,
        Some(t) => Wait::Timeout(seconds(t, "timeout")?),
    })
}

/// A connection pool for one Redis deployment: `Client(url)`, or
/// `Client([url, url, url])` for Redlock over independent servers (a
/// majority must agree; fencing numbers are advisory there). Thread-safe;
/// share one per process. Subclassable: `redislock.Client` is a Python
/// subclass that adds `synchronized()`. `repr()` shows the URL without its
/// password; a client is not pickled, and a copy of it is the same client.
#[pyclass(module = "redislock", frozen, subclass)]
pub struct Client {
    client: CoreClient,
    /// The URL, or the Redlock list, without its password (for `repr()`).
    shown: String,
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (url, *, connect_timeout=None, command_timeout=None, node_timeout=None))]
    fn new(
        url: &Bound<'_, PyAny>,
        connect_timeout: Option<f64>,
        command_timeout: Option<f64>,
        node_timeout: Option<f64>,
    ) -> PyResult<Self> {
        let py = url.py();
        let urls: Vec<String> = if let Ok(s) = url.cast::<PyString>() {
            vec![s.to_cow()?.into_owned()]
        } else {
            url.extract()
                .map_err(|_| PyTypeError::new_err("url must be a str or a list of str"))?
        };
        if urls.is_empty() {
            return Err(PyValueError::new_err("the list of URLs is empty"));
        }
        let mut builder = CoreClient::redlock(&urls);
        if let Some(t) = connect_timeout {
            builder = builder.connect_timeout(seconds(t, "connect_timeout")?);
        }
        if let Some(t) = command_timeout {
            builder = builder.command_timeout(seconds(t, "command_timeout")?);
        }
        if let Some(t) = node_timeout {
            builder = builder.node_timeout(seconds(t, "node_timeout")?);
        }
        let client = builder.build().map_err(|e| to_py(py, e))?;
        let shown = match url.cast::<PyString>() {
            Ok(_) => redislock::redact_url(&urls[0]),
            Err(_) => {
                let each: Vec<String> = urls.iter().map(|u| redislock::redact_url(u)).collect();
                format!("[{}]", each.join(", "))
            }
        };
        Ok(Client { client, shown })
    }

    /// A lock named `name` (str or bytes). Nothing is sent to Redis until
    /// it is acquired. `ttl`: seconds the lock lives unless extended.
    /// `timeout`: how long `acquire()`/`with` wait: None forever, 0 once.
    /// `token`: the caller's own (str or bytes), else 128 random bits per
    /// acquisition. `auto_renew`: renew in the background until released.
    /// `on_lost`: a callable taking no arguments, run once for each
    /// acquisition found lost (by renewal, on the renewal thread; by
    /// `extend()` or `release()`, on the caller's thread before it raises).
    /// `fenced`: draw the fencing number in the acquire itself (otherwise
    /// on the first read of `lock.fence`, one more round trip).
    #[pyo3(signature = (name, ttl=30.0, timeout=None, token=None, auto_renew=false, on_lost=None, fenced=false))]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        &self,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        timeout: Option<f64>,
        token: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
        on_lost: Option<&Bound<'_, PyAny>>,
        fenced: bool,
    ) -> PyResult<Lock> {
        let args = (ttl, timeout, token, auto_renew, on_lost);
        self.handle(name, Kind::Lock, args, fenced)
    }

    /// `permits` of the counting semaphore `name`, which admits `limit`
    /// permits in all (this call's limit; 1 to 1,000,000, `permits` 1 to
    /// `limit`, else ValueError). Waiters are served in arrival order, with
    /// no barging; each holder has its own lease (`ttl`), token and fence.
    /// The object is used as a lock's: `with`, `async with`, `acquire()`,
    /// `release()`, `extend()`, `fence`, `token`, `lost`. It never collides
    /// with the lock of the same name. The other arguments as for `lock()`.
    #[pyo3(signature = (name, limit, ttl=30.0, permits=1, token=None, auto_renew=false, timeout=None, on_lost=None))]
    #[allow(clippy::too_many_arguments)]
    fn semaphore(
        &self,
        name: &Bound<'_, PyAny>,
        limit: u32,
        ttl: f64,
        permits: u32,
        token: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
        timeout: Option<f64>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Lock> {
        let kind = redislock::__private::semaphore_kind(limit, permits)
            .map_err(|e| to_py(name.py(), e))?;
        self.handle(name, kind, (ttl, timeout, token, auto_renew, on_lost), true)
    }

    /// The read-write lock `name`, shared: any number of readers at once,
    /// while no writer holds it or waits for it (a queued writer stops new
    /// readers; the readers behind it enter together after it). As
    /// `semaphore()` otherwise.
    #[pyo3(signature = (name, ttl=30.0, token=None, auto_renew=false, timeout=None, on_lost=None))]
    fn read_lock(
        &self,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        token: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
        timeout: Option<f64>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Lock> {
        let args = (ttl, timeout, token, auto_renew, on_lost);
        self.handle(name, Kind::Read, args, true)
    }

    /// The read-write lock `name`, exclusive: once nobody holds it and
    /// nobody queued earlier waits. As `read_lock()` otherwise.
    #[pyo3(signature = (name, ttl=30.0, token=None, auto_renew=false, timeout=None, on_lost=None))]
    fn write_lock(
        &self,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        token: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
        timeout: Option<f64>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Lock> {
        let args = (ttl, timeout, token, auto_renew, on_lost);
        self.handle(name, Kind::Write, args, true)
    }

    /// What this client did since it was made (or since a fork, in the
    /// child): a dict of counters (ints), the gauges `held_now`,
    /// `waiters_now` and `permits_held_now`, and the histograms `wait` and `held` (dicts of
    /// `count`, `sum`, `max`, `p50`, `p90`, `p99` in seconds, `buckets` and
    /// their upper `bounds` in seconds). No I/O.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats::to_dict(py, &self.client.stats())
    }

    /// Take the lock `name` from whoever holds it (this library's holder,
    /// or any string another client stored there) and hand it to the
    /// oldest waiter at once, as a release would. True when a holder was
    /// removed, False when nobody held it. The operator's unlock, for a
    /// lock whose owner is known to be gone: it breaks mutual exclusion if
    /// the owner is still working (its release then raises LockNotOwned).
    /// Fences stay monotonic. Only the plain lock `name`, never a semaphore
    /// or read-write lock; LockWrongType for a key of another type (left
    /// alone).
    fn force_release(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        let name = bytes_arg(name, "name")?;
        let client = &self.client;
        detached(py, || client.force_release(&name))?.map_err(|e| to_py(py, e))
    }

    /// Release the lock `name` if it holds `token` (no Lock object needed).
    /// False when it does not: expired, or held by another owner.
    fn release_token(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        token: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let name = bytes_arg(name, "name")?;
        let token = bytes_arg(token, "token")?;
        let client = &self.client;
        detached(py, || client.release_token(&name, &token))?.map_err(|e| to_py(py, e))
    }

    /// Check every server this client's locks may reach for what makes a
    /// lock unsafe or slow (eviction, persistence, replication, scripting,
    /// ...), and run one lock cycle: a Report (`str()` of it is what
    /// `redislock doctor` prints). Only harmless commands; nothing is left
    /// on the server. Raises only when no server could be asked:
    /// LockConnectionError, LockQuorumError (Redlock), LockServerError
    /// (credentials refused).
    fn doctor(&self, py: Python<'_>) -> PyResult<doctor::Report> {
        let client = &self.client;
        let r = detached(py, || client.doctor())?.map_err(|e| to_py(py, e))?;
        doctor::Report::new(py, r)
    }

    /// Awaitable `doctor()`: the checks run on a thread of the runtime, not
    /// on the event loop's.
    fn doctor_async(&self, py: Python<'_>) -> PyResult<Py<aio::Pending>> {
        let client = self.client.clone();
        aio::future(py, async move {
            let r = aio::runtime()
                .spawn_blocking(move || client.doctor())
                .await
                .map_err(|e| LockError::new_err(format!("doctor did not finish: {e}")))?;
            Python::attach(|py| doctor::Report::new(py, r.map_err(|e| to_py(py, e))?))
        })
    }

    /// The URL without its password: `<redislock.Client redis://user:***@host:6379/0>`.
    fn __repr__(&self) -> String {
        format!("<redislock.Client {}>", self.shown)
    }

    /// A client is not pickled: it holds connections (and its URL may hold
    /// a password). Open one from the URL in the other process.
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "cannot pickle a redislock.Client: it holds connections; \
             open a Client from its URL in the other process",
        ))
    }

    /// The same client: it is immutable and made to be shared (by threads,
    /// and by the objects that copy.copy() or copy.deepcopy() copies).
    fn __copy__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __deepcopy__(slf: Py<Self>, _memo: &Bound<'_, PyAny>) -> Py<Self> {
        slf
    }
}

/// Handles of every kind.
impl Client {
    /// A handle on the name `name` locked as `kind`; the arguments
    /// checked before any I/O.
    fn handle(
        &self,
        name: &Bound<'_, PyAny>,
        kind: Kind,
        (ttl, timeout, token, auto_renew, on_lost): HandleArgs<'_, '_>,
        fenced: bool,
    ) -> PyResult<Lock> {
        let py = name.py();

        let name = bytes_arg(name, "name")?;
        redislock::__private::check_key(&name).map_err(|e| to_py(py, e))?;
        let ttl = seconds(ttl, "ttl")?;
        redislock::__private::ttl_millis(ttl).map_err(|e| to_py(py, e))?;
        let token = token.map(|t| bytes_arg(t, "token")).transpose()?;
        if let Some(t) = &token {
            redislock::__private::check_token(t).map_err(|e| to_py(py, e))?;
        }
        let on_lost = on_lost.filter(|f| !f.is_none());
        if let Some(f) = on_lost {
            if !f.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "on_lost must be callable, not {}",
                    f.get_type().name()?
                )));
            }
        }
        Ok(Lock {
            client: self.client.clone(),
            name,
            kind,
            ttl,
            wait: wait_arg(timeout)?,
            token,
            auto_renew,
            fenced,
            on_lost: Mutex::new(on_lost.map(|f| f.clone().unbind())),
            held: Mutex::new(Vec::new()),
            released: Arc::new(Mutex::new(Vec::new())),
        })
    }
}

/// `ttl`, `timeout`, `token`, `auto_renew`, `on_lost` of a handle.
type HandleArgs<'a, 'py> = (
    f64,
    Option<f64>,
    Option<&'a Bound<'py, PyAny>>,
    bool,
    Option<&'a Bound<'py, PyAny>>,
);

struct Held {
    thread: ThreadId,
    /// Shared only for the length of a call (extend, owned) that runs
    /// without the list's mutex; release waits for those to end.
    lock: Arc<CoreLock>,
}

/// The fence of an acquisition given back, as `fence` answers it after
/// the release: for the thread that took it and for the one that released
/// it (the same one, but for hand-overs between threads).
struct Released {
    /// Which acquisition (for the update once the release has it alone).
    id: u64,
    threads: [ThreadId; 2],
    /// None: released before its fence was drawn.
    fence: Option<u64>,
}

/// Note the fence of `lock`, the acquisition `id` being released, once the
/// release has it alone: a fence drawn meanwhile (by another thread's read
/// that was running) was drawn while it was held.
fn drawn(released: &Mutex<Vec<Released>>, id: u64, lock: &CoreLock) {
    if let Some(f) = lock.fence_if_drawn() {
        let mut released = locked(released);
        if let Some(r) = released.iter_mut().rev().find(|r| r.id == id) {
            r.fence = Some(f);
        }
    }
}

/// How many released acquisitions a Lock remembers, the latest of each
/// thread: a pool's threads come and go, the list does not grow with them.
const RELEASED_KEPT: usize = 64;

/// How long a thread whose release woke a waiting thread of this process
/// stays off the GIL, so that the woken thread takes it first (see
/// `Lock.release`). Measured with 1,000 threads down one lock's queue
/// (`bench/waiters.py threads`, before releases named their waiter): p50
/// hand-off 318-326 µs with 20 µs, 358-427 µs with a `sched_yield`,
/// 431-496 µs with neither.
const HAND_OVER_GIL: Duration = Duration::from_micros(20);

/// A named lock, acquired and released like `threading.Lock`, usable with
/// `with` and `async with`. One object may be shared by threads: each
/// thread's acquisition is kept apart, and `release()` gives back the
/// calling thread's (or the only one held, for hand-overs between threads
/// as in `async with`).
#[pyclass(module = "redislock", frozen, weakref)]
pub struct Lock {
    client: CoreClient,
    name: Vec<u8>,
    /// A lock, a semaphore's permits, or a side of a read-write lock.
    kind: Kind,
    ttl: Duration,
    wait: Wait,
    token: Option<Vec<u8>>,
    auto_renew: bool,
    fenced: bool,
    /// The `on_lost` callback; only touched with the GIL held.
    on_lost: Mutex<Option<Py<PyAny>>>,
    /// Only held for moments, never across a call into the core.
    held: Mutex<Vec<Held>>,
    /// The fences of the acquisitions released, latest last (see
    /// [`Released`]); only held for moments.
    released: Arc<Mutex<Vec<Released>>>,
}

impl Lock {
    /// The index of the acquisition that `release()` and the properties
    /// refer to: this thread's, else the only one.
    fn pick(held: &[Held]) -> Option<usize> {
        let me = std::thread::current().id();
        held.iter()
            .rposition(|h| h.thread == me)
            .or(if held.len() == 1 { Some(0) } else { None })
    }

    /// `f` of the acquisition the properties refer to; `f` must not block.
    fn with_held<T>(&self, f: impl FnOnce(Option<&CoreLock>) -> T) -> T {
        let held = locked(&self.held);
        f(Lock::pick(&held).map(|i| &*held[i].lock))
    }

    /// The acquisition `extend()` and `owned()` refer to, shared for the
    /// length of the call.
    fn current(&self) -> Option<Arc<CoreLock>> {
        let held = locked(&self.held);
        Lock::pick(&held).map(|i| held[i].lock.clone())
    }

    /// The callback, if any.
    fn callback(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        locked(&self.on_lost).as_ref().map(|f| f.clone_ref(py))
    }

    /// The notice that `on_lost` needs for each acquisition, if it is set.
    fn notice(slf: &Bound<'_, Self>) -> PyResult<Option<Notice>> {
        if locked(&slf.get().on_lost).is_none() {
            return Ok(None);
        }
        Notice::new(slf).map(Some)
    }

    /// Keep a new acquisition of the calling thread.
    fn keep(&self, lock: CoreLock, notice: Option<&Notice>) {
        if let Some(n) = notice {
            n.register(&lock);
        }
        locked(&self.held).push(Held {
            thread: std::thread::current().id(),
            lock: Arc::new(lock),
        });
    }

    fn do_acquire(slf: &Bound<'_, Self>, wait: Wait) -> PyResult<bool> {
        let (py, this) = (slf.py(), slf.get());
        let notice = Lock::notice(slf)?;
        let opts = this.options(wait);
        match acquire_interruptibly(py, &this.client, &this.name, this.kind, opts)? {
            Ok(lock) => {
                this.keep(lock, notice.as_ref());
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::NotAcquired => Ok(false),
            Err(e) => Err(to_py(py, e)),
        }
    }

    /// The wait `acquire(blocking, timeout)` asks for.
    fn wait_for(&self, blocking: bool, timeout: Option<f64>) -> PyResult<Wait> {
        Ok(match (blocking, timeout) {
            (false, Some(-1.0)) => Wait::TryOnce,
            (false, _) => {
                return Err(PyValueError::new_err(
                    "can't specify a timeout for a non-blocking call",
                ));
            }
            (true, Some(-1.0)) => self.wait,
            (true, t) => wait_arg(t)?,
        })
    }

    fn options(&self, wait: Wait) -> AcquireOptions {
        let mut opts = AcquireOptions::new(self.ttl)
            .wait(wait)
            .auto_renew(self.auto_renew)
            .fenced(self.fenced);
        opts.token = self.token.clone();
        opts
    }

    /// The acquisition `release()` gives back, out of the list (shared
    /// still, while an extend or owned of another thread runs on it), its
    /// fence noted for `fence` (drawn so far: [`Lock::drawn`] notes one
    /// that a call running meanwhile draws).
    fn take_held(&self) -> PyResult<(Arc<CoreLock>, u64)> {
        let taken = {
            let mut held = locked(&self.held);
            match Lock::pick(&held) {
                Some(i) => held.remove(i),
                None => return Err(self.not_held()),
            }
        };
        static RELEASES: AtomicU64 = AtomicU64::new(0);
        let id = RELEASES.fetch_add(1, Ordering::Relaxed);
        let me = std::thread::current().id();
        let mut released = locked(&self.released);
        released.retain(|r| !r.threads.contains(&me) && !r.threads.contains(&taken.thread));
        if released.len() >= RELEASED_KEPT {
            released.remove(0);
        }
        released.push(Released {
            id,
            threads: [taken.thread, me],
            fence: taken.lock.fence_if_drawn(),
        });
        Ok((taken.lock, id))
    }

    /// `fence` when this thread holds nothing: the fence of the
    /// acquisition it last released (or took, when another thread
    /// released it); None when it released none.
    fn fence_released(&self) -> PyResult<Option<u64>> {
        let me = std::thread::current().id();
        let released = locked(&self.released);
        match released.iter().rev().find(|r| r.threads.contains(&me)) {
            None => Ok(None),
            Some(Released { fence: Some(f), .. }) => Ok(Some(*f)),
            Some(Released { fence: None, .. }) => Err(LockNotOwned::new_err(format!(
                "lock {} was released before its fence was drawn: read lock.fence while \
                 holding it, or take it with client.lock(..., fenced=True)",
                redislock::__private::show_key(&self.name)
            ))),
        }
    }

    fn not_held(&self) -> PyErr {
        LockNotOwned::new_err(format!(
            "lock {} is not held by this Lock object (never acquired, or already released)",
            redislock::__private::show_key(&self.name)
        ))
    }
}

/// Where an async acquisition leaves its lock for the task that awaits it.
enum Grant {
    Waiting,
    Ready(CoreLock),
    /// The task took it, or is gone (cancelled).
    Closed,
}

/// Start an async acquisition of `slf`'s lock. The awaitable's result is
/// True/False (`acquire_async`), or the Lock itself with LockTimeout when
/// the wait runs out (`async with`). The lock reaches `slf`'s acquisitions
/// only when the task takes the result; a task that stops waiting first has
/// it released (see [`Acquiring`]).
fn start_acquire<'py>(
    slf: &Bound<'py, Lock>,
    wait: Wait,
    entering: bool,
) -> PyResult<Py<aio::Pending>> {
    let py = slf.py();
    let this = slf.get();
    let (client, name, opts) = (this.client.clone(), this.name.clone(), this.options(wait));
    let kind = this.kind;
    let notice = Lock::notice(slf)?;
    let slot = Arc::new(Mutex::new(Grant::Waiting));
    let me: Py<Lock> = slf.clone().unbind();
    let fut = {
        let slot = slot.clone();
        async move {
            let got = client.acquire_as_async(&name, kind, opts).await;
            Python::attach(|py| match got {
                Ok(lock) => {
                    let mut s = locked(&slot);
                    if matches!(*s, Grant::Waiting) {
                        *s = Grant::Ready(lock);
                    }
                    // Closed: the task stopped waiting; dropping the lock
                    // here releases it on the runtime.
                    drop(s);
                    if entering {
                        Ok(me.into_any())
                    } else {
                        true.into_py_any(py)
                    }
                }
                Err(e) if e.kind() == ErrorKind::NotAcquired && !entering => false.into_py_any(py),
                Err(e) => Err(to_py(py, e)),
            })
        }
    };
    let claim = Acquiring {
        slot,
        lock: Mutex::new(Some(slf.clone().unbind())),
        notice,
    };
    aio::pending(py, fut, Some(Box::new(claim)))
}

/// An async acquisition's lock on its way to the task that awaits it. The
/// Lock object is let go once the result is taken or abandoned: a finished
/// task keeps its awaitable, and the awaitable must not keep the Lock (whose
/// end releases what it holds).
struct Acquiring {
    slot: Arc<Mutex<Grant>>,
    lock: Mutex<Option<Py<Lock>>>,
    /// The Lock's `on_lost`, registered when the task takes the lock.
    notice: Option<Notice>,
}

impl aio::Claim for Acquiring {
    fn adopt(&self) {
        let to = locked(&self.lock).take();
        let got = std::mem::replace(&mut *locked(&self.slot), Grant::Closed);
        if let (Grant::Ready(lock), Some(to)) = (got, to) {
            to.get().keep(lock, self.notice.as_ref());
        }
    }

    fn abandon(&self) {
        drop(locked(&self.lock).take());
        if let Grant::Ready(lock) = std::mem::replace(&mut *locked(&self.slot), Grant::Closed) {
            aio::runtime().spawn(async move {
                let _ = lock.release_async().await;
            });
        }
    }
}

#[pymethods]
impl Lock {
    /// Acquire; True when acquired, False when the wait ran out.
    /// `blocking=False` tries once. `timeout=-1` waits as the lock was made
    /// to (`client.lock(timeout=...)`), None forever, 0 once, else seconds.
    #[pyo3(signature = (blocking=true, timeout=Some(-1.0)), text_signature = "(self, /, blocking=True, timeout=-1.0)")]
    fn acquire(slf: &Bound<'_, Self>, blocking: bool, timeout: Option<f64>) -> PyResult<bool> {
        let wait = slf.get().wait_for(blocking, timeout)?;
        Lock::do_acquire(slf, wait)
    }

    /// Release. Raises LockNotOwned when the lock expired or was taken over
    /// (the new holder's key is left alone), or was not held.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let (mut shared, id) = self.take_held()?;
        let (r, lost, lines) = detached(py, || {
            // Another thread's extend or owned on this acquisition ends
            // within its round trip.
            let lock = loop {
                match Arc::try_unwrap(shared) {
                    Ok(lock) => break lock,
                    Err(again) => {
                        shared = again;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            };
            drawn(&self.released, id, &lock);
            // Set by an earlier release on this thread that was not asked.
            let _ = redislock::__private::take_woke_here();
            // Its log lines (a hand-off's) are held back: asking `logging`
            // about one would take the GIL now, when the thread that the
            // lock went to needs it.
            let ((released, lost), lines) = holding_lines(|| deferring(|| lock.release()));
            if redislock::__private::take_woke_here() {
                // The lock went to a thread of this process that slept
                // waiting for it: that thread needs the GIL next, and this
                // one, still running, would take it first.
                std::thread::sleep(HAND_OVER_GIL);
            }
            (released, lost, lines)
        })?;
        pass_on(lines)?;
        fire_all(lost);
        r.map_err(|e| to_py(py, e))
    }

    /// Set the remaining time to `ttl` seconds (not added to it). Raises
    /// LockNotOwned when the lock expired or was taken over.
    fn extend(&self, py: Python<'_>, ttl: f64) -> PyResult<()> {
        let ttl = seconds(ttl, "ttl")?;
        let lock = self.current().ok_or_else(|| self.not_held())?;
        let (r, lost) = detached(py, || deferring(|| lock.extend(ttl)))?;
        drop(lock);
        fire_all(lost);
        r.map_err(|e| to_py(py, e))
    }

    /// Whether anyone holds the lock (asks Redis).
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        let (client, name) = (&self.client, &self.name);
        detached(py, || client.is_locked(name))?.map_err(|e| to_py(py, e))
    }

    /// Whether this object holds the lock right now (asks Redis).
    fn owned(&self, py: Python<'_>) -> PyResult<bool> {
        let Some(lock) = self.current() else {
            return Ok(false);
        };
        detached(py, || lock.owned())?.map_err(|e| to_py(py, e))
    }

    /// True once renewal or an extend found the lock gone.
    #[getter]
    fn lost(&self) -> bool {
        self.with_held(|l| l.is_some_and(|l| l.is_lost()))
    }

    /// The token stored under the key (bytes); before the first
    /// acquisition, the caller's token or None.
    #[getter]
    fn token<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.with_held(|l| match l {
            Some(l) => Some(PyBytes::new(py, l.token())),
            None => self.token.as_deref().map(|t| PyBytes::new(py, t)),
        })
    }

    /// The fencing number of the current acquisition (int): greater than
    /// any number handed out before for this name to an earlier holder,
    /// also across a server restart (at least the server's clock in µs,
    /// below 2**53). Drawn on first access, with a check that the lock is
    /// still held (one round trip; `fenced=True`, semaphores, read-write
    /// locks and Redlock draw it in the acquire instead). Raises
    /// LockNotOwned when the lock expired or was taken over before that.
    ///
    /// After a release: the number drawn while the acquisition was held
    /// (this thread's last one); LockNotOwned when it was released before
    /// its fence was drawn (no number is drawn for a lock not held). None
    /// only before the first acquisition.
    #[getter]
    fn fence(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let Some(lock) = self.current() else {
            return self.fence_released();
        };
        if let Some(f) = lock.fence_if_drawn() {
            return Ok(Some(f));
        }
        let (r, lost) = detached(py, || deferring(|| lock.fence()))?;
        drop(lock);
        fire_all(lost);
        r.map(Some).map_err(|e| to_py(py, e))
    }

    /// The lock name (bytes).
    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.name)
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let py = slf.py();
        let this = slf.get();
        let notice = Lock::notice(&slf)?;
        let (client, name) = (&this.client, &this.name);
        let opts = this.options(this.wait);
        let lock =
            acquire_interruptibly(py, client, name, this.kind, opts)?.map_err(|e| to_py(py, e))?;
        this.keep(lock, notice.as_ref());
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.release(py)?;
        Ok(false)
    }

    /// Awaitable `acquire()`: no thread waits; the wake-up comes through
    /// the client's subscriber connection. Cancelling the task leaves the
    /// queue; a lock handed over at that very moment is released.
    #[pyo3(signature = (blocking=true, timeout=Some(-1.0)), text_signature = "(self, /, blocking=True, timeout=-1.0)")]
    fn acquire_async<'py>(
        slf: &Bound<'py, Self>,
        blocking: bool,
        timeout: Option<f64>,
    ) -> PyResult<Py<aio::Pending>> {
        let wait = slf.get().wait_for(blocking, timeout)?;
        start_acquire(slf, wait, false)
    }

    /// Awaitable `release()`.
    fn release_async<'py>(slf: &Bound<'py, Self>) -> PyResult<Py<aio::Pending>> {
        let (lock, id) = slf.get().take_held()?;
        let released = slf.get().released.clone();
        aio::future(slf.py(), async move {
            let lock = sole(lock).await;
            drawn(&released, id, &lock);
            lock.release_async()
                .await
                .map_err(|e| Python::attach(|py| to_py(py, e)))
        })
    }

    fn __aenter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Py<aio::Pending>> {
        start_acquire(slf, slf.get().wait, true)
    }

    #[pyo3(signature = (*_exc))]
    fn __aexit__<'py>(
        slf: &Bound<'py, Self>,
        _exc: &Bound<'py, PyTuple>,
    ) -> PyResult<Py<aio::Pending>> {
        let (lock, id) = slf.get().take_held()?;
        let released = slf.get().released.clone();
        aio::future(slf.py(), async move {
            let lock = sole(lock).await;
            drawn(&released, id, &lock);
            lock.release_async()
                .await
                .map(|()| false)
                .map_err(|e| Python::attach(|py| to_py(py, e)))
        })
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Touched only with the GIL held, which the collector holds now.
        if let Ok(f) = self.on_lost.try_lock() {
            if let Some(f) = &*f {
                visit.call(f)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let f = match self.on_lost.try_lock() {
            Ok(mut f) => f.take(),
            Err(_) => None,
        };
        drop(f);
    }

    /// A Lock is a live acquisition handle: it is not pickled. Pass its
    /// name and token to another process (`client.release_token()`).
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "cannot pickle a redislock.Lock: it is a live handle; pass its name and token \
             instead (client.release_token(name, token))",
        ))
    }

    /// Nor copied: one acquisition has one handle, released once.
    fn __copy__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "cannot copy a redislock.Lock: one acquisition has one handle; share the object",
        ))
    }

    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> PyResult<()> {
        self.__copy__()
    }

    fn __repr__(&self) -> String {
        format!(
            "<redislock.Lock {} ttl={}s held={}>",
            redislock::__private::show_key(&self.name),
            self.ttl.as_secs_f64(),
            !locked(&self.held).is_empty()
        )
    }
}

impl Drop for Lock {
    /// Acquisitions still held are released (by the core's drop), over the
    /// network: not with the GIL held.
    fn drop(&mut self) {
        let held = std::mem::take(self.held.get_mut().unwrap_or_else(|e| e.into_inner()));
        if !held.is_empty() {
            Python::attach(|py| {
                if let Err(e) = detached(py, move || drop(held)) {
                    // Nothing can raise from here: shown as Python shows
                    // an exception in __del__.
                    e.write_unraisable(py, None);
                }
            });
        }
    }
}

/// The core's debug lines (queued behind whom, retries and why, hand-offs,
/// gave up, lost) as records of Python's `logging`, on loggers named after
/// the core's modules (`redislock.deploy.wait`, `redislock.renew`, ...),
/// children of `redislock`. Only the core's own lines: the crates under it
/// stay quiet. Loggers are cached but not their levels, so a level set at
/// any time is obeyed: by the next call, and within a second by a call
/// that is waiting. The cost (taking the GIL to ask `isEnabledFor`) is paid
/// only by the lines there are, all on slow paths (a wait, a retry, a
/// loss), and once per call and logger: the line of a hand-off, which ends
/// a wait that logged when it queued, costs nothing when it is not wanted.
/// An acquire or release that finds the lock free logs nothing.
fn forward_logs(py: Python<'_>) -> PyResult<()> {
    let logger = pyo3_log::Logger::new(py, pyo3_log::Caching::Loggers)?
        .filter(log::LevelFilter::Off)
        .filter_target("redislock".to_owned(), log::LevelFilter::Debug);
    // Only fails when a logger is already installed in this library, which
    // then keeps its place.
    if log::set_boxed_logger(Box::new(Logs(logger))).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    Ok(())
}

/// pyo3-log's logger, and what to do with an exception raised inside
/// `logging` (by a handler, or by a signal handler that Python runs there):
/// pyo3-log leaves it set on the thread, where the interpreter would later
/// find it as a SystemError, or where it is silently dropped. On a thread inside a call of ours it is kept
/// for that call to raise ([`detached`]); on the library's own threads
/// (renewal, the async runtime) it is shown as an exception in `__del__`
/// is, since nothing there can raise it.
struct Logs(pyo3_log::Logger);

impl log::Log for Logs {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        !aio::EXITING.load(std::sync::atomic::Ordering::Relaxed) && self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        // The interpreter is exiting ([`aio::before_exit`]): no more lines.
        if aio::EXITING.load(std::sync::atomic::Ordering::Relaxed)
            || !self.0.enabled(record.metadata())
        {
            return;
        }
        let held = HELD_LINES.with(|h| match h.borrow_mut().as_mut() {
            Some(lines) => {
                lines.push(HeldLine::of(record));
                true
            }
            None => false,
        });
        if held {
            return;
        }
        // Inside a call, what `logging` answered earlier in it.
        let target = record.target().as_ptr() as usize;
        let level = record.level();
        let asked = IN_CALL.get().then(|| {
            ASKED.with(|a| {
                let a = a.borrow();
                a.iter()
                    .find(|x| x.target == target && x.level == level)
                    .filter(|x| x.at.elapsed() < ASKED_FOR)
                    .map(|x| x.enabled)
            })
        });
        if asked == Some(Some(false)) {
            return;
        }
        // One attach around pyo3-log's own: on a thread Python does not
        // know, the exception would go with the thread state made for it.
        Python::attach(|py| {
            if asked == Some(None) {
                let enabled = python_takes(py, record.target(), level);
                ASKED.with(|a| {
                    let mut a = a.borrow_mut();
                    a.retain(|x| !(x.target == target && x.level == level));
                    a.push(Asked {
                        target,
                        level,
                        enabled,
                        at: Instant::now(),
                    });
                });
                if !enabled {
                    return;
                }
            }
            self.0.log(record);
            if let Some(e) = PyErr::take(py) {
                if IN_CALL.get() {
                    RAISED.with(|r| {
                        r.borrow_mut().get_or_insert(e);
                    });
                } else {
                    e.write_unraisable(py, None);
                }
            }
        });
    }

    fn flush(&self) {
        self.0.flush()
    }
}

/// A line of the core held back (see [`holding_lines`]): what `log` gave,
/// owned.
struct HeldLine {
    level: log::Level,
    target: String,
    message: String,
    module_path: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

impl HeldLine {
    fn of(record: &log::Record<'_>) -> HeldLine {
        HeldLine {
            level: record.level(),
            target: record.target().to_owned(),
            message: record.args().to_string(),
            module_path: record.module_path().map(str::to_owned),
            file: record.file().map(str::to_owned),
            line: record.line(),
        }
    }
}

/// Run `f` on this thread (inside a call without the GIL, see
/// [`detached`]), holding back the core's lines that it logs instead of
/// taking the GIL to pass each on; they are returned for [`pass_on`]
/// once the call has the GIL back.
fn holding_lines<T>(f: impl FnOnce() -> T) -> (T, Vec<HeldLine>) {
    struct Restore(Option<Vec<HeldLine>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            HELD_LINES.with(|h| *h.borrow_mut() = outer);
        }
    }
    let outer = HELD_LINES.with(|h| h.borrow_mut().replace(Vec::new()));
    let restore = Restore(outer);
    let out = f();
    let lines = HELD_LINES
        .with(|h| h.borrow_mut().take())
        .unwrap_or_default();
    drop(restore);
    (out, lines)
}

/// Pass lines held back by [`holding_lines`] on to `logging` with the GIL
/// the call took back, as they would have gone inside the call: an
/// exception raised there is what the call raises (see [`detached`]).
/// `logging` is asked afresh, and all the lines live until the last is
/// passed on, so that each target is its own address (see [`Asked`]).
fn pass_on(lines: Vec<HeldLine>) -> PyResult<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let outer = IN_CALL.replace(true);
    ASKED.with(|a| a.borrow_mut().clear());
    let logger = log::logger();
    for l in &lines {
        logger.log(
            &log::Record::builder()
                .level(l.level)
                .target(&l.target)
                .args(format_args!("{}", l.message))
                .module_path(l.module_path.as_deref())
                .file(l.file.as_deref())
                .line(l.line)
                .build(),
        );
    }
    IN_CALL.set(outer);
    match take_raised() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Whether the `logging` logger of a core module (`redislock.deploy.wait`
/// for `redislock::deploy::wait`) takes `level`, as pyo3-log names both.
/// When `logging` cannot tell, yes: pyo3-log then decides.
fn python_takes(py: Python<'_>, target: &str, level: log::Level) -> bool {
    let number = match level {
        log::Level::Error => 40,
        log::Level::Warn => 30,
        log::Level::Info => 20,
        log::Level::Debug => 10,
        log::Level::Trace => 5,
    };
    let name = target.replace("::", ".");
    let asked = py
        .import("logging")
        .and_then(|logging| logging.call_method1("getLogger", (name,)))
        .and_then(|logger| logger.call_method1("isEnabledFor", (number,)))
        .and_then(|enabled| enabled.is_truthy());
    asked.unwrap_or_else(|e| {
        // Kept for the call, as an exception of pyo3-log's would be.
        e.restore(py);
        true
    })
}

/// The native module.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Client>()?;
    m.add_class::<Lock>()?;
    m.add_class::<doctor::Report>()?;
    m.add_class::<doctor::Finding>()?;
    m.add("LockError", py.get_type::<LockError>())?;
    m.add("LockTimeout", py.get_type::<LockTimeout>())?;
    m.add("LockNotOwned", py.get_type::<LockNotOwned>())?;
    m.add("LockWrongType", py.get_type::<LockWrongType>())?;
    m.add("LockQuorumError", py.get_type::<LockQuorumError>())?;
    m.add("LockServerError", py.get_type::<LockServerError>())?;
    m.add("LockUnconfirmed", py.get_type::<LockUnconfirmed>())?;
    m.add("LockConnectionError", connection_error_type(py)?)?;
    m.add("__version__", redislock::VERSION)?;
    forward_logs(py)?;
    let before_exit = wrap_pyfunction!(aio::before_exit, m)?;
    py.import("atexit")?
        .call_method1("register", (before_exit,))?;
    Ok(())
}
