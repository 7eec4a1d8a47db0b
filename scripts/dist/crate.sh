#!/usr/bin/env bash
# make dist: the core as a Rust crate, redislock-<v>.crate: what `cargo
# package -p redislock` makes of crates/redislock (its sources, build.rs,
# the Rust guide as README.md, the licences, and a Cargo.lock of the
# repository's versions), copied into DIST. Rust programs depend on it by
# path once unpacked (the crates.io name redislock is another project's:
# nothing here publishes). `make dist-check` builds a program on it offline
# (scripts/dist/check-rust.sh).
#
#   scripts/dist/crate.sh DIST [--no-verify]
#
# Without --no-verify, cargo package also builds the packaged crate alone,
# from its own files, before it is copied. The tree may hold uncommitted
# changes (as for every artifact of make dist): the package's
# .cargo_vcs_info.json then says so ("dirty").
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: scripts/dist/crate.sh DIST [--no-verify]"; fi
[ -d "$1" ] || die "crate: no directory $1"
dist=$(cd "$1" && pwd)
verify=()
case ${2:-} in
  "") ;;
  --no-verify) verify=(--no-verify) ;;
  *) die "crate: unknown option $2 (--no-verify)" ;;
esac
command -v cargo >/dev/null || die "crate: cargo is missing: install a Rust toolchain with rustup (1.88 or newer)"
name=redislock-$version.crate
source_date_epoch

# A target directory of its own: cargo package writes the .crate (and its
# verification build) there, never into another build's.
target=${CARGO_TARGET_DIR:-$root/target}/crate
rm -f "$target/package/$name"
(cd "$root" && cargo package -p redislock --locked --allow-dirty --quiet "${verify[@]}" --target-dir "$target") ||
  die "crate: cargo package -p redislock failed (above)"
made=$target/package/$name
[ -f "$made" ] || die "crate: cargo package made no $made"

# Read back: the manifest, the front page, the licences, the lock file; and
# no path dependency left (the doc tests' redislock-tests is the
# repository's, which cargo package drops with the other dev-dependencies'
# paths).
listing=$(tar -tzf "$made") || die "crate: $made is not a tar.gz"
for f in Cargo.toml Cargo.lock README.md LICENSE-MIT LICENSE-APACHE build.rs src/lib.rs; do
  grep -qx "redislock-$version/$f" <<<"$listing" || die "crate: redislock-$version/$f is missing from $name"
done
manifest=$(tar -xOzf "$made" "redislock-$version/Cargo.toml")
if grep -n 'path *=\|redislock-tests' <<<"$manifest" | grep -v '^[0-9]*:path = "src/lib.rs"$\|^[0-9]*:path = "build.rs"$' >&2; then
  die "crate: the packaged Cargo.toml still names a path dependency (above)"
fi
tar -xOzf "$made" "redislock-$version/README.md" | cmp -s - "$root/docs/rust.md" ||
  die "crate: the packaged README.md is not docs/rust.md (crates/redislock/README.md links to it)"

install -m 0644 "$made" "$dist/$name"
echo "dist: $dist/$name ($(stat -c %s "$dist/$name") bytes, $(wc -l <<<"$listing") files${verify[*]:+, not verified})"
