//! What goes over the wire: the Lua scripts, the key names, tokens, the
//! encoding of waiters in the queue and the parsing of the scripts' replies.
//! No I/O: the layers above send what this one describes.
//!
//! For a lock named `K` these keys are used, all in `K`'s cluster hash slot:
//! - `K` itself holds the owner's token and nothing else (so `SET K tok NX
//!   PX` from any other client excludes us and is excluded by us);
//! - `{K}:meta` exists only when a release has more to do than delete `K`:
//!   waiters are queued, or the holder's fence is kept for inspection. It
//!   holds `<fence>:<holder token>` (fence `0` when none was drawn), lives at
//!   least as long as `K` and the queue, and is deleted with `K`;
//! - `{K}:queue` is the waiter queue, a list that empties itself as waiters
//!   are served and expires a grace period after the lock;
//! - `redislock:fence:{N}` is the fence counter shared by every lock name in
//!   the slot (`N` is the smallest decimal tag hashing to that slot), so at
//!   most 16,384 counters exist per database whatever the number of names.
//!
//! When `K` already has a hash tag the suffixes are appended to `K` as it
//! is. So no key of a lock name outlives its last holder and its waiters;
//! only the shared counters stay.
//!
//! The uncontended cycle costs what the hand-written helper costs: acquire
//! is the plain command `SET K tok NX PX ttl GET` (the `GET` reports the
//! holder, and a key of another type, in the same reply), release is
//! [`RELEASE`], a compare-and-delete of `K` and `{K}:meta` in one `DEL`
//! whose count tells whether anything more is to be done.
//!
//! A fence is `max(counter + 1, server TIME in µs)`, drawn while the lock
//! is held, atomically with the check that it is: in the acquire itself
//! when the caller asked for a fenced lock ([`ACQUIRE`], [`ENQUEUE`]), or on
//! the holder's first request for it ([`FENCE`]). Fences therefore follow
//! the order of ownership. A counter lost to a restart without persistence,
//! an eviction or a failover to a lagging replica resumes above every
//! number handed out before, as long as the servers' clocks agree better
//! than the outage lasted. A server that refuses `TIME` in scripts gets the
//! counter alone. Numbers stay below 2^53 (exact as doubles).
//!
//! Waiting works by hand-off: a blocked acquirer subscribes to its own
//! channel `redislock:w:<id>`, appends `<id>:<nonce>:<ttl>:<token>` to the
//! queue and makes sure `{K}:meta` exists. The release script, finding
//! `{K}:meta`, pops the oldest waiter, `PUBLISH`es the nonce to it, and only
//! if someone received the message (a dead or departed waiter receives
//! nothing) sets the key to that waiter's token with that waiter's TTL.
//! Otherwise it leaves the key deleted. The key therefore always holds
//! exactly one owner's token, and the releaser cannot jump the queue.
//!
//! Every script but [`RELEASE`] takes the same KEYS, in [`LockKeys::all`]'s
//! order: lock, meta, queue, counter. [`RELEASE`] takes lock and meta, and
//! finds the queue from meta's name.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use once_cell::race::OnceBox;
use redis::Value;

use crate::crc16::crc16;
use crate::options::{Holder, LockInfo, SharedInfo};

/// The suffix of `{K}:meta`. RELEASE turns it into the queue's name by
/// cutting these 5 bytes off: keep the two in step.
const META_SUFFIX: &[u8] = b":meta";

/// Prefix of each waiter's own pub/sub channel.
pub(crate) const WAKE_CHANNEL_PREFIX: &str = "redislock:w:";

/// How long an abandoned queue outlives the lock it queues for. Live
/// waiters push the expiry forward on every retry (at least once a second),
/// so this only bounds how long the entries of waiters that died stay.
pub(crate) const QUEUE_GRACE_MS: u64 = 10_000;

/// Lua that draws the next fence from the slot's counter `KEYS[4]` into
/// `f` (declared by the caller): `max(counter + 1, TIME in µs)` as a
/// decimal string, stored back with one `SET … GET` (Redis 6.2+; GET then
/// SET on older servers). On a counter of another type, `f` is the
/// WRONGTYPE error table instead and nothing was changed.
///
/// Fences are handled as digit strings, compared by length then bytes:
/// Lua's numbers are doubles, and each conversion to text is an `snprintf`
/// on the hot path. A counter holding a string that is not a number below
/// 2^53 is taken for lost and overwritten (the clock still puts the new
/// number above every earlier one). Without TIME (refused in scripts) the
/// counter alone counts from 1. Straight-line code rather than a Lua
/// function: a closure per call costs more than the lines it saves.
macro_rules! next_fence_lua {
    () => {
        concat!("\nlocal t = redis.pcall('TIME')", fence_from_time_lua!())
    };
}

