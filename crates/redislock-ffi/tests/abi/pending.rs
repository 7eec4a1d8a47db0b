//! The C ABI's asynchronous acquisitions (`redislock_acquire_start` and its
//! siblings, `redislock_pending_cancel`), called from Rust as a C program
//! would: the callback comes once with the outcome, a cancelled wait leaves
//! the server's queue, and a cancel racing a hand-off never leaves a lock
//! held by nobody.

use super::common;

use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::redislock_status;
use crate::*;
use common::{wait_until, RefusingPort, Server};

const S: Duration = Duration::from_secs(1);

/// What the callback received, each call once.
#[derive(Default)]
struct Heard {
    calls: Mutex<Vec<(redislock_status, usize, String)>>,
    cv: Condvar,
}

unsafe extern "C" fn heard(
    userdata: *mut c_void,
    status: redislock_status,
    lock: *mut redislock_lock,
) {
    let h = unsafe { &*(userdata as *const Heard) };
    let mut buf = [0 as c_char; 512];
    redislock_last_error(buf.as_mut_ptr(), buf.len());
    let msg = if status == REDISLOCK_OK {
        String::new()
    } else {
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    h.calls.lock().unwrap().push((status, lock as usize, msg));
    h.cv.notify_all();
}

impl Heard {
    fn new() -> Arc<Heard> {
        Arc::new(Heard::default())
    }

    fn userdata(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self) as *mut c_void
    }

    /// The first call, waiting up to `limit` for it.
    fn outcome(&self, limit: Duration) -> (redislock_status, *mut redislock_lock, String) {
        let until = Instant::now() + limit;
        let mut calls = self.calls.lock().unwrap();
        while calls.is_empty() {
            let left = until
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("no callback within {limit:?}"));
            calls = self.cv.wait_timeout(calls, left).unwrap().0;
        }
        let (st, lock, msg) = calls[0].clone();
        (st, lock as *mut redislock_lock, msg)
    }

    fn count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}

struct Client(*mut redislock_client);

impl Client {
    fn open(url: &str) -> Client {
        let url = std::ffi::CString::new(url).unwrap();
        let mut c = ptr::null_mut();
        assert_eq!(redislock_client_open(url.as_ptr(), &mut c), REDISLOCK_OK);
        Client(c)
    }

    fn acquire(&self, key: &str, ttl_ms: u64) -> *mut redislock_lock {
        let mut l = ptr::null_mut();
        let st = redislock_acquire(
            self.0,
            key.as_ptr(),
            key.len(),
            ttl_ms,
            0,
            ptr::null(),
            0,
            &mut l,
        );
        assert_eq!(st, REDISLOCK_OK);
        l
    }

    /// Start a plain acquisition of `key`; the pending handle.
    fn start(&self, key: &str, wait_ms: i64, h: &Arc<Heard>) -> *mut redislock_pending {
        let mut p = ptr::null_mut();
        let st = redislock_acquire_start(
            self.0,
            key.as_ptr(),
            key.len(),
            60_000,
            wait_ms,
            ptr::null(),
            0,
            Some(heard),
            h.userdata(),
            &mut p,
        );
        assert_eq!(st, REDISLOCK_OK);
        assert!(!p.is_null());
        p
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        redislock_client_free(self.0);
    }
}

/// The waiters queued for the plain lock `key`.
fn queue_len(srv: &Server, key: &str) -> i64 {
    llen(srv, &format!("{{{key}}}:queue"))
}

fn llen(srv: &Server, list: &str) -> i64 {
    srv.query(redis::cmd("LLEN").arg(list)).unwrap()
}

fn keys_like(srv: &Server, pattern: &str) -> Vec<String> {
    srv.query(redis::cmd("KEYS").arg(pattern)).unwrap()
}

fn release(lock: *mut redislock_lock) {
    assert_eq!(redislock_release(lock), REDISLOCK_OK);
}

