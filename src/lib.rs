//! # redislock
//!
//! One Redis distributed lock for Rust, C, Python and PHP programs: the same
//! wire protocol, the same waiting and renewal logic, from one core.
//!
//! ```no_run
//! use std::time::Duration;
//! use redislock::{Client, Wait};
//!
//! let client = Client::open("redis://127.0.0.1:6379/0")?;
//! let lock = client.acquire("reports", Duration::from_secs(30), Wait::Timeout(Duration::from_secs(10)))?;
//! println!("fencing number {}", lock.fence()?); // drawn now, one round trip
//! lock.extend(Duration::from_secs(30))?;
//! lock.release()?;
//! # Ok::<(), redislock::Error>(())
//! ```
//!
//! The key holds the owner's token and nothing else (`SET key token NX PX`),
//! so clients that use the classic hand-written pattern on the same key
//! exclude us and are excluded. See `docs/PROTOCOL.md` for the protocol.

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
// Background renewal of held locks, over a deployment.
mod renew;
// The public API: the lock handle,
mod lock;

// then the client that makes it.
mod client;
// Bindings, on the public API only.
pub mod ffi;
// The runtime the async bindings share.
#[cfg(feature = "node")]
mod node;
#[cfg(feature = "python")]
mod python;
#[cfg(any(feature = "python", feature = "node"))]
mod runtime;

pub use client::{Client, ClientBuilder};
pub use config::parse_duration;
pub use error::{Error, ErrorKind, Result};
pub use lock::Lock;
pub use options::{
    AcquireOptions, Holder, Interrupt, LockInfo, SharedInfo, Wait, DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT, MAX_KEY_LEN, MAX_TTL,
};
pub use stats::{Histogram, Stats, BUCKETS, BUCKET_BOUNDS};

/// A fresh random token like the ones acquire makes: 128 bits from the
/// operating system's generator, as 32 hex characters.
pub fn random_token() -> Vec<u8> {
    protocol::new_token()
}

/// This library's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
