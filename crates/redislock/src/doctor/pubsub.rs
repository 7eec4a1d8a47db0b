//! `pubsub`: whether this user may use the waiters' channels
//! `redislock:w:*`, asked with a `PUBLISH` to a channel nobody listens to
//! and a `SUBSCRIBE` and `UNSUBSCRIBE` of it.

use redis::Value;

use super::acl::is_noperm;
use super::{At, Finding, Severity};
use crate::net::wire::{server_message, Wire};

pub(super) fn check_pubsub(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    let mut channel = b"redislock:w:doctor-".to_vec();
    channel.extend_from_slice(&crate::random_token());
    let publish = redis::cmd("PUBLISH")
        .arg(&channel)
        .arg("")
        .query::<i64>(wire)
        .err();
    // A waiter's SUBSCRIBE, then UNSUBSCRIBE: the connection is a plain
    // one again.
    let subscribe = match redis::cmd("SUBSCRIBE").arg(&channel).query::<Value>(wire) {
        Ok(_) => redis::cmd("UNSUBSCRIBE")
            .arg(&channel)
            .query::<Value>(wire)
            .err(),
        Err(e) => Some(e),
    };
    let refused: Vec<(&str, redis::RedisError)> = [("PUBLISH", publish), ("SUBSCRIBE", subscribe)]
        .into_iter()
        .filter_map(|(cmd, e)| e.map(|e| (cmd, e)))
        .collect();
    if refused.is_empty() {
        out.push(at(
            Severity::Ok,
            "pubsub",
            String::from("the waiters' channels redislock:w:* can be used (PUBLISH, SUBSCRIBE)"),
            "",
        ));
        return;
    }
    let names: Vec<&str> = refused.iter().map(|(cmd, _)| *cmd).collect();
    let texts: Vec<String> = refused.iter().map(|(_, e)| server_message(e)).collect();
    let channels = texts.iter().any(|t| t.contains("channel"));
    let fix = if channels {
        String::from(
            "ACL SETUSER <user> &redislock:w:* (Redis 7 gives new users no channels: \
             acl-pubsub-default resetchannels)",
        )
    } else if refused.iter().any(|(_, e)| is_noperm(e)) {
        let plus: Vec<String> = names
            .iter()
            .map(|n| format!("+{}", n.to_lowercase()))
            .collect();
        format!("ACL SETUSER <user> {} &redislock:w:*", plus.join(" "))
    } else {
        String::from("allow PUBLISH and SUBSCRIBE (rename-command, ACL)")
    };
    let effect = match names.as_slice() {
        ["PUBLISH"] => "releases cannot hand a lock over (the release scripts publish)",
        ["SUBSCRIBE"] => "acquires cannot wait for a held lock",
        _ => "releases cannot hand a lock over and acquires cannot wait",
    };
    out.push(at(
        Severity::Unsafe,
        "pubsub",
        format!(
            "{} on a waiters' channel {} refused to this user ({}): {effect}",
            names.join(" and "),
            if names.len() == 1 { "is" } else { "are" },
            texts.join("; ")
        ),
        &fix,
    ));
}