/// [`next_fence_lua`] with the server time already in `t` (a script that
/// read TIME itself, or the error table when TIME is refused).
macro_rules! fence_from_time_lua {
    () => {
        r#"
f = '1'
if t[1] then f = t[1] .. string.sub('00000' .. t[2], -6) end
local old = redis.pcall('SET', KEYS[4], f, 'GET')
if type(old) == 'table' and not string.find(old.err, 'WRONGTYPE', 1, true) then
  old = redis.pcall('GET', KEYS[4])
  if type(old) ~= 'table' then redis.call('SET', KEYS[4], f) end
end
if type(old) == 'table' then
  f = old
elseif old and (#old > #f or (#old == #f and old >= f)) and string.find(old, '^%d+$') then
  local n = tonumber(old)
  if n < 9007199254740991 then
    f = string.format('%.0f', n + 1)
    redis.call('SET', KEYS[4], f)
  end
end
"#
    };
}

/// [`next_fence_lua`] into `f` (declared by the caller), returning the
/// WRONGTYPE error when the counter holds something else.
macro_rules! next_fence_or_error_lua {
    () => {
        concat!(
            next_fence_lua!(),
            r#"
if type(f) == 'table' then
  return redis.error_reply('WRONGTYPE the fence counter does not hold a number')
end
"#
        )
    };
}

/// Lua that runs right after the lock's `SET NX` succeeded, for a fenced
/// acquisition: draw the fence into `f` (declared by the caller); a
/// counter of the wrong type undoes the SET and returns the WRONGTYPE
/// error.
macro_rules! draw_fence_lua {
    () => {
        concat!(
            next_fence_lua!(),
            r#"
if type(f) == 'table' then
  redis.call('DEL', KEYS[1])
  return redis.error_reply('WRONGTYPE the fence counter does not hold a number')
end
"#
        )
    };
}

/// Lua for a holder that finds the lock already its own (a repeated run
/// after a lost reply, or a hand-off whose message was missed): its fence
/// into `hf`, from `{K}:meta` when that names this holder, else 0 (none
/// drawn yet: the holder draws one when asked, above every earlier
/// holder's). `mine` tells whether `{K}:meta` names this holder: a release
/// that hands the lock over writes it.
macro_rules! held_fence_lua {
    () => {
        r#"
local hf, mine = 0, false
local mv = redis.pcall('GET', KEYS[2])
if type(mv) == 'string' then
  local s = string.find(mv, ':', 1, true)
  if s and string.sub(mv, s + 1) == ARGV[1] then
    hf, mine = string.sub(mv, 1, s - 1), true
  end
end
"#
    };
}

mod semaphore;
pub(crate) use semaphore::{MAX_LIMIT, WRITER};

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

/// The release of a holder that waited (its grant came by hand-off or by a
/// retry): under contention the queue is the likely case, so it is looked
/// at first, without deleting and re-making `{K}:meta` around each hand-off.
/// KEYS: lock, meta, queue. ARGV: token. Returns as [`RELEASE`]. The lock
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

/// The lazy fence: drawn on the holder's first request for it, atomically
/// with the check that it still holds the lock, and kept in `{K}:meta` for
/// inspection and for the holder's later requests (which get the same
/// number). ARGV: token. Returns {fence} or nil (not the owner).
pub(crate) const FENCE: &str = concat!(
    r#"
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return false end
"#,
    held_fence_lua!(),
    r#"
if hf ~= 0 and hf ~= '0' then return {hf} end
local f
"#,
    next_fence_or_error_lua!(),
    r#"
local t = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]))
if t > 0 then redis.call('SET', KEYS[2], f .. ':' .. ARGV[1], 'PX', t) end
return {f}
"#
);

/// Raise the fence counter `KEYS[4]` to at least ARGV[1] (digits): what a
/// Redlock client sends to the nodes of its granting majority that drew
/// less than the fence it keeps, so that every later majority draws above
/// it whatever the nodes' clocks say. Returns 1 (raised) or 0 (already at
/// or above); a counter of another type is the WRONGTYPE error.
pub(crate) const FLOOR: &str = r#"
local old = redis.pcall('GET', KEYS[4])
if type(old) == 'table' then
  return redis.error_reply('WRONGTYPE the fence counter does not hold a number')
end
local f = ARGV[1]
if old and string.find(old, '^%d+$') and (#old > #f or (#old == #f and old >= f)) then
  return 0
end
redis.call('SET', KEYS[4], f)
return 1
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

/// What a server accepts beyond Redis 6.2, learnt from its replies and
/// kept per client and server (a failover to another version corrects it
/// at the first refusal): `SET … NX GET` (Redis 7.0, Valkey) for the
/// uncontended acquire, `SET … IFEQ` (Valkey 8.1, Redis 8.4) for an extend
/// without a script. Unknown until the first use, which tries it.
#[derive(Debug, Default)]
pub(crate) struct Caps {
    nx_get: AtomicU8,
    ifeq: AtomicU8,
}

const YES: u8 = 1;
const NO: u8 = 2;

/// One of [`Caps`]' features.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cap {
    NxGet,
    IfEq,
}