#[test]
fn a_free_lock_is_delivered_once_and_a_held_one_after_its_release() {
    let srv = Server::start();
    let c = Client::open(&srv.url());

    let h = Heard::new();
    let p = c.start("free", 0, &h);
    let (st, lock, _) = h.outcome(10 * S);
    assert_eq!(st, REDISLOCK_OK);
    assert!(!lock.is_null());
    let token: String = srv.query(redis::cmd("GET").arg("free")).unwrap();
    assert_eq!(token.len(), 32, "the lock is held with a random token");
    // Cancelling after the outcome changes nothing.
    assert!(!redislock_pending_cancel(p));
    redislock_pending_free(p);
    release(lock);

    // Held: the acquisition waits in the queue, then gets it by hand-off.
    let holder = c.acquire("held", 60_000);
    let h = Heard::new();
    let p = c.start("held", -1, &h);
    wait_until("the waiter queued", 10 * S, || queue_len(&srv, "held") == 1);
    assert_eq!(h.count(), 0, "called back while still waiting");
    release(holder);
    let (st, lock, _) = h.outcome(10 * S);
    assert_eq!(st, REDISLOCK_OK);
    release(lock);
    redislock_pending_free(p);
    assert!(keys_like(&srv, "*held*").is_empty());
    assert_eq!(h.count(), 1, "the callback ran more than once");

    // Fenced: the fence comes with the lock, no round trip later.
    let h = Heard::new();
    let mut p = ptr::null_mut();
    let st = redislock_acquire_fenced_start(
        c.0,
        b"fenced".as_ptr(),
        6,
        60_000,
        0,
        ptr::null(),
        0,
        Some(heard),
        h.userdata(),
        &mut p,
    );
    assert_eq!(st, REDISLOCK_OK);
    let (st, lock, _) = h.outcome(10 * S);
    assert_eq!(st, REDISLOCK_OK);
    assert!(redislock_lock_fence_if_drawn(lock) > 0);
    release(lock);
    redislock_pending_free(p);
}

#[test]
fn semaphores_and_both_sides_of_a_read_write_lock_start_too() {
    let srv = Server::start();
    let c = Client::open(&srv.url());
    let h = Heard::new();
    let st = redislock_acquire_semaphore_start(
        c.0,
        b"pool".as_ptr(),
        4,
        2,
        1,
        60_000,
        0,
        Some(heard),
        h.userdata(),
        ptr::null_mut(),
    );
    assert_eq!(st, REDISLOCK_OK);
    let (st, permit, _) = h.outcome(10 * S);
    assert_eq!(st, REDISLOCK_OK);

    let (r, w) = (Heard::new(), Heard::new());
    let rw = b"doc";
    let st = redislock_acquire_read_start(
        c.0,
        rw.as_ptr(),
        3,
        60_000,
        0,
        Some(heard),
        r.userdata(),
        ptr::null_mut(),
    );
    assert_eq!(st, REDISLOCK_OK);
    let (st, reader, _) = r.outcome(10 * S);
    assert_eq!(st, REDISLOCK_OK);
    // The writer waits for the reader.
    let st = redislock_acquire_write_start(
        c.0,
        rw.as_ptr(),
        3,
        60_000,
        -1,
        Some(heard),
        w.userdata(),
        ptr::null_mut(),
    );
    assert_eq!(st, REDISLOCK_OK);
    wait_until("the writer queued", 10 * S, || {
        llen(&srv, "{doc}:rw:queue") == 1
    });
    assert_eq!(w.count(), 0);
    release(reader);
    let (st, writer, _) = w.outcome(10 * S);
    assert_eq!(st, REDISLOCK_OK);
    release(writer);
    release(permit);
    assert!(keys_like(&srv, "*pool*").is_empty());
    assert!(keys_like(&srv, "*doc*").is_empty());
}

