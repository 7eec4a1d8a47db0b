//! The addon's calls run on the JavaScript thread, driven by Node's own
//! event loop (libuv), not on a runtime thread.
//!
//! A call queues its future and returns its Promise (a few microseconds);
//! the loop polls the future as soon as the JavaScript that made the call
//! yields, in its idle phase, before it waits for I/O: the command is
//! written then, together with those of the other calls made meanwhile.
//! The connection's socket is watched by the event loop (a `uv_poll_t`), so
//! the reply wakes the JavaScript thread itself, which reads it, completes
//! the future and settles the Promise there: no thread is woken on the way
//! in or out. The waiters' subscriber is watched the same way (see
//! `net::hub`), so a hand-off message wakes this thread directly too. The
//! core is unchanged: its futures, its framing rules and its timeouts are
//! the same ones tokio runs for Rust and Python callers (a connection opened
//! here is handed to this loop through [`LocalLoop`]). Timers and the other
//! threads' wake-ups (a Sentinel switch, a renewal that found the lock
//! lost) come from the runtime's and the client's threads, and reach this
//! thread through a `uv_async_t`.
//!
//! The loop is kept alive while a call's Promise is pending, not by an idle
//! client: the socket's handle never keeps it alive.
//!
//! libuv is the running node's own, looked up when the first call is made
//! (like napi's symbols) and only where `index.js` said the runtime is
//! Node.js itself ([`set_allowed`]): Bun exports every `uv_*` symbol as a
//! stub that aborts the process, and `napi_get_uv_event_loop` succeeds
//! there, so neither the symbols nor Node-API can tell a real libuv from a
//! stub. Elsewhere (Bun, Deno, `REDISLOCK_NODE_EVENT_LOOP=tokio`, an addon
//! loaded without `index.js`), or where libuv cannot be found, the calls
//! run on the tokio runtime instead and settle through Node-API's
//! threadsafe functions: no `uv_*` function is called then.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;

use napi::sys;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use redislock::__private::local::{set_local_loop, LocalLoop, LocalStream, Watched};
use redislock::__private::locked;

// ------------------------------------------------------------------ libuv

type AsyncCb = unsafe extern "C" fn(*mut c_void);
type PollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
type CloseCb = unsafe extern "C" fn(*mut c_void);

/// uv_handle_type values (uv.h's order, stable since libuv 1.0).
const UV_ASYNC: c_int = 1;
const UV_IDLE: c_int = 6;
const UV_POLL: c_int = 8;
const UV_READABLE: c_int = 1;
const UV_WRITABLE: c_int = 2;

/// Declares `Uv` and its lookup: each field the libuv function of that
/// name, with its C signature (uv.h, libuv 1.x).
macro_rules! libuv {
    ($($field:ident = $name:literal: $ty:ty,)*) => {
        /// The libuv functions the addon uses, from the running process.
        struct Uv {
            $($field: $ty,)*
        }

        fn uv() -> Option<&'static Uv> {
            static UV: OnceLock<Option<Uv>> = OnceLock::new();
            UV.get_or_init(|| {
                // SAFETY: lookups in the objects already loaded; each symbol
                // found is libuv's function of that name, of the type given.
                unsafe {
                    Some(Uv {
                        $($field: {
                            let p = libc::dlsym(libc::RTLD_DEFAULT, $name.as_ptr());
                            if p.is_null() {
                                return None;
                            }
                            std::mem::transmute::<*mut c_void, $ty>(p)
                        },)*
                    })
                }
            })
            .as_ref()
        }
    };
}

