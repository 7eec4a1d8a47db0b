//! asyncio without threads: the async core runs on the bindings' tokio
//! runtime (`redislock::runtime`, which Node's binding shares), and
//! pyo3-async-runtimes turns its futures into asyncio futures. A task
//! awaiting a lock holds no thread: its wake-up comes through the client's
//! subscriber connection.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3_async_runtimes::generic::{ContextExt, JoinError, Runtime};
use pyo3_async_runtimes::TaskLocals;

use redislock::__private::locked;

pub(crate) use redislock::runtime::runtime;

/// The runtime as pyo3-async-runtimes sees it.
pub(crate) struct Rt;

pub(crate) struct Joined(tokio::task::JoinError);

impl JoinError for Joined {
    fn is_panic(&self) -> bool {
        self.0.is_panic()
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        self.0.into_panic()
    }
}

/// A spawned task's handle.
pub(crate) struct Handle(tokio::task::JoinHandle<()>);

impl Future for Handle {
    type Output = Result<(), Joined>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map_err(Joined)
    }
}

impl Runtime for Rt {
    type JoinError = Joined;
    type JoinHandle = Handle;

    fn spawn<F>(fut: F) -> Handle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let done = Done::start();
        let id = done.0;
        let handle = runtime().spawn(Tracked {
            fut: Box::pin(fut),
            _done: done,
        });
        TASKS.watch(id, handle.abort_handle());
        Handle(handle)
    }

    fn spawn_blocking<F>(f: F) -> Handle
    where
        F: FnOnce() + Send + 'static,
    {
        let done = Done::start();
        Handle(runtime().spawn_blocking(move || {
            f();
            drop(done);
        }))
    }
}

/// The runtime's tasks that may still enter Python (pyo3-async-runtimes
/// sets an asyncio future's result from them, and drops their event
/// loop's references there). A thread that asks for the GIL once the
/// interpreter finalizes is ended by CPython in the middle of Rust code,
/// which then frees Python objects without the GIL: a crash at exit. So the
/// interpreter's exit ([`before_exit`], an `atexit` callback, which runs
/// before finalizing) stops these tasks and waits for them.
struct Tasks {
    state: Mutex<TaskSet>,
    empty: Condvar,
}

struct TaskSet {
    next: u64,
    live: BTreeMap<u64, Option<tokio::task::AbortHandle>>,
}

static TASKS: Tasks = Tasks {
    state: Mutex::new(TaskSet {
        next: 0,
        live: BTreeMap::new(),
    }),
    empty: Condvar::new(),
};

/// Set by [`before_exit`]: nothing of this module enters Python any more.
pub(crate) static EXITING: AtomicBool = AtomicBool::new(false);

impl Tasks {
    fn set(&self) -> std::sync::MutexGuard<'_, TaskSet> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn watch(&self, id: u64, abort: tokio::task::AbortHandle) {
        let mut set = self.set();
        // Not there: the task has ended already.
        if let Some(slot) = set.live.get_mut(&id) {
            *slot = Some(abort);
        }
    }
}

/// A task's place in [`TASKS`], given up when it is dropped: after the
/// task's future, whatever of Python that held.
struct Done(u64);

impl Done {
    fn start() -> Done {
        let mut set = TASKS.set();
        let id = set.next;
        set.next += 1;
        set.live.insert(id, None);
        Done(id)
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        let mut set = TASKS.set();
        set.live.remove(&self.0);
        if set.live.is_empty() {
            TASKS.empty.notify_all();
        }
    }
}

/// A future and then its [`Done`] (fields drop in this order).
struct Tracked<F> {
    fut: Pin<Box<F>>,
    _done: Done,
}

impl<F: Future<Output = ()>> Future for Tracked<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.fut.as_mut().poll(cx)
    }
}

/// How long the interpreter's exit waits for the runtime's tasks to stop.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// Registered with `atexit` by the module: from now on no task of the
/// runtime and no log line of the core enters Python; the tasks that could
/// are cancelled (an asyncio call still pending at exit has nobody left to
/// answer) and waited for, without the GIL, for at most [`EXIT_WAIT`].
#[pyfunction]
pub(crate) fn before_exit(py: Python<'_>) {
    EXITING.store(true, Ordering::SeqCst);
    py.detach(|| {
        let mut set = TASKS.set();
        for abort in set.live.values().flatten() {
            abort.abort();
        }
        let deadline = Instant::now() + EXIT_WAIT;
        while !set.live.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            set = TASKS
                .empty
                .wait_timeout(set, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    });
}

tokio::task_local! {
    static LOCALS: OnceCell<TaskLocals>;
}

impl ContextExt for Rt {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        LOCALS.try_with(|c| c.get().cloned()).unwrap_or_default()
    }
}

type Boxed = Pin<Box<dyn Future<Output = PyResult<Py<PyAny>>> + Send>>;

/// What a pending call hands to its caller when the caller takes its
/// result, and gives back when the caller stops waiting without it.
pub(crate) trait Claim: Send + Sync + 'static {
    /// The caller received the result.
    fn adopt(&self);
    /// The caller is gone (cancelled, closed, dropped) without the result.
    fn abandon(&self);
}

enum Stage {
    /// Not awaited yet: nothing has run.
    Idle(Boxed),
    /// Running on the runtime; `stop` dropped (or sent) drops the work.
    Running {
        fut: Py<PyAny>,
        iter: Py<PyAny>,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
    },
    Finished,
}

