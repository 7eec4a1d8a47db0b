//! The stable C ABI of redislock: `libredislock.so` and `libredislock.a`,
//! declared by `include/redislock.h` (and PHP's `bindings/php/redislock*.h`),
//! which cbindgen generates from these modules (`make headers`;
//! `tests/headers.rs` fails when the committed headers are stale).
//!
//! Thin wrappers over the core and nothing more. Every exported function
//! follows the same rules: its body runs inside the panic guard
//! (`guard.rs`: a panic becomes `REDISLOCK_INTERNAL`, or NULL/0/false where
//! a function has no status), its pointers are checked by the helpers of
//! `args.rs` (NULL is `REDISLOCK_INVALID_ARGUMENT`, never a crash),
//! outputs are written only on success, and every failure leaves a message
//! for `redislock_last_error` on the calling thread (`error.rs`).
//!
//! cbindgen writes the declarations in the order it reads them: the modules
//! in the order of their `mod` lines below, each from top to bottom. The
//! header's order is the API's reading order, so a new function goes where
//! it belongs there.

#![allow(non_camel_case_types)]
// These functions are called from C, where nothing can be marked `unsafe`:
// the pointer contracts are in each function's documentation instead.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

// What every function uses (no C declarations): the panic guard, and the
// checks of arguments.
mod args;
mod guard;

// The C API, in the header's order: each module on its own line, as
// cbindgen follows this order (a blank line keeps `cargo fmt` from
// sorting them).

// Clients: open (one server, Redlock, shared), free.
mod client;

// The blocking acquisitions: lock, fenced lock, semaphore, read, write.
mod acquire;

// The interrupt check of this thread's waits.
mod interrupt;

// The lock handle: release, extend, renewal, lost callback, token, fence.
mod lock;

// Calls by key and token, without a handle; force release; log text.
mod token;

// A client's statistics.
mod stats;

// A once-per-process flag for the bindings' hints.
mod first_time;

// The statuses and the last error's message.
mod error;

// The deployment check and its report.
mod doctor;

// The library's version.
mod version;

// Acquisitions that call back instead of blocking (`redislock_acquire_start`...).
mod pending;

// Every C item at the crate's root, as one C namespace (and for the
// Rust-side tests of tests/abi, which call them as `crate::*`).
pub use acquire::*;
pub use client::*;
pub use doctor::*;
pub use error::redislock_status::*;
pub use error::*;
pub use first_time::*;
pub use interrupt::*;
pub use lock::*;
pub use pending::*;
pub use stats::*;
pub use token::*;
pub use version::*;

// The Rust-side tests of the C functions, kept in tests/abi (outside the
// library's sources) and compiled as unit tests: this crate makes only a C
// library, so an integration test would have nothing to link.
#[cfg(test)]
#[path = "../tests/abi/mod.rs"]
mod abi_tests;