libuv! {
    handle_size = c"uv_handle_size": unsafe extern "C" fn(c_int) -> usize,
    async_init = c"uv_async_init": unsafe extern "C" fn(*mut c_void, *mut c_void, AsyncCb) -> c_int,
    async_send = c"uv_async_send": unsafe extern "C" fn(*mut c_void) -> c_int,
    idle_init = c"uv_idle_init": unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int,
    idle_start = c"uv_idle_start": unsafe extern "C" fn(*mut c_void, AsyncCb) -> c_int,
    idle_stop = c"uv_idle_stop": unsafe extern "C" fn(*mut c_void) -> c_int,
    poll_init = c"uv_poll_init": unsafe extern "C" fn(*mut c_void, *mut c_void, c_int) -> c_int,
    poll_start = c"uv_poll_start": unsafe extern "C" fn(*mut c_void, c_int, PollCb) -> c_int,
    poll_stop = c"uv_poll_stop": unsafe extern "C" fn(*mut c_void) -> c_int,
    close = c"uv_close": unsafe extern "C" fn(*mut c_void, Option<CloseCb>),
    ref_ = c"uv_ref": unsafe extern "C" fn(*mut c_void),
    unref = c"uv_unref": unsafe extern "C" fn(*mut c_void),
    strerror = c"uv_strerror": unsafe extern "C" fn(c_int) -> *const c_char,
}

fn uv_error(uv: &Uv, what: &str, code: c_int) -> io::Error {
    // SAFETY: uv_strerror returns a static string for any code.
    let text = unsafe { CStr::from_ptr((uv.strerror)(code)) };
    io::Error::other(format!("{what}: {}", text.to_string_lossy()))
}

/// A zeroed handle of `kind`, its `data` (the first field of every libuv
/// handle) set to `data`; freed by [`free_handle`] once closed.
fn new_handle(uv: &Uv, kind: c_int, data: *mut c_void) -> *mut c_void {
    // SAFETY: uv_handle_size is pure; calloc's memory is freed once.
    unsafe {
        let h = libc::calloc(1, (uv.handle_size)(kind));
        if !h.is_null() {
            *(h as *mut *mut c_void) = data;
        }
        h
    }
}

unsafe extern "C" fn free_handle(h: *mut c_void) {
    libc::free(h);
}

fn data_of<T>(h: *mut c_void) -> *mut T {
    // SAFETY: every handle here was made by `new_handle`.
    unsafe { *(h as *mut *mut T) }
}

// --------------------------------------------------------------- executor

thread_local! {
    /// Whether this JavaScript thread's runtime is Node.js with its libuv
    /// (`index.js` says so when it loads, before any call: see
    /// [`set_allowed`]). False until then: an addon loaded some other way
    /// never touches libuv.
    static ALLOWED: Cell<bool> = const { Cell::new(false) };
    /// This thread's executor (a JavaScript thread's, once it made a call).
    static EXEC: RefCell<Option<Rc<Executor>>> = const { RefCell::new(None) };
    /// Inside one of the executor's runs on this thread: a task woken here
    /// is polled before the run ends, with no `uv_async_send`.
    static RUNNING: Cell<bool> = const { Cell::new(false) };
}

/// What wakers reach, from any thread.
struct Shared {
    queue: Mutex<Queue>,
}

struct Queue {
    ready: Vec<usize>,
    /// The uv_async_t; null once the environment is torn down.
    handle: *mut c_void,
}

// SAFETY: the handle is only passed to uv_async_send (thread-safe), under
// the mutex that closing it takes.
unsafe impl Send for Queue {}

struct TaskWaker {
    id: usize,
    queued: AtomicBool,
    shared: Arc<Shared>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let here = RUNNING.try_with(Cell::get).unwrap_or(false);
        let mut q = locked(&self.shared.queue);
        q.ready.push(self.id);
        if !here && !q.handle.is_null() {
            if let Some(uv) = uv() {
                // SAFETY: the handle is open (not null under the mutex).
                unsafe { (uv.async_send)(q.handle) };
            }
        }
    }
}

struct Task {
    future: Pin<Box<dyn Future<Output = ()>>>,
    waker: Arc<TaskWaker>,
    /// A call's Promise waits on it: the loop stays alive meanwhile.
    call: bool,
}

