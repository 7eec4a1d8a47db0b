//! The one error type of redislock.
//!
//! Every failure of every operation is one variant of [`Error`], and every
//! variant's message says what happened and what the caller can do about it.
//! The C status codes, the Python exceptions and the PHP exceptions are all
//! derived from [`Error::kind`], so a message written here is the message a
//! user sees in every language. Messages never contain a password: addresses
//! are shown as `host:port` (or the socket path) only.

use std::time::Duration;

/// What went wrong, as a plain code that bindings map onto their own types.
///
/// The order and values match the C `redislock_status` enum (minus `OK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The lock is held by another owner and the wait ran out.
    NotAcquired = 1,
    /// Release or extend of a lock this owner no longer holds.
    NotOwner = 2,
    /// The server could not be reached, an I/O error, or a timeout.
    Connection = 3,
    /// A bad argument, rejected before any I/O.
    InvalidArgument = 4,
    /// The key exists and holds something other than a lock.
    WrongType = 5,
    /// Redlock: no majority of the nodes could be reached.
    NoQuorum = 6,
    /// The server answered with an error (authentication, permissions, …).
    Server = 7,
    /// A bug in redislock.
    Internal = 8,
    /// A release whose outcome is unknown: the connection broke after it
    /// was sent, and when sent again the lock was no longer this owner's
    /// (most likely the first attempt released it).
    Unconfirmed = 9,
}

/// A redislock error. The `Display` text is meant for people: it names the
/// lock (lossily, and shortened when long) and suggests what to do.
/// Programs branch on [`Error::kind`], or match the variants for their
/// details (the enum is `#[non_exhaustive]`: keep a catch-all arm).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use redislock::{Client, Error, ErrorKind, Wait};
///
/// # let redis = redislock_tests::Server::start();
/// # let client = Client::open(redis.url())?;
/// let ttl = Duration::from_secs(10);
/// let _held = client.acquire("nightly", ttl, Wait::TryOnce)?;
/// match client.acquire("nightly", ttl, Wait::Timeout(Duration::from_millis(50))) {
///     Err(Error::NotAcquired { holder_ttl, .. }) => {
///         // Held by someone else: its remaining TTL says when to retry.
///         assert!(holder_ttl.unwrap() <= ttl);
///     }
///     Err(e) => return Err(e), // connection, server, ...
///     Ok(_) => unreachable!("the lock is held"),
/// }
///
/// // Bad arguments are refused before any I/O.
/// let err = client.acquire("", ttl, Wait::TryOnce).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
/// println!("{err}"); // invalid argument: the lock name is empty
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock is held by someone else and the wait (possibly zero) ran out.
    #[error(
        "lock {key} is held by another owner{}; gave up after {} ms \
         (try again later or wait longer)",
        holder_ttl_text(*.holder_ttl),
        .waited.as_millis()
    )]
    NotAcquired {
        /// The lock name, for display.
        key: String,
        /// How long the holder's lock still had to live when we gave up:
        /// `Duration::MAX` when its key has no expiry, `None` when the
        /// reply did not say (a try-once is the helper's `SET … NX PX …
        /// GET`, whose reply names the holder but not its TTL).
        holder_ttl: Option<Duration>,
        /// How long this call waited.
        waited: Duration,
    },

    /// The lock is no longer held by this owner: it expired or was taken
    /// over. Nothing was changed on the server.
    #[error(
        "lock {key} is no longer held by this owner: it expired or was taken over \
         (nothing was changed; use a longer TTL or auto-renew, and treat the work done \
         under it as unprotected)"
    )]
    NotOwner {
        /// The lock name, for display.
        key: String,
    },

    /// The server could not be reached or did not answer in time.
    #[error(
        "cannot reach Redis at {addr}: {reason} (is redis-server running and reachable? {hint})"
    )]
    Connection {
        /// The server address without credentials.
        addr: String,
        /// What the I/O layer reported.
        reason: String,
        /// Which timeout applied, or what else to check.
        hint: String,
    },

    /// An argument was rejected before anything was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The key exists but is not a string, so it is not a lock; it was left
    /// untouched.
    #[error(
        "key {key} holds a Redis {found} value, not a lock; it was left untouched \
         (use another lock name, or delete the key if it is stale)"
    )]
    WrongType {
        /// The lock name, for display.
        key: String,
        /// What the server said the key holds, when known.
        found: String,
    },

    /// Redlock: a majority of the nodes could not be reached or agreed.
    #[error("no quorum for lock {key}: {detail}")]
    NoQuorum {
        /// The lock name, for display.
        key: String,
        /// Per-node outcome.
        detail: String,
    },

    /// The server answered with an error.
    #[error("Redis at {addr} refused the request: {message}{}", server_hint(.message))]
    Server {
        /// The server address without credentials.
        addr: String,
        /// The server's error text.
        message: String,
    },

    /// A bug in redislock (a caught panic).
    #[error("internal error in redislock (please report it): {0}")]
    Internal(String),

    /// The server (or what stands between it and us) sent what the command
    /// never answers: a malformed frame, a reply of another type or out of
    /// range, bytes after the reply, a frame nobody asked for. Nothing was
    /// taken from it (no lock is granted on such a reply); the connection
    /// was closed. Its kind is [`ErrorKind::Connection`]: the operation
    /// failed as on a broken connection.
    #[error(
        "Redis at {addr} broke the protocol: {detail} (the connection was closed and nothing \
         was taken from that reply; is a proxy or another program answering on that port, or \
         is the server not Redis?)"
    )]
    Protocol {
        /// The server address without credentials.
        addr: String,
        /// What came, abridged, and where the command expected what.
        detail: String,
    },

    /// A release was sent, its reply was lost with the connection, and the
    /// release sent again on a fresh connection found the lock no longer
    /// held by this owner. Most likely the first attempt released it (the
    /// lock is free or handed to the next waiter); it may also have expired
    /// just before. Nothing else was changed.
    #[error(
        "the release of lock {key} is unconfirmed: the connection to Redis at {addr} broke \
         after the release was sent, and when sent again the lock no longer held this owner's \
         token (most likely the first attempt released it; it may also have expired just \
         before; nothing else was changed)"
    )]
    Unconfirmed {
        /// The lock name, for display.
        key: String,
        /// The server address without credentials.
        addr: String,
    },

    /// The server stayed in a transient state (loading its data, running a
    /// slow script, resharding, without its master) for the whole time
    /// this call could wait.
    #[error(
        "Redis at {addr} is {state} and stayed so for {} ms, as long as this call could wait \
         (try again shortly{hint})",
        .waited.as_millis()
    )]
    Unavailable {
        /// The server address without credentials.
        addr: String,
        /// What the server said, in words, with its code.
        state: String,
        /// How long this call retried.
        waited: Duration,
        /// Which budget ran out.
        hint: String,
    },
}

