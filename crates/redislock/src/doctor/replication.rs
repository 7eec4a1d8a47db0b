//! Replication and failover: a server that is a replica (`role`), a
//! master whose replicas may lose a lock in a failover, unless
//! `min-replicas-to-write` or the client's `wait_replicas` is set
//! (`replication`), and whether the sentinels can authorize a failover
//! (`sentinel`).

use std::collections::HashMap;

use super::{At, Finding, Severity};

pub(super) fn check_role(info: &HashMap<String, String>, at: &At, out: &mut Vec<Finding>) {
    if info.get("role").map(String::as_str) != Some("slave") {
        return;
    }
    let master = format!(
        "{}:{}",
        info.get("master_host").map_or("?", String::as_str),
        info.get("master_port").map_or("?", String::as_str)
    );
    out.push(at(
        Severity::Unsafe,
        "role",
        format!(
            "this server is a replica of {master}: lock writes fail here (READONLY) or, with \
             replica-read-only no, are taken on a copy that the master overwrites, beside the \
             master's own lock"
        ),
        "point the URL at the master, or name the service with redis+sentinel://",
    ));
}

pub(super) fn check_replication(
    replicas: u64,
    min_replicas: Option<u64>,
    wait_replicas: Option<u32>,
    at: &At,
    out: &mut Vec<Finding>,
) {
    if replicas == 0 {
        return;
    }
    let finding = match (min_replicas, wait_replicas) {
        (Some(m), _) if m > 0 => at(
            Severity::Ok,
            "replication",
            format!("{replicas} replica(s), min-replicas-to-write {m}"),
            "",
        ),
        (_, Some(n)) => at(
            Severity::Ok,
            "replication",
            format!("{replicas} replica(s); this client waits for {n} of them (wait_replicas)"),
            "",
        ),
        (m, None) => at(
            Severity::Warning,
            "replication",
            format!(
                "{replicas} replica(s) and min-replicas-to-write {}: replication is \
                 asynchronous, so a failover to a replica that had not yet received a lock \
                 loses it, and the lock can get a second owner",
                m.map_or_else(
                    || String::from("unknown (CONFIG GET refused)"),
                    |m| m.to_string()
                )
            ),
            "CONFIG SET min-replicas-to-write 1 and min-replicas-max-lag 10 (and in \
             redis.conf), or add ?wait_replicas=1&wait_timeout=100ms to the client's URL",
        ),
    };
    out.push(finding);
}

pub(super) fn sentinel_quorum(
    describe: &str,
    answers: Vec<(String, std::result::Result<String, String>)>,
) -> Finding {
    let total = answers.len();
    let good: Vec<&String> = answers
        .iter()
        .filter_map(|(_, a)| a.as_ref().ok())
        .collect();
    let bad: Vec<String> = answers
        .iter()
        .filter_map(|(addr, a)| a.as_ref().err().map(|e| format!("{addr}: {e}")))
        .collect();
    if bad.is_empty() {
        return Finding {
            severity: Severity::Ok,
            check: "sentinel",
            server: describe.to_string(),
            message: format!(
                "{total} of {total} sentinels can authorize a failover ({})",
                good.first().map_or("", |s| s.as_str())
            ),
            fix: String::new(),
        };
    }
    // Those that answered at all (NOQUORUM too): the client hears them.
    let heard = answers
        .iter()
        .filter(|(_, a)| {
            a.as_ref()
                .map_or_else(|e| e.starts_with("NOQUORUM"), |_| true)
        })
        .count();
    if heard < total / 2 + 1 {
        return Finding {
            severity: Severity::Unsafe,
            check: "sentinel",
            server: describe.to_string(),
            message: format!(
                "only {heard} of the {total} sentinels answer, and a client grants no lock \
                 while it cannot hear a majority of those its URL lists (it fails closed: a \
                 partition may have cut it off beside an old master); {}",
                bad.join("; ")
            ),
            fix: String::from(
                "bring the sentinels back, or reach them from here (firewall, ACL); list every \
                 sentinel of the service in the URL",
            ),
        };
    }
    Finding {
        severity: Severity::Warning,
        check: "sentinel",
        server: describe.to_string(),
        message: format!(
            "{} of {total} sentinels say a failover can be authorized; {}",
            good.len(),
            bad.join("; ")
        ),
        fix: String::from(
            "bring the sentinels back (SENTINEL CKQUORUM on each says what it misses); while \
             a failover cannot happen, a dead master stops every lock",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::tests::at;

    #[test]
    fn replication_needs_min_replicas_or_wait_replicas() {
        let mut out = Vec::new();
        check_replication(1, Some(0), None, &at, &mut out);
        check_replication(1, Some(1), None, &at, &mut out);
        check_replication(1, Some(0), Some(1), &at, &mut out);
        check_replication(0, Some(0), None, &at, &mut out);
        let s: Vec<Severity> = out.iter().map(|f| f.severity).collect();
        assert_eq!(s, [Severity::Warning, Severity::Ok, Severity::Ok]);
    }
}