/// One JavaScript thread's tasks: the calls' futures and the connections'
/// drivers.
pub(super) struct Executor {
    env: sys::napi_env,
    uv_loop: *mut c_void,
    shared: Arc<Shared>,
    tasks: RefCell<Vec<Option<Task>>>,
    free: RefCell<Vec<usize>>,
    /// Pending calls; the async handle is referenced while there are some.
    calls: Cell<usize>,
    handle: *mut c_void,
    /// A uv_idle_t, started while calls made since the loop last ran wait
    /// for their first poll.
    idle: *mut c_void,
    idle_on: Cell<bool>,
    /// What a run from the event loop opens its callback scope with (so
    /// that the microtasks of the Promises it settles run at its end).
    resource: sys::napi_ref,
    context: sys::napi_async_context,
    runtime: Arc<tokio::runtime::Runtime>,
}

/// The `LocalLoop` the core sees: this thread's executor.
struct ThisThread;

impl LocalLoop for ThisThread {
    fn adopt(&self, fd: OwnedFd) -> io::Result<Box<dyn LocalStream>> {
        let exec = EXEC.with(|e| e.borrow().clone());
        match exec {
            Some(exec) => Ok(Box::new(UvStream::new(&exec, fd)?)),
            None => Err(io::Error::other("no event loop on this thread")),
        }
    }

    fn spawn(&self, driver: Pin<Box<dyn Future<Output = ()> + Send>>) {
        match EXEC.with(|e| e.borrow().clone()) {
            Some(exec) => exec.spawn(driver, false),
            // Not reached: a future that saw the loop is polled here.
            None => drop(redislock::runtime::runtime().spawn(driver)),
        }
    }

    fn watch(
        &self,
        fd: OwnedFd,
        mut on_readable: Box<dyn FnMut() -> Watched + Send>,
    ) -> io::Result<()> {
        let exec = EXEC.with(|e| e.borrow().clone());
        let exec = exec.ok_or_else(|| io::Error::other("no event loop on this thread"))?;
        let mut socket = UvStream::new(&exec, fd)?;
        exec.spawn(
            Box::pin(async move {
                // Ends when the watcher is done, or when the loop cannot
                // watch the socket (dropping `on_readable` tells its owner).
                while std::future::poll_fn(|cx| socket.poll_readable(cx))
                    .await
                    .is_ok()
                {
                    match on_readable() {
                        Watched::More => socket.io().readable = false,
                        // Read by another now (for a millisecond at most).
                        Watched::Busy => tokio::time::sleep(BUSY_AGAIN).await,
                        Watched::Done => break,
                    }
                }
            }),
            false,
        );
        Ok(())
    }
}

/// How soon a watcher whose socket someone else reads tries again.
const BUSY_AGAIN: std::time::Duration = std::time::Duration::from_millis(1);

/// Let this thread's calls run on its event loop (`true`: the runtime is
/// Node.js, whose libuv the addon may use) or keep them on the tokio
/// runtime (`false`, the default). Decides for the calls made after it; an
/// executor already made stays.
pub(super) fn set_allowed(allowed: bool) {
    ALLOWED.with(|a| a.set(allowed));
}

/// Which machinery runs the calls of this thread's environment `env`:
/// "libuv" (its event loop, through this module's executor) or "tokio"
/// (the runtime's thread, settled through threadsafe functions). Makes the
/// executor if it is allowed and not made yet, as the next call would.
pub(super) fn in_use(env: sys::napi_env) -> &'static str {
    if Executor::current(env).is_some() {
        "libuv"
    } else {
        "tokio"
    }
}

