//! Waiting in the queue and the hand-off: [`ENQUEUE`] (an attempt that
//! joins `{K}:queue` when the lock is held), [`CANCEL`] (leave it, keeping
//! a lock handed over meanwhile) and [`RELEASE_QUEUED`] (the release of a
//! holder that waited, which serves the queue first); a waiter's entry
//! ([`queue_member`]), its wake-up channel and the message a release
//! publishes there ([`split_handoff`]), and the client's memory of the
//! names it found held ([`Contended`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// Prefix of each waiter's own pub/sub channel.
pub(crate) const WAKE_CHANNEL_PREFIX: &str = "redislock:w:";

/// How long an abandoned queue outlives the lock it queues for. Live
/// waiters push the expiry forward on every retry (at least once a second),
/// so this only bounds how long the entries of waiters that died stay.
pub(crate) const QUEUE_GRACE_MS: u64 = 10_000;

/// An attempt that joins the queue when the lock is held.
/// ARGV: token, ttl_ms, member, first (1|0), grace_ms, fenced (1|0).
/// Returns {1, fence} (taken; fence 0 unless fenced), {1, fence, 1}
/// (handed to us by a release since the last call: the release wrote our
/// token into `{K}:meta`, which a plain acquisition does not) or
/// {0, pttl, holder_token|false, ahead} (queued behind `ahead` waiters).
///
/// Every queueing pushes the queue's expiry to the holder's TTL plus a
/// grace period. The first waiter of a queue (and every retry) also makes
/// sure `{K}:meta` exists with that expiry, so that a release by a holder
/// that took the lock at once takes its slow path and serves the queue; the
/// waiters behind it leave `{K}:meta` alone (a holder that waited releases
/// with [`RELEASE_QUEUED`], which looks at the queue itself).
///
/// The first call of a wait does the least: SET NX, PTTL, RPUSH, and the
/// expiries. Its SET NX fails quietly on a key of another type; the
/// retries that follow (the first after at most 25 ms) GET the key, which
/// reports the wrong type, find out whether the lock was handed over (the
/// key holds our token and we are no longer queued), and put the waiter
/// back in the queue only if it is missing (the queue expired). LPOS needs
/// Redis 6.0.6; older servers skip that check.
pub(crate) const ENQUEUE: &str = concat!(
    "local first = ARGV[4] == '1'\n",
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n",
    "local f = 0\n",
    "if ARGV[6] == '1' then\n",
    draw_fence_lua!(),
    r#"
  end
  if not first then redis.pcall('LREM', KEYS[3], 1, ARGV[3]) end
  return {1, f}
end
local pttl = redis.call('PTTL', KEYS[1])
local keep = math.max(pttl, 0) + tonumber(ARGV[5])
local pos
if first then
  local n = redis.pcall('RPUSH', KEYS[3], ARGV[3])
  if type(n) == 'table' then
    return redis.error_reply('WRONGTYPE the waiter queue does not hold a list')
  end
  redis.call('PEXPIRE', KEYS[3], keep)
  pos = n - 1
else
  local holder = redis.call('GET', KEYS[1])
  pos = redis.pcall('LPOS', KEYS[3], ARGV[3])
  if type(pos) == 'table' then pos = 0 end
  if holder == ARGV[1] and not pos then
"#,
    held_fence_lua!(),
    r#"
    if mine then return {1, hf, 1} end
    return {1, hf}
  end
  if not pos then
    local n = redis.pcall('RPUSH', KEYS[3], ARGV[3])
    if type(n) == 'table' then
      return redis.error_reply('WRONGTYPE the waiter queue does not hold a list')
    end
    pos = n - 1
  end
  redis.call('PEXPIRE', KEYS[3], keep)
end
if (pos == 0 or not first) and redis.call('PEXPIRE', KEYS[2], keep) == 0 then
  redis.pcall('SET', KEYS[2], '0:', 'PX', keep)
end
if first then return {0, pttl, false, pos} end
return {0, pttl, redis.call('GET', KEYS[1]), pos}
"#
);

/// Leave the queue. If the lock was handed to us meanwhile, keep it.
/// ARGV: token, member. Returns {fence} (0 when none was drawn) when the
/// lock is ours, nil otherwise.
pub(crate) const CANCEL: &str = concat!(
    r#"
if redis.pcall('LREM', KEYS[3], 1, ARGV[2]) == 0 and redis.pcall('GET', KEYS[1]) == ARGV[1] then
"#,
    held_fence_lua!(),
    r#"
  return {hf}
end
return false
"#
);