#[test]
fn failures_come_through_the_callback_and_bad_arguments_at_once() {
    let srv = Server::start();
    let c = Client::open(&srv.url());
    let holder = c.acquire("busy", 60_000);

    // One attempt, and a bounded wait, on a held lock.
    for wait_ms in [0, 200] {
        let h = Heard::new();
        let p = c.start("busy", wait_ms, &h);
        let (st, lock, msg) = h.outcome(10 * S);
        assert_eq!(st, REDISLOCK_NOT_ACQUIRED, "{msg}");
        assert!(lock.is_null());
        assert!(msg.contains("busy"), "{msg}");
        redislock_pending_free(p);
    }
    assert_eq!(queue_len(&srv, "busy"), 0);
    release(holder);

    // A key of another type.
    srv.query::<()>(redis::cmd("HSET").arg("hash").arg("f").arg("v"))
        .unwrap();
    let h = Heard::new();
    redislock_pending_free(c.start("hash", -1, &h));
    assert_eq!(h.outcome(10 * S).0, REDISLOCK_WRONG_TYPE);

    // A TTL out of range is found by the acquisition: through the callback.
    let h = Heard::new();
    let st = redislock_acquire_start(
        c.0,
        b"k".as_ptr(),
        1,
        0,
        0,
        ptr::null(),
        0,
        Some(heard),
        h.userdata(),
        ptr::null_mut(),
    );
    assert_eq!(st, REDISLOCK_OK);
    assert_eq!(h.outcome(10 * S).0, REDISLOCK_INVALID_ARGUMENT);

    // No callback, no key, no client: refused at once, nothing started.
    let mut p = ptr::null_mut();
    let args = |cb: redislock_acquired_fn, client, key: *const u8, p: &mut *mut _| {
        redislock_acquire_start(
            client,
            key,
            1,
            1000,
            -1,
            ptr::null(),
            0,
            cb,
            ptr::null_mut(),
            p,
        )
    };
    assert_eq!(
        args(None, c.0, b"k".as_ptr(), &mut p),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert_eq!(
        args(Some(heard), c.0, ptr::null(), &mut p),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert_eq!(
        args(Some(heard), ptr::null(), b"k".as_ptr(), &mut p),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(p.is_null(), "out written on failure");
    assert!(!redislock_pending_cancel(ptr::null_mut()));
    redislock_pending_free(ptr::null_mut());

    // A server that cannot be reached, even waiting for ever.
    let refusing = RefusingPort::new();
    let dead = Client::open(&format!(
        "redis://127.0.0.1:{}?connect_timeout=200ms",
        refusing.port
    ));
    let h = Heard::new();
    redislock_pending_free(dead.start("k", -1, &h));
    let (st, _, msg) = h.outcome(30 * S);
    assert_eq!(st, REDISLOCK_CONNECTION, "{msg}");
}

#[test]
fn a_cancelled_wait_leaves_the_queue_and_is_reported_once() {
    let srv = Server::start();
    let c = Client::open(&srv.url());
    let holder = c.acquire("cx", 60_000);

    // Cancelled at once, perhaps before the task ran: nothing is queued.
    let h = Heard::new();
    let p = c.start("cx", -1, &h);
    assert!(redislock_pending_cancel(p));
    let (st, lock, msg) = h.outcome(10 * S);
    assert_eq!(st, REDISLOCK_CANCELLED);
    assert!(lock.is_null());
    assert!(msg.contains("cancelled"), "{msg}");
    assert!(!redislock_pending_cancel(p), "cancelled twice");
    redislock_pending_free(p);

    // Cancelled while queued.
    let h = Heard::new();
    let p = c.start("cx", -1, &h);
    wait_until("the waiter queued", 10 * S, || queue_len(&srv, "cx") == 1);
    assert!(redislock_pending_cancel(p));
    assert_eq!(h.outcome(10 * S).0, REDISLOCK_CANCELLED);
    redislock_pending_free(p);
    wait_until("the cancelled waiter left the queue", 10 * S, || {
        queue_len(&srv, "cx") == 0
    });

    // The release finds nobody to hand over to: the lock is free at once.
    release(holder);
    assert!(
        keys_like(&srv, "*cx*").is_empty(),
        "{:?}",
        keys_like(&srv, "*cx*")
    );
    assert_eq!(h.count(), 1, "the callback ran more than once");

    // Freeing the pending handle does not cancel: the wait goes on.
    let holder = c.acquire("cx", 60_000);
    let h = Heard::new();
    redislock_pending_free(c.start("cx", -1, &h));
    wait_until("the waiter queued", 10 * S, || queue_len(&srv, "cx") == 1);
    release(holder);
    let (st, lock, _) = h.outcome(10 * S);
    assert_eq!(st, REDISLOCK_OK);
    release(lock);
}

/// A cancel in the same instant as the hand-off, in both orders with a
/// little skew: either the cancel wins (the callback says cancelled and the
/// lock it was handed is released) or the outcome does (the callback
/// delivers the lock); the lock is never left held by nobody, and the
/// callback runs once.
#[test]
fn a_cancel_racing_the_hand_off_never_leaks_the_lock() {
    let srv = Server::start();
    let c = Client::open(&srv.url());
    let (mut won, mut lost) = (0, 0);
    let mut heard = Vec::new();
    for round in 0..40u64 {
        let holder = c.acquire("race", 60_000);
        let h = Heard::new();
        let p = c.start("race", -1, &h);
        wait_until("queued", 10 * S, || queue_len(&srv, "race") == 1);
        let skew = Duration::from_micros(round * 50);
        let cancelled = if round % 2 == 0 {
            release(holder);
            std::thread::sleep(skew);
            redislock_pending_cancel(p)
        } else {
            let cancelled = redislock_pending_cancel(p);
            std::thread::sleep(skew);
            release(holder);
            cancelled
        };
        let (st, lock, _) = h.outcome(10 * S);
        if cancelled {
            won += 1;
            assert_eq!(st, REDISLOCK_CANCELLED);
            assert!(lock.is_null());
        } else {
            lost += 1;
            assert_eq!(
                st, REDISLOCK_OK,
                "the cancel lost, so the lock is delivered"
            );
            release(lock);
        }
        redislock_pending_free(p);
        wait_until("the lock is free again", 10 * S, || {
            keys_like(&srv, "*race*").is_empty()
        });
        heard.push(h);
    }
    eprintln!("cancel won {won} times, the hand-off {lost} times");
    for h in &heard {
        assert_eq!(h.count(), 1, "a callback ran more than once");
    }
}
