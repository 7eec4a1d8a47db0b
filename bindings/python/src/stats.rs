//! `Client.stats()`: the core's [`Stats`](redislock::Stats) as a plain dict,
//! keyed by the core's field names (the PHP binding returns the same
//! shape). Durations are float seconds; each histogram carries its
//! buckets (not cumulative) and their upper bounds, so that an exporter
//! needs nothing else.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use redislock::{Histogram, Stats, BUCKET_BOUNDS};

/// The dict of one client's statistics.
pub(crate) fn to_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in s.counters() {
        d.set_item(k, v)?;
    }
    d.set_item("wait", histogram(py, &s.wait)?)?;
    d.set_item("held", histogram(py, &s.held)?)?;
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
