//! The lock of one holder: its scripts and their replies. The uncontended
//! acquire is the plain `SET K tok NX PX ttl GET` ([`set_nx_get`]), and
//! [`ACQUIRE`] the scripted one (fenced, Redlock, servers without `SET … NX
//! GET`); [`RELEASE`] is the compare-and-delete that hands the lock to the
//! oldest waiter when there is one, [`FORCE_RELEASE`] an operator's unlock;
//! [`EXTEND`] (or `SET … IFEQ`, [`set_ifeq`]) renews; [`INSPECT`] reads
//! what a status display shows. Each reply is read by the parser beside
//! its script ([`parse_attempt`], [`parse_released`], [`parse_forced`],
//! [`parse_info`]).

use std::time::Duration;

use redis::Value;

use super::{parse_fence, Decimal};
use crate::options::LockInfo;

/// One atomic attempt: take the lock or report the holder, drawing the
/// fence at once when asked (Redlock, fenced locks, servers without `SET
/// … NX GET`). ARGV: token, ttl_ms, retry (1 when a first run may have
/// taken the lock before its connection died), fenced (1|0).
/// Returns {1, fence} (the fence as digits or an integer; 0 when none was
/// drawn) or {0, pttl, holder_token}. A counter of the wrong type undoes
/// the SET and fails with WRONGTYPE.
pub(crate) const ACQUIRE: &str = concat!(
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n",
    "local f = 0\n",
    "if ARGV[4] == '1' then\n",
    draw_fence_lua!(),
    r#"
  end
  return {1, f}
end
local holder = redis.call('GET', KEYS[1])
if ARGV[3] == '1' and holder == ARGV[1] then
"#,
    held_fence_lua!(),
    r#"
  return {1, hf}
end
return {0, redis.call('PTTL', KEYS[1]), holder}
"#
);

/// Compare-and-delete. KEYS: lock, meta. ARGV: token. Returns 0 (not the
/// owner), 1 (deleted) or 2 (handed off).
///
/// Uncontended it is the hand-written helper's script with one more key in
/// its `DEL`: `{K}:meta` is there only when waiters are queued or a fence is
/// kept. Only then (the `DEL` counted 2) does it look at the queue, whose
/// name it makes from meta's, and hand the lock to the oldest live waiter:
/// the key gets that waiter's token and TTL, and `{K}:meta` names it (and
/// lives on while the queue does). A damaged queue never stops a release:
/// the lock then stays deleted.
pub(crate) const RELEASE: &str = r#"
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('DEL', KEYS[1], KEYS[2]) == 1 then return 1 end
local q = string.sub(KEYS[2], 1, -6) .. ':queue'
while true do
  local m = redis.pcall('LPOP', q)
  if type(m) ~= 'string' then return 1 end
  local sep = string.find(m, ':', 51, true)
  local heard = sep and redis.pcall('PUBLISH', 'redislock:w:' .. string.sub(m, 1, 32),
                                    string.sub(m, 34, 49))
  if type(heard) == 'table' then
    redis.call('LPUSH', q, m)
    local keep = redis.call('PTTL', q)
    if keep > 0 then redis.call('SET', KEYS[2], '0:', 'PX', keep) end
    return redis.error_reply('NOPERM this user may not PUBLISH to the waiters\' channels redislock:w:* (' .. heard.err .. '): the lock was released, but its waiters were left queued, unwoken')
  end
  if heard and heard > 0 then
    local ttl, tok = tonumber(string.sub(m, 51, sep - 1)), string.sub(m, sep + 1)
    redis.call('SET', KEYS[1], tok, 'PX', ttl)
    redis.call('SET', KEYS[2], '0:' .. tok, 'PX', math.max(ttl, redis.call('PTTL', q)))
    return {2, string.sub(m, 1, 49)}
  end
end
"#;

/// The forced release: the lock is taken from whoever holds it (this
/// library's token, a foreign client's value, redis-objects' timestamp),
/// and handed to the oldest live waiter as [`RELEASE`] would, so that the
/// queue does not sit out a TTL. The one path that removes a lock without
/// its token: an operator's "unlock" (redis-objects' `clear`, Laravel's
/// `forceRelease`). The fence counter is not touched, so the next holder's
/// fence is above the broken holder's. A key of another type is left alone
/// (WRONGTYPE). KEYS: lock, meta, queue. No ARGV. Returns {removed (1|0),
/// handed (1|0)}.
pub(crate) const FORCE_RELEASE: &str = r#"
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then
  return redis.error_reply('WRONGTYPE the lock key does not hold a string')
end
local removed = 0
if holder then
  redis.call('DEL', KEYS[1])
  removed = 1
