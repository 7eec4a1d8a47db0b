//! What goes over the wire: the Lua scripts, the companion key names, tokens
//! and the encoding of waiters in the queue.
//!
//! For a lock named `K` three keys are used, all in `K`'s cluster hash slot:
//! `K` itself holds the owner's token and nothing else (so `SET K tok NX PX`
//! from any other client excludes us and is excluded by us), the fence
//! counter `{K}:fence` (an integer `INCR`ed on every acquisition) and the
//! waiter queue `{K}:queue` (a sorted set, scored by arrival time on the
//! server's clock). When `K` already has a hash tag the suffix is appended to
//! `K` unchanged instead.
//!
//! Waiting works by hand-off: a blocked acquirer subscribes to its own
//! channel `redislock:w:<id>` and appends `<id>:<nonce>:<ttl>:<token>` to
//! the queue.
//! The release script pops the oldest waiter, `PUBLISH`es the new fence
//! number to it, and only if someone received the message (a dead or
//! departed waiter receives nothing) sets the key to that waiter's token
//! with that waiter's TTL. Otherwise it deletes the key. The key therefore
//! always holds exactly one owner's token, and the releaser cannot jump the
//! queue.

use redis::Value;

/// Prefix of each waiter's own pub/sub channel.
pub(crate) const WAKE_CHANNEL_PREFIX: &str = "redislock:w:";

/// How long an abandoned queue outlives the lock it queues for.
pub(crate) const QUEUE_GRACE_MS: u64 = 60_000;

/// One atomic attempt: take the lock or report the holder.
/// KEYS: lock, fence. ARGV: token, ttl_ms, retry (1 when a first run may
/// have taken the lock before its connection died).
/// Returns {1, fence} or {0, pttl, holder_token}. A fence key that is not
/// an integer undoes the SET and fails with WRONGTYPE.
pub(crate) const ACQUIRE: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.pcall('INCR', KEYS[2])
  if type(fence) == 'table' then
    redis.call('DEL', KEYS[1])
    return redis.error_reply('WRONGTYPE the fence counter does not hold an integer')
  end
  return {1, fence}
end
local holder = redis.call('GET', KEYS[1])
if ARGV[3] == '1' and holder == ARGV[1] then
  return {1, tonumber(redis.pcall('GET', KEYS[2])) or 0}
end
return {0, redis.call('PTTL', KEYS[1]), holder}
"#;

/// An attempt that joins the queue when the lock is held.
/// KEYS: lock, fence, queue. ARGV: token, ttl_ms, member, first (1|0), grace_ms.
/// Returns {1, fence} (taken, or handed to us since the last call) or
/// {0, pttl[, holder_token]} (queued).
///
/// The first call of a wait is the hot path and does the least: SET NX,
/// PTTL, RPUSH (and PEXPIRE when it creates the queue). Its SET NX fails
/// quietly on a key of another type; the retries that follow (the first
/// after at most 25 ms) GET the key, which reports the wrong type, find
/// out whether the lock was handed over (the key holds our token and we are
/// no longer queued), and put the waiter back in the queue only if it is
/// missing (the queue expired). LPOS needs Redis 6.0.6; older servers skip
/// that check.
pub(crate) const ENQUEUE: &str = r#"
local first = ARGV[4] == '1'
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.pcall('INCR', KEYS[2])
  if type(fence) == 'table' then
    redis.call('DEL', KEYS[1])
    return redis.error_reply('WRONGTYPE the fence counter does not hold an integer')
  end
  if not first then redis.pcall('LREM', KEYS[3], 1, ARGV[3]) end
  return {1, fence}
end
if first then
  local pttl = redis.call('PTTL', KEYS[1])
  local n = redis.pcall('RPUSH', KEYS[3], ARGV[3])
  if type(n) == 'table' then
    return redis.error_reply('WRONGTYPE the waiter queue does not hold a list')
  end
  if n == 1 then redis.call('PEXPIRE', KEYS[3], math.max(pttl, 0) + tonumber(ARGV[5])) end
  return {0, pttl}