impl Executor {
    /// This thread's executor for `env`, made on first use; None where
    /// libuv may not be used ([`set_allowed`]) or cannot be found (the
    /// calls then run on the runtime).
    pub(super) fn current(env: sys::napi_env) -> Option<Rc<Executor>> {
        if let Some(e) = EXEC.with(|e| e.borrow().clone()) {
            return (e.env == env).then_some(e);
        }
        if !ALLOWED.with(Cell::get) {
            return None;
        }
        let exec = Rc::new(Executor::new(env)?);
        EXEC.with(|e| *e.borrow_mut() = Some(exec.clone()));
        set_local_loop(Some(Arc::new(ThisThread)));
        // SAFETY: env is the calling environment; the hook runs on this
        // thread when it is torn down.
        unsafe { sys::napi_add_env_cleanup_hook(env, Some(teardown), ptr::null_mut()) };
        Some(exec)
    }

    fn new(env: sys::napi_env) -> Option<Executor> {
        let uv = uv()?;
        let mut uv_loop = ptr::null_mut();
        let mut resource = ptr::null_mut();
        let mut name = ptr::null_mut();
        let mut resource_ref = ptr::null_mut();
        let mut context = ptr::null_mut();
        // SAFETY: napi calls on the calling thread's environment.
        unsafe {
            let ok = |s: sys::napi_status| s == sys::Status::napi_ok;
            if !ok(sys::napi_get_uv_event_loop(env, &mut uv_loop))
                || uv_loop.is_null()
                || !ok(sys::napi_create_object(env, &mut resource))
                || !ok(sys::napi_create_string_utf8(
                    env,
                    c"redislock".as_ptr(),
                    9,
                    &mut name,
                ))
                || !ok(sys::napi_create_reference(
                    env,
                    resource,
                    1,
                    &mut resource_ref,
                ))
                || !ok(sys::napi_async_init(env, resource, name, &mut context))
            {
                return None;
            }
        }
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                ready: Vec::new(),
                handle: ptr::null_mut(),
            }),
        });
        let handle = new_handle(uv, UV_ASYNC, ptr::null_mut());
        if handle.is_null() {
            return None;
        }
        // SAFETY: a fresh handle on this thread's loop.
        unsafe {
            if (uv.async_init)(uv_loop.cast(), handle, on_async) != 0 {
                free_handle(handle);
                return None;
            }
            (uv.unref)(handle);
        }
        let idle = new_handle(uv, UV_IDLE, ptr::null_mut());
        // SAFETY: a fresh handle on this thread's loop.
        if idle.is_null() || unsafe { (uv.idle_init)(uv_loop.cast(), idle) } != 0 {
            // SAFETY: the async handle is open, on this thread.
            unsafe { (uv.close)(handle, Some(free_handle)) };
            if !idle.is_null() {
                // SAFETY: never initialised: plain memory.
                unsafe { free_handle(idle) };
            }
            return None;
        }
        // SAFETY: the idle handle was just initialised, on this thread. A
        // pending call keeps the loop alive through the async handle.
        unsafe { (uv.unref)(idle) };
        locked(&shared.queue).handle = handle;
        Some(Executor {
            env,
            uv_loop: uv_loop.cast(),
            shared,
            tasks: RefCell::default(),
            free: RefCell::default(),
            calls: Cell::new(0),
            handle,
            idle,
            idle_on: Cell::new(false),
            resource: resource_ref,
            context,
            runtime: redislock::runtime::runtime(),
        })
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()>>>, call: bool) {
        let id = match self.free.borrow_mut().pop() {
            Some(id) => id,
            None => {
                let mut tasks = self.tasks.borrow_mut();
                tasks.push(None);
                tasks.len() - 1
            }
        };
        let waker = Arc::new(TaskWaker {
            id,
            queued: AtomicBool::new(true),
            shared: self.shared.clone(),
        });
        self.tasks.borrow_mut()[id] = Some(Task {
            future,
            waker,
            call,
        });
        if call {
            self.calls.set(self.calls.get() + 1);
            if self.calls.get() == 1 {
                // SAFETY: the open async handle, on its loop's thread.
                unsafe { (uv().expect("libuv").ref_)(self.handle) };
            }
        }
        locked(&self.shared.queue).ready.push(id);
    }

    /// Run `call` (a call's work, which settles its Promise) here: first
    /// polled by the loop as soon as the JavaScript that made the call
    /// yields (the loop's idle phase, before it waits for I/O), so that a
    /// call costs its caller a few microseconds and the commands of the
    /// calls made in one turn go out together.
    pub(super) fn run_call(&self, call: impl Future<Output = ()> + 'static) {
        self.spawn(Box::pin(call), true);
        if !self.idle_on.replace(true) {
            // SAFETY: the open idle handle, on its loop's thread.
            unsafe { (uv().expect("libuv").idle_start)(self.idle, on_idle) };
        }
    }

    /// Poll the woken tasks until none is left.
    fn run(&self) {
        let was = RUNNING.with(|r| r.replace(true));
        let _entered = self.runtime.enter();
        let mut ids = Vec::new();
        loop {
            std::mem::swap(&mut ids, &mut locked(&self.shared.queue).ready);
            if ids.is_empty() {
                break;
            }
            for id in ids.drain(..) {
                let taken = self.tasks.borrow_mut().get_mut(id).and_then(Option::take);
                let Some(mut task) = taken else { continue };
                task.waker.queued.store(false, Ordering::Release);
                let waker = Waker::from(task.waker.clone());
                let polled = catch_unwind(AssertUnwindSafe(|| {
                    task.future.as_mut().poll(&mut Context::from_waker(&waker))
                }));
                // A panic ends the task (a call's own future turns its
                // panics into a failure first: see `caught`).
                if matches!(polled, Ok(Poll::Pending)) {
                    self.tasks.borrow_mut()[id] = Some(task);
                    continue;
                }
                self.free.borrow_mut().push(id);
                if task.call {
                    self.calls.set(self.calls.get() - 1);
                    if self.calls.get() == 0 {
                        // SAFETY: as in `spawn`.
                        unsafe { (uv().expect("libuv").unref)(self.handle) };
                    }
                }
            }
        }
        RUNNING.with(|r| r.set(was));
    }

    /// A run from the event loop: inside a handle scope and a callback
    /// scope, whose closing runs the microtasks of the Promises settled
    /// (which may make calls, and so wake more tasks).
    fn run_from_loop(&self) {
        let env = self.env;
        while !locked(&self.shared.queue).ready.is_empty() {
            // SAFETY: napi calls on this environment's thread, outside any
            // other scope of ours; each scope opened is closed.
            unsafe {
                let mut handles = ptr::null_mut();
                if sys::napi_open_handle_scope(env, &mut handles) != sys::Status::napi_ok {
                    return;
                }
                let mut resource = ptr::null_mut();
                let mut scope = ptr::null_mut();
                let scoped = sys::napi_get_reference_value(env, self.resource, &mut resource)
                    == sys::Status::napi_ok
                    && sys::napi_open_callback_scope(env, resource, self.context, &mut scope)
                        == sys::Status::napi_ok;
                self.run();
                if scoped {
                    sys::napi_close_callback_scope(env, scope);
                }
                sys::napi_close_handle_scope(env, handles);
            }
        }
    }
}

