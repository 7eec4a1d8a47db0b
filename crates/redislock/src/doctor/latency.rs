//! `latency`: the round trip to a server, the median of a few timed
//! `PING`s, against what a lock cycle and a hand-off cost.

use std::time::{Duration, Instant};

use redis::{ConnectionLike, Value};

use super::{At, Finding, Severity};
use crate::net::wire::Wire;

/// A median round trip above this is reported as slow.
const SLOW_ROUND_TRIP: Duration = Duration::from_millis(10);
/// PINGs timed for the latency check.
const PINGS: usize = 5;

pub(super) fn check_latency(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    let mut times = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let t = Instant::now();
        match wire.req_command(&redis::cmd("PING")) {
            Ok(Value::SimpleString(_)) | Ok(Value::Okay) => times.push(t.elapsed()),
            _ => break,
        }
    }
    if times.is_empty() {
        out.push(at(
            Severity::Warning,
            "latency",
            String::from("PING got no answer: the round trip was not measured"),
            "",
        ));
        return;
    }
    times.sort();
    let median = times[times.len() / 2];
    let max = times[times.len() - 1];
    let text = format!(
        "round trip {} µs (median of {}, at most {} µs)",
        median.as_micros(),
        times.len(),
        max.as_micros()
    );
    if median > SLOW_ROUND_TRIP {
        out.push(at(
            Severity::Warning,
            "latency",
            format!(
                "{text}: a lock cycle costs 2 round trips and a hand-off 2 to 3, so waits and \
                 renewals take that long, and short TTLs leave little margin"
            ),
            "run clients close to the server, and use TTLs far above the round trip",
        ));
    } else {
        out.push(at(Severity::Ok, "latency", text, ""));
    }
}
