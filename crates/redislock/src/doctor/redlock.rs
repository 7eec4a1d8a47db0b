//! The checks of a Redlock deployment as a whole: how many of its nodes
//! may be down while acquires still get a majority (`redlock`), and
//! whether the nodes' clocks agree (`clock`).

use super::clock::CLOCK_SKEW;
use super::{Finding, Severity};

pub(super) fn redlock_size(target: &str, n: usize) -> Finding {
    let tolerated = (n - 1) / 2;
    Finding {
        severity: if tolerated == 0 {
            Severity::Warning
        } else {
            Severity::Ok
        },
        check: "redlock",
        server: target.to_string(),
        message: format!(
            "{n} nodes, a majority of {} needed: {tolerated} may be down",
            n / 2 + 1
        ),
        fix: if tolerated == 0 {
            String::from("use at least 3 independent nodes (5 to survive two failures)")
        } else {
            String::new()
        },
    }
}

/// The Redlock nodes' clocks against each other (`offsets`: each node's
/// from this host's, µs): a warning when two differ by more than
/// [`CLOCK_SKEW`].
pub(super) fn redlock_clocks(target: &str, offsets: &[(String, i64)]) -> Option<Finding> {
    let min = offsets.iter().min_by_key(|(_, o)| *o)?;
    let max = offsets.iter().max_by_key(|(_, o)| *o)?;
    let spread = max.1 - min.1;
    (spread.unsigned_abs() > CLOCK_SKEW.as_micros() as u64).then(|| Finding {
        severity: Severity::Warning,
        check: "clock",
        server: target.to_string(),
        message: format!(
            "the nodes' clocks differ by {:.3} s ({} ahead of {}): Redlock allows for clock \
             drift of 1% of the TTL and 2 ms, and unsynchronised clocks jump when corrected; \
             a node whose clock jumps forward frees a lock early, and with a majority that has \
             it, a second owner can be granted",
            spread as f64 / 1e6,
            max.0,
            min.0
        ),
        fix: String::from("synchronise every node's clock (chrony, systemd-timesyncd or ntpd)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redlock_of_two_tolerates_nothing() {
        assert_eq!(redlock_size("r", 2).severity, Severity::Warning);
        assert_eq!(redlock_size("r", 3).severity, Severity::Ok);
    }
}
