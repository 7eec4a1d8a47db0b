//! Commands and scripts as they go on the wire: a command packed as RESP in
//! one allocation ([`pack`]) or as a redis-rs command ([`cmd_of`]),
//! numbers in decimal on the stack ([`Decimal`]), a Lua script sent by
//! `EVALSHA` with its `EVAL` fallback ([`Script`]), and every script of the
//! protocol files, hashed once per process with the reply shape it gives
//! ([`scripts`]).

use std::sync::atomic::Ordering;

use redis::Value;

use super::fence::{FENCE, FLOOR};
use super::lock::{
    is_attempt, is_forced, is_info, is_released, ACQUIRE, EXTEND, FORCE_RELEASE, INSPECT, RELEASE,
};
use super::queue::{CANCEL, ENQUEUE, RELEASE_QUEUED};
use super::semaphore::{self, is_shared_info};
use super::{checked, is_fence_or_nil, is_flag, Accepts};

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
#[cfg(feature = "tokio")]
pub(crate) fn cmd_of(args: &[&[u8]]) -> redis::Cmd {
    let size = args.iter().map(|a| a.len()).sum();
    let mut cmd = redis::Cmd::with_capacity(args.len(), size);
    for a in args {
        cmd.arg(*a);
    }
    cmd
}

/// A Lua script with its SHA1, sent as EVALSHA with an EVAL fallback.
pub(crate) struct Script {
    /// Its name, for errors.
    pub(crate) name: &'static str,
    pub(crate) source: &'static str,
    pub(crate) sha: String,
    /// How many of [`LockKeys::all`](super::LockKeys::all) it takes, from the first.
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
    #[cfg(feature = "tokio")]
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

// Against redis-rs's own packing, which the async transport uses.
#[cfg(all(test, feature = "tokio"))]
mod tests {
    use super::*;
    use crate::protocol::set_nx_get;

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
}