unsafe extern "C" fn on_idle(handle: *mut c_void) {
    (uv().expect("libuv").idle_stop)(handle);
    if let Some(exec) = EXEC.with(|e| e.borrow().clone()) {
        exec.idle_on.set(false);
        exec.run_from_loop();
    }
}

unsafe extern "C" fn on_async(_handle: *mut c_void) {
    if let Some(exec) = EXEC.with(|e| e.borrow().clone()) {
        exec.run_from_loop();
    }
}

/// The environment is going away: no wake-up reaches it any more, its
/// tasks are dropped (closing their sockets' handles) and connections
/// opened on this thread from now on are tokio's.
unsafe extern "C" fn teardown(_arg: *mut c_void) {
    set_local_loop(None);
    let Some(exec) = EXEC.with(|e| e.borrow_mut().take()) else {
        return;
    };
    locked(&exec.shared.queue).handle = ptr::null_mut();
    if let Some(uv) = uv() {
        (uv.close)(exec.handle, Some(free_handle));
        (uv.close)(exec.idle, Some(free_handle));
    }
    sys::napi_async_destroy(exec.env, exec.context);
    sys::napi_delete_reference(exec.env, exec.resource);
    let tasks = std::mem::take(&mut *exec.tasks.borrow_mut());
    drop(tasks);
}

