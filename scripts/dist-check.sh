#!/usr/bin/env bash
# make dist-check: install every artifact of dist/ the way its users do, in
# fresh temporary directories, with no cargo or rustc on the PATH, no
# REDISLOCK_LIB and no path into this repository; each takes a lock on a
# throwaway loopback redis-server and checks its version against the
# library it loaded (scripts/dist/check-*.sh). Then the cross-language demo
# of `make demo` runs once more with the installed artifacts only: C (built
# through the tarball's pkg-config file), Python (the wheel), PHP (the
# Composer package), Ruby (the gem), Node.js (the npm package), Java (the
# jar, with Debian's JNA) and the CLI (the .deb) on one lock. The Rust
# crate is checked by a program built on it offline (cargo comes back for
# that check alone, as for the sdist's build; it is not in the demo).
#
#   scripts/dist-check.sh [DIST] [--demo DEMO_BINARY]
#
# DEMO_BINARY: the demo's driver (cargo build --example demo), copied away
# before use; without it the demo is not run (make dist-check builds it).
# DIST_SDIST_CARGO_TARGET_DIR, DIST_SDIST_PROFILE: passed to the sdist's
# build (see scripts/dist/check-python.sh); DIST_RUST_CARGO_TARGET_DIR to
# the Rust crate's check (scripts/dist/check-rust.sh).
source "$(dirname "$0")/dist/common.sh"

dist=$root/dist
demo=
while [ $# -gt 0 ]; do
  case $1 in
    --demo) demo=${2:?--demo DEMO_BINARY}; shift 2 ;;
    *) dist=$1; shift ;;
  esac
done
dist=$(cd "$dist" && pwd) || die "no $dist: run make dist first"
started=$(date +%s)

# Every artifact of the table, by its exact name; nothing else but SHA256SUMS.
expected=(
  "redislock-$version-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
  "redislock-$version.tar.gz"
  "redislock-$version.tgz"
  "redislock-$version-x86_64-linux.gem"
  "redislock-php-$version.tar.gz"
  "redislock-$version.jar"
  "redislock-$version-sources.jar"
  "libredislock${abi}_$version-1_amd64.deb"
  "libredislock-dev_$version-1_amd64.deb"
  "redislock_$version-1_amd64.deb"
  "libredislock-$version-x86_64-linux-gnu.tar.gz"
  "redislock-$version.crate"
)
for f in "${expected[@]}" SHA256SUMS; do
  [ -f "$dist/$f" ] || die "$dist/$f is missing (make dist)"
done
for f in "$dist"/*; do
  name=${f##*/}
  [ "$name" = SHA256SUMS ] || printf '%s\n' "${expected[@]}" | grep -qxF "$name" ||
    die "$dist/$name is not an artifact of this version ($version): a stale file? (make dist empties dist/)"
done
(cd "$dist" && sha256sum --quiet --strict -c SHA256SUMS) || die "$dist/SHA256SUMS does not match the artifacts"
[ "$(wc -l <"$dist/SHA256SUMS")" = ${#expected[@]} ] || die "$dist/SHA256SUMS does not list exactly the ${#expected[@]} artifacts"
echo "dist-check: ${#expected[@]} artifacts, SHA256SUMS verified"

# The sdist's build and the Rust crate's check use cargo: their checks put
# this PATH back for them.
export DIST_CARGO_PATH=$PATH
PATH=$(without_cargo)
export PATH
unset REDISLOCK_LIB
! command -v cargo >/dev/null && ! command -v rustc >/dev/null ||
  die "cargo or rustc is still on the PATH ($(command -v cargo rustc | tr '\n' ' '))"
[ -x "$root/target/dist-tools/bin/auditwheel" ] && export DIST_TOOLS_BIN=$root/target/dist-tools/bin

ensure_redis
installed=$(scratch installed)
for lang in python node ruby php java c rust; do
  t=$(date +%s)
  mkdir "$installed/$lang"
  (cd "$installed" && "$root/scripts/dist/check-$lang.sh" "$dist" "$installed/$lang") ||
    die "the $lang artifact failed its check (above)"
  echo "dist-check: $lang passed in $(($(date +%s) - t)) s"
done

if [ -n "$demo" ]; then
  [ -x "$demo" ] || die "--demo $demo: no such program (cargo build --example demo)"
  work=$(scratch demo)
  cp "$demo" "$work/demo"
  cp "$root"/examples/demo/worker.{c,py,php,rb,js,java} "$work/"
  prefix=$installed/c/prefix
  cli=$installed/c/cli-root/usr/bin/redislock
  venv=$installed/python/venv
  autoload=$installed/php/project/vendor/autoload.php
  jar=$installed/java/project/redislock-$version.jar
  for f in "$prefix/lib/pkgconfig/redislock.pc" "$cli" "$venv/bin/python" "$autoload" \
    "$installed/ruby/gems" "$installed/node/project/node_modules/redislock" "$jar"; do
    [ -e "$f" ] || die "the demo needs $f, which the checks should have left"
  done
  # The C worker through the tarball's pkg-config file only.
  # shellcheck disable=SC2046
  cc -O2 -std=c11 -Wall -Wextra -Werror -pedantic -o "$work/worker-c" "$work/worker.c" \
    $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs redislock) -Wl,-rpath,"$prefix/lib" ||
    die "the C worker did not build through $prefix/lib/pkgconfig/redislock.pc"
  # The Python worker's own client library (redis-py), beside the wheel.
  # At the version and hashes of requirements/demo.txt, as make demo installs it.
  "$venv/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$root/requirements/demo.txt" >/dev/null ||
    die "pip could not install redis-py (the Python worker's counter) from requirements/demo.txt into $venv"
  echo "dist-check: the demo with the installed artifacts"
  (cd "$work" && REDISLOCK_DEMO_AUTOLOAD=$autoload GEM_HOME=$installed/ruby/gems \
    NODE_PATH=$installed/node/project/node_modules \
    ./demo --installed --seconds 1 --workers "$work" --c-worker "$work/worker-c" \
      --python "$venv/bin/python" --cli "$cli" --java-jar "$jar") ||
    die "the demo with the installed artifacts failed (above)"
fi
echo "dist-check: passed in $(($(date +%s) - started)) s"
