//! The scripts of counting semaphores and read-write locks, and the reply
//! of [`SEM_INSPECT`] ([`parse_shared_info`]).
//!
//! A semaphore named `K` keeps, in `K`'s cluster slot:
//! - `{K}:sem`, a sorted set of its holders: each holder's token, scored by
//!   the server time (ms) at which its lease runs out. Each holder has its
//!   own lease: renewing one never extends another, and a holder that died
//!   gives its permits back when its lease runs out (every script drops the
//!   holders whose lease ran out before it does anything else);
//! - `{K}:sem:info`, a hash: each holder's token → `<permits>:<fence>`;
//! - `{K}:sem:queue`, the waiters in arrival order, each
//!   `<channel id>:<nonce>:<ttl>:<permits>:<limit>:<token>`;
//! - the fence counter the lock names of the slot share.
//!
//! A read-write lock named `K` keeps the same under `{K}:rw`: a reader is a
//! holder of one permit and a writer a holder of [`WRITER`] permits, both
//! with a limit of [`WRITER`], so that any number of readers or one writer
//! fit. Neither collides with the plain lock `K`.
//!
//! A caller is admitted when nobody waits ahead of it and the permits held
//! plus its own fit its limit (a call's limit is the number of permits it
//! admits). Otherwise it joins the queue, and no later caller passes it: a
//! queued writer stops new readers, and a waiter for k permits gets them as
//! soon as k are free. Every script that frees permits (a release, a
//! waiter leaving, a lease that ran out) serves the queue from its head:
//! each waiter that fits is made a holder (with a fence of its own) and
//! woken on its channel with `<nonce>:<fence>`, in order, until the head
//! does not fit. A waiter that is gone (nobody receives its message) is
//! dropped. Readers queued behind a writer are thus admitted together
//! after it.
//!
//! The holders' set and hash expire with the last lease; the queue a grace
//! period after it. Nothing of a name stays once its last holder's lease
//! and its waiters are gone.

use std::time::Duration;

use redis::Value;

use super::parse_fence;
use crate::options::{Holder, SharedInfo};

/// The permits of a writer, and the limit of readers and writers alike.
pub(crate) const WRITER: u32 = 1 << 30;

/// The largest limit a semaphore takes.
pub(crate) const MAX_LIMIT: u32 = 1_000_000;

/// The server time in ms into `now` (and TIME's reply in `t`), then the
/// holders whose lease ran out dropped.
macro_rules! sem_prelude_lua {
    () => {
        r#"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
local unwoken = false
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('HDEL', KEYS[2], unpack(dead))
end
"#
    };
}

/// Sum the permits held into `used`.
macro_rules! sem_used_lua {
    () => {
        r#"
local used = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  local s = string.find(v, ':', 1, true)
  used = used + (tonumber(string.sub(v, 1, (s or 0) - 1)) or 0)
end
"#
    };
}

/// The length of the queue into `n`, or the WRONGTYPE error returned.
macro_rules! sem_queue_len_lua {
    () => {
        r#"
local n = redis.pcall('LLEN', KEYS[3])
if type(n) == 'table' then
  return redis.error_reply('WRONGTYPE the waiter queue does not hold a list')
end
"#
    };
}

/// Make the holders' set and hash last at least `d` ms from now, and the
/// queue (when `n` > 0) `grace` ms longer. `fresh`: the holders' keys were
/// made by this script (they have no expiry yet). An expiry is only ever
/// pushed further here: a holder's lease may end before the keys do, never
/// after, and the scripts drop ended leases themselves.
macro_rules! sem_keep_lua {
    () => {
        r#"
  if fresh or redis.call('PTTL', KEYS[1]) < d then
    redis.call('PEXPIRE', KEYS[1], d)
    redis.call('PEXPIRE', KEYS[2], d)
    if n > 0 then redis.call('PEXPIRE', KEYS[3], d + grace) end
  end
"#
    };
}