impl Caps {
    fn cell(&self, cap: Cap) -> &AtomicU8 {
        match cap {
            Cap::NxGet => &self.nx_get,
            Cap::IfEq => &self.ifeq,
        }
    }

    /// Whether the server is known to take the feature.
    pub(crate) fn known(&self, cap: Cap) -> bool {
        self.cell(cap).load(Ordering::Relaxed) == YES
    }

    /// Whether to try the feature: not known to be refused.
    pub(crate) fn worth_trying(&self, cap: Cap) -> bool {
        self.cell(cap).load(Ordering::Relaxed) != NO
    }

    /// Learn from the reply to a try of `cap`, and say whether the server
    /// refused it (a syntax error: the option is unknown there; the caller
    /// then falls back). Any other reply shows the server takes it; other
    /// errors (a broken connection) teach nothing.
    pub(crate) fn refused<T>(&self, cap: Cap, reply: &crate::Result<T>) -> bool {
        let v = match reply {
            Ok(_) => YES,
            // What Redis and Valkey answer for an unknown `SET` option.
            Err(crate::Error::Server { message, .. }) if message.contains("syntax error") => NO,
            Err(_) => return false,
        };
        if self.cell(cap).load(Ordering::Relaxed) != v {
            self.cell(cap).store(v, Ordering::Relaxed);
        }
        v == NO
    }
}

/// `SET key token NX PX ttl GET`: the uncontended acquire, as its
/// arguments (`ttl` is the caller's, in decimal). Replies nil when it took
/// the lock, the holder's token when the lock is held, and WRONGTYPE when
/// the key holds something else.
pub(crate) fn set_nx_get<'a>(key: &'a [u8], token: &'a [u8], ttl: &'a Decimal) -> [&'a [u8]; 7] {
    [b"SET", key, token, b"NX", b"PX", ttl.as_bytes(), b"GET"]
}

/// A number in decimal, on the stack.
pub(crate) struct Decimal {
    digits: [u8; 20],
    at: u8,
}

