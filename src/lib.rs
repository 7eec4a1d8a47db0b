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
//! println!("fencing number {}", lock.fence());
//! lock.extend(Duration::from_secs(30))?;
//! lock.release()?;
//! # Ok::<(), redislock::Error>(())
//! ```
//!
//! The key holds the owner's token and nothing else (`SET key token NX PX`),
//! so clients that use the classic hand-written pattern on the same key
//! exclude us and are excluded. See `shared/DESIGN.md` for the protocol.

mod client;
mod cluster;
mod conn;
mod crc16;
mod error;
pub mod ffi;
mod lock;
mod protocol;
#[cfg(feature = "python")]
mod python;
mod redlock;
mod renew;
mod sentinel;
mod sync;
mod wait;
mod wire;

pub use client::{
    parse_duration, AcquireOptions, Client, ClientBuilder, Interrupt, LockInfo, Wait,
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, MAX_KEY_LEN, MAX_TTL,
};
pub use error::{Error, ErrorKind, Result};
pub use lock::Lock;

/// A fresh random token like the ones acquire makes: 128 bits from the
/// operating system's generator, as 32 hex characters.
pub fn random_token() -> Vec<u8> {
    protocol::new_token()
}

/// This library's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
