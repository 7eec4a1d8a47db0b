//! Acquisitions that do not hold the caller's thread: `redislock_acquire_start`
//! and its siblings start the core's async acquire on the bindings' tokio
//! runtime (one worker thread that every such wait shares; a waiter's
//! wake-up comes through the client's subscriber connection) and call the
//! caller's function once with the outcome. `redislock_pending_cancel` ends
//! the wait by dropping the acquire's future: the core then takes the waiter
//! out of the server's queue, and a lock handed over in that moment is
//! released here before cancellation is reported. One atomic decides the
//! race between a cancel and the outcome, so a cancel that reports success
//! is always followed by a cancellation report, and one that does not is
//! followed by the real outcome.

use std::ffi::c_void;

use crate::acquire::wait_of;
use crate::args::{byte_str, non_null};
use crate::client::redislock_client;
use crate::error::{fail, redislock_status, set_last_error, status};
use crate::guard::guard;
use crate::lock::redislock_lock;
use redislock::Error;

use std::sync::Arc;
use std::time::Duration;

use redislock::runtime::runtime;

/// An asynchronous acquisition under way, for `redislock_pending_cancel`.
///
/// Thread safety: `redislock_pending_cancel` may be called from any thread,
/// also while the callback runs and from inside it. Lifetime: from a
/// successful `redislock_acquire_start` (or sibling) until
/// `redislock_pending_free`, exactly once, which may come before or after the
/// callback ran (freeing it neither cancels the wait nor stops the callback).
pub struct redislock_pending {
    shared: Arc<Shared>,
}

/// The function an asynchronous acquisition calls once with its outcome.
///
/// `status` is `REDISLOCK_OK` with `lock` a new lock handle, owned by the
/// callee from then on (release it with `redislock_release`, or free it);
/// otherwise `lock` is NULL and `status` says why: the statuses of
/// `redislock_acquire` (`REDISLOCK_NOT_ACQUIRED` when the wait ran out...),
/// or `REDISLOCK_CANCELLED` after a successful `redislock_pending_cancel`.
/// `redislock_last_error`, called inside the callback, gives the failure's
/// message.
pub type redislock_acquired_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        status: redislock_status,
        lock: *mut redislock_lock,
    ),
>;

/// What an acquisition takes.
enum What {
    Lock { fenced: bool },
    Semaphore { limit: u32, permits: u32 },
    Read,
    Write,
}

/// The arguments every start shares: client, key and its length, TTL, wait.
type StartArgs = (*const redislock_client, *const u8, usize, u64, i64);

/// The callee of an acquisition and its userdata.
struct Callee {
    f: unsafe extern "C" fn(*mut c_void, redislock_status, *mut redislock_lock),
    userdata: *mut c_void,
}

// SAFETY: the caller of redislock_acquire_start promises that the callback
// may run on the runtime's thread with this userdata (its documentation).
unsafe impl Send for Callee {}

/// The body of every start: check the arguments, hand out the pending
/// handle, start the acquisition.
fn start(
    (client, key, key_len, ttl_ms, wait_ms): StartArgs,
    what: What,
    token: Option<(*const u8, usize)>,
    callback: redislock_acquired_fn,
    userdata: *mut c_void,
    out: *mut *mut redislock_pending,
) -> redislock_status {
    guard(redislock_status::REDISLOCK_INTERNAL, || {
        status((|| {
            let client = non_null(client, "client")?;
            let key = byte_str(key, key_len, "key", false)?.unwrap_or_default();
            let token = match token {
                Some((t, len)) => byte_str(t, len, "token", true)?,
                None => None,
            };
            let Some(f) = callback else {
                return Err(Error::InvalidArgument(
                    "callback is NULL: nobody would hear the outcome".into(),
                ));
            };
            let callee = Callee { f, userdata };
            spawn(
                &client.client,
                key,
                what,
                (ttl_ms, wait_ms, token),
                callee,
                out,
            )
        })())
    })
}

fn spawn(
    client: &redislock::Client,
    key: &[u8],
    what: What,
    (ttl_ms, wait_ms, token): (u64, i64, Option<&[u8]>),
    callee: Callee,
    out: *mut *mut redislock_pending,
) -> Result<(), Error> {
    let mut opts =
        redislock::AcquireOptions::new(Duration::from_millis(ttl_ms)).wait(wait_of(wait_ms));
    if let What::Lock { fenced } = what {
        opts = opts.fenced(fenced);
    }
    if let Some(t) = token {
        opts = opts.token(t);
    }
    let shared = Arc::new(Shared::default());
    if !out.is_null() {
        let pending = Box::new(redislock_pending {
            shared: shared.clone(),
        });
        // SAFETY: not NULL; the caller promises it is writable. Written
        // before the task starts, so before the callback can run.
        unsafe { *out = Box::into_raw(pending) };
    }
    let (client, key) = (client.clone(), key.to_vec());
    let acquire = async move {
        match what {
            What::Lock { .. } => client.acquire_with_async(&key, opts).await,
            What::Semaphore { limit, permits } => {
                client
                    .acquire_semaphore_async(&key, limit, permits, opts)
                    .await
            }
            What::Read => client.acquire_read_async(&key, opts).await,
            What::Write => client.acquire_write_async(&key, opts).await,
        }
    };
    runtime().spawn(run(shared, acquire, callee));
    Ok(())
}

