//! Locking helpers.
//!
//! redislock uses the standard library's `Mutex` and `Condvar` rather than
//! parking_lot's on purpose: on Linux they are plain futex words with no
//! process-wide state, so a child process after `fork()` can keep using the
//! ones it inherited. parking_lot keeps a global table of parked threads,
//! which in a child still lists the parent's threads (seen here as a panic in
//! the child's renewal thread). A poisoned mutex is used as is: every
//! critical section leaves its data consistent.
//!
//! A mutex some thread holds at the moment another thread forks stays held
//! in the child for ever (only the forking thread is copied), and the child
//! hangs at its first use: seen as a child's Redlock call stopped in a
//! connection pool that a worker thread of the parent was putting a
//! connection back into. So every critical section taken with [`locked`] is
//! also a *fork section*: a `pthread_atfork` prepare handler stops new ones
//! from starting and waits for the ones under way to end, and fork() copies
//! the process between two of them. The mutexes that [`wait_timeout`] waits
//! on are taken back by the condition variable outside any section, so the
//! handler also holds the few that are process-wide (see
//! [`hold_across_fork`]).
//!
//! [`pid`] is the process id, cached: the fork checks ask for it on every
//! operation, and `getpid()` is a system call each time.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once, WaitTimeoutResult};
use std::time::{Duration, Instant};

static PID: AtomicU32 = AtomicU32::new(0);

/// Threads inside a fork section (each counted once, however deep).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Set by the prepare handler until fork() has returned.
static FORKING: AtomicBool = AtomicBool::new(false);
/// How long fork() waits for the sections under way. None lasts this long
/// (they hold a mutex, never a socket); the bound only keeps a fork from a
/// thread we never expected to wait on (one inside a section itself) from
/// hanging.
const DRAIN: Duration = Duration::from_secs(1);
/// Locks a process-wide mutex and returns its guard (see
/// [`hold_across_fork`]).
type Hold = fn() -> Box<dyn Any>;
/// Process-wide mutexes taken by a condition variable: prepare holds them.
static HOLDS: Mutex<Vec<Hold>> = Mutex::new(Vec::new());

thread_local! {
    /// How many sections this thread is inside.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// What the prepare handler holds until fork() returns (in both
    /// processes).
    static HELD: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

fn register() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: registers handlers that only touch atomics, this
        // thread's locals and the mutexes they name; the child's runs
        // right after fork(), when it is the only thread.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    });
}

extern "C" fn prepare() {
    FORKING.store(true, Ordering::SeqCst);
    let mine = usize::from(DEPTH.with(Cell::get) > 0);
    let deadline = Instant::now() + DRAIN;
    while ACTIVE.load(Ordering::SeqCst) > mine && Instant::now() < deadline {
        std::thread::yield_now();
    }
    let holds = HOLDS.lock().map(|h| h.clone()).unwrap_or_default();
    let held: Vec<Box<dyn Any>> = holds.iter().map(|hold| hold()).collect();
    HELD.with(|h| h.borrow_mut().extend(held));
}

extern "C" fn parent() {
    HELD.with(|h| h.borrow_mut().clear());
    FORKING.store(false, Ordering::SeqCst);
}

extern "C" fn child() {
    HELD.with(|h| h.borrow_mut().clear());
    ACTIVE.store(usize::from(DEPTH.with(Cell::get) > 0), Ordering::SeqCst);
    PID.store(0, Ordering::Relaxed);
    FORKING.store(false, Ordering::SeqCst);
}

/// This process's id. Cached until a `fork()` (a `pthread_atfork` child
/// handler clears it in the child).
pub(crate) fn pid() -> u32 {
    let p = PID.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    register();
    let p = std::process::id();
    PID.store(p, Ordering::Relaxed);
    p
}

/// Have fork() hold a process-wide mutex, which `hold` locks (with
/// `Mutex::lock`, not [`locked`]) and returns the guard of. For the ones a
/// condition variable waits on: a thread it wakes takes the mutex back
/// before it can enter a section.
pub(crate) fn hold_across_fork(hold: Hold) {
    register();
    let mut holds = locked(&HOLDS);
    if !holds.contains(&hold) {
        holds.push(hold);
    }
}

