//! Fences: the Lua fragments that draw a fence from the slot's counter
//! (in an acquire, a lazy draw or a semaphore's admission) or read the one
//! `{K}:meta` keeps for its holder, the scripts [`FENCE`] (a holder's lazy
//! draw) and [`FLOOR`] (Redlock's raise of a counter), and the names
//! tagged by cluster slot: the counters, `redislock:fence:{N}`, one per
//! slot, where `N` is the slot's tag (the smallest decimal number hashing
//! to it), and the channel a cluster client watches a slot by
//! ([`slot_watch`]). The fragments are macros, so that each script is one
//! string constant; `protocol/mod.rs` declares this module first, which
//! puts them in scope in the other script files.

use super::push_decimal;

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

/// Raise the fence counter `KEYS[4]` to at least `ARGV[1]` (digits): what a
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

/// Append the name of the fence counter shared by the lock names of one
/// cluster slot.
pub(super) fn push_counter(out: &mut Vec<u8>, slot: u16) {
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

include!(concat!(env!("OUT_DIR"), "/slot_tags.rs"));

/// The smallest decimal number whose cluster slot is `slot` (a table made
/// by build.rs).
pub(super) fn slot_tag(slot: u16) -> u32 {
    SLOT_TAGS[usize::from(slot) % SLOT_TAGS.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crc16::crc16;
    use crate::protocol::{slot, LockKeys};

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
}