mod state {
    use std::sync::atomic::{AtomicU8, Ordering};

    /// Nothing decided yet.
    const WAITING: u8 = 0;
    /// `redislock_pending_cancel` came first: the callback reports it.
    const CANCELLED: u8 = 1;
    /// The outcome came first: the callback reports it.
    const DECIDED: u8 = 2;

    /// What the pending handle and the task share.
    #[derive(Default)]
    pub(super) struct Shared {
        state: AtomicU8,
        /// Woken by a successful cancel.
        pub(super) stop: tokio::sync::Notify,
    }

    impl Shared {
        /// True when this cancel came before the outcome.
        pub(super) fn cancel(&self) -> bool {
            let won = self
                .state
                .compare_exchange(WAITING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if won {
                // A permit: the task hears it even before its first poll.
                self.stop.notify_one();
            }
            won
        }

        /// True when the outcome came before any cancel.
        pub(super) fn decide(&self) -> bool {
            self.state
                .compare_exchange(WAITING, DECIDED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        }
    }
}
use state::Shared;

/// A future's output, or the message of a panic it raised while polled:
/// the callback runs whatever happens inside the core.
struct Guarded<F>(std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for Guarded<F> {
    type Output = Result<F::Output, String>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        use std::task::Poll;
        match catch_unwind(AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(p) => Poll::Ready(Err(crate::guard::panic_message(p.as_ref()))),
        }
    }
}

/// The task of one acquisition: wait for the outcome or a cancel, settle
/// the race between them, call back once.
async fn run(
    shared: Arc<Shared>,
    acquire: impl std::future::Future<Output = Result<redislock::Lock, Error>>,
    callee: Callee,
) {
    use redislock_status::*;
    use std::future::Future;
    use std::task::Poll;
    let mut acquire = Guarded(Box::pin(acquire));
    let mut stop = std::pin::pin!(shared.stop.notified());
    // A cancel first, then the acquisition.
    let first = std::future::poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        std::pin::Pin::new(&mut acquire).poll(cx).map(Some)
    })
    .await;
    // Dropping the acquire's future ends a wait: the core takes the waiter
    // out of the queue (and releases a lock handed over then).
    drop(acquire);
    let outcome = match first {
        Some(r) if shared.decide() => Some(r),
        Some(r) => {
            // Cancelled as it finished: what it got goes back.
            if let Ok(Ok(lock)) = r {
                let _ = lock.release_async().await;
            }
            None
        }
        None => None,
    };
    let (status, lock) = match outcome {
        Some(Ok(Ok(lock))) => {
            let handle = Box::new(redislock_lock::new(lock));
            (REDISLOCK_OK, Box::into_raw(handle))
        }
        Some(Ok(Err(e))) => (fail(e), std::ptr::null_mut()),
        Some(Err(panic)) => {
            set_last_error(&format!(
                "internal error in redislock (please report it): panic: {panic}"
            ));
            (REDISLOCK_INTERNAL, std::ptr::null_mut())
        }
        None => {
            set_last_error("the acquisition was cancelled (redislock_pending_cancel)");
            (REDISLOCK_CANCELLED, std::ptr::null_mut())
        }
    };
    // SAFETY: the caller of redislock_acquire_start promised that the
    // callback may be called once, on this thread, with this userdata.
    unsafe { (callee.f)(callee.userdata, status, lock) };
}

