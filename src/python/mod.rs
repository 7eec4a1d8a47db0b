//! The Python module `redislock._native` (pyo3), re-exported by the
//! `redislock` package in `python/redislock/`.
//!
//! Thin wrappers over the core: arguments become owned Rust values, then
//! the GIL is released around every call that may touch the network. The
//! async methods await the core's async operations on a runtime of this
//! module's own (`aio`): no thread is held while a task waits. No protocol
//! or timing logic lives here.

mod aio;

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyConnectionError, PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};
use pyo3::IntoPyObjectExt;

use crate::sync::locked;
use crate::{
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
    LockError,
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

/// Acquire with the GIL released. While it waits, Python's pending signal
/// handlers run between the slices of the wait (at least every 100 ms, and
/// at once when a signal arrives): an exception they raise, such as
/// KeyboardInterrupt, ends the wait and is what the call raises (a lock
/// handed over in that very moment is released again).
fn acquire_interruptibly(
    py: Python<'_>,
    client: &CoreClient,
    name: &[u8],
    opts: AcquireOptions,
) -> PyResult<Result<CoreLock, Error>> {
    let raised: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
    let stash = Arc::clone(&raised);
    let opts = opts.interrupt(Interrupt::new(move || {
        Python::attach(|py| match py.check_signals() {
            Ok(()) => false,
            Err(e) => {
                *locked(&stash) = Some(e);
                true
            }
        })
    }));
    let r = py.detach(|| client.acquire_with(name, opts));
    let pending = locked(&raised).take();
    match pending {
        Some(e) => {
            drop(r);
            Err(e)
        }
        None => Ok(r),
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
/// subclass that adds `synchronized()`.
#[pyclass(module = "redislock", frozen, subclass)]
pub struct Client {
    client: CoreClient,
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
        Ok(Client { client })
    }

    /// A lock named `name` (str or bytes). Nothing is sent to Redis until
    /// it is acquired. `ttl`: seconds the lock lives unless extended.
    /// `timeout`: how long `acquire()`/`with` wait: None forever, 0 once.
    /// `token`: the caller's own (str or bytes), else 128 random bits per
    /// acquisition. `auto_renew`: renew in the background until released.
    #[pyo3(signature = (name, ttl=30.0, timeout=None, token=None, auto_renew=false))]
    fn lock(
        &self,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        timeout: Option<f64>,
        token: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
    ) -> PyResult<Lock> {
        let py = name.py();
        let name = bytes_arg(name, "name")?;
        crate::options::check_key(&name).map_err(|e| to_py(py, e))?;
        let ttl = seconds(ttl, "ttl")?;
        crate::options::ttl_millis(ttl).map_err(|e| to_py(py, e))?;
        let token = token.map(|t| bytes_arg(t, "token")).transpose()?;
        if let Some(t) = &token {
            crate::options::check_token(t).map_err(|e| to_py(py, e))?;
        }
        Ok(Lock {
            client: self.client.clone(),
            name,
            ttl,
            wait: wait_arg(timeout)?,
            token,
            auto_renew,
            held: Mutex::new(Vec::new()),
        })
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
        py.detach(|| client.release_token(&name, &token))
            .map_err(|e| to_py(py, e))
    }

    fn __repr__(&self) -> String {
        format!("<redislock.Client {}>", self.client.addr())
    }
}

struct Held {
    thread: ThreadId,
    lock: CoreLock,
}

/// A named lock, acquired and released like `threading.Lock`, usable with
/// `with` and `async with`. One object may be shared by threads: each
/// thread's acquisition is kept apart, and `release()` gives back the
/// calling thread's (or the only one held, for hand-overs between threads
/// as in `async with`).
#[pyclass(module = "redislock", frozen)]
pub struct Lock {
    client: CoreClient,
    name: Vec<u8>,
    ttl: Duration,
    wait: Wait,
    token: Option<Vec<u8>>,
    auto_renew: bool,
    held: Mutex<Vec<Held>>,
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

    fn with_held<T>(&self, f: impl FnOnce(Option<&CoreLock>) -> T) -> T {
        let held = locked(&self.held);
        f(Lock::pick(&held).map(|i| &held[i].lock))
    }

    fn do_acquire(&self, py: Python<'_>, wait: Wait) -> PyResult<bool> {
        let opts = self.options(wait);
        match acquire_interruptibly(py, &self.client, &self.name, opts)? {
            Ok(lock) => {
                locked(&self.held).push(Held {
                    thread: std::thread::current().id(),
                    lock,
                });
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
            .auto_renew(self.auto_renew);
        opts.token = self.token.clone();
        opts
    }

    /// The acquisition `release()` gives back, out of the list.
    fn take_held(&self) -> PyResult<CoreLock> {
        let mut held = locked(&self.held);
        match Lock::pick(&held) {
            Some(i) => Ok(held.remove(i).lock),
            None => Err(self.not_held()),
        }
    }

    fn not_held(&self) -> PyErr {
        LockNotOwned::new_err(format!(
            "lock {} is not held by this Lock object (never acquired, or already released)",
            crate::error::show_key(&self.name)
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
    let slot = Arc::new(Mutex::new(Grant::Waiting));
    let me: Py<Lock> = slf.clone().unbind();
    let fut = {
        let slot = slot.clone();
        async move {
            let got = client.acquire_with_async(&name, opts).await;
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
}

impl aio::Claim for Acquiring {
    fn adopt(&self) {
        let to = locked(&self.lock).take();
        let got = std::mem::replace(&mut *locked(&self.slot), Grant::Closed);
        if let (Grant::Ready(lock), Some(to)) = (got, to) {
            locked(&to.get().held).push(Held {
                thread: std::thread::current().id(),
                lock,
            });
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
    fn acquire(&self, py: Python<'_>, blocking: bool, timeout: Option<f64>) -> PyResult<bool> {
        let wait = self.wait_for(blocking, timeout)?;
        self.do_acquire(py, wait)
    }

    /// Release. Raises LockNotOwned when the lock expired or was taken over
    /// (the new holder's key is left alone), or was not held.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let lock = self.take_held()?;
        py.detach(|| lock.release()).map_err(|e| to_py(py, e))
    }

    /// Set the remaining time to `ttl` seconds (not added to it). Raises
    /// LockNotOwned when the lock expired or was taken over.
    fn extend(&self, py: Python<'_>, ttl: f64) -> PyResult<()> {
        let ttl = seconds(ttl, "ttl")?;
        let r = py.detach(|| self.with_held(|l| l.map(|l| l.extend(ttl))));
        match r {
            Some(r) => r.map_err(|e| to_py(py, e)),
            None => Err(self.not_held()),
        }
    }

    /// Whether anyone holds the lock (asks Redis).
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        let (client, name) = (&self.client, &self.name);
        py.detach(|| client.is_locked(name))
            .map_err(|e| to_py(py, e))
    }

    /// Whether this object holds the lock right now (asks Redis).
    fn owned(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.with_held(|l| l.map(|l| l.owned()).unwrap_or(Ok(false))))
            .map_err(|e| to_py(py, e))
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

    /// The fencing number of the current acquisition (int), or None: greater
    /// than any number handed out before for this name, also across a server
    /// restart (at least the server's clock in µs, below 2**53).
    #[getter]
    fn fence(&self) -> Option<u64> {
        self.with_held(|l| l.map(|l| l.fence()))
    }

    /// The lock name (bytes).
    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.name)
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let py = slf.py();
        let this = slf.get();
        let (client, name) = (&this.client, &this.name);
        let opts = this.options(this.wait);
        let lock = acquire_interruptibly(py, client, name, opts)?.map_err(|e| to_py(py, e))?;
        locked(&this.held).push(Held {
            thread: std::thread::current().id(),
            lock,
        });
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
        let lock = slf.get().take_held()?;
        aio::future(slf.py(), async move {
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
        let lock = slf.get().take_held()?;
        aio::future(slf.py(), async move {
            lock.release_async()
                .await
                .map(|()| false)
                .map_err(|e| Python::attach(|py| to_py(py, e)))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<redislock.Lock {} ttl={}s held={}>",
            crate::error::show_key(&self.name),
            self.ttl.as_secs_f64(),
            !locked(&self.held).is_empty()
        )
    }
}

/// The native module.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Client>()?;
    m.add_class::<Lock>()?;
    m.add("LockError", py.get_type::<LockError>())?;
    m.add("LockTimeout", py.get_type::<LockTimeout>())?;
    m.add("LockNotOwned", py.get_type::<LockNotOwned>())?;
    m.add("LockWrongType", py.get_type::<LockWrongType>())?;
    m.add("LockQuorumError", py.get_type::<LockQuorumError>())?;
    m.add("LockServerError", py.get_type::<LockServerError>())?;
    m.add("LockUnconfirmed", py.get_type::<LockUnconfirmed>())?;
    m.add("LockConnectionError", connection_error_type(py)?)?;
    m.add("__version__", crate::VERSION)?;
    Ok(())
}
