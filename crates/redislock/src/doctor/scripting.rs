//! `scripting` and `time`: whether `EVAL` and `EVALSHA` run (or are
//! refused by ACL, or renamed), and whether scripts can read `TIME`, the
//! fencing numbers' floor; where scripts run, the `acl` check follows.

use super::acl::{check_acl, is_noperm};
use super::{At, Finding, Severity};
use crate::net::wire::{server_message, Wire};

/// The hash of a script, as EVALSHA takes it.
fn sha(src: &str) -> String {
    redis::Script::new(src).get_hash().to_string()
}

pub(super) fn check_scripting(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    const PROBE: &str = "return 1";
    // Both are asked, so that a finding names every one refused. EVALSHA
    // of a script the server does not hold (EVAL refused) answers
    // NOSCRIPT: allowed to run.
    let eval = redis::cmd("EVAL")
        .arg(PROBE)
        .arg(0)
        .query::<i64>(wire)
        .err();
    let evalsha = redis::cmd("EVALSHA")
        .arg(sha(PROBE))
        .arg(0)
        .query::<i64>(wire)
        .err()
        .filter(|e| e.kind() != redis::ErrorKind::Server(redis::ServerErrorKind::NoScript));
    let refused: Vec<(&str, redis::RedisError)> = [("EVAL", eval), ("EVALSHA", evalsha)]
        .into_iter()
        .filter_map(|(cmd, e)| e.map(|e| (cmd, e)))
        .collect();
    if !refused.is_empty() {
        let names: Vec<&str> = refused.iter().map(|(cmd, _)| *cmd).collect();
        let texts: Vec<String> = refused.iter().map(|(_, e)| server_message(e)).collect();
        let (why, fix) = if refused.iter().any(|(_, e)| is_noperm(e)) {
            let plus: Vec<String> = names
                .iter()
                .map(|n| format!("+{}", n.to_lowercase()))
                .collect();
            (
                "refused to this user by ACL",
                format!("ACL SETUSER <user> {} (or +@scripting)", plus.join(" ")),
            )
        } else if texts
            .iter()
            .any(|t| t.to_lowercase().contains("unknown command"))
        {
            (
                "renamed or disabled",
                String::from("remove rename-command EVAL and EVALSHA from redis.conf"),
            )
        } else {
            ("refused", String::from("see the server's message"))
        };
        let (verb, subject) = match names.as_slice() {
            [one] => ("is", one.to_string()),
            _ => ("are", names.join(" and ")),
        };
        out.push(at(
            Severity::Unsafe,
            "scripting",
            format!(
                "{subject} {verb} {why} ({}): every release, renewal and contended acquire runs \
                 a script, so they all fail",
                texts.join("; ")
            ),
            &fix,
        ));
        return;
    }
    out.push(at(
        Severity::Ok,
        "scripting",
        String::from("EVAL and EVALSHA run"),
        "",
    ));
    // What the fence scripts do: a refused TIME comes back as an error
    // table, and the fence falls back on the counter alone.
    const TIME: &str = "local t = redis.pcall('TIME') \
                        if t.err then return t.err end return 'ok'";
    match redis::cmd("EVAL").arg(TIME).arg(0).query::<String>(wire) {
        Ok(ok) if ok == "ok" => out.push(at(
            Severity::Ok,
            "time",
            String::from(
                "scripts can read TIME: fencing numbers keep the server's clock as a floor",
            ),
            "",
        )),
        r => {
            let why = match r {
                Ok(err) => err,
                Err(e) => server_message(&e),
            };
            out.push(at(
                Severity::Unsafe,
                "time",
                format!(
                    "TIME is refused in scripts ({why}): fencing numbers lose their floor, so \
                     when a restart, a failover or an eviction loses a fence counter they start \
                     again from 1 and go backwards"
                ),
                "remove rename-command TIME from redis.conf: scripts call it by its name",
            ));
        }
    }
    check_acl(wire, at, out);
}