/// Start taking the lock `key` without waiting for it: the acquisition
/// runs on the library's async runtime and calls `callback(userdata,
/// status, lock)` once when it ends, from the runtime's thread.
///
/// `client`, `key`/`key_len`, `ttl_ms`, `wait_ms` and `token`/`token_len`
/// as for `redislock_acquire` (borrowed for this call only: they are
/// copied). `callback`: not NULL; see `redislock_acquired_fn` for what it
/// receives. `userdata`: passed to it as is; it must stay valid until the
/// callback ran. `out`: on success receives a new pending handle owned by
/// the caller, for `redislock_pending_cancel`, to be freed with
/// `redislock_pending_free`; it is written before the callback can run.
/// NULL when the caller will never cancel.
///
/// Returns `REDISLOCK_OK` when the acquisition started: the callback then
/// runs exactly once, possibly before this returns (on another thread), and
/// only a process exit keeps it from running. Any other status (a NULL
/// `client`, `key` or `callback`, a key too long) means nothing started:
/// no callback, `out` untouched. Errors found later (a TTL out of range, a
/// connection error, the wait running out) come through the callback.
///
/// The callback runs on the one thread that serves every asynchronous
/// acquisition of the process: it must be quick and must not block (hand the
/// lock to your own thread and return). It may call any function of this
/// library, including `redislock_pending_cancel` and
/// `redislock_pending_free`, but a blocking call there (a release, another
/// blocking acquire) delays every other asynchronous acquisition meanwhile.
/// The caller's interrupt check (`redislock_set_interrupt`) is not consulted:
/// cancel with `redislock_pending_cancel`. A child made by `fork()` does not
/// inherit the acquisitions under way in its parent.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn redislock_acquire_start(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    ttl_ms: u64,
    wait_ms: i64,
    token: *const u8,
    token_len: usize,
    callback: redislock_acquired_fn,
    userdata: *mut c_void,
    out: *mut *mut redislock_pending,
) -> redislock_status {
    let args = (client, key, key_len, ttl_ms, wait_ms);
    let what = What::Lock { fenced: false };
    start(
        args,
        what,
        Some((token, token_len)),
        callback,
        userdata,
        out,
    )
}

/// `redislock_acquire_start` drawing the fencing number in the acquisition,
/// as `redislock_acquire_fenced` does. Same arguments and outcomes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn redislock_acquire_fenced_start(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    ttl_ms: u64,
    wait_ms: i64,
    token: *const u8,
    token_len: usize,
    callback: redislock_acquired_fn,
    userdata: *mut c_void,
    out: *mut *mut redislock_pending,
) -> redislock_status {
    let args = (client, key, key_len, ttl_ms, wait_ms);
    let what = What::Lock { fenced: true };
    start(
        args,
        what,
        Some((token, token_len)),
        callback,
        userdata,
        out,
    )
}

/// `redislock_acquire_semaphore` without waiting for it: `limit` and
/// `permits` as there, the rest as for `redislock_acquire_start`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn redislock_acquire_semaphore_start(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    limit: u32,
    permits: u32,
    ttl_ms: u64,
    wait_ms: i64,
    callback: redislock_acquired_fn,
    userdata: *mut c_void,
    out: *mut *mut redislock_pending,
) -> redislock_status {
    let args = (client, key, key_len, ttl_ms, wait_ms);
    let what = What::Semaphore { limit, permits };
    start(args, what, None, callback, userdata, out)
}

/// `redislock_acquire_read` without waiting for it: arguments as for
/// `redislock_acquire_start`, without a token.
#[no_mangle]
pub extern "C" fn redislock_acquire_read_start(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    ttl_ms: u64,
    wait_ms: i64,
    callback: redislock_acquired_fn,
    userdata: *mut c_void,
    out: *mut *mut redislock_pending,
) -> redislock_status {
    let args = (client, key, key_len, ttl_ms, wait_ms);
    start(args, What::Read, None, callback, userdata, out)
}

/// `redislock_acquire_write` without waiting for it: arguments as for
/// `redislock_acquire_read_start`.
#[no_mangle]
pub extern "C" fn redislock_acquire_write_start(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    ttl_ms: u64,
    wait_ms: i64,
    callback: redislock_acquired_fn,
    userdata: *mut c_void,
    out: *mut *mut redislock_pending,
) -> redislock_status {
    let args = (client, key, key_len, ttl_ms, wait_ms);
    start(args, What::Write, None, callback, userdata, out)
}

/// End an asynchronous acquisition's wait. `pending`: borrowed; NULL gives
/// false.
///
/// Returns true when the cancel came before the outcome was decided: the
/// callback then reports `REDISLOCK_CANCELLED` (soon, from the runtime's
/// thread; perhaps before this returns), the waiter leaves the server's
/// queue in the background, and a lock handed over in that very moment is
/// released before the callback runs. False when the outcome was decided
/// already (the callback ran or is about to run with it: a lock it
/// delivers is the callee's to release) or the acquisition was cancelled
/// before. Never blocks.
#[no_mangle]
pub extern "C" fn redislock_pending_cancel(pending: *mut redislock_pending) -> bool {
    guard(false, || {
        let Ok(p) = non_null(pending, "pending") else {
            return false;
        };
        p.shared.cancel()
    })
}

/// Free a pending handle. Takes ownership of `pending`; NULL is a no-op.
/// It neither cancels the acquisition nor stops its callback: cancel first
/// if the wait should end.
#[no_mangle]
pub extern "C" fn redislock_pending_free(pending: *mut redislock_pending) {
    guard((), || {
        if !pending.is_null() {
            // SAFETY: made by Box::into_raw in a start function, freed once.
            drop(unsafe { Box::from_raw(pending) });
        }
    })
}