/// Serve the queue (`n` waiters) from its head while the head fits (see
/// the module text), counting the waiters admitted in `served`, keeping
/// `n`, `used` and the latest lease they were given (`d`, ms from now) up
/// to date. The caller itself (`me`, its token, or false), when queued, is
/// admitted without a message (it is alive: it runs this script) and its
/// fence noted in `minef`. Then the keys are kept as long as the new leases.
macro_rules! sem_serve_lua {
    () => {
        concat!(
            r#"
local served, d, minef = 0, 0, false
while n > 0 do
  local m = redis.call('LINDEX', KEYS[3], 0)
  if not m then n = 0 break end
  local a = string.find(m, ':', 51, true)
  local b = a and string.find(m, ':', a + 1, true)
  local c = b and string.find(m, ':', b + 1, true)
  if not c then
    redis.call('LPOP', KEYS[3])
    n = n - 1
  else
    local mk = tonumber(string.sub(m, a + 1, b - 1)) or 1
    local ml = tonumber(string.sub(m, b + 1, c - 1)) or 1
    if used + mk > ml then break end
    local mt = string.sub(m, c + 1)
    if mt ~= me and redis.acl_check_cmd
       and not redis.acl_check_cmd('PUBLISH', 'redislock:w:' .. string.sub(m, 1, 32), 'x') then
      unwoken = true
      break
    end
    redis.call('LPOP', KEYS[3])
    n = n - 1
    local f
"#,
            fence_from_time_lua!(),
            r#"
    if type(f) == 'table' then f = '0' end
    if mt == me or redis.call('PUBLISH', 'redislock:w:' .. string.sub(m, 1, 32),
                              string.sub(m, 34, 49) .. ':' .. f) > 0 then
      local mttl = tonumber(string.sub(m, 51, a - 1))
      redis.call('ZADD', KEYS[1], now + mttl, mt)
      redis.call('HSET', KEYS[2], mt, mk .. ':' .. f)
      if mttl > d then d = mttl end
      if mt == ARGV[1] then minef = f end
      used = used + mk
      served = served + 1
    end
  end
end
if served > 0 then
  local fresh = false
"#,
            sem_keep_lua!(),
            r#"
end
"#
        )
    };
}

/// An attempt, joining the queue when `member` is given.
/// ARGV: token, ttl_ms, member ('' to try only), first (1|0), grace_ms,
/// permits, limit. Returns what ENQUEUE returns: {1, fence} (admitted by
/// this run, also when it served the queue up to this very caller: no
/// message was sent to it), {1, fence, 1} (admitted while queued, by
/// another script whose message is on its way), or {0, ms until the first
/// lease runs out (-1: no holder), false, waiters ahead}.
///
/// Uncontended, it runs 9 commands: TIME, the purge, LLEN, HGETALL, the
/// fence's SET … GET, ZADD, HSET and the two PEXPIREs. A newcomer behind
/// waiters queues with 5: TIME, the purge, LLEN, ZRANGE, RPUSH.
pub(crate) const SEM_ACQUIRE: &str = concat!(
    sem_prelude_lua!(),
    r#"
local member = ARGV[3]
local queued = member ~= '' and ARGV[4] ~= '1'
local me = queued and ARGV[1]
local grace = tonumber(ARGV[5])
"#,
    sem_queue_len_lua!(),
    r#"
if n > 0 and not queued and #dead == 0 then
  -- A newcomer behind waiters, with holders left and no lease run out:
  -- the head still does not fit, and nobody passes it. It queues (or is
  -- refused) without looking at the holders.
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if first[2] then
    local pttl = tonumber(first[2]) - now
    if member == '' then return {0, pttl, false, n} end
    return {0, pttl, false, redis.call('RPUSH', KEYS[3], member) - 1}
  end
end
local used, mine = 0, false
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local v = all[i + 1]
  local s = string.find(v, ':', 1, true)
  used = used + (tonumber(string.sub(v, 1, (s or 0) - 1)) or 0)
  if all[i] == ARGV[1] then mine = string.sub(v, (s or 0) + 1) end
end
if mine and redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  -- Already a holder: a repeated run after a lost reply, or served while
  -- queued.
  if queued then return {1, mine, 1} end
  return {1, mine}
end
local fresh = used == 0
"#,
    // Every script that frees permits serves the queue, so its head did
    // not fit when the last one ended: only leases that ran out since (or
    // keys that expired with them) can make it fit now.
    r#"
if n > 0 and (#dead > 0 or used == 0) then
"#,
    sem_serve_lua!(),
    r#"
  if minef then return {1, minef} end
  if served > 0 then fresh = false end
end
local pos = false
if queued and n > 0 then
  pos = redis.call('LPOS', KEYS[3], member)
end
local k, limit = tonumber(ARGV[6]), tonumber(ARGV[7])
local ahead = pos or n
if ahead == 0 and used + k <= limit then
  if pos then
    redis.call('LREM', KEYS[3], 1, member)
    n = n - 1
  end
  local f
"#,
    fence_from_time_lua!(),
    r#"
  if type(f) == 'table' then
    return redis.error_reply('WRONGTYPE the fence counter does not hold a number')
  end
  local d = tonumber(ARGV[2])
  redis.call('ZADD', KEYS[1], now + d, ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], k .. ':' .. f)
"#,
    sem_keep_lua!(),
    r#"
  return {1, f}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local pttl = -1
if first[2] then pttl = tonumber(first[2]) - now end
if member == '' then
  return {0, pttl, false, ahead}
end
if not pos then
  pos = redis.call('RPUSH', KEYS[3], member) - 1
  if pos == 0 then
    local keep = redis.call('PTTL', KEYS[1])
    if keep < 0 then keep = 0 end
    redis.call('PEXPIRE', KEYS[3], keep + grace)
  end
end
return {0, pttl, false, pos}
"#
);