/// The awaitable that async methods return. It behaves as a coroutine
/// (`send`, `throw`, `close`, `__await__`), so `asyncio.create_task`,
/// `wait_for` and `gather` take it, and, as a coroutine does, it starts only
/// when first awaited. Unlike a coroutine wrapping a future, it hears a
/// cancellation that arrives before its first step or while its task is
/// between steps: every way the caller stops waiting (`throw`, `close`,
/// garbage collection) drops the work on the runtime and gives back what it
/// produced (see [`Claim`]).
#[pyclass(module = "redislock", frozen)]
pub(crate) struct Pending {
    stage: Mutex<Stage>,
    claim: Option<Box<dyn Claim>>,
}

impl Pending {
    /// Stop waiting: drop the work (through the runtime, whether or not the
    /// loop still runs) and give back what it produced.
    fn abandon(&self, py: Python<'_>) {
        let was = std::mem::replace(&mut *locked(&self.stage), Stage::Finished);
        if let Stage::Running { fut, stop, .. } = was {
            drop(stop);
            // Best effort: a closed loop refuses, and the runtime side has
            // already been told.
            let _ = fut.bind(py).call_method0("cancel");
        }
        if let Some(c) = &self.claim {
            c.abandon();
        }
    }

    /// The iterator of the running asyncio future, starting the work on the
    /// first call.
    fn iter(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut stage = locked(&self.stage);
        match &*stage {
            Stage::Running { iter, .. } => return Ok(iter.clone_ref(py)),
            Stage::Finished => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "cannot reuse already awaited coroutine",
                ))
            }
            Stage::Idle(_) => {}
        }
        let Stage::Idle(work) = std::mem::replace(&mut *stage, Stage::Finished) else {
            unreachable!()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let work = Stoppable { work, stopped };
        let fut = pyo3_async_runtimes::generic::future_into_py::<Rt, _, _>(py, work)?;
        let iter = fut.call_method0("__await__")?.unbind();
        *stage = Stage::Running {
            fut: fut.unbind(),
            iter: iter.clone_ref(py),
            stop: Some(stop),
        };
        Ok(iter)
    }

    /// What the inner iterator gave: a yield passes through; its end (a
    /// result or an error) finishes this awaitable, and a result is adopted.
    fn step(&self, py: Python<'_>, r: PyResult<Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        match r {
            Ok(v) => Ok(v.unbind()),
            Err(e) => {
                *locked(&self.stage) = Stage::Finished;
                if let Some(c) = &self.claim {
                    if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) {
                        c.adopt();
                    } else {
                        c.abandon();
                    }
                }
                Err(e)
            }
        }
    }
}

/// The work, dropped when the awaitable lets go of `stopped`'s sender.
struct Stoppable {
    work: Boxed,
    stopped: tokio::sync::oneshot::Receiver<()>,
}

impl Future for Stoppable {
    type Output = PyResult<Py<PyAny>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if Pin::new(&mut self.stopped).poll(cx).is_ready() {
            return Poll::Ready(Err(pyo3::exceptions::asyncio::CancelledError::new_err(
                "the awaiting task stopped waiting",
            )));
        }
        self.work.as_mut().poll(cx)
    }
}

#[pymethods]
impl Pending {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let iter = self.iter(py)?;
        let r = iter.bind(py).call_method0("__next__");
        self.step(py, r)
    }

    fn send(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let iter = self.iter(py)?;
        let r = iter.bind(py).call_method1("send", (value,));
        self.step(py, r)
    }

    #[pyo3(signature = (typ, val=None, tb=None))]
    fn throw(
        &self,
        py: Python<'_>,
        typ: &Bound<'_, PyAny>,
        val: Option<&Bound<'_, PyAny>>,
        tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let running = match &*locked(&self.stage) {
            Stage::Running { iter, .. } => Some(iter.clone_ref(py)),
            _ => None,
        };
        self.abandon(py);
        // The future's iterator raises what it is given, as a coroutine
        // would at its await; without one, raise it here.
        let e = match running {
            Some(iter) => match iter.bind(py).call_method1("throw", (typ, val, tb)) {
                Err(e) => e,
                Ok(v) => return Ok(v.unbind()),
            },
            None if typ.is_instance_of::<pyo3::types::PyType>() => {
                let made = match val {
                    Some(v) if v.is_instance(typ)? => v.clone(),
                    Some(v) if !v.is_none() => typ.call1((v,))?,
                    _ => typ.call0()?,
                };
                PyErr::from_value(made)
            }
            None => PyErr::from_value(typ.clone()),
        };
        Err(e)
    }

    fn close(&self, py: Python<'_>) {
        self.abandon(py);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let unfinished = !matches!(*locked(&self.stage), Stage::Finished);
        if unfinished {
            Python::attach(|py| self.abandon(py));
        }
    }
}

/// An awaitable of `fut`, which runs on this process's runtime once awaited;
/// the caller's result is `claim`ed (see [`Pending`]).
pub(crate) fn pending<F, T>(
    py: Python<'_>,
    fut: F,
    claim: Option<Box<dyn Claim>>,
) -> PyResult<Py<Pending>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let work: Boxed = Box::pin(async move {
        let v = fut.await?;
        Python::attach(|py| v.into_py_any(py))
    });
    Py::new(
        py,
        Pending {
            stage: Mutex::new(Stage::Idle(work)),
            claim,
        },
    )
}

/// An awaitable of `fut` (see [`pending`]) with nothing to claim.
pub(crate) fn future<F, T>(py: Python<'_>, fut: F) -> PyResult<Py<Pending>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    pending(py, fut, None)
}
