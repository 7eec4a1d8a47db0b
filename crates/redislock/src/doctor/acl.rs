//! `acl`: whether this user's ACL allows the commands redislock sends on
//! the keys of a lock and of a semaphore, asked of the server by a script
//! that runs none of them; and how a refusal by ACL is told from others
//! ([`is_noperm`]).

use super::{At, Finding, Severity};
use crate::net::wire::{server_message, Wire};

/// Whether `e` is a refusal by ACL: `NOPERM` outside scripts; inside one,
/// Redis 7.0 says `ERR … can't run this command` and Valkey `ERR ACL
/// failure in script`.
pub(super) fn is_noperm(e: &redis::RedisError) -> bool {
    let text = server_message(e);
    e.code() == Some("NOPERM")
        || text.contains("NOPERM")
        || text.contains("ACL failure")
        || text.contains("executing the script can't")
}

/// Asks the server's ACL (`redis.acl_check_cmd`, Redis 7 and Valkey) about
/// each command in ARGV (its argument count, then its arguments), without
/// running any: the names of those refused, or false where the server
/// cannot tell.
const ACL_PROBE: &str = r#"
if not redis.acl_check_cmd then return false end
local refused, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local ok, allowed = pcall(redis.acl_check_cmd, unpack(ARGV, i + 1, i + n))
  if ok and not allowed then table.insert(refused, ARGV[i + 1]) end
  i = i + n + 1
end
return refused
"#;

/// The commands a lock, a semaphore and a waiter send (outside scripts
/// and inside them; PUBLISH and SUBSCRIBE are the `pubsub` check's), on
/// the keys of a lock and of a semaphore named `name`, as
/// [`ACL_PROBE`]'s ARGV.
fn acl_probe_args(name: &[u8]) -> Vec<Vec<u8>> {
    use crate::protocol::{Kind, LockKeys};
    let lock = LockKeys::new(name);
    let [k, meta, queue, counter] = lock.all();
    let sem = LockKeys::of(
        name,
        Kind::Semaphore {
            limit: 1,
            permits: 1,
        },
    );
    let [set, info, sem_queue, _] = sem.all();
    let x: &[u8] = b"x";
    let commands: [&[&[u8]]; 30] = [
        &[b"SET", k, x],
        &[b"GET", k],
        &[b"EXISTS", k],
        &[b"TYPE", k],
        &[b"PTTL", k],
        &[b"PEXPIRE", k, b"1"],
        &[b"DEL", k, meta],
        &[b"SET", meta, x],
        &[b"GET", meta],
        &[b"RPUSH", queue, x],
        &[b"LPOP", queue],
        &[b"LREM", queue, b"1", x],
        &[b"LPOS", queue, x],
        &[b"LLEN", queue],
        &[b"LINDEX", queue, b"0"],
        &[b"SET", counter, x],
        &[b"GET", counter],
        &[b"TIME"],
        &[b"ZADD", set, b"1", x],
        &[b"ZREM", set, x],
        &[b"ZRANGE", set, b"0", b"0"],
        &[b"ZRANGEBYSCORE", set, b"0", b"1"],
        &[b"ZREMRANGEBYSCORE", set, b"0", b"1"],
        &[b"ZSCORE", set, x],
        &[b"ZCOUNT", set, b"0", b"1"],
        &[b"HSET", info, x, x],
        &[b"HGET", info, x],
        &[b"HDEL", info, x],
        &[b"HGETALL", info],
        &[b"HVALS", info],
    ];
    let mut args = Vec::new();
    for c in commands {
        args.push(c.len().to_string().into_bytes());
        args.extend(c.iter().map(|a| a.to_vec()));
    }
    args.extend([b"2".to_vec(), b"EXISTS".to_vec(), sem_queue.to_vec()]);
    args
}

/// The commands redislock sends, asked of the server's ACL for this user
/// (Redis 7 and later, Valkey; nothing is said where the server cannot
/// tell). A command refused inside a script stops the script where it
/// stands: a release can fail half-way.
pub(super) fn check_acl(wire: &mut Wire, at: &At, out: &mut Vec<Finding>) {
    let mut name = b"redislock:doctor:".to_vec();
    name.extend_from_slice(&crate::random_token());
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(ACL_PROBE).arg(0);
    for a in acl_probe_args(&name) {
        cmd.arg(a);
    }
    let refused = match cmd.query::<Option<Vec<String>>>(wire) {
        Ok(Some(refused)) => refused,
        // Older than Redis 7, or the probe itself refused: not known.
        Ok(None) | Err(_) => return,
    };
    let mut names: Vec<String> = Vec::new();
    for r in refused {
        let r = r.to_uppercase();
        if !names.contains(&r) {
            names.push(r);
        }
    }
    if names.is_empty() {
        out.push(at(
            Severity::Ok,
            "acl",
            String::from(
                "this user may run every command redislock sends (asked of the ACL for the keys \
                 of a lock named redislock:doctor:…)",
            ),
            "",
        ));
        return;
    }
    let plus: Vec<String> = names
        .iter()
        .map(|n| format!("+{}", n.to_lowercase()))
        .collect();
    out.push(at(
        Severity::Unsafe,
        "acl",
        format!(
            "this user may not run {} on the keys of a lock (ACL): locks, their releases, \
             renewals and waits fail where they need it, and a script refused one half-way \
             has already written what came before",
            names.join(", ")
        ),
        &format!(
            "ACL SETUSER <user> {} (and key patterns ~… that cover the lock names, their \
             {{name}}:… companions and redislock:*)",
            plus.join(" ")
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acl_probe_arguments_are_counted_commands() {
        let args = acl_probe_args(b"jobs");
        let (mut i, mut names) = (0, Vec::new());
        while i < args.len() {
            let n: usize = std::str::from_utf8(&args[i]).unwrap().parse().unwrap();
            assert!(n >= 1 && i + n < args.len(), "a count past the end at {i}");
            names.push(String::from_utf8(args[i + 1].clone()).unwrap());
            i += n + 1;
        }
        assert_eq!(i, args.len());
        for c in [
            "SET", "EXISTS", "LPOP", "RPUSH", "PEXPIRE", "TIME", "ZADD", "HVALS",
        ] {
            assert!(names.iter().any(|n| n == c), "{c} is not asked about");
        }
        assert!(args.iter().any(|a| a.as_slice() == b"{jobs}:queue"));
    }
}