/// A holder's remaining TTL that the reply did not tell (see
/// [`Error::not_acquired`]).
pub(crate) const UNKNOWN_TTL: i64 = i64::MIN;

fn holder_ttl_text(ttl: Option<Duration>) -> String {
    match ttl {
        Some(Duration::MAX) => String::from(" (its key has no expiry)"),
        Some(d) => format!(" (its lock expires in {} ms)", d.as_millis()),
        None => String::new(),
    }
}

fn server_hint(message: &str) -> &'static str {
    let code = message.split_whitespace().next().unwrap_or("");
    if message.contains("sentinel_password") {
        // A sentinel's refusal already says which credentials it wants.
        return "";
    }
    if message.contains("uthentication") {
        return " (check the user name and password in the URL)";
    }
    if message.contains("max number of clients") {
        return " (the server's maxclients limit is reached: raise maxclients, or close idle \
                 connections)";
    }
    match code {
        "WRONGPASS" | "NOAUTH" => " (check the user name and password in the URL)",
        "NOPERM" => {
            " (the ACL user needs +set +get +exists +type +evalsha +eval +subscribe +ping, and \
             inside scripts +del +pttl +pexpire +rpush +lpop +lrem +lpos +llen +lindex +publish \
             +time and the sorted-set and hash commands, on the locks' keys and \
             ~redislock:fence:*, with the channels &redislock:w:*; `redislock doctor` names what \
             is missing)"
        }
        "READONLY" => " (this is a replica: point the URL at the master)",
        "LOADING" => " (the server is loading its data set: retry shortly)",
        "BUSY" => " (a slow script blocks the server)",
        _ => "",
    }
}

