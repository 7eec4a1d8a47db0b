//! `persistence`: what a restart of the server keeps of the locks held
//! (the append-only file and its fsync, RDB snapshots, or nothing).

use std::collections::HashMap;

use super::{At, Finding, Severity};

pub(super) fn check_persistence(
    info: &HashMap<String, String>,
    save: Option<String>,
    fsync: Option<String>,
    at: &At,
    out: &mut Vec<Finding>,
) {
    let aof = info.get("aof_enabled").map(String::as_str) == Some("1");
    let fix = "appendonly yes (appendfsync everysec or always); or keep a restarted server out \
               of use for longer than the longest lock TTL";
    let finding = match (aof, save.as_deref()) {
        (true, _) => {
            let fsync = fsync.unwrap_or_else(|| String::from("?"));
            let kept = match fsync.as_str() {
                "always" => "every lock",
                "everysec" => "every lock but those of the last second",
                _ => "the locks the operating system had written out",
            };
            at(
                Severity::Ok,
                "persistence",
                format!("appendonly yes, appendfsync {fsync}: a restart keeps {kept}"),
                "",
            )
        }
        (false, Some("")) => at(
            Severity::Warning,
            "persistence",
            String::from(
                "persistence is off (no save, no appendonly): a restart forgets every held \
                 lock, and until their TTLs run out each can get a second owner",
            ),
            fix,
        ),
        (false, Some(save)) => at(
            Severity::Warning,
            "persistence",
            format!(
                "RDB snapshots only (save {save}): a restart forgets the locks taken since the \
                 last snapshot, and until their TTLs run out each can get a second owner"
            ),
            fix,
        ),
        (false, None) => at(
            Severity::Warning,
            "persistence",
            String::from(
                "appendonly is off and CONFIG GET save is refused: a restart forgets at least \
                 the locks taken since the last snapshot",
            ),
            fix,
        ),
    };
    out.push(finding);
}
