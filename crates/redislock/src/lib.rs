// The crate's front page is the Rust guide (docs/rust.md; README.md here is
// a link to it, copied into the package by cargo package): its examples are
// doc tests.
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![warn(rustdoc::broken_intra_doc_links, rustdoc::private_intra_doc_links)]

// The layers, lowest first; each imports only from the ones above it in
// this list.
//
// Vocabulary: errors, the caller's values, fork-aware helpers. No I/O.
mod error;
mod options;
mod sync;
// What a client did: counters and histograms, no I/O.
mod stats;
// The wire protocol: scripts, key names, reply parsing.
mod crc16;
mod protocol;
// Connections: one socket, the pool, Sentinel and Cluster routing.
mod net;
// Deployments: one server or Redlock, behind one set of operations.
mod deploy;
// Opening: URLs and builder settings into a deployment.
mod config;
mod redact;
// Background renewal of held locks, over a deployment.
mod renew;
// The public API: the lock handle,
mod lock;

// then the client that makes it.
mod client;
// Checks of the servers' setup, on the client.
mod doctor;
// The runtime the async bindings and the C ABI's pending acquisitions
// share (without them, its lock-handle helpers are unused).
#[cfg(feature = "tokio")]
#[allow(dead_code)]
#[doc(hidden)]
pub mod runtime;

/// What the bindings (the C ABI, Python, Node.js) share with the core
/// beyond its public API: not part of the API, no stability promise.
#[doc(hidden)]
pub mod __private {
    pub use crate::client::shared::semaphore_kind;
    pub use crate::error::show_key;
    pub use crate::net::hub::take_woke_here;
    pub use crate::options::{check_key, check_token, ttl_millis};
    pub use crate::protocol::Kind;
    pub use crate::sync::{locked, Locked};

    /// The acquire of [`Client::acquire_with`](crate::Client::acquire_with)
    /// without a handle (the C API's acquire by token).
    pub fn acquire_without_handle(
        client: &crate::Client,
        key: &[u8],
        opts: &crate::AcquireOptions,
    ) -> crate::Result<()> {
        client.take(key, opts).map(drop)
    }
    /// Node.js's event loop driving the client's sockets.
    #[cfg(feature = "tokio")]
    pub mod local {
        pub use crate::net::local::{set_local_loop, LocalLoop, LocalStream, Watched};
    }
    /// The fuzzer's way in (the package `redislock-fuzz`, in `fuzz/`): the
    /// RESP2 framer and the reply decoders its property tests exercise,
    /// each the crate's own, called as the connections and the clients
    /// call it. Not part of the API.
    pub mod fuzz {
        use redis::{RedisResult, Value};

        use crate::protocol::{self, Attempt};

        /// The length of the first whole reply at the start of `buf`, or
        /// `Ok(None)` when more bytes are needed (the connections' framer).
        pub fn frame(buf: &[u8]) -> RedisResult<Option<usize>> {
            crate::net::resp::frame(buf)
        }

        /// The value of one reply, as [`frame`] delimited it.
        pub fn decode(frame: &[u8]) -> RedisResult<Value> {
            crate::net::resp::decode(frame)
        }

        /// The fence of the grant that ACQUIRE's or ENQUEUE's reply `v` is
        /// (taken, or handed over while queued), as the acquire reads it;
        /// `None` for any other reply.
        pub fn parse_grant(v: &Value) -> Option<u64> {
            match protocol::parse_attempt(v) {
                Some(Attempt::Taken(fence) | Attempt::Handed(fence)) => Some(fence),
                _ => None,
            }
        }

        /// A fence in a script's reply.
        pub fn parse_fence(v: &Value) -> Option<u64> {
            protocol::parse_fence(v)
        }

        /// FORCE_RELEASE's reply.
        pub fn parse_forced(v: &Value) -> Option<(bool, bool)> {
            protocol::parse_forced(v)
        }

        /// The INSPECT script's reply.
        pub fn parse_info(v: &Value) -> Option<crate::LockInfo> {
            protocol::parse_info(v)
        }

        /// SEM_INSPECT's reply.
        pub fn parse_shared_info(v: &Value) -> Option<crate::SharedInfo> {
            protocol::parse_shared_info(v)
        }

        /// A hand-off message's nonce and fence.
        pub fn split_handoff(payload: &[u8]) -> Option<(&[u8], u64)> {
            protocol::split_handoff(payload)
        }

        /// The permits a writer holds.
        pub const WRITER: u32 = protocol::WRITER;
    }
}

pub use client::{Client, ClientBuilder};
pub use config::parse_duration;
pub use doctor::{Finding, Report, Severity};
pub use error::{Error, ErrorKind, Result};
pub use lock::Lock;
pub use options::{
    AcquireOptions, Holder, Interrupt, LockInfo, SharedInfo, Wait, DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT, MAX_KEY_LEN, MAX_TTL,
};
pub use redact::redact_url;
pub use stats::{Histogram, Stats, BUCKETS, BUCKET_BOUNDS};

/// A fresh random token like the ones acquire makes: 128 bits from the
/// operating system's generator, as 32 hex characters. For callers that
/// pick the token before the acquire
/// ([`AcquireOptions::token`]) to hand it on.
///
/// ```
/// let token = redislock::random_token();
/// assert_eq!(token.len(), 32);
/// assert!(token.iter().all(u8::is_ascii_hexdigit));
/// assert_ne!(token, redislock::random_token());
/// ```
pub fn random_token() -> Vec<u8> {
    protocol::new_token()
}

/// This library's version (the crate's, `major.minor.patch`), the same
/// string the C API's `redislock_version()` returns.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