end
local holder = redis.call('GET', KEYS[1])
local pos = redis.pcall('LPOS', KEYS[3], ARGV[3])
if type(pos) == 'table' then pos = 0 end
if holder == ARGV[1] and not pos then
  return {1, tonumber(redis.pcall('GET', KEYS[2])) or 0}
end
local pttl = redis.call('PTTL', KEYS[1])
if not pos and type(redis.pcall('RPUSH', KEYS[3], ARGV[3])) == 'table' then
  return redis.error_reply('WRONGTYPE the waiter queue does not hold a list')
end
redis.call('PEXPIRE', KEYS[3], math.max(pttl, 0) + tonumber(ARGV[5]))
return {0, pttl, holder}
"#;

/// Leave the queue. If the lock was handed to us meanwhile, keep it.
/// KEYS: lock, fence, queue. ARGV: token, member.
/// Returns the fence when the lock is ours, nil otherwise.
pub(crate) const CANCEL: &str = r#"
if redis.pcall('LREM', KEYS[3], 1, ARGV[2]) == 0 and redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return tonumber(redis.pcall('GET', KEYS[2])) or 0
end
return false
"#;

/// Compare-and-delete, handing the lock to the oldest live waiter instead
/// of deleting when there is one. A damaged queue or fence key never stops
/// a release: the key is then simply deleted.
/// KEYS: lock, fence, queue. ARGV: token.
/// Returns 0 (not the owner), 1 (deleted) or 2 (handed off).
pub(crate) const RELEASE: &str = r#"
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return 0 end
while true do
  local m = redis.pcall('LPOP', KEYS[3])
  if type(m) ~= 'string' then break end
  local sep = string.find(m, ':', 51, true)
  if sep then
    local fence = redis.pcall('INCR', KEYS[2])
    if type(fence) == 'table' then break end
    if redis.call('PUBLISH', 'redislock:w:' .. string.sub(m, 1, 32),
                  string.sub(m, 34, 49) .. ':' .. fence) > 0 then
      redis.call('SET', KEYS[1], string.sub(m, sep + 1), 'PX', string.sub(m, 51, sep - 1))
      return 2
    end
  end
end
redis.call('DEL', KEYS[1])
return 1
"#;

/// Compare-and-PEXPIRE: sets the remaining time, never re-creates the key.
/// KEYS: lock. ARGV: token, ttl_ms. Returns 1 (extended) or 0 (not owner).
pub(crate) const EXTEND: &str = r#"
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// A Lua script with its SHA1, sent as EVALSHA with an EVAL fallback.
pub(crate) struct Script {
    pub(crate) source: &'static str,
    pub(crate) sha: String,
}

impl Script {
    pub(crate) fn new(source: &'static str) -> Script {
        Script {
            source,
            sha: redis::Script::new(source).get_hash().to_string(),
        }
    }

    /// The EVALSHA command for these keys and arguments.
    pub(crate) fn evalsha(&self, keys: &[&[u8]], args: &[&[u8]]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.sha);
        push_keys_args(&mut cmd, keys, args);
        cmd
    }

    /// The EVAL command (the fallback after NOSCRIPT).
    pub(crate) fn eval(&self, keys: &[&[u8]], args: &[&[u8]]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(self.source);
        push_keys_args(&mut cmd, keys, args);
        cmd
    }
}

fn push_keys_args(cmd: &mut redis::Cmd, keys: &[&[u8]], args: &[&[u8]]) {
    cmd.arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(*a);
    }
}

/// The scripts, hashed once per process.
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) enqueue: Script,
    pub(crate) cancel: Script,
    pub(crate) release: Script,
    pub(crate) extend: Script,
}

