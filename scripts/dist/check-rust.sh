#!/usr/bin/env bash
# make dist-check: the Rust crate redislock-<v>.crate, used as a Rust
# program's dependency with nothing else: the .crate unpacked into a fresh
# directory, a new cargo project beside it that depends on it by path, and
# the crate's own Cargo.lock (cargo package wrote it from the repository's:
# the same versions, checked here) pruned to the program's dependencies
# offline. Then `cargo build --offline --locked`: no registry is consulted,
# only cargo's local cache of downloaded crates, and no file of this
# repository is read. The program takes a lock on $REDIS_URL (a throwaway
# server unless set), checks that a second acquisition fails and that
# redislock::VERSION is the crate's, releases it and prints its fence.
#
#   scripts/dist/check-rust.sh DIST [INSTALL_DIR]
#
# cargo comes from $DIST_CARGO_PATH when set (make dist-check takes cargo
# off the PATH for the other checks), else from the PATH. With INSTALL_DIR
# the project is left at INSTALL_DIR/project; without, a scratch directory,
# removed at exit. $DIST_RUST_CARGO_TARGET_DIR: a target directory kept
# across runs (the dependencies compile once; the crate and the program
# always again).
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: scripts/dist/check-rust.sh DIST [INSTALL_DIR]"; fi
dist=$(cd "$1" && pwd) || die "rust: no directory $1"
crate=$dist/redislock-$version.crate
[ -f "$crate" ] || die "rust: no $crate (make dist)"
[ -n "${DIST_CARGO_PATH:-}" ] && PATH=$DIST_CARGO_PATH
command -v cargo >/dev/null || die "rust: no cargo on the PATH${DIST_CARGO_PATH:+ (DIST_CARGO_PATH=$DIST_CARGO_PATH)}"
command -v python3 >/dev/null || die "rust: no python3 (it compares the lock files)"

work=$(scratch rust-check)
project=$(kept project "$@")
# The user's copy of the artifact, unpacked beside the project.
tar -xzf "$crate" -C "$project" || die "rust: $crate is not a tar.gz"
src=$project/redislock-$version
[ -f "$src/Cargo.toml" ] || die "rust: $crate holds no redislock-$version/Cargo.toml"
for f in Cargo.lock README.md LICENSE-MIT LICENSE-APACHE; do
  [ -f "$src/$f" ] || die "rust: $crate holds no redislock-$version/$f"
done

# The crate's lock file: every package at the version the repository's
# Cargo.lock has (the repository's tests ran with those).
python3 - "$src/Cargo.lock" "$root/Cargo.lock" <<'EOF' || die "rust: the crate's Cargo.lock differs from the repository's (above)"
import re
import sys

def packages(path):
    with open(path) as f:
        text = f.read()
    return set(re.findall(r'^name = "([^"]+)"\nversion = "([^"]+)"', text, re.M))

crate, repo = packages(sys.argv[1]), packages(sys.argv[2])
if not crate:
    sys.exit(f"no packages in {sys.argv[1]}")
other = sorted(crate - repo)
for name, version in other:
    print(f"rust: the crate's Cargo.lock has {name} {version}, not in the repository's", file=sys.stderr)
sys.exit(1 if other else 0)
EOF

app=$project/app
mkdir -p "$app/src"
cat >"$app/Cargo.toml" <<EOF
[package]
name = "redislock-dist-check"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
redislock = { path = "../redislock-$version" }

# A workspace of its own, whatever directory it lies in.
[workspace]
EOF
cat >"$app/src/main.rs" <<'EOF'
//! Takes a lock on $REDIS_URL with the packaged crate, as a program does.
use std::time::Duration;

use redislock::{Client, ErrorKind, Wait};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let expected = std::env::args().nth(1).ok_or("usage: redislock-dist-check VERSION")?;
    assert_eq!(redislock::VERSION, expected, "redislock::VERSION");
    let client = Client::open(&std::env::var("REDIS_URL")?)?;
    let name = format!("dist-check:rust:{}", std::process::id());
    let lock = client.acquire(&name, Duration::from_secs(10), Wait::Timeout(Duration::from_secs(5)))?;
    let fence = lock.fence()?;
    match client.acquire(&name, Duration::from_secs(10), Wait::TryOnce) {
        Err(e) if e.kind() == ErrorKind::NotAcquired => {}
        other => panic!("a second acquisition while the lock is held: {other:?}"),
    }
    lock.release()?;
    assert!(!client.is_locked(&name)?, "the lock is free after its release");
    println!("redislock {}: lock taken and released, fence {fence}", redislock::VERSION);
    Ok(())
}
EOF
cp "$src/Cargo.lock" "$app/Cargo.lock"

target=$work/target
if [ -n "${DIST_RUST_CARGO_TARGET_DIR:-}" ]; then
  mkdir -p "$DIST_RUST_CARGO_TARGET_DIR"
  target=$(cd "$DIST_RUST_CARGO_TARGET_DIR" && pwd)
  # The dependencies are reused, never redislock or the program: the
  # crate's files carry a fixed old time and lie at the same relative path
  # each run, so cargo would take their last build as fresh.
  find "$target" -type d -path '*/.fingerprint/redislock-*' -prune -exec rm -rf {} +
fi
# Offline and with this lock file only: the first resolve drops what the
# program does not use (the crate's dev-dependencies) and changes no
# version; then the build must hold to it.
started=$(date +%s%N)
(cd "$app" && CARGO_TARGET_DIR=$target cargo metadata --offline --quiet --format-version 1 >/dev/null) ||
  die "rust: cargo could not resolve the project offline from the crate's Cargo.lock (above)"
(cd "$app" && CARGO_TARGET_DIR=$target cargo build --offline --locked --quiet) ||
  die "rust: cargo build --offline --locked of a program on $crate failed in $app (above)"
built_ms=$((($(date +%s%N) - started) / 1000000))
bin=$target/debug/redislock-dist-check
[ -x "$bin" ] || die "rust: the build left no $bin"
if grep -rIlF "$root" "$app" --exclude-dir=target; then
  die "rust: the files above, in $app, name the repository $root"
fi

ensure_redis
out=$(cd "$work" && "$bin" "$version") || die "rust: the program on the packaged crate failed (above)"
echo "rust: $(basename "$crate") ($(stat -c %s "$crate") bytes) unpacked, a program on it built offline --locked" \
  "in $((built_ms / 1000)).$(printf %03d $((built_ms % 1000))) s; $out on $REDIS_URL"
if [ $# -eq 2 ]; then echo "rust: the project in $app"; fi