/// Give the permits back and serve the queue. ARGV: token, grace_ms.
/// Returns 0 (not a holder: its lease ran out, or it never was), 1
/// (released) or 2 (released, and waiters were admitted). With nobody
/// queued it runs 5 commands: TIME, the purge, ZREM, HDEL, LLEN.
pub(crate) const SEM_RELEASE: &str = concat!(
    sem_prelude_lua!(),
    r#"
local grace, me = tonumber(ARGV[2]), false
local gone = redis.call('ZREM', KEYS[1], ARGV[1])
if gone == 1 then redis.call('HDEL', KEYS[2], ARGV[1]) end
"#,
    sem_queue_len_lua!(),
    r#"
local served = 0
if n > 0 then
"#,
    sem_used_lua!(),
    sem_serve_lua!(),
    r#"
end
if gone == 0 then return 0 end
if unwoken then
  return redis.error_reply('NOPERM this user may not PUBLISH to the waiters\' channels redislock:w:*: the permits were released, but the waiters they now fit were left queued, unwoken')
end
if served > 0 then return 2 end
return 1
"#
);

/// Renew one holder's lease to `ttl_ms` from now. ARGV: token, ttl_ms,
/// fence (unused), grace_ms. Returns 1 (extended) or 0 (not a holder).
pub(crate) const SEM_EXTEND: &str = concat!(
    r#"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local e = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not e or tonumber(e) <= now then return 0 end
local d, grace, fresh = tonumber(ARGV[2]), tonumber(ARGV[4]), false
redis.call('ZADD', KEYS[1], 'XX', now + d, ARGV[1])
local n = redis.call('EXISTS', KEYS[3])
"#,
    sem_keep_lua!(),
    r#"
return 1
"#
);

/// A holder's fence. ARGV: token. Returns {fence} or nil (not a holder).
pub(crate) const SEM_FENCE: &str = r#"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local e = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not e or tonumber(e) <= now then return false end
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return false end
return {string.sub(v, string.find(v, ':', 1, true) + 1)}
"#;

/// Leave the queue; keep the permits if they were given meanwhile. The
/// waiters behind may fit now: the queue is served. ARGV: token, member,
/// grace_ms. Returns {fence} when a holder, nil otherwise.
pub(crate) const SEM_CANCEL: &str = concat!(
    sem_prelude_lua!(),
    r#"
local grace, me = tonumber(ARGV[3]), false
redis.pcall('LREM', KEYS[3], 1, ARGV[2])
"#,
    sem_queue_len_lua!(),
    r#"
if n > 0 then
"#,
    sem_used_lua!(),
    sem_serve_lua!(),
    r#"
end
local v = redis.call('HGET', KEYS[2], ARGV[1])
if v and redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return {string.sub(v, string.find(v, ':', 1, true) + 1)}
end
return false
"#
);

/// Who holds permits and how many wait, read without changing anything:
/// {{token, ms left, permits, fence}… (at most 100, soonest expiry first),
/// waiters, holders in all}. No ARGV.
pub(crate) const SEM_INSPECT: &str = r#"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local out = {}
local hs = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 100)
for i = 1, #hs, 2 do
  local v = redis.call('HGET', KEYS[2], hs[i]) or '0:0'
  local s = string.find(v, ':', 1, true) or 2
  table.insert(out, {hs[i], tonumber(hs[i + 1]) - now,
                     tonumber(string.sub(v, 1, s - 1)) or 0, string.sub(v, s + 1)})
end
local n = redis.pcall('LLEN', KEYS[3])
if type(n) ~= 'number' then n = 0 end
return {out, n, redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')}
"#;

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

/// See [`parse_shared_info`].
pub(crate) fn is_shared_info(v: &Value) -> bool {
    parse_shared_info(v).is_some()
}