end
while true do
  local m = redis.pcall('LPOP', KEYS[3])
  if type(m) ~= 'string' then
    redis.call('DEL', KEYS[2])
    return {removed, 0}
  end
  local sep = string.find(m, ':', 51, true)
  local heard = sep and redis.pcall('PUBLISH', 'redislock:w:' .. string.sub(m, 1, 32),
                                    string.sub(m, 34, 49))
  if type(heard) == 'table' then
    redis.call('LPUSH', KEYS[3], m)
    return redis.error_reply('NOPERM this user may not PUBLISH to the waiters\' channels redislock:w:* (' .. heard.err .. '): the lock was removed, but its waiters were left queued, unwoken')
  end
  if heard and heard > 0 then
    local ttl, tok = tonumber(string.sub(m, 51, sep - 1)), string.sub(m, sep + 1)
    redis.call('SET', KEYS[1], tok, 'PX', ttl)
    redis.call('SET', KEYS[2], '0:' .. tok, 'PX', math.max(ttl, redis.call('PTTL', KEYS[3])))
    return {removed, 1}
  end
end
"#;

/// Compare-and-PEXPIRE: sets the remaining time, never re-creates the
/// lock. ARGV: token, ttl_ms, fence (0: none drawn). A drawn fence is
/// kept in `{K}:meta` for as long as the lock (see [`INSPECT`]). Returns 1
/// (extended) or 0 (not owner).
pub(crate) const EXTEND: &str = r#"
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  local r = redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if ARGV[3] ~= '0' then
    local t = math.max(tonumber(ARGV[2]), redis.call('PTTL', KEYS[2]))
    redis.call('SET', KEYS[2], ARGV[3] .. ':' .. ARGV[1], 'PX', t)
  end
  return r
end
return 0
"#;

/// What a status display shows, read atomically. No ARGV.
/// Returns {holder|nil, pttl, fence|nil, queued}: the fence only while
/// the lock is held and `{K}:meta` keeps it for that holder (a lazy draw,
/// an extend or a renewal with a fence wrote it).
pub(crate) const INSPECT: &str = r#"
local holder = redis.call('GET', KEYS[1])
local fence = false
if holder then
  local mv = redis.pcall('GET', KEYS[2])
  if type(mv) == 'string' then
    local s = string.find(mv, ':', 1, true)
    if s and string.sub(mv, s + 1) == holder then
      fence = tonumber(string.sub(mv, 1, s - 1)) or false
      if fence == 0 then fence = false end
    end
  end
end
local n = redis.pcall('LLEN', KEYS[3])
if type(n) ~= 'number' then n = 0 end
return {holder, redis.call('PTTL', KEYS[1]), fence, n}
"#;

/// `SET key token NX PX ttl GET`: the uncontended acquire, as its
/// arguments (`ttl` is the caller's, in decimal). Replies nil when it took
/// the lock, the holder's token when the lock is held, and WRONGTYPE when
/// the key holds something else.
pub(crate) fn set_nx_get<'a>(key: &'a [u8], token: &'a [u8], ttl: &'a Decimal) -> [&'a [u8]; 7] {
    [b"SET", key, token, b"NX", b"PX", ttl.as_bytes(), b"GET"]
}

/// `SET key token IFEQ token PX ttl`: extend without a script. Replies OK
/// when the key held `token` (its TTL is now `ttl`), nil otherwise (the
/// key is never created).
pub(crate) fn set_ifeq(key: &[u8], token: &[u8], ttl_ms: u64) -> redis::Cmd {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key)
        .arg(token)
        .arg("IFEQ")
        .arg(token)
        .arg("PX")
        .arg(ttl_ms);
    cmd
}

/// The reply of ACQUIRE / ENQUEUE.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Ours, with this fencing number.
    Taken(u64),
    /// Handed to us by a release while we were queued (ENQUEUE only).
    Handed(u64),
    /// Held by another owner.
    Held {
        /// Remaining TTL in ms; negative when the key has no expiry.
        pttl: i64,
        /// The holder's token.
        holder: Vec<u8>,
        /// Waiters queued before this one (ENQUEUE only; 0 otherwise).
        ahead: u64,
    },
}

/// ACQUIRE's, ENQUEUE's and SEM_ACQUIRE's reply, read as exactly what
/// they answer: `{1, fence}` (taken), `{1, fence, 1}` (handed over while
/// queued), `{0, pttl, holder|nil}` or `{0, pttl, holder|nil, ahead}`
/// (held). Anything else (another type, another length, another flag, a
/// negative fence or place) is `None`, and is never a grant.
pub(crate) fn parse_attempt(v: &Value) -> Option<Attempt> {
    let Value::Array(items) = v else {
        return None;
    };
    match items.as_slice() {
        [Value::Int(1), fence] => Some(Attempt::Taken(parse_fence(fence)?)),
        [Value::Int(1), fence, Value::Int(1)] => Some(Attempt::Handed(parse_fence(fence)?)),
        [Value::Int(0), Value::Int(pttl), holder, rest @ ..] if rest.len() <= 1 => {
            let holder = match holder {
                Value::BulkString(b) => b.clone(),
                Value::Nil => Vec::new(),
                _ => return None,
            };
            let ahead = match rest {
                [] => 0,
                [Value::Int(n)] => u64::try_from(*n).ok()?,
                _ => return None,
            };
            Some(Attempt::Held {
                pttl: *pttl,
                holder,
                ahead,
            })
        }
        _ => None,
    }
}

