//! `cluster`: a cluster node's view of its cluster (`CLUSTER INFO`):
//! whether it serves commands, and whether every slot is assigned.

use super::{parse_info, At, Finding, Severity};
use crate::net::wire::{server_message, Wire};

pub(super) fn check_cluster(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    let info = match redis::cmd("CLUSTER").arg("INFO").query::<String>(wire) {
        Ok(text) => parse_info(&text),
        Err(e) => {
            out.push(at(
                Severity::Warning,
                "cluster",
                format!("CLUSTER INFO is refused ({})", server_message(&e)),
                "run doctor as a user allowed CLUSTER INFO",
            ));
            return;
        }
    };
    let get = |k: &str| info.get(k).map_or("?", String::as_str);
    let counts = format!(
        "{} slots assigned, {} ok, {} failing, {} nodes",
        get("cluster_slots_assigned"),
        get("cluster_slots_ok"),
        get("cluster_slots_fail"),
        get("cluster_known_nodes"),
    );
    if get("cluster_state") != "ok" {
        out.push(at(
            Severity::Unsafe,
            "cluster",
            format!(
                "cluster_state:{} as this node sees it ({counts}): it refuses commands, so \
                 locks here fail",
                get("cluster_state")
            ),
            "CLUSTER NODES shows which masters failed: bring them back or fail over to their \
             replicas, and cover every slot",
        ));
    } else if get("cluster_slots_assigned") != "16384" {
        out.push(at(
            Severity::Warning,
            "cluster",
            format!("cluster_state:ok, but not every slot is served ({counts})"),
            "assign every slot (cluster-require-full-coverage no hides this)",
        ));
    } else {
        out.push(at(
            Severity::Ok,
            "cluster",
            format!("cluster_state:ok ({counts})"),
            "",
        ));
    }
}
