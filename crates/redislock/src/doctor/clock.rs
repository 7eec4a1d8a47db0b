//! `clock`, server by server: a server's clock against this host's (`TIME`
//! read between two readings of this host's clock), and a master's
//! replicas' clocks against the master's. The Redlock nodes' clocks
//! against each other are `redlock`'s.

use std::collections::HashMap;
use std::time::Duration;

use super::{At, Finding, Severity};
use crate::net::pool::Pool;
use crate::net::wire::Wire;

/// A server clock further than this from this host's is a warning (see
/// [`check_clock`]).
pub(super) const CLOCK_SKEW: Duration = Duration::from_secs(1);

/// `TIME` against this host's clock, read before and after: the offset
/// (µs, positive when the server is ahead), within half the round trip.
/// Expiry is counted by the server's clock, so an offset alone breaks
/// nothing; but a clock that far off is not synchronised, and such clocks
/// jump when they are corrected: forward, a server expires its locks early;
/// back, a new master after a failover hands out smaller fences.
pub(super) fn check_clock(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) -> Option<i64> {
    let (offset, within) = clock_offset(wire)?;
    let text = clock_text(offset, within);
    if offset.unsigned_abs() > CLOCK_SKEW.as_micros() as u64 {
        out.push(at(
            Severity::Warning,
            "clock",
            format!(
                "{text}: a clock that far off is not synchronised, and jumps when it is \
                 corrected; forward, the server expires locks before their TTL (it counts them \
                 by its clock); back, fences drawn after a failover to it can be smaller"
            ),
            "synchronise the server's clock (chrony, systemd-timesyncd or ntpd), and this host's",
        ));
    } else {
        out.push(at(Severity::Ok, "clock", text, ""));
    }
    Some(offset)
}

/// The server's `TIME` less this host's clock (µs, positive when the
/// server is ahead), and within how much (half the round trip).
fn clock_offset(wire: &mut Wire) -> Option<(i64, i64)> {
    let epoch_us = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64)
    };
    let before = std::time::SystemTime::now();
    let reply = redis::cmd("TIME").query::<(i64, i64)>(wire);
    let after = std::time::SystemTime::now();
    let (secs, micros) = reply.ok()?;
    let (before, after) = (epoch_us(before), epoch_us(after));
    Some((
        secs * 1_000_000 + micros - (before + after) / 2,
        (after - before) / 2,
    ))
}

/// The clocks of a master's replicas (its INFO's `slaveN` lines) against
/// its own (`master_us`: its offset from this host's). A failover hands
/// the locks to a replica with their expiry times as absolute instants of
/// the master's clock: a replica ahead expires them early (a second owner
/// while the first still works), one behind keeps them longer and, when
/// the fence counter had not reached it, draws smaller fences.
pub(super) fn check_replica_clocks(
    info: &HashMap<String, String>,
    master_us: i64,
    master: &str,
    pool: &Pool,
    out: &mut Vec<Finding>,
) {
    let replicas = (0..)
        .map_while(|i| info.get(&format!("slave{i}")))
        .filter_map(|line| {
            let field = |k: &str| {
                line.split(',')
                    .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            };
            Some((
                field("ip")?.to_string(),
                field("port")?.parse::<u16>().ok()?,
            ))
        });
    for (host, port) in replicas {
        let server = format!("{host}:{port} (replica of {master})");
        let finding = |severity, message: String, fix: &str| Finding {
            severity,
            check: "clock",
            server: server.clone(),
            message,
            fix: fix.to_string(),
        };
        let offset = pool
            .inspection_connection_to(&host, port)
            .map_err(|e| e.to_string())
            .and_then(|mut wire| clock_offset(&mut wire).ok_or_else(|| "TIME refused".into()));
        let (offset, within) = match offset {
            Ok(o) => o,
            Err(e) => {
                out.push(finding(
                    Severity::Warning,
                    format!("the replica's clock could not be read ({e})"),
                    "run doctor where the replicas can be reached, as a user allowed TIME",
                ));
                continue;
            }
        };
        let apart = offset - master_us;
        let text = format!(
            "clock {:.3} s {} its master's (± {:.1} ms)",
            apart.unsigned_abs() as f64 / 1e6,
            if apart >= 0 { "ahead of" } else { "behind" },
            within as f64 / 1e3
        );
        if apart.unsigned_abs() <= CLOCK_SKEW.as_micros() as u64 {
            out.push(finding(Severity::Ok, text, ""));
        } else if apart > 0 {
            out.push(finding(
                Severity::Warning,
                format!(
                    "{text}: after a failover to it, every lock taken before expires that much \
                     early (expiry is an instant of the master's clock, counted by the \
                     replica's): a second owner while the first still works"
                ),
                "synchronise the replica's clock with its master's (chrony, \
                 systemd-timesyncd or ntpd)",
            ));
        } else {
            out.push(finding(
                Severity::Warning,
                format!(
                    "{text}: after a failover to it, locks taken before last that much longer, \
                     and fences it draws can fall below those handed out already when the \
                     fence counter had not reached it"
                ),
                "synchronise the replica's clock with its master's (chrony, \
                 systemd-timesyncd or ntpd)",
            ));
        }
    }
}

/// "clock 90.000 s ahead of this host's (± 0.1 ms)".
fn clock_text(offset_us: i64, within_us: i64) -> String {
    let side = if offset_us >= 0 { "ahead of" } else { "behind" };
    format!(
        "clock {:.3} s {side} this host's (± {:.1} ms)",
        offset_us.unsigned_abs() as f64 / 1e6,
        within_us as f64 / 1e3
    )
}
