//! `Client.doctor()`: the core's [`Report`](redislock::Report) and its
//! [`Finding`](redislock::Finding)s as read-only Python objects. Every check is
//! the core's; this only converts.

use pyo3::prelude::*;
use pyo3::types::PyList;

/// What `Client.doctor()` found: every check on every server.
/// `str(report)` is the text `redislock doctor` prints, ending with a
/// `verdict:` line.
#[pyclass(module = "redislock", frozen)]
pub struct Report {
    core: redislock::Report,
    findings: Vec<Py<Finding>>,
}

impl Report {
    /// The Python objects of a core report (with the GIL: they are made now).
    pub(crate) fn new(py: Python<'_>, core: redislock::Report) -> PyResult<Report> {
        let findings = core
            .findings
            .iter()
            .map(|f| {
                Py::new(
                    py,
                    Finding {
                        severity: f.severity,
                        check: f.check,
                        server: f.server.clone(),
                        message: f.message.clone(),
                        fix: f.fix.clone(),
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Report { core, findings })
    }
}

#[pymethods]
impl Report {
    /// The deployment, as the client names it (no credentials).
    #[getter]
    fn target(&self) -> &str {
        &self.core.target
    }

    /// Every finding (a new list each time), in the order checked: each
    /// server's, then the whole deployment's.
    #[getter]
    fn findings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.findings.iter().map(|f| f.clone_ref(py)))
    }

    /// True when nothing makes a lock unsafe (warnings allowed).
    #[getter]
    fn is_safe(&self) -> bool {
        self.core.is_safe()
    }

    /// The most serious finding's severity: "ok", "warning" or "unsafe".
    #[getter]
    fn worst(&self) -> &'static str {
        self.core.worst().as_str()
    }

    fn __str__(&self) -> String {
        self.core.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "<redislock.Report {} worst={} findings={}>",
            self.core.target,
            self.core.worst().as_str(),
            self.core.findings.len()
        )
    }
}

/// One thing `Client.doctor()` checked on one server.
#[pyclass(module = "redislock", frozen)]
pub struct Finding {
    severity: redislock::Severity,
    check: &'static str,
    server: String,
    message: String,
    fix: String,
}

#[pymethods]
impl Finding {
    /// How much it matters: "ok", "warning" or "unsafe".
    #[getter]
    fn severity(&self) -> &'static str {
        self.severity.as_str()
    }

    /// Which check (`server`, `eviction`, `persistence`, `lock-cycle`, ...):
    /// stable, to match on.
    #[getter]
    fn check(&self) -> &'static str {
        self.check
    }

    /// The server (`host:port` or socket path, never credentials), or the
    /// deployment for checks of the whole.
    #[getter]
    fn server(&self) -> &str {
        &self.server
    }

    /// What was found, and why it matters for a lock.
    #[getter]
    fn message(&self) -> &str {
        &self.message
    }

    /// What to change; empty when nothing needs to.
    #[getter]
    fn fix(&self) -> &str {
        &self.fix
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = |s: &str| -> PyResult<String> {
            Ok(pyo3::types::PyString::new(py, s)
                .repr()?
                .to_cow()?
                .into_owned())
        };
        Ok(format!(
            "Finding(severity={}, check={}, server={}, message={}, fix={})",
            r(self.severity.as_str())?,
            r(self.check)?,
            r(&self.server)?,
            r(&self.message)?,
            r(&self.fix)?
        ))
    }
}
