//! The server's limits, and what they do to locks: `maxmemory` and its
//! eviction policy (`eviction`: whether a held lock's key can be evicted;
//! `memory`: whether acquires are about to fail with OOM) and `maxclients`
//! (`clients`: the headroom left for connections).

use std::collections::HashMap;

use super::{At, Finding, Severity};

/// Connections in use, as a share of `maxclients`, above which the
/// headroom is reported as short.
const CLIENTS_SHARE: f64 = 0.8;

/// Memory in use, as a share of `maxmemory` under `noeviction`, above
/// which acquires are about to fail with OOM.
const MEMORY_SHARE: f64 = 0.9;

pub(super) fn check_memory(info: &HashMap<String, String>, at: &At, out: &mut Vec<Finding>) {
    let policy = info
        .get("maxmemory_policy")
        .map_or("?", String::as_str)
        .to_string();
    let num = |k: &str| info.get(k).and_then(|v| v.parse::<u64>().ok());
    let maxmemory = num("maxmemory").unwrap_or(0);
    let human = info
        .get("maxmemory_human")
        .cloned()
        .unwrap_or_else(|| maxmemory.to_string());
    let evicted = num("evicted_keys").unwrap_or(0);
    let evicted = if evicted > 0 {
        format!(" (it has evicted {evicted} keys since it started)")
    } else {
        String::new()
    };
    let fix = "CONFIG SET maxmemory-policy noeviction and the same line in redis.conf; or keep \
               locks on a server of their own with noeviction";
    if policy == "noeviction" {
        let used = num("used_memory").unwrap_or(0);
        if maxmemory > 0 && used as f64 >= MEMORY_SHARE * maxmemory as f64 {
            out.push(at(
                Severity::Warning,
                "memory",
                format!(
                    "{used} of maxmemory {maxmemory} bytes in use: at the limit every acquire \
                     fails with OOM"
                ),
                "raise maxmemory, or free memory",
            ));
        }
        out.push(at(
            Severity::Ok,
            "eviction",
            String::from("maxmemory-policy noeviction: lock keys are never evicted"),
            "",
        ));
    } else if maxmemory > 0 {
        out.push(at(
            Severity::Unsafe,
            "eviction",
            format!(
                "maxmemory-policy {policy} with maxmemory {human}: under memory pressure Redis \
                 may evict a held lock's key (every lock key has a TTL, so volatile-* policies \
                 choose them too), and the next caller becomes a second owner{evicted}"
            ),
            fix,
        ));
    } else {
        out.push(at(
            Severity::Warning,
            "eviction",
            format!(
                "maxmemory-policy {policy}, but maxmemory is 0 (no limit), so nothing is \
                 evicted today; setting maxmemory later makes held locks evictable{evicted}"
            ),
            fix,
        ));
    }
}

pub(super) fn check_clients(
    connected: Option<u64>,
    max: Option<u64>,
    rejected: Option<u64>,
    at: &At,
    out: &mut Vec<Finding>,
) {
    let fix = "raise maxclients (and the open-files limit of redis-server), or use fewer \
               connections";
    let (Some(connected), Some(max)) = (connected, max) else {
        return;
    };
    if max > 0 && connected as f64 >= CLIENTS_SHARE * max as f64 {
        out.push(at(
            Severity::Warning,
            "clients",
            format!(
                "{connected} of maxclients {max} connections in use: every process holds a few \
                 (its pool, and a subscriber while it waits), and at the limit new ones are \
                 refused and acquires fail"
            ),
            fix,
        ));
    } else if let Some(r) = rejected.filter(|r| *r > 0) {
        out.push(at(
            Severity::Warning,
            "clients",
            format!(
                "{connected} of maxclients {max} connections in use, but {r} were refused \
                 (maxclients reached) since the server started"
            ),
            fix,
        ));
    } else {
        out.push(at(
            Severity::Ok,
            "clients",
            format!("{connected} of maxclients {max} connections in use"),
            "",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::tests::at;

    #[test]
    fn clients_headroom() {
        let mut out = Vec::new();
        check_clients(Some(8), Some(10), Some(0), &at, &mut out);
        check_clients(Some(2), Some(10), Some(3), &at, &mut out);
        check_clients(Some(2), Some(10), Some(0), &at, &mut out);
        let s: Vec<Severity> = out.iter().map(|f| f.severity).collect();
        assert_eq!(s, [Severity::Warning, Severity::Warning, Severity::Ok]);
    }
}