impl Decimal {
    pub(crate) fn new(n: u64) -> Decimal {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = n;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Decimal {
            digits,
            at: at as u8,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.digits[usize::from(self.at)..]
    }
}

/// A command packed for the wire as RESP (an array of bulk strings) in one
/// allocation of the right size: what the blocking transport sends, without
/// redis-rs's `Cmd` (building and packing one costs more than the system
/// calls that send it).
pub(crate) fn pack(args: &[&[u8]]) -> Vec<u8> {
    pack_parts(&[args])
}

/// [`pack`] of the arguments of `parts`, one after the other.
pub(crate) fn pack_parts(parts: &[&[&[u8]]]) -> Vec<u8> {
    let (mut n, mut size) = (0, 16);
    for part in parts {
        n += part.len();
        size += part.iter().map(|a| a.len() + 16).sum::<usize>();
    }
    let mut out = Vec::with_capacity(size);
    push_header(&mut out, b'*', n);
    for part in parts {
        for a in *part {
            push_header(&mut out, b'$', a.len());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// `*n\r\n` or `$n\r\n`, written at once for the short lengths of almost
/// every argument.
#[inline]
fn push_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    let digit = |d: usize| b'0' + (d % 10) as u8;
    if n < 10 {
        out.extend_from_slice(&[kind, digit(n), b'\r', b'\n']);
    } else if n < 100 {
        out.extend_from_slice(&[kind, digit(n / 10), digit(n), b'\r', b'\n']);
    } else {
        out.push(kind);
        out.extend_from_slice(Decimal::new(n as u64).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// A redis-rs command of these arguments (the async transport's form).
pub(crate) fn cmd_of(args: &[&[u8]]) -> redis::Cmd {
    let size = args.iter().map(|a| a.len()).sum();
    let mut cmd = redis::Cmd::with_capacity(args.len(), size);
    for a in args {
        cmd.arg(*a);
    }
    cmd
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

/// Whether a reply has the shape a command answers, checked by the
/// transport before anything is taken from it: a reply of another shape
/// closes the connection and fails the command (see [`checked`]).
pub(crate) type Accepts = fn(&Value) -> bool;

/// `v` if `accepts` takes it as the reply to `what` (a command's or a
/// script's name), else the protocol error that says what came instead.
pub(crate) fn checked(v: Value, accepts: Accepts, what: &str) -> redis::RedisResult<Value> {
    if accepts(&v) {
        return Ok(v);
    }
    Err(crate::error::protocol_error(format!(
        "{} in answer to {what}",
        crate::error::abridged(&v)
    )))
}

/// A Lua script with its SHA1, sent as EVALSHA with an EVAL fallback.
pub(crate) struct Script {
    /// Its name, for errors.
    pub(crate) name: &'static str,
    pub(crate) source: &'static str,
    pub(crate) sha: String,
    /// How many of [`LockKeys::all`] it takes, from the first.
    pub(crate) nkeys: usize,
    /// The shape of every reply it gives.
    pub(crate) accepts: Accepts,
}

impl Script {
    pub(crate) fn new(name: &'static str, source: &'static str, accepts: Accepts) -> Script {
        Script::with_keys(name, source, 4, accepts)
    }

    fn with_keys(
        name: &'static str,
        source: &'static str,
        nkeys: usize,
        accepts: Accepts,
    ) -> Script {
        Script {
            name,
            source,
            sha: redis::Script::new(source).get_hash().to_string(),
            nkeys,
            accepts,
        }
    }

    /// `v` if it is a reply this script gives, else the protocol error
    /// that says what came instead.
    pub(crate) fn checked(&self, v: Value) -> redis::RedisResult<Value> {
        checked(v, self.accepts, self.name)
    }

    /// The EVALSHA command for these keys and arguments.
    pub(crate) fn evalsha(&self, keys: &[&[u8]], args: &[&[u8]]) -> redis::Cmd {
        // Sized at once: growing it costs more than sending it.
        let size: usize = keys.iter().chain(args).map(|a| a.len()).sum();
        let mut cmd = redis::Cmd::with_capacity(3 + keys.len() + args.len(), 70 + size);
        cmd.arg("EVALSHA").arg(&self.sha);
        push_keys_args(&mut cmd, keys, args);
        cmd
    }

    /// [`Script::evalsha`] packed for the wire (see [`pack`]).
    pub(crate) fn evalsha_packed(&self, keys: &[&[u8]], args: &[&[u8]]) -> Vec<u8> {
        let nkeys = Decimal::new(keys.len() as u64);
        pack_parts(&[
            &[b"EVALSHA", self.sha.as_bytes(), nkeys.as_bytes()],
            keys,
            args,
        ])
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
    pub(crate) release_queued: Script,
    pub(crate) force_release: Script,
    pub(crate) fence: Script,
    pub(crate) floor: Script,
    pub(crate) extend: Script,
    pub(crate) inspect: Script,
    pub(crate) sem_acquire: Script,
    pub(crate) sem_release: Script,
    pub(crate) sem_extend: Script,
    pub(crate) sem_fence: Script,
    pub(crate) sem_cancel: Script,
    pub(crate) sem_inspect: Script,
}

/// The scripts with their hashes, made once per process without a lock: a
/// `fork()` while another thread is making them (a `OnceLock` would be
/// left "running" in the child, and its first release would wait forever)
/// only means that the child makes them again.
pub(crate) fn scripts() -> &'static Scripts {
    use std::sync::atomic::AtomicPtr;
    static SCRIPTS: AtomicPtr<Scripts> = AtomicPtr::new(std::ptr::null_mut());
    let made = SCRIPTS.load(Ordering::Acquire);
    if !made.is_null() {
        // SAFETY: only ever set to a leaked Box, never freed.
        return unsafe { &*made };
    }
    let fresh = Box::into_raw(Box::new(Scripts {
        acquire: Script::new("ACQUIRE", ACQUIRE, is_attempt),
        enqueue: Script::new("ENQUEUE", ENQUEUE, is_attempt),
        cancel: Script::new("CANCEL", CANCEL, is_fence_or_nil),
        release: Script::with_keys("RELEASE", RELEASE, 2, is_released),
        release_queued: Script::with_keys("RELEASE_QUEUED", RELEASE_QUEUED, 3, is_released),
        force_release: Script::with_keys("FORCE_RELEASE", FORCE_RELEASE, 3, is_forced),
        fence: Script::new("FENCE", FENCE, is_fence_or_nil),
        floor: Script::new("FLOOR", FLOOR, is_flag),
        extend: Script::new("EXTEND", EXTEND, is_flag),
        inspect: Script::new("INSPECT", INSPECT, is_info),
        sem_acquire: Script::new("SEM_ACQUIRE", semaphore::SEM_ACQUIRE, is_attempt),
        sem_release: Script::new("SEM_RELEASE", semaphore::SEM_RELEASE, is_released),
        sem_extend: Script::new("SEM_EXTEND", semaphore::SEM_EXTEND, is_flag),
        sem_fence: Script::new("SEM_FENCE", semaphore::SEM_FENCE, is_fence_or_nil),
        sem_cancel: Script::new("SEM_CANCEL", semaphore::SEM_CANCEL, is_fence_or_nil),
        sem_inspect: Script::new("SEM_INSPECT", semaphore::SEM_INSPECT, is_shared_info),
    }));
    let ptr = std::ptr::null_mut();
    match SCRIPTS.compare_exchange(ptr, fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: leaked on purpose, for the life of the process.
        Ok(_) => unsafe { &*fresh },
        Err(first) => {
            // SAFETY: `fresh` came from Box::into_raw above and was not shared.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: as above: a leaked Box, never freed.
            unsafe { &*first }
        }
    }
}

/// What a name is locked as: a lock (one holder), a counting semaphore
/// (holders of `permits` each, `limit` permits in all), or either side of a
/// read-write lock. See [`semaphore`] for the last three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Kind {
    Lock,
    Semaphore { limit: u32, permits: u32 },
    Read,
    Write,
}

impl Kind {
    /// `(permits, limit)` of a holder of a semaphore or read-write lock.
    fn permits(self) -> Option<(u32, u32)> {
        match self {
            Kind::Lock => None,
            Kind::Semaphore { limit, permits } => Some((permits, limit)),
            Kind::Read => Some((1, WRITER)),
            Kind::Write => Some((WRITER, WRITER)),
        }
    }
}

/// The scripts of one kind of name, and how their arguments differ.
pub struct KindScripts {
    /// An attempt that may join the queue (ENQUEUE's arguments and reply;
    /// a semaphore's also tries without queueing, with no member).
    pub(crate) enqueue: &'static Script,
    /// Leave the queue (CANCEL's arguments and reply).
    pub(crate) cancel: &'static Script,
    pub(crate) extend: &'static Script,
    pub(crate) fence: &'static Script,
}

/// The names of the keys that one lock uses (see the module comment).
#[derive(Debug)]
pub(crate) struct LockKeys {
    /// The lock's key; a semaphore's or read-write lock's holders.
    pub(crate) lock: Vec<u8>,
    pub(crate) kind: Kind,
    /// `{K}:meta`: every release names it.
    meta: Vec<u8>,
    /// `{K}:queue` then the counter's name, made when first asked for: an
    /// uncontended try and release never need them. Lock-free (racing
    /// threads may both make them; one is kept), so that a child forked in
    /// the middle never finds them half made and waits.
    rest: OnceBox<(Vec<u8>, usize)>,
    /// Set when this holder's grant came after a wait: its release then
    /// looks at the queue first ([`RELEASE_QUEUED`]).
    waited: AtomicBool,
}

impl Clone for LockKeys {
    fn clone(&self) -> LockKeys {
        let rest = OnceBox::new();
        if let Some(names) = self.rest.get() {
            let _ = rest.set(Box::new(names.clone()));
        }
        LockKeys {
            lock: self.lock.clone(),
            kind: self.kind,
            meta: self.meta.clone(),
            rest,
            waited: AtomicBool::new(self.waited()),
        }
    }
}

impl LockKeys {
    pub(crate) fn new(key: &[u8]) -> LockKeys {
        let mut meta = Vec::with_capacity(key.len() + 2 + META_SUFFIX.len());
        push_companion(&mut meta, key, META_SUFFIX);
        LockKeys {
            lock: key.to_vec(),
            kind: Kind::Lock,
            meta,
            rest: OnceBox::new(),
            waited: AtomicBool::new(false),
        }
    }

    /// The keys of the name `key` locked as `kind`: a semaphore's under
    /// `{K}:sem`, a read-write lock's under `{K}:rw` (see [`semaphore`]).
    pub(crate) fn of(key: &[u8], kind: Kind) -> LockKeys {
        let base: &[u8] = match kind {
            Kind::Lock => return LockKeys::new(key),
            Kind::Semaphore { .. } => b":sem",
            Kind::Read | Kind::Write => b":rw",
        };
        let mut lock = Vec::with_capacity(key.len() + 8);
        push_companion(&mut lock, key, base);
        let mut meta = lock.clone();
        meta.extend_from_slice(b":info");
        LockKeys {
            lock,
            kind,
            meta,
            rest: OnceBox::new(),
            waited: AtomicBool::new(false),
        }
    }

    /// Whether the name is a semaphore or a side of a read-write lock.
    pub(crate) fn shared(&self) -> bool {
        self.kind != Kind::Lock
    }

    /// The scripts of this kind of name.
    pub(crate) fn scripts(&self) -> KindScripts {
        let s = scripts();
        if self.shared() {
            KindScripts {
                enqueue: &s.sem_acquire,
                cancel: &s.sem_cancel,
                extend: &s.sem_extend,
                fence: &s.sem_fence,
            }
        } else {
            KindScripts {
                enqueue: &s.enqueue,
                cancel: &s.cancel,
                extend: &s.extend,
                fence: &s.fence,
            }
        }
    }

    /// The arguments ENQUEUE's (or SEM_ACQUIRE's) take after the grace
    /// period: `fenced` for a lock, the permits and the limit otherwise.
    pub(crate) fn tail_args(&self, fenced: bool) -> Vec<Vec<u8>> {
        match self.kind.permits() {
            None => vec![if fenced { b"1".to_vec() } else { b"0".to_vec() }],
            Some((k, limit)) => vec![k.to_string().into_bytes(), limit.to_string().into_bytes()],
        }
    }

    /// The permits a holder of this semaphore holds; `None` for the other
    /// kinds.
    pub(crate) fn semaphore_permits(&self) -> Option<u32> {
        match self.kind {
            Kind::Semaphore { permits, .. } => Some(permits),
            _ => None,
        }
    }

    /// A waiter's entry in the queue (see [`queue_member`]).
    pub(crate) fn member(&self, sub_id: &str, nonce: &str, ttl_ms: u64, token: &[u8]) -> Vec<u8> {
        match self.kind.permits() {
            None => queue_member(sub_id, nonce, ttl_ms, token),
            Some((k, limit)) => {
                let mut head = format!("{ttl_ms}:{k}").into_bytes();
                head.extend_from_slice(format!(":{limit}").as_bytes());
                let mut m = queue_member(sub_id, nonce, 0, token);
                // `<id>:<nonce>:0:<token>` → `<id>:<nonce>:<ttl>:<k>:<limit>:<token>`
                m.splice(50..51, head);
                m
            }
        }
    }

    /// Whether the grant came after a wait (see [`LockKeys::set_waited`]).
    pub(crate) fn waited(&self) -> bool {
        self.waited.load(Ordering::Relaxed)
    }

    /// Say how the grant came: after a wait (by hand-off or a retry) there
    /// are likely waiters behind.
    pub(crate) fn set_waited(&self, waited: bool) {
        self.waited.store(waited, Ordering::Relaxed);
    }

    #[cfg(test)]
    fn meta(&self) -> &[u8] {
        &self.meta
    }

    fn rest(&self) -> (&[u8], &[u8]) {
        let (names, counter_at) = self.rest.get_or_init(|| {
            let mut names = Vec::with_capacity(self.lock.len() + 32);
            push_companion(&mut names, &self.lock, b":queue");
            let counter_at = names.len();
            push_counter(&mut names, slot(&self.lock));
            Box::new((names, counter_at))
        });
        names.split_at(*counter_at)
    }

    pub(crate) fn queue(&self) -> &[u8] {
        self.rest().0
    }

    pub(crate) fn counter(&self) -> &[u8] {
        self.rest().1
    }

    /// The KEYS of every script but RELEASE: lock, meta, queue, counter.
    pub(crate) fn all(&self) -> [&[u8]; 4] {
        let (queue, counter) = self.rest();
        [&self.lock, &self.meta, queue, counter]
    }

    /// The KEYS of RELEASE: lock, meta (the first two of [`LockKeys::all`]).
    pub(crate) fn release(&self) -> [&[u8]; 2] {
        [&self.lock, &self.meta]
    }

    /// The KEYS of RELEASE_QUEUED: lock, meta, queue.
    pub(crate) fn release_queued(&self) -> [&[u8]; 3] {
        [&self.lock, &self.meta, self.queue()]
    }
}

/// Append the name of the fence counter shared by the lock names of one
/// cluster slot.
fn push_counter(out: &mut Vec<u8>, slot: u16) {
    out.extend_from_slice(b"redislock:fence:{");
    push_decimal(out, slot_tag(slot));
    out.push(b'}');
}

/// The shard channel a cluster client SSUBSCRIBEs on a node to hear, by
/// the `sunsubscribe` the node sends, that `slot` left it (a failover, a
/// migration): `redislock:slot:{N}`, tagged like the fence counters.
/// Nothing is ever published there.
pub(crate) fn slot_watch(slot: u16) -> String {
    format!("redislock:slot:{{{}}}", slot_tag(slot))
}

/// Append a key in the same cluster hash slot as `key`: `key` + suffix
/// when `key` has a hash tag, `{key}` + suffix when it has no `}` at all.
/// A name with a `}` but no valid tag cannot be wrapped; it gets a short
/// tag of its own slot in front: `{t}key` + suffix, where `slot(t) ==
/// slot(key)`.
fn push_companion(out: &mut Vec<u8>, key: &[u8], suffix: &[u8]) {
    if has_hash_tag(key) {
        out.extend_from_slice(key);
    } else if !key.contains(&b'}') {
        out.push(b'{');
        out.extend_from_slice(key);
        out.push(b'}');
    } else {
        out.push(b'{');
        push_decimal(out, slot_tag(slot(key)));
        out.push(b'}');
        out.extend_from_slice(key);
    }
    out.extend_from_slice(suffix);
}

/// Append `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(Decimal::new(n.into()).as_bytes());
}

include!(concat!(env!("OUT_DIR"), "/slot_tags.rs"));

/// The smallest decimal number whose cluster slot is `slot` (a table made
/// by build.rs).
fn slot_tag(slot: u16) -> u32 {
    SLOT_TAGS[usize::from(slot) % SLOT_TAGS.len()]
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

/// The pool of [`random_bytes`]: its owner's pid, the next unused byte,
/// the bytes.
static RANDOM_POOL: Mutex<(u32, usize, Vec<u8>)> = Mutex::new((0, 0, Vec::new()));

/// `N` random bytes from the operating system's generator, taken from a
/// per-process pool refilled 4 KiB at a time (one system call per 256
/// tokens instead of one per token). A child after `fork()` discards the
/// pool it inherited, so parent and child never hand out the same bytes.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    const POOL: usize = 4096;
    let mut out = [0u8; N];
    // Never wait for the pool: in a child forked while another thread held
    // it, nobody would ever let it go. Asking the OS directly is as good.
    let mut st = match RANDOM_POOL.try_lock() {
        Ok(st) => st,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            getrandom::fill(&mut out).expect("the operating system's random generator failed");
            return out;
        }
    };
    let pid = crate::sync::pid();
    let (owner, pos, pool) = &mut *st;
    if *owner != pid || *pos + N > pool.len() {
        pool.resize(POOL.max(N), 0);
        // getrandom only fails when the OS has no entropy source at all.
        getrandom::fill(pool).expect("the operating system's random generator failed");
        *owner = pid;
        *pos = 0;
    }
    out.copy_from_slice(&pool[*pos..*pos + N]);
    // Bytes handed out are never handed out again.
    pool[*pos..*pos + N].fill(0);
    *pos += N;
    out
}

/// Lower-case hex of some bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = Vec::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    String::from_utf8(s).expect("hex digits are ASCII")
}

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
}

/// A fresh token: 128 random bits from the OS, as 32 hex characters (what
/// `redis-cli GET` shows an operator).
pub(crate) fn new_token() -> Vec<u8> {
    let mut token = Vec::with_capacity(32);
    push_hex(&mut token, &random_bytes::<16>());
    token
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

/// A fence in a script's reply: an integer, or a decimal string (digits
/// only), never negative.
pub(crate) fn parse_fence(v: &Value) -> Option<u64> {
    match v {
        Value::Int(f) => u64::try_from(*f).ok(),
        Value::BulkString(digits)
            if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) =>
        {
            std::str::from_utf8(digits).ok()?.parse().ok()
        }
        _ => None,
    }
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

/// The releases' reply: 0 (not the owner), 1 (released), 2 (handed over).
pub(crate) fn is_released(v: &Value) -> bool {
    parse_released(v).is_some()
}

/// What a release did ([`RELEASE`] and [`RELEASE_QUEUED`]).
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

/// EXTEND's reply: 1 (extended) or 0 (not the owner).
pub(crate) fn is_flag(v: &Value) -> bool {
    matches!(v, Value::Int(0 | 1))
}

/// FENCE's and CANCEL's reply: `{fence}`, or nil.
pub(crate) fn is_fence_or_nil(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Array(items) => matches!(items.as_slice(), [f] if parse_fence(f).is_some()),
        _ => false,
    }
}

/// See [`parse_forced`].
pub(crate) fn is_forced(v: &Value) -> bool {
    parse_forced(v).is_some()
}

/// See [`parse_info`].
pub(crate) fn is_info(v: &Value) -> bool {
    parse_info(v).is_some()
}

/// See [`parse_shared_info`].
pub(crate) fn is_shared_info(v: &Value) -> bool {
    parse_shared_info(v).is_some()
}

/// `SET … NX … GET`'s reply: nil (taken; only `$-1` reads as nil, see
/// `resp`) or the holder's token.
pub(crate) fn is_nil_or_string(v: &Value) -> bool {
    matches!(v, Value::Nil | Value::BulkString(_))
}

/// SEM_INSPECT's reply.
pub(crate) fn parse_shared_info(v: &Value) -> Option<SharedInfo> {
    let Value::Array(items) = v else { return None };
    let [Value::Array(list), Value::Int(waiters), Value::Int(count)] = items.as_slice() else {
        return None;
    };
    let mut holders = Vec::with_capacity(list.len());
    for h in list {
        let Value::Array(f) = h else { return None };
        let [Value::BulkString(token), Value::Int(ms), Value::Int(permits), fence] = f.as_slice()
        else {
            return None;
        };
        if !matches!(fence, Value::BulkString(_) | Value::Int(_)) {
            return None;
        }
        let permits = u32::try_from(*permits).ok()?;
        holders.push(Holder {
            token: token.clone(),
            ttl: Duration::from_millis(u64::try_from(*ms).unwrap_or(0)),
            permits: if permits == WRITER { 1 } else { permits },
            writer: permits == WRITER,
            fence: parse_fence(fence).unwrap_or(0),
        });
    }
    Some(SharedInfo {
        holders,
        holder_count: u64::try_from(*count).unwrap_or(0),
        waiters: u64::try_from(*waiters).unwrap_or(0),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_learn_from_replies() {
        let server = |message: &str| -> crate::Result<()> {
            Err(crate::Error::Server {
                addr: "127.0.0.1:1".into(),
                message: message.into(),
            })
        };
        let caps = Caps::default();
        assert!(caps.worth_trying(Cap::IfEq) && !caps.known(Cap::IfEq));
        // A broken connection or another server error teaches nothing.
        assert!(!caps.refused(Cap::IfEq, &Err::<(), _>(crate::Error::Internal("x".into()))));
        assert!(!caps.refused(Cap::IfEq, &server("WRONGTYPE Operation against a key")));
        assert!(caps.worth_trying(Cap::IfEq) && !caps.known(Cap::IfEq));
        // A syntax error: refused, not tried again; any reply: taken.
        assert!(caps.refused(Cap::IfEq, &server("ERR syntax error")));
        assert!(!caps.worth_trying(Cap::IfEq));
        assert!(!caps.refused(Cap::IfEq, &Ok(())));
        assert!(caps.known(Cap::IfEq));
        // Kept apart per feature.
        assert!(caps.worth_trying(Cap::NxGet) && !caps.known(Cap::NxGet));
    }

    fn companion_key(key: &[u8], suffix: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_companion(&mut out, key, suffix);
        out
    }

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
    fn lock_keys_are_named_as_the_protocol_says() {
        let keys = LockKeys::new(b"jobs");
        let counter = format!("redislock:fence:{{{}}}", slot_tag(slot(b"jobs")));
        assert_eq!(
            keys.all(),
            [
                &b"jobs"[..],
                b"{jobs}:meta",
                b"{jobs}:queue",
                counter.as_bytes()
            ]
        );
        assert_eq!(keys.release(), [&b"jobs"[..], b"{jobs}:meta"]);
        let tagged = LockKeys::new(b"{u1}:job");
        assert_eq!(tagged.meta(), b"{u1}:job:meta");
        assert_eq!(tagged.queue(), b"{u1}:job:queue");
        for n in [0, 7, 10, 16383, 99_999, u32::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}").as_bytes());
        }
    }

    #[test]
    fn packed_commands_are_what_redis_rs_sends() {
        let long = vec![b'x'; 70_000];
        for args in [
            vec![&b"PING"[..]],
            vec![b"SET", b"k", b"", b"NX", b"PX", b"10000", b"GET"],
            vec![b"SET", &long[..], b"\r\n\0\xff"],
            vec![&long[..9], &long[..10], &long[..99], &long[..100]],
        ] {
            assert_eq!(pack(&args), cmd_of(&args).get_packed_command());
        }
        let s = &scripts().release;
        let (keys, args): ([&[u8]; 2], [&[u8]; 1]) = ([b"k", b"{k}:meta"], [b"tok"]);
        assert_eq!(
            s.evalsha_packed(&keys, &args),
            s.evalsha(&keys, &args).get_packed_command()
        );
        for n in [0, 9, 10, 99, 100, 10_000, u64::MAX] {
            assert_eq!(Decimal::new(n).as_bytes(), n.to_string().as_bytes());
        }
        let ttl = Decimal::new(2500);
        assert_eq!(
            pack(&set_nx_get(b"k", b"t", &ttl)),
            b"*7\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nt\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n2500\r\n$3\r\nGET\r\n"
        );
    }

    #[test]
    fn lazily_made_names_are_made_once_across_threads() {
        let keys = LockKeys::new(b"jobs");
        let seen: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| keys.queue().as_ptr() as usize))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
        assert_eq!(keys.queue(), b"{jobs}:queue");
        assert_eq!(keys.clone().all(), keys.all());
    }

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
    fn slot_tags_hash_to_their_slot() {
        for slot in 0..16384u16 {
            let tag = slot_tag(slot).to_string();
            assert_eq!(crc16(tag.as_bytes()) % 16384, slot, "tag {tag}");
        }
        assert_eq!(slot(slot_watch(1234).as_bytes()), 1234);
        // The counter of a name sits in the name's slot, tagged or not.
        for key in [&b"order:1"[..], b"{user1}:job", b"a}b", b"x"] {
            let keys = LockKeys::new(key);
            for k in keys.all() {
                assert_eq!(slot(k), slot(key), "{}", String::from_utf8_lossy(k));
            }
        }
        assert!(LockKeys::new(b"x")
            .counter()
            .starts_with(b"redislock:fence:{"));
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
    fn a_child_forked_while_the_token_pool_is_held_still_gets_tokens() {
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _pool = RANDOM_POOL.lock().unwrap();
            held_tx.send(()).unwrap();
            done_rx.recv().unwrap();
        });
        held_rx.recv().unwrap();
        // SAFETY: the child only computes a token and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = new_token().len() == 32 && scripts().release.nkeys == 2;
            // SAFETY: ends the child without running the parent's handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert!(pid > 0);
        let mut status = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            // SAFETY: waits for our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("the child waited for a pool its parent's thread held");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        done_tx.send(()).unwrap();
        holder.join().unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
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
        assert_eq!(split_handoff(b"00ff:42"), Some((&b"00ff"[..], 42)));
        assert_eq!(split_handoff(b"00ff42"), Some((&b"00ff42"[..], 0)));
        assert_eq!(split_handoff(b""), None);
        assert_eq!(split_handoff(b"00ff:x"), None);
    }

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
