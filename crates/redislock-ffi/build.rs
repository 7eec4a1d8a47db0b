//! Links `libredislock.so` with its soname, `libredislock.so.<abi>`: the
//! number in this crate's `[package.metadata.redislock]`, which changes
//! with the C ABI, not with the crate's version (docs/c.md). The headers
//! are not written here: `make headers` writes them and `tests/headers.rs`
//! fails when the committed ones are stale.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.toml");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let abi = abi_version();
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libredislock.so.{abi}");
        // Never unloaded once loaded: dlclose() would pull the code from
        // under the renewal and subscriber threads, and a php-fpm worker that
        // loads the library per request (FFI::cdef) keeps its shared clients.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    }
}

/// `abi = "N"` of Cargo.toml's `[package.metadata.redislock]`.
fn abi_version() -> String {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let manifest = std::fs::read_to_string(Path::new(&dir).join("Cargo.toml")).expect("Cargo.toml");
    let mut in_table = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_table = line == "[package.metadata.redislock]";
        } else if let Some(v) = line.strip_prefix("abi = ").filter(|_| in_table) {
            let v = v.trim_matches('"');
            assert!(
                !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()),
                "Cargo.toml: abi = {v:?} is not a number"
            );
            return v.to_string();
        }
    }
    panic!("Cargo.toml has no abi = \"N\" in [package.metadata.redislock]")
}