/// Being inside a fork section (see the module's documentation).
struct Section(());

impl Section {
    fn enter() -> Section {
        let depth = DEPTH.with(Cell::get);
        if depth == 0 {
            let mut spins = 0u32;
            loop {
                ACTIVE.fetch_add(1, Ordering::SeqCst);
                if !FORKING.load(Ordering::SeqCst) {
                    break;
                }
                ACTIVE.fetch_sub(1, Ordering::SeqCst);
                while FORKING.load(Ordering::SeqCst) {
                    spins += 1;
                    if spins < 64 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            }
        }
        DEPTH.with(|d| d.set(depth + 1));
        Section(())
    }

    /// Enter unless a fork is being prepared.
    fn try_enter() -> Option<Section> {
        let depth = DEPTH.with(Cell::get);
        if depth == 0 {
            ACTIVE.fetch_add(1, Ordering::SeqCst);
            if FORKING.load(Ordering::SeqCst) {
                ACTIVE.fetch_sub(1, Ordering::SeqCst);
                return None;
            }
        }
        DEPTH.with(|d| d.set(depth + 1));
        Some(Section(()))
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        let depth = DEPTH.with(Cell::get).saturating_sub(1);
        DEPTH.with(|d| d.set(depth));
        if depth == 0 {
            ACTIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A mutex held by [`locked`]: its guard, inside a fork section.
pub struct Locked<'a, T> {
    // Dropped in this order: the mutex, then the section.
    guard: MutexGuard<'a, T>,
    mutex: &'a Mutex<T>,
    _section: Section,
}

impl<T> Deref for Locked<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// Lock `m`, ignoring poisoning, inside a fork section.
pub fn locked<T>(m: &Mutex<T>) -> Locked<'_, T> {
    let section = Section::enter();
    Locked {
        guard: m.lock().unwrap_or_else(|e| e.into_inner()),
        mutex: m,
        _section: section,
    }
}

/// `cv.wait_timeout` on a mutex held by [`locked`]: out of the fork section
/// while waiting. A wake-up while a fork is prepared lets go of the mutex
/// and takes it again after the fork (a spurious wake-up to the caller).
pub(crate) fn wait_timeout<'a, T>(
    cv: &Condvar,
    held: Locked<'a, T>,
    dur: Duration,
) -> (Locked<'a, T>, WaitTimeoutResult) {
    let Locked {
        guard,
        mutex,
        _section,
    } = held;
    drop(_section);
    let (guard, result) = cv
        .wait_timeout(guard, dur)
        .unwrap_or_else(|e| e.into_inner());
    match Section::try_enter() {
        Some(section) => (
            Locked {
                guard,
                mutex,
                _section: section,
            },
            result,
        ),
        None => {
            drop(guard);
            (locked(mutex), result)
        }
    }
}

/// `cv.wait` on a mutex held by [`locked`] (see [`wait_timeout`]).
pub(crate) fn wait<'a, T>(cv: &Condvar, held: Locked<'a, T>) -> Locked<'a, T> {
    // A day at a time: the same wait to every caller, who looks again on
    // each wake-up anyway.
    wait_timeout(cv, held, Duration::from_secs(86_400)).0
}

/// Block every signal in the calling thread (a library thread: see
/// [`spawn_quiet`]).
#[cfg(feature = "tokio")]
pub(crate) fn block_signals() {
    // SAFETY: sigfillset/pthread_sigmask on a local, initialised set.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Start a library thread with every signal blocked in it, so that a
/// process's signals go to the caller's own threads (a C program waiting
/// for EINTR in its main thread, Python's handlers) and never to ours.
pub(crate) fn spawn_quiet(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    // The new thread inherits the mask in force when it is created.
    // SAFETY: sigfillset/pthread_sigmask on local, initialised sets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let spawned = std::thread::Builder::new().name(name.into()).spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned
    }
}