impl Error {
    /// The status this error maps to in C (`redislock_status`), Python and PHP.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotAcquired { .. } => ErrorKind::NotAcquired,
            Error::NotOwner { .. } => ErrorKind::NotOwner,
            Error::Connection { .. } => ErrorKind::Connection,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::WrongType { .. } => ErrorKind::WrongType,
            Error::NoQuorum { .. } => ErrorKind::NoQuorum,
            Error::Server { .. } => ErrorKind::Server,
            Error::Internal(_) => ErrorKind::Internal,
            Error::Protocol { .. } => ErrorKind::Connection,
            Error::Unconfirmed { .. } => ErrorKind::Unconfirmed,
            Error::Unavailable { .. } => ErrorKind::Server,
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// The wait for `key` ran out (`pttl`: the holder's remaining TTL in
    /// ms, negative when unknown; `started`: when the acquisition began).
    /// `pttl` as PTTL answers (`-1`: no expiry), or [`UNKNOWN_TTL`].
    pub(crate) fn not_acquired(key: &[u8], pttl: i64, started: std::time::Instant) -> Error {
        Error::NotAcquired {
            key: show_key(key),
            holder_ttl: match pttl {
                -1 => Some(Duration::MAX),
                _ => u64::try_from(pttl).ok().map(Duration::from_millis),
            },
            waited: started.elapsed(),
        }
    }

    /// `addr` answered `what` with something it never answers.
    pub(crate) fn unexpected(addr: &str, what: &str, v: &redis::Value) -> Error {
        Error::Protocol {
            addr: addr.to_string(),
            detail: format!("{} in answer to {what}", abridged(v)),
        }
    }
}

/// The result type of redislock: `Result<T>` is `Result<T, Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A lock name for people: UTF-8 shown as is (quoted), other bytes escaped,
/// long names shortened.
pub fn show_key(key: &[u8]) -> String {
    const MAX: usize = 80;
    let mut out = String::from("\"");
    for chunk in key.utf8_chunks() {
        for c in chunk.valid().chars() {
            if out.len() > MAX {
                break;
            }
            out.extend(c.escape_debug());
        }
        for b in chunk.invalid() {
            if out.len() > MAX {
                break;
            }
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if out.len() > MAX {
        out.push_str(&format!("…\" ({} bytes)", key.len()));
    } else {
        out.push('"');
    }
    out
}

/// A reply the connection cannot take: what came, abridged. The caller
/// adds which server sent it.
pub(crate) fn protocol_error(what: String) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Parse,
        "protocol error: the server sent",
        what,
    ))
}

/// A reply as people read it, cut short.
pub(crate) fn abridged(v: &redis::Value) -> String {
    cut(format!("{v:?}"))
}

/// Bytes as people read them (escaped), cut short.
pub(crate) fn abridged_bytes(b: &[u8]) -> String {
    let shown = &b[..b.len().min(64)];
    let mut s = format!("\"{}\"", shown.escape_ascii());
    if b.len() > shown.len() {
        s.push_str(&format!("… ({} bytes)", b.len()));
    }
    s
}

fn cut(mut s: String) -> String {
    const MAX: usize = 120;
    if s.len() > MAX {
        let mut end = MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let len = s.len();
        s.truncate(end);
        s.push_str(&format!("… ({len} characters)"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_key_escapes_and_shortens() {
        assert_eq!(show_key(b"jobs"), "\"jobs\"");
        assert_eq!(show_key(b"a\xffb\0"), "\"a\\xffb\\0\"");
        let long = show_key(&[b'x'; 500]);
        assert!(long.len() < 120, "{long}");
        assert!(long.ends_with("(500 bytes)"), "{long}");
    }

    #[test]
    fn kinds_match_c_status_values() {
        let e = Error::NotOwner {
            key: show_key(b"k"),
        };
        assert_eq!(e.kind() as i32, 2);
        assert_eq!(Error::Internal(String::new()).kind() as i32, 8);
    }

    #[test]
    fn server_errors_explain_auth() {
        let e = Error::Server {
            addr: "127.0.0.1:1".into(),
            message: "WRONGPASS invalid username-password pair".into(),
        };
        assert!(e.to_string().contains("check the user name and password"));
    }
}