pub(crate) fn scripts() -> &'static Scripts {
    static SCRIPTS: std::sync::OnceLock<Scripts> = std::sync::OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        acquire: Script::new(ACQUIRE),
        enqueue: Script::new(ENQUEUE),
        cancel: Script::new(CANCEL),
        release: Script::new(RELEASE),
        extend: Script::new(EXTEND),
    })
}

/// The names of the keys that belong to one lock.
#[derive(Debug, Clone)]
pub(crate) struct LockKeys {
    pub(crate) lock: Vec<u8>,
    pub(crate) fence: Vec<u8>,
    pub(crate) queue: Vec<u8>,
}

impl LockKeys {
    pub(crate) fn new(key: &[u8]) -> LockKeys {
        LockKeys {
            lock: key.to_vec(),
            fence: companion_key(key, b":fence"),
            queue: companion_key(key, b":queue"),
        }
    }
}

/// A key in the same cluster hash slot as `key`: `key` + suffix when `key`
/// has a hash tag, `{key}` + suffix when it has no `}` at all. A name with
/// a `}` but no valid tag cannot be wrapped; it gets a short tag of its own
/// slot in front: `{t}key` + suffix, where `slot(t) == slot(key)`.
pub(crate) fn companion_key(key: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + suffix.len() + 8);
    if has_hash_tag(key) {
        out.extend_from_slice(key);
    } else if !key.contains(&b'}') {
        out.push(b'{');
        out.extend_from_slice(key);
        out.push(b'}');
    } else {
        out.push(b'{');
        out.extend_from_slice(tag_for_slot(slot(key)).as_bytes());
        out.push(b'}');
        out.extend_from_slice(key);
    }
    out.extend_from_slice(suffix);
    out
}

/// The first decimal number whose cluster slot is `slot` (a few thousand
/// CRCs at most).
fn tag_for_slot(slot: u16) -> String {
    (0u32..)
        .map(|n| n.to_string())
        .find(|t| crc16(t.as_bytes()) % 16384 == slot)
        .expect("every slot has a decimal tag")
}

/// Redis Cluster's rule: a '{' followed later by a '}' with something between.
fn has_hash_tag(key: &[u8]) -> bool {
    hash_tag(key).is_some()
}

fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let len = key[open + 1..].iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// The Redis Cluster hash slot of a key.
pub(crate) fn slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % 16384
}

/// CRC16-CCITT (XModem), as Redis Cluster uses it.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// `n` random bytes from the operating system.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    // getrandom only fails when the OS has no entropy source at all.
    getrandom::fill(&mut buf).expect("the operating system's random generator failed");
    buf
}

/// Lower-case hex of some bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// A fresh token: 128 random bits from the OS, as 32 hex characters (what
/// `redis-cli GET` shows an operator).
pub(crate) fn new_token() -> Vec<u8> {
    hex(&random_bytes::<16>()).into_bytes()
}

/// A waiter's queue entry: `<32 hex id>:<16 hex nonce>:<ttl_ms>:<token>`.
/// The release script parses it by position (see [`RELEASE`]).
pub(crate) fn queue_member(sub_id: &str, nonce: &str, ttl_ms: u64, token: &[u8]) -> Vec<u8> {
    debug_assert_eq!(sub_id.len(), 32);
    debug_assert_eq!(nonce.len(), 16);
    let mut m = Vec::with_capacity(52 + 20 + token.len());
    m.extend_from_slice(sub_id.as_bytes());
    m.push(b':');
    m.extend_from_slice(nonce.as_bytes());
    m.push(b':');
    m.extend_from_slice(ttl_ms.to_string().as_bytes());
    m.push(b':');
    m.extend_from_slice(token);
    m
}

/// The reply of ACQUIRE / ENQUEUE.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Ours, with this fencing number.
    Taken(u64),
    /// Held by another owner.
    Held {
        /// Remaining TTL in ms; negative when the key has no expiry.
        pttl: i64,
        /// The holder's token.
        holder: Vec<u8>,
    },
}