/// The release of a holder that waited (its grant came by hand-off or by a
/// retry): under contention the queue is the likely case, so it is looked
/// at first, without deleting and re-making `{K}:meta` around each hand-off.
/// KEYS: lock, meta, queue. ARGV: token. Returns as [`RELEASE`](super::lock::RELEASE). The lock
/// goes to the oldest live waiter, as there; `{K}:meta` is left as the
/// waiters keep it (they also keep the queue's expiry), and deleted with the
/// lock once the queue is empty.
pub(crate) const RELEASE_QUEUED: &str = r#"
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return 0 end
while true do
  local m = redis.pcall('LPOP', KEYS[3])
  if type(m) ~= 'string' then
    redis.call('DEL', KEYS[1], KEYS[2])
    return 1
  end
  local sep = string.find(m, ':', 51, true)
  local heard = sep and redis.pcall('PUBLISH', 'redislock:w:' .. string.sub(m, 1, 32),
                                    string.sub(m, 34, 49))
  if type(heard) == 'table' then
    redis.call('LPUSH', KEYS[3], m)
    redis.call('DEL', KEYS[1])
    return redis.error_reply('NOPERM this user may not PUBLISH to the waiters\' channels redislock:w:* (' .. heard.err .. '): the lock was released, but its waiters were left queued, unwoken')
  end
  if heard and heard > 0 then
    redis.call('SET', KEYS[1], string.sub(m, sep + 1), 'PX',
               tonumber(string.sub(m, 51, sep - 1)))
    return {2, string.sub(m, 1, 49)}
  end
end
"#;

/// A waiter's queue entry: `<32 hex id>:<16 hex nonce>:<ttl_ms>:<token>`.
/// The release script parses it by position (see [`RELEASE`](super::lock::RELEASE)).
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

/// Split a hand-off message into the nonce of the waiter it is for and
/// the fence it carries (0: none, the new holder draws one when asked).
/// Releases send the nonce alone; `<nonce>:<fence>` is what earlier
/// versions sent.
pub(crate) fn split_handoff(payload: &[u8]) -> Option<(&[u8], u64)> {
    let Some(sep) = payload.iter().position(|&b| b == b':') else {
        return (!payload.is_empty()).then_some((payload, 0));
    };
    let fence = std::str::from_utf8(&payload[sep + 1..])
        .ok()?
        .parse()
        .ok()?;
    Some((&payload[..sep], fence))
}

/// Lock names a client recently found held, so that its next blocking
/// acquisition of one goes straight to ENQUEUE (which tries the lock too)
/// instead of first sending the plain try that would fail: one command and
/// one round trip less per contended acquisition. A fixed table of hashes,
/// without a lock (a name may push out another of the same slot; a lost
/// hint only costs the try). A name leaves when ENQUEUE finds it free.
pub(crate) struct Contended {
    slots: [AtomicU64; CONTENDED_SLOTS],
}

const CONTENDED_SLOTS: usize = 64;

impl Default for Contended {
    fn default() -> Contended {
        Contended {
            slots: [const { AtomicU64::new(0) }; CONTENDED_SLOTS],
        }
    }
}

impl std::fmt::Debug for Contended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Contended")
    }
}

impl Contended {
    /// FNV-1a, never 0 (an empty slot).
    fn hash(key: &[u8]) -> u64 {
        let h = key.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        h | 1
    }

    fn slot(&self, h: u64) -> &AtomicU64 {
        &self.slots[(h >> 32) as usize % CONTENDED_SLOTS]
    }

    pub(crate) fn is(&self, key: &[u8]) -> bool {
        let h = Self::hash(key);
        self.slot(h).load(Ordering::Relaxed) == h
    }

    pub(crate) fn set(&self, key: &[u8], held: bool) {
        let h = Self::hash(key);
        let slot = self.slot(h);
        if held {
            slot.store(h, Ordering::Relaxed);
        } else {
            let _ = slot.compare_exchange(h, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::hex;

    #[test]
    fn contended_names_are_remembered_until_found_free() {
        let c = Contended::default();
        assert!(!c.is(b"a"));
        c.set(b"a", true);
        assert!(c.is(b"a") && !c.is(b"b"));
        // Another name clearing its own slot leaves "a" alone.
        c.set(b"b", false);
        assert!(c.is(b"a"));
        c.set(b"a", false);
        assert!(!c.is(b"a"));
        assert_ne!(Contended::hash(b""), 0);
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
        assert_eq!(split_handoff(b"00ff:42"), Some((&b"00ff"[..], 42)));
        assert_eq!(split_handoff(b"00ff42"), Some((&b"00ff42"[..], 0)));
        assert_eq!(split_handoff(b""), None);
        assert_eq!(split_handoff(b"00ff:x"), None);
    }
}