/// See [`parse_attempt`].
pub(crate) fn is_attempt(v: &Value) -> bool {
    match v {
        // The uncontended reply, checked without copying anything.
        Value::Array(items) if items.len() == 2 => {
            matches!(items[0], Value::Int(1)) && parse_fence(&items[1]).is_some()
        }
        _ => parse_attempt(v).is_some(),
    }
}

/// What a release did ([`RELEASE`] and [`RELEASE_QUEUED`](super::queue::RELEASE_QUEUED)).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Released<'a> {
    /// Not the owner: nothing changed.
    NotOwner,
    /// Deleted.
    Deleted,
    /// Handed to a waiter: its subscriber's channel id and its nonce, when
    /// the reply names them (`{2, "<id>:<nonce>"}`; a bare `2` from a
    /// semaphore's release or `FORCE_RELEASE` does not).
    Handed(Option<(&'a str, &'a str)>),
}

/// A release's reply: `0`, `1`, `2` or `{2, "<32 hex id>:<16 hex nonce>"}`.
pub(crate) fn parse_released(v: &Value) -> Option<Released<'_>> {
    match v {
        Value::Int(0) => Some(Released::NotOwner),
        Value::Int(1) => Some(Released::Deleted),
        Value::Int(2) => Some(Released::Handed(None)),
        Value::Array(a) => match a.as_slice() {
            [Value::Int(2), Value::BulkString(who)] => {
                let who = std::str::from_utf8(who).ok()?;
                let (id, nonce) = who.split_once(':')?;
                let hex =
                    |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
                (hex(id, 32) && hex(nonce, 16)).then_some(Released::Handed(Some((id, nonce))))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The releases' reply: 0 (not the owner), 1 (released), 2 (handed over).
pub(crate) fn is_released(v: &Value) -> bool {
    parse_released(v).is_some()
}

/// [`FORCE_RELEASE`]'s reply: (a holder was removed, the lock was handed
/// to a waiter).
pub(crate) fn parse_forced(v: &Value) -> Option<(bool, bool)> {
    let flag = |n: &i64| match n {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    };
    match v {
        Value::Array(a) => match a.as_slice() {
            [Value::Int(removed), Value::Int(handed)] => Some((flag(removed)?, flag(handed)?)),
            _ => None,
        },
        _ => None,
    }
}

/// See [`parse_forced`].
pub(crate) fn is_forced(v: &Value) -> bool {
    parse_forced(v).is_some()
}

/// The INSPECT script's reply.
pub(crate) fn parse_info(v: &Value) -> Option<LockInfo> {
    let Value::Array(items) = v else { return None };
    let [holder, Value::Int(_), Value::Int(_) | Value::Nil, Value::Int(_)] = items.as_slice()
    else {
        return None;
    };
    let holder = match holder {
        Value::BulkString(b) => Some(b.clone()),
        Value::Nil => None,
        _ => return None,
    };
    let int = |i: usize| match items.get(i) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    Some(LockInfo {
        ttl: holder
            .as_ref()
            .and_then(|_| u64::try_from(int(1)?).ok())
            .map(Duration::from_millis),
        holder,
        fence: int(2).and_then(|f| u64::try_from(f).ok()),
        waiters: int(3).and_then(|n| u64::try_from(n).ok()).unwrap_or(0),
    })
}

/// See [`parse_info`].
pub(crate) fn is_info(v: &Value) -> bool {
    parse_info(v).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_parse() {
        let taken = Value::Array(vec![Value::Int(1), Value::Int(7)]);
        assert_eq!(parse_attempt(&taken), Some(Attempt::Taken(7)));
        let digits = Value::Array(vec![
            Value::Int(1),
            Value::BulkString(b"1795360184864561".to_vec()),
        ]);
        assert_eq!(
            parse_attempt(&digits),
            Some(Attempt::Taken(1_795_360_184_864_561))
        );
        let handed = Value::Array(vec![Value::Int(1), Value::Int(8), Value::Int(1)]);
        assert_eq!(parse_attempt(&handed), Some(Attempt::Handed(8)));
        let junk = Value::Array(vec![Value::Int(1), Value::BulkString(b"x".to_vec())]);
        assert_eq!(parse_attempt(&junk), None);
        let held = Value::Array(vec![
            Value::Int(0),
            Value::Int(250),
            Value::BulkString(b"t".to_vec()),
        ]);
        assert_eq!(
            parse_attempt(&held),
            Some(Attempt::Held {
                pttl: 250,
                holder: b"t".to_vec(),
                ahead: 0,
            })
        );
        let queued = Value::Array(vec![
            Value::Int(0),
            Value::Int(-1),
            Value::Nil,
            Value::Int(3),
        ]);
        assert_eq!(
            parse_attempt(&queued),
            Some(Attempt::Held {
                pttl: -1,
                holder: Vec::new(),
                ahead: 3,
            })
        );
        assert_eq!(parse_attempt(&Value::Nil), None);
    }
}