pub(crate) fn parse_attempt(v: &Value) -> Option<Attempt> {
    let items = match v {
        Value::Array(items) => items,
        _ => return None,
    };
    match (items.first()?, items.get(1)?) {
        (Value::Int(1), Value::Int(fence)) => Some(Attempt::Taken(u64::try_from(*fence).ok()?)),
        (Value::Int(0), Value::Int(pttl)) => {
            let holder = match items.get(2) {
                Some(Value::BulkString(b)) => b.clone(),
                _ => Vec::new(),
            };
            Some(Attempt::Held {
                pttl: *pttl,
                holder,
            })
        }
        _ => None,
    }
}

/// Parse a hand-off message `<nonce>:<fence>` meant for `nonce`.
pub(crate) fn parse_handoff(payload: &[u8], nonce: &str) -> Option<u64> {
    let rest = payload.strip_prefix(nonce.as_bytes())?.strip_prefix(b":")?;
    std::str::from_utf8(rest).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companion_keys_share_the_slot() {
        assert_eq!(companion_key(b"jobs", b":fence"), b"{jobs}:fence");
        assert_eq!(
            companion_key(b"{user1}:job", b":fence"),
            b"{user1}:job:fence"
        );
        // An empty tag is no tag: wrap the whole name.
        assert_eq!(companion_key(b"{x", b":q"), b"{{x}:q");
        assert!(has_hash_tag(b"a{b}c"));
        assert!(!has_hash_tag(b"a{}c"));
        assert!(!has_hash_tag(b"a}b{"));
        // A '}' without a tag: a tag of the same slot goes in front.
        for key in [&b"a}b"[..], b"}", b"{}x", b"x}{"] {
            for suffix in [&b":fence"[..], b":queue"] {
                let c = companion_key(key, suffix);
                assert_eq!(slot(&c), slot(key), "{:?}", String::from_utf8_lossy(&c));
                assert!(c.ends_with(suffix));
            }
        }
        for key in [&b"jobs"[..], b"{user1}:job", b"{x"] {
            assert_eq!(slot(&companion_key(key, b":fence")), slot(key));
        }
    }

    #[test]
    fn slots_match_redis() {
        // Values from CLUSTER KEYSLOT.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn tokens_are_128_bit_hex_and_distinct() {
        let a = new_token();
        let b = new_token();
        assert_eq!(a.len(), 32);
        assert!(a.iter().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn member_layout_matches_the_release_script() {
        let id = hex(&[0xab; 16]);
        let nonce = hex(&[0xcd; 8]);
        let m = queue_member(&id, &nonce, 1500, b"to:ken");
        // Lua is 1-based: id is 1..32, nonce 34..49, ttl from 51.
        assert_eq!(&m[0..32], id.as_bytes());
        assert_eq!(&m[33..49], nonce.as_bytes());
        assert_eq!(&m[50..55], b"1500:");
        assert_eq!(&m[55..], b"to:ken");
    }

    #[test]
    fn handoff_messages_are_checked_against_the_nonce() {
        assert_eq!(parse_handoff(b"00ff:42", "00ff"), Some(42));
        assert_eq!(parse_handoff(b"00fe:42", "00ff"), None);
        assert_eq!(parse_handoff(b"00ff:x", "00ff"), None);
    }

    #[test]
    fn attempts_parse() {
        let taken = Value::Array(vec![Value::Int(1), Value::Int(7)]);
        assert_eq!(parse_attempt(&taken), Some(Attempt::Taken(7)));
        let held = Value::Array(vec![
            Value::Int(0),
            Value::Int(250),
            Value::BulkString(b"t".to_vec()),
        ]);
        assert_eq!(
            parse_attempt(&held),
            Some(Attempt::Held {
                pttl: 250,
                holder: b"t".to_vec()
            })
        );
        assert_eq!(parse_attempt(&Value::Nil), None);
    }
}
