//! What goes over the wire: the Lua scripts, the key names, tokens, the
//! encoding of waiters in the queue and the parsing of the scripts' replies.
//! No I/O: the layers above send what this one describes. Each family of
//! scripts has a file, with the parsers of its replies beside it:
//!
//! - [`lock`]: the lock of one holder (`ACQUIRE`, `RELEASE`,
//!   `FORCE_RELEASE`, `EXTEND`, `INSPECT`, and the plain commands that
//!   stand in for them uncontended);
//! - [`queue`]: waiting (`ENQUEUE`, `CANCEL`, `RELEASE_QUEUED`), the
//!   waiters' entries, channels and hand-off messages;
//! - [`fence`]: fences (the Lua that draws them, `FENCE`, `FLOOR`) and the
//!   counters' names, one per cluster slot;
//! - [`semaphore`]: counting semaphores and read-write locks (`SEM_*`);
//! - [`command`]: commands and scripts as sent, and the registry of every
//!   script ([`scripts`]).
//!
//! This file holds what they share: the keys of a name ([`LockKeys`]) and
//! what it is locked as ([`Kind`]), cluster slots, tokens, what a server
//! was found to accept ([`Caps`]), and the reply shapes common to several
//! scripts (fences, flags).
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
//! [`RELEASE`](lock::RELEASE), a compare-and-delete of `K` and `{K}:meta`
//! in one `DEL` whose count tells whether anything more is to be done.
//!
//! A fence is `max(counter + 1, server TIME in µs)`, drawn while the lock
//! is held, atomically with the check that it is: in the acquire itself
//! when the caller asked for a fenced lock ([`ACQUIRE`](lock::ACQUIRE),
//! [`ENQUEUE`](queue::ENQUEUE)), or on the holder's first request for it
//! ([`FENCE`](fence::FENCE)). Fences therefore follow the order of
//! ownership. A counter lost to a restart without persistence, an eviction
//! or a failover to a lagging replica resumes above every number handed
//! out before, as long as the servers' clocks agree better than the outage
//! lasted. A server that refuses `TIME` in scripts gets the counter alone.
//! Numbers stay below 2^53 (exact as doubles).
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
//! Every script but `RELEASE` takes the same KEYS, in [`LockKeys::all`]'s
//! order: lock, meta, queue, counter. `RELEASE` takes lock and meta, and
//! finds the queue from meta's name.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;

use once_cell::race::OnceBox;
use redis::Value;

use crate::crc16::crc16;

// First: its Lua fragments (macros) are then in scope in the files below.
#[macro_use]
mod fence;

mod command;
mod lock;
mod queue;
mod semaphore;

#[cfg(feature = "tokio")]
pub(crate) use command::cmd_of;
pub(crate) use command::{pack, scripts, Decimal, Script};
pub(crate) use fence::slot_watch;
use fence::{push_counter, slot_tag};
pub(crate) use lock::{
    parse_attempt, parse_forced, parse_info, parse_released, set_ifeq, set_nx_get, Attempt,
    Released,
};
use queue::queue_member;
pub(crate) use queue::{split_handoff, Contended, QUEUE_GRACE_MS, WAKE_CHANNEL_PREFIX};
pub(crate) use semaphore::{parse_shared_info, MAX_LIMIT, WRITER};

/// The suffix of `{K}:meta`. RELEASE turns it into the queue's name by
/// cutting these 5 bytes off: keep the two in step.
const META_SUFFIX: &[u8] = b":meta";

/// What a name is locked as: a lock (one holder), a counting semaphore
/// (holders of `permits` each, `limit` permits in all), or either side of a
/// read-write lock. See `protocol/semaphore.rs` for the last three.
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
    /// looks at the queue first ([`RELEASE_QUEUED`](queue::RELEASE_QUEUED)).
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

/// `SET … NX … GET`'s reply: nil (taken; only `$-1` reads as nil, see
/// `resp`) or the holder's token.
pub(crate) fn is_nil_or_string(v: &Value) -> bool {
    matches!(v, Value::Nil | Value::BulkString(_))
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
}