/// `work`'s output, or `on_panic`'s if polling it panicked (a panic never
/// unwinds into the event loop).
pub(super) async fn caught<T>(
    work: impl Future<Output = T>,
    on_panic: impl FnOnce(String) -> T,
) -> T {
    let mut work = std::pin::pin!(work);
    let mut on_panic = Some(on_panic);
    std::future::poll_fn(move |cx| {
        match catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(panic) => {
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                Poll::Ready((on_panic.take().expect("polled after completion"))(text))
            }
        }
    })
    .await
}

// ----------------------------------------------------------------- socket

/// A connected socket read and written on the JavaScript thread, its
/// readiness from the event loop (level-triggered: interest in reading is
/// kept while a reader waits, dropped when the socket is readable and
/// nobody does).
struct UvStream {
    io: *mut Io,
}

struct Io {
    fd: OwnedFd,
    handle: *mut c_void,
    reader: Option<Waker>,
    writer: Option<Waker>,
    events: c_int,
    /// Bytes may be waiting: false after a read that drained the socket
    /// until the loop says it is readable again (which it will: interest
    /// is kept while a reader waits), so that a read then costs no call.
    readable: bool,
    thread: ThreadId,
}

// SAFETY: a stream is adopted, polled and dropped on its loop's thread
// (futures that see the loop stay on it); `Drop` checks.
unsafe impl Send for UvStream {}

impl UvStream {
    fn new(exec: &Executor, fd: OwnedFd) -> io::Result<UvStream> {
        let uv = uv().ok_or_else(|| io::Error::other("libuv is not loaded"))?;
        let io = Box::into_raw(Box::new(Io {
            fd,
            handle: ptr::null_mut(),
            reader: None,
            writer: None,
            events: 0,
            readable: true,
            thread: std::thread::current().id(),
        }));
        let handle = new_handle(uv, UV_POLL, io.cast());
        // SAFETY: `io` was just made; the handle is fresh, on this loop.
        unsafe {
            if handle.is_null() {
                drop(Box::from_raw(io));
                return Err(io::Error::other("out of memory for a poll handle"));
            }
            let rc = (uv.poll_init)(exec.uv_loop, handle, (*io).fd.as_raw_fd());
            if rc != 0 {
                free_handle(handle);
                drop(Box::from_raw(io));
                return Err(uv_error(uv, "uv_poll_init", rc));
            }
            (uv.unref)(handle);
            (*io).handle = handle;
        }
        Ok(UvStream { io })
    }

    /// Ready once the socket may be read (what a read found last, or the
    /// loop's word since).
    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let io = self.io();
        if io.readable {
            return Poll::Ready(Ok(()));
        }
        match io.wait(UV_READABLE, cx) {
            Ok(()) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn io(&mut self) -> &mut Io {
        // SAFETY: owned by this stream; the poll callback, its only other
        // user, never runs while a future is being polled.
        unsafe { &mut *self.io }
    }
}

impl Io {
    fn watch(&mut self, events: c_int) -> io::Result<()> {
        if self.events == events {
            return Ok(());
        }
        let uv = uv().expect("libuv");
        self.events = events;
        // SAFETY: the open handle, on its loop's thread.
        let rc = unsafe {
            if events == 0 {
                (uv.poll_stop)(self.handle)
            } else {
                (uv.poll_start)(self.handle, events, on_poll)
            }
        };
        if rc != 0 {
            return Err(uv_error(uv, "uv_poll_start", rc));
        }
        Ok(())
    }

