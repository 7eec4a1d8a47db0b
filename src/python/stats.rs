//! `Client.stats()`: the core's [`Stats`](crate::Stats) as a plain dict,
//! keyed by the core's field names (the PHP binding returns the same
//! shape). Durations are float seconds; each histogram carries its
//! buckets (not cumulative) and their upper bounds, so that an exporter
//! needs nothing else.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{Histogram, Stats, BUCKET_BOUNDS};

/// The dict of one client's statistics.
pub(crate) fn to_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    // Destructured in full: a field added to the core fails to compile
    // here until the binding (and its stubs) say what it becomes.
    let Stats {
        acquired_at_once,
        acquired_after_wait,
        acquired_handed_over,
        acquire_timed_out,
        acquire_errors,
        releases_ok,
        releases_not_owner,
        extends_ok,
        extends_lost,
        renewals_ok,
        renewals_lost,
        locks_lost,
        handoffs_given,
        handoffs_received,
        connection_errors,
        reconnects,
        held_now,
        waiters_now,
        wait,
        held,
    } = s;
    let d = PyDict::new(py);
    for (k, v) in [
        ("acquired_at_once", acquired_at_once),
        ("acquired_after_wait", acquired_after_wait),
        ("acquired_handed_over", acquired_handed_over),
        ("acquire_timed_out", acquire_timed_out),
        ("acquire_errors", acquire_errors),
        ("releases_ok", releases_ok),
        ("releases_not_owner", releases_not_owner),
        ("extends_ok", extends_ok),
        ("extends_lost", extends_lost),
        ("renewals_ok", renewals_ok),
        ("renewals_lost", renewals_lost),
        ("locks_lost", locks_lost),
        ("handoffs_given", handoffs_given),
        ("handoffs_received", handoffs_received),
        ("connection_errors", connection_errors),
        ("reconnects", reconnects),
        ("held_now", held_now),
        ("waiters_now", waiters_now),
    ] {
        d.set_item(k, *v)?;
    }
    d.set_item("wait", histogram(py, wait)?)?;
    d.set_item("held", histogram(py, held)?)?;
    Ok(d)
}

fn histogram<'py>(py: Python<'py>, h: &Histogram) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("count", h.count)?;
    d.set_item("sum", h.sum.as_secs_f64())?;
    d.set_item("max", h.max.as_secs_f64())?;
    d.set_item("p50", h.p50().as_secs_f64())?;
    d.set_item("p90", h.p90().as_secs_f64())?;
    d.set_item("p99", h.p99().as_secs_f64())?;
    d.set_item("buckets", h.buckets.to_vec())?;
    d.set_item("bounds", BUCKET_BOUNDS.map(|b| b.as_secs_f64()).to_vec())?;
    Ok(d)
}
