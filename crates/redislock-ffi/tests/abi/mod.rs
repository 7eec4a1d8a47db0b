//! The Rust-side tests of the C functions: the pending acquisitions
//! (`pending.rs`) and the property tests of every function's inputs
//! (`c_abi_fuzz.rs`). They live outside the library's sources but are
//! compiled as the crate's unit tests (`src/lib.rs`), as the crate is a C
//! library only: no rlib that an integration test could link. The C
//! programs' tests are the repository's `tests/c_api.rs`.

#[path = "../../../../tests/common/mod.rs"]
mod common;

mod c_abi_fuzz;
mod pending;
