//! The deployment check in C: `redislock_doctor` runs the core's checks of
//! every server a client's locks may reach and hands out a
//! `redislock_report`, whose findings (`struct redislock_finding`, with a
//! `redislock_severity`) and printed text are read with the
//! `redislock_report_*` functions and freed with `redislock_report_free`.

use std::ffi::c_char;

use crate::args::{non_null, out_ptr};
use crate::client::redislock_client;
use crate::error::redislock_status::{self, *};
use crate::error::status;
use crate::guard::guard;

/// How much a finding of `redislock_doctor` matters. Values are stable:
/// new ones are only ever added at the end.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redislock_severity {
    /// Checked, and nothing to change.
    REDISLOCK_SEVERITY_OK = 0,
    /// Safe as the server runs now, but slow, or unsafe after a rare
    /// failure (a restart, a failover), or the check could not be made.
    REDISLOCK_SEVERITY_WARNING = 1,
    /// Locks can have two owners in normal operation, fencing numbers can
    /// go backwards, or locks cannot be used at all.
    REDISLOCK_SEVERITY_UNSAFE = 2,
}

/// One finding of `redislock_doctor`: one check on one server. Every
/// string is NUL-terminated UTF-8, owned by the report and valid until
/// `redislock_report_free`; `fix` is "" when nothing needs to change.
///
/// Growth rule: fields are only ever appended. The library allocates the
/// struct and a program reads the fields it knows, so a program built
/// against this header keeps working with later libraries.
#[repr(C)]
#[derive(Debug)]
pub struct redislock_finding {
    /// How much it matters.
    pub severity: redislock_severity,
    /// Which check (`eviction`, `scripting`, `time`, `pubsub`,
    /// `persistence`, `replication`, `clients`, `cluster`, `latency`, …):
    /// stable names, to match on.
    pub check: *const c_char,
    /// The server (`host:port` or socket path, never credentials).
    pub server: *const c_char,
    /// What was found, and why it matters for a lock.
    pub message: *const c_char,
    /// What to change.
    pub fix: *const c_char,
}

/// What `redislock_doctor` found: a list of findings and the text
/// `redislock doctor` prints. Owned by the caller; free it with
/// `redislock_report_free`. Read-only: may be read from several threads.
pub struct redislock_report {
    findings: Vec<redislock_finding>,
    /// Where the findings' pointers point.
    _strings: Vec<std::ffi::CString>,
    text: std::ffi::CString,
    safe: bool,
}

/// `s` as a C string (a NUL inside, which no server message should hold,
/// becomes `\0`).
fn c_string(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

fn c_report(report: &redislock::Report) -> redislock_report {
    let mut strings = Vec::new();
    let mut keep = |s: &str| {
        let c = c_string(s);
        let ptr = c.as_ptr();
        strings.push(c);
        ptr
    };
    let findings = report
        .findings
        .iter()
        .map(|f| redislock_finding {
            severity: match f.severity {
                redislock::Severity::Ok => redislock_severity::REDISLOCK_SEVERITY_OK,
                redislock::Severity::Warning => redislock_severity::REDISLOCK_SEVERITY_WARNING,
                redislock::Severity::Unsafe => redislock_severity::REDISLOCK_SEVERITY_UNSAFE,
            },
            check: keep(f.check),
            server: keep(&f.server),
            message: keep(&f.message),
            fix: keep(&f.fix),
        })
        .collect();
    redislock_report {
        findings,
        _strings: strings,
        text: c_string(&report.to_string()),
        safe: report.is_safe(),
    }
}

/// Check every server `client`'s locks may reach for what makes a lock
/// unsafe or slow (eviction policy, scripting, `TIME` and pub/sub refused,
/// persistence, replicas without `min-replicas-to-write`, `maxclients`
/// headroom, cluster state, Sentinel quorum, round trip) and run one lock
/// cycle; the same checks as `redislock doctor`. A few round trips per
/// server; nothing is left on the server.
///
/// `client`: borrowed. `out`: on success receives a new report owned by
/// the caller (free it with `redislock_report_free`); untouched on failure.
/// Returns `REDISLOCK_OK` whatever was found (see
/// `redislock_report_is_safe`), `REDISLOCK_CONNECTION` when the server (or
/// every sentinel, or every cluster node) cannot be reached,
/// `REDISLOCK_NO_QUORUM` when a majority of Redlock servers cannot, and
/// `REDISLOCK_SERVER` when it refuses the credentials.
#[no_mangle]
pub extern "C" fn redislock_doctor(
    client: *const redislock_client,
    out: *mut *mut redislock_report,
) -> redislock_status {
    guard(REDISLOCK_INTERNAL, || {
        status((|| {
            let client = non_null(client, "client")?;
            let out = out_ptr(out, "out")?;
            let report = client.client.doctor()?;
            *out = Box::into_raw(Box::new(c_report(&report)));
            Ok(())
        })())
    })
}

/// How many findings `report` holds (0 when it is NULL).
#[no_mangle]
pub extern "C" fn redislock_report_count(report: *const redislock_report) -> usize {
    guard(0, || {
        non_null(report, "report").map_or(0, |r| r.findings.len())
    })
}

/// Finding `i` (from 0) of `report`, borrowed from it; NULL when `report`
/// is NULL or `i` is out of range.
#[no_mangle]
pub extern "C" fn redislock_report_finding(
    report: *const redislock_report,
    i: usize,
) -> *const redislock_finding {
    guard(std::ptr::null(), || {
        non_null(report, "report")
            .ok()
            .and_then(|r| r.findings.get(i))
            .map_or(std::ptr::null(), |f| f as *const redislock_finding)
    })
}

/// True when no finding of `report` is `REDISLOCK_SEVERITY_UNSAFE` (false
/// when `report` is NULL): what `redislock doctor`'s exit status 0 means.
#[no_mangle]
pub extern "C" fn redislock_report_is_safe(report: *const redislock_report) -> bool {
    guard(false, || non_null(report, "report").is_ok_and(|r| r.safe))
}

/// The report as `redislock doctor` prints it: one line per finding, each
/// fix on the next line, then a verdict line. Borrowed from `report`
/// (NUL-terminated UTF-8); NULL when `report` is NULL.
#[no_mangle]
pub extern "C" fn redislock_report_text(report: *const redislock_report) -> *const c_char {
    guard(std::ptr::null(), || {
        non_null(report, "report").map_or(std::ptr::null(), |r| r.text.as_ptr())
    })
}

/// Free a report and every string of its findings. NULL is a no-op.
#[no_mangle]
pub extern "C" fn redislock_report_free(report: *mut redislock_report) {
    guard((), || {
        if !report.is_null() {
            // SAFETY: made by Box::into_raw in redislock_doctor, freed once.
            drop(unsafe { Box::from_raw(report) });
        }
    })
}