    fn wait(&mut self, event: c_int, cx: &Context<'_>) -> io::Result<()> {
        let slot = if event == UV_READABLE {
            &mut self.reader
        } else {
            &mut self.writer
        };
        match slot {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        self.watch(self.events | event)
    }
}

unsafe extern "C" fn on_poll(handle: *mut c_void, status: c_int, events: c_int) {
    let io = &mut *data_of::<Io>(handle);
    let fired = if status < 0 { io.events } else { events };
    let mut woken = Vec::with_capacity(2);
    let mut keep = io.events;
    if fired & UV_READABLE != 0 {
        io.readable = true;
        match io.reader.take() {
            Some(w) => woken.push(w),
            None => keep &= !UV_READABLE,
        }
    }
    if fired & UV_WRITABLE != 0 {
        woken.extend(io.writer.take());
        keep &= !UV_WRITABLE;
    }
    if status < 0 {
        keep = 0;
    }
    let _ = io.watch(keep);
    let was = RUNNING.with(|r| r.replace(true));
    for w in woken {
        w.wake();
    }
    RUNNING.with(|r| r.set(was));
    if let Some(exec) = EXEC.with(|e| e.borrow().clone()) {
        exec.run_from_loop();
    }
}

fn last_error<T>(n: isize, f: impl FnOnce(usize) -> T) -> io::Result<T> {
    if n >= 0 {
        Ok(f(n as usize))
    } else {
        Err(io::Error::last_os_error())
    }
}

impl AsyncRead for UvStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let io = self.io();
        loop {
            if !io.readable {
                return match io.wait(UV_READABLE, cx) {
                    Ok(()) => Poll::Pending,
                    Err(e) => Poll::Ready(Err(e)),
                };
            }
            // SAFETY: recv writes at most `len` bytes into the unfilled part,
            // which are then marked initialised and filled.
            let read = unsafe {
                let dst = buf.unfilled_mut();
                let len = dst.len();
                let n = libc::recv(io.fd.as_raw_fd(), dst.as_mut_ptr().cast(), len, 0);
                last_error(n, |n| {
                    buf.assume_init(n);
                    buf.advance(n);
                    n < len
                })
            };
            match read {
                Ok(drained) => {
                    // A short read emptied the socket (an empty one is the
                    // end of the stream, read again only by a caller that
                    // ignores it).
                    io.readable = !drained;
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    io.readable = false;
                    return match io.wait(UV_READABLE, cx) {
                        Ok(()) => Poll::Pending,
                        Err(e) => Poll::Ready(Err(e)),
                    };
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for UvStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let io = self.io();
        loop {
            // SAFETY: send reads `buf`; MSG_NOSIGNAL: a closed peer is an
            // error, not SIGPIPE.
            let n = unsafe {
                libc::send(
                    io.fd.as_raw_fd(),
                    buf.as_ptr().cast(),
                    buf.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            match last_error(n, |n| n) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return match io.wait(UV_WRITABLE, cx) {
                        Ok(()) => Poll::Pending,
                        Err(e) => Poll::Ready(Err(e)),
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // SAFETY: shutdown of our own socket.
        let rc = unsafe { libc::shutdown(self.io().fd.as_raw_fd(), libc::SHUT_WR) };
        Poll::Ready(last_error(rc as isize, |_| ()))
    }
}

impl Drop for UvStream {
    fn drop(&mut self) {
        // SAFETY: the stream owns `io`; the handle is closed (which stops
        // watching the socket) before the socket is, on the loop's thread.
        unsafe {
            if (*self.io).thread != std::thread::current().id() {
                // Not reached (see `Send`): leaving both open is safe, closing
                // either from here is not.
                return;
            }
            let io = Box::from_raw(self.io);
            if let Some(uv) = uv() {
                (uv.close)(io.handle, Some(free_handle));
            }
            drop(io);
        }
    }
}
