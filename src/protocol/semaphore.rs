//! The scripts of counting semaphores and read-write locks.
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

/// The permits of a writer, and the limit of readers and writers alike.
pub(crate) const WRITER: u32 = 1 << 30;

/// The largest limit a semaphore takes.
pub(crate) const MAX_LIMIT: u32 = 1_000_000;

/// The server time in ms into `now`, then the holders whose lease ran out
/// dropped, then the permits held summed into `used`.
macro_rules! sem_prelude_lua {
    () => {
        r#"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
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

/// Serve the queue from its head while the head fits (see the module
/// text), counting the waiters admitted in `served`.
macro_rules! sem_serve_lua {
    () => {
        concat!(
            r#"
local served = 0
while true do
  local m = redis.call('LINDEX', KEYS[3], 0)
  if not m then break end
  local a = string.find(m, ':', 51, true)
  local b = a and string.find(m, ':', a + 1, true)
  local c = b and string.find(m, ':', b + 1, true)
  if not c then
    redis.call('LPOP', KEYS[3])
  else
    local mk = tonumber(string.sub(m, a + 1, b - 1)) or 1
    local ml = tonumber(string.sub(m, b + 1, c - 1)) or 1
    if used + mk > ml then break end
    redis.call('LPOP', KEYS[3])
    local f
"#,
            next_fence_lua!(),
            r#"
    if type(f) == 'table' then f = '0' end
    if redis.call('PUBLISH', 'redislock:w:' .. string.sub(m, 1, 32),
                  string.sub(m, 34, 49) .. ':' .. f) > 0 then
      local mt = string.sub(m, c + 1)
      redis.call('ZADD', KEYS[1], now + tonumber(string.sub(m, 51, a - 1)), mt)
      redis.call('HSET', KEYS[2], mt, mk .. ':' .. f)
      used = used + mk
      served = served + 1
    end
  end
end
"#
        )
    };
}

/// Make the holders' set and hash expire with the last lease, and the
/// queue `ARGV[grace]` ms after it (`grace` names the ARGV index).
macro_rules! sem_expire_lua {
    ($grace:literal) => {
        concat!(
            r#"
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local keep = 0
if last[2] then
  keep = tonumber(last[2]) - now
  redis.call('PEXPIRE', KEYS[1], keep)
  redis.call('PEXPIRE', KEYS[2], keep)
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('PEXPIRE', KEYS[3], keep + tonumber(ARGV["#,
            $grace,
            r#"]))
end
"#
        )
    };
}

/// An attempt, joining the queue when `member` is given.
/// ARGV: token, ttl_ms, member ('' to try only), first (1|0), grace_ms,
/// permits, limit. Returns what ENQUEUE returns: {1, fence} (admitted),
/// {1, fence, 1} (admitted while queued: by a release, or by this very
/// script serving the queue), or {0, ms until the first lease runs out (-1:
/// no holder), false, waiters ahead}.
pub(crate) const SEM_ACQUIRE: &str = concat!(
    sem_prelude_lua!(),
    r#"
local member = ARGV[3]
local mine = redis.call('HGET', KEYS[2], ARGV[1])
if mine and redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  -- Already a holder: a repeated run after a lost reply, or served while
  -- queued.
  local s = string.find(mine, ':', 1, true)
  if member ~= '' and ARGV[4] ~= '1' then
    return {1, string.sub(mine, s + 1), 1}
  end
  return {1, string.sub(mine, s + 1)}
end
"#,
    sem_used_lua!(),
    sem_serve_lua!(),
    r#"
local pos = false
if member ~= '' and ARGV[4] ~= '1' then
  pos = redis.pcall('LPOS', KEYS[3], member)
  if type(pos) == 'table' then pos = false end
  if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
    local v = redis.call('HGET', KEYS[2], ARGV[1])
"#,
    sem_expire_lua!("5"),
    r#"
    return {1, string.sub(v, string.find(v, ':', 1, true) + 1), 1}
  end
end
local k, limit = tonumber(ARGV[6]), tonumber(ARGV[7])
local ahead = pos
if not ahead then ahead = redis.pcall('LLEN', KEYS[3]) end
if type(ahead) == 'table' then
  return redis.error_reply('WRONGTYPE the waiter queue does not hold a list')
end
if ahead == 0 and used + k <= limit then
  if pos then redis.call('LREM', KEYS[3], 1, member) end
  local f
"#,
    next_fence_or_error_lua!(),
    r#"
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], k .. ':' .. f)
"#,
    sem_expire_lua!("5"),
    r#"
  return {1, f}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local pttl = -1
if first[2] then pttl = tonumber(first[2]) - now end
if member == '' then
"#,
    sem_expire_lua!("5"),
    r#"
  return {0, pttl, false, ahead}
end
if not pos then
  local n = redis.pcall('RPUSH', KEYS[3], member)
  if type(n) == 'table' then
    return redis.error_reply('WRONGTYPE the waiter queue does not hold a list')
  end
  pos = n - 1
end
"#,
    sem_expire_lua!("5"),
    r#"
return {0, pttl, false, pos}
"#
);

/// Give the permits back and serve the queue. ARGV: token, grace_ms.
/// Returns 0 (not a holder: its lease ran out, or it never was), 1
/// (released) or 2 (released, and waiters were admitted).
pub(crate) const SEM_RELEASE: &str = concat!(
    sem_prelude_lua!(),
    r#"
local gone = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
"#,
    sem_used_lua!(),
    sem_serve_lua!(),
    sem_expire_lua!("2"),
    r#"
if gone == 0 then return 0 end
if served > 0 then return 2 end
return 1
"#
);

/// Renew one holder's lease to `ttl_ms` from now. ARGV: token, ttl_ms,
/// fence (unused), grace_ms. Returns 1 (extended) or 0 (not a holder).
pub(crate) const SEM_EXTEND: &str = concat!(
    sem_prelude_lua!(),
    r#"
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
"#,
    sem_expire_lua!("4"),
    r#"
return 1
"#
);

/// A holder's fence. ARGV: token. Returns {fence} or nil (not a holder).
pub(crate) const SEM_FENCE: &str = concat!(
    sem_prelude_lua!(),
    r#"
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return false end
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return false end
return {string.sub(v, string.find(v, ':', 1, true) + 1)}
"#
);

/// Leave the queue; keep the permits if they were given meanwhile. The
/// waiters behind may fit now: the queue is served. ARGV: token, member,
/// grace_ms. Returns {fence} when a holder, nil otherwise.
pub(crate) const SEM_CANCEL: &str = concat!(
    sem_prelude_lua!(),
    r#"
redis.pcall('LREM', KEYS[3], 1, ARGV[2])
"#,
    sem_used_lua!(),
    sem_serve_lua!(),
    sem_expire_lua!("3"),
    r#"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local v = redis.call('HGET', KEYS[2], ARGV[1])
  if v then return {string.sub(v, string.find(v, ':', 1, true) + 1)} end
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
