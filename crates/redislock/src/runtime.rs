//! What the async bindings (Python's asyncio, Node's promises) share: the
//! tokio runtime their calls run on, and the way to take a lock handle back
//! from the calls that borrow it.
//!
//! The runtime belongs to the process that made it. After `fork()` its
//! threads do not exist in the child, so a child makes its own (the
//! parent's is left alone, never shut down: that would wait for threads
//! that are not there).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sync::locked;
use crate::Lock;

/// This process's runtime, made on first use: one worker thread, which
/// every waiting call shares (a wait holds no thread: its wake-up comes
/// through the client's subscriber connection).
pub fn runtime() -> Arc<tokio::runtime::Runtime> {
    static RT: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);
    let mut rt = locked(&RT);
    let pid = crate::sync::pid();
    if let Some((p, r)) = &*rt {
        if *p == pid {
            return r.clone();
        }
    }
    // A forked child: the parent's runtime is forgotten, not dropped.
    if let Some((_, parent)) = rt.take() {
        std::mem::forget(parent);
    }
    let made = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redislock-async")
            .on_thread_start(crate::sync::block_signals)
            .enable_all()
            .build()
            .expect("the redislock async runtime"),
    );
    *rt = Some((pid, made.clone()));
    made
}

/// The lock handle alone, once the other calls that borrowed it (an extend,
/// an `owned`, from another task or thread) have ended.
pub async fn sole(mut shared: Arc<Lock>) -> Lock {
    loop {
        match Arc::try_unwrap(shared) {
            Ok(lock) => return lock,
            Err(again) => {
                shared = again;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}
