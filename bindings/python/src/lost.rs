//! `on_lost=`: a Python callable run once when an acquisition of a Lock
//! object is found lost.
//!
//! Each acquisition registers a [`Notice`] with its core lock. The notice
//! reaches the Lock object through a weak reference: the Lock object owns
//! the core lock, and the core lock's callback must not keep the Lock
//! alive (nor hide from Python's garbage collector a cycle through a
//! callback that refers to its Lock). The callback itself is kept by the
//! Lock object, where the collector sees it.
//!
//! A notice fired by background renewal runs the callback on the renewal
//! thread, with the GIL taken there. One fired inside an extend or a
//! release that this module's caller runs with [`deferring`] is held back
//! until that call has let go of the core lock, then run on the caller's
//! thread: the callback may then call the Lock's own methods (release,
//! extend, `lost`) without waiting for itself. An exception in the callback
//! is logged to the `redislock` logger, with its traceback; it never stops
//! the thread that found the loss.

use std::cell::RefCell;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyWeakrefMethods, PyWeakrefReference};

use super::Lock;
use redislock::Lock as CoreLock;

/// The way from a core lock back to its Lock object's callback.
#[derive(Clone)]
pub(crate) struct Notice(Arc<Py<PyWeakrefReference>>);

impl Notice {
    /// A notice for the Lock object `lock`.
    pub(crate) fn new(lock: &Bound<'_, Lock>) -> PyResult<Notice> {
        Ok(Notice(Arc::new(PyWeakrefReference::new(lock)?.unbind())))
    }

    /// Have `lock` fire this notice when it is found lost (at once if it
    /// already is).
    pub(crate) fn register(&self, lock: &CoreLock) {
        let notice = self.clone();
        lock.on_lost(move || {
            if let Some(notice) = hold_back(notice) {
                notice.fire();
            }
        });
    }

    /// Run the Lock object's callback, if the Lock object is still there
    /// and the interpreter can be entered.
    pub(crate) fn fire(&self) {
        if crate::aio::EXITING.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        Python::try_attach(|py| {
            let Ok(Some(lock)) = self.0.bind(py).upgrade_as::<Lock>() else {
                return;
            };
            let Some(callback) = lock.get().callback(py) else {
                return;
            };
            if let Err(e) = callback.call0(py) {
                report(py, &lock, e);
            }
        });
    }
}

thread_local! {
    /// The notices held back on this thread, while a [`deferring`] call runs.
    static HELD_BACK: RefCell<Option<Vec<Notice>>> = const { RefCell::new(None) };
}

/// `notice` back when it is to run now; `None` when it was held back.
fn hold_back(notice: Notice) -> Option<Notice> {
    HELD_BACK.with(|h| match h.borrow_mut().as_mut() {
        Some(held) => {
            held.push(notice);
            None
        }
        None => Some(notice),
    })
}

/// Run `f` on this thread, holding back the notices that it fires; they
/// are returned, for the caller to fire once it holds nothing.
pub(crate) fn deferring<T>(f: impl FnOnce() -> T) -> (T, Vec<Notice>) {
    struct Restore(Option<Vec<Notice>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            HELD_BACK.with(|h| *h.borrow_mut() = outer);
        }
    }
    let outer = HELD_BACK.with(|h| h.borrow_mut().replace(Vec::new()));
    let restore = Restore(outer);
    let out = f();
    let held = HELD_BACK
        .with(|h| h.borrow_mut().take())
        .unwrap_or_default();
    drop(restore);
    (out, held)
}

/// Fire notices that were held back (see [`deferring`]).
pub(crate) fn fire_all(notices: Vec<Notice>) {
    for n in notices {
        n.fire();
    }
}

/// Log an exception raised by the callback of `lock` to the `redislock`
/// logger, with its traceback.
fn report(py: Python<'_>, lock: &Bound<'_, Lock>, e: PyErr) {
    let logged = (|| -> PyResult<()> {
        let logger = py
            .import("logging")?
            .call_method1("getLogger", ("redislock",))?;
        let kwargs = PyDict::new(py);
        // The instance, with its traceback attached.
        kwargs.set_item("exc_info", e.clone_ref(py).into_value(py))?;
        let name = redislock::__private::show_key(&lock.get().name);
        logger.call_method(
            "error",
            ("the on_lost callback of lock %s raised an exception", name),
            Some(&kwargs),
        )?;
        Ok(())
    })();
    if let Err(failed) = logged {
        failed.write_unraisable(py, Some(lock.as_any()));
    }
}
