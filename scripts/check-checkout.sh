#!/usr/bin/env bash
# `pip install .` in a checkout, the way a contributor runs it, must leave
# the C library that `cargo build` made beside it as it was: the Python
# module is its own crate (bindings/python, lib_native.so), never built
# onto target/<profile>/libredislock.so. Then Ruby and PHP load that
# library, and the module imports.
#
#   scripts/check-checkout.sh [PROFILE]    PROFILE: debug (default) or release
#
# debug: pip builds through maturin with `--profile dev` (MATURIN_PEP517_ARGS),
# so that the core make test compiled is reused; release: as pip does by
# default. The build backend (maturin) comes from requirements/build.txt.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
profile=${1:-debug}
python=${PYTHON:-python3}
die() {
  echo "check-checkout: $*" >&2
  exit 1
}
case $profile in
  debug) pep517_args="--profile dev" ;;
  release) pep517_args= ;;
  *) die "unknown profile $profile (debug or release)" ;;
esac
lib=$root/target/$profile/libredislock.so
[ -f "$lib" ] || die "no $lib: run \`cargo build$([ "$profile" = release ] && echo ' --release')\` first"
before=$(sha256sum <"$lib")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$root/requirements/pip.txt"
"$work/venv/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$root/requirements/build.txt"
# As `pip install .` in the checkout: the workspace's own target directory.
cd "$root"
env -u CARGO_TARGET_DIR PATH="$work/venv/bin:$PATH" MATURIN_PEP517_ARGS="$pep517_args" \
  "$work/venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation "$root" || die "pip install $root failed"

[ "$(sha256sum <"$lib")" = "$before" ] ||
  die "pip install . rewrote $lib: the Python module was built onto the C library's path"
if grep -q ' Py' <<<"$(nm -D --undefined-only "$lib")"; then
  die "$lib needs Python's symbols: it is the Python module, not the C library"
fi
(cd "$work" && "$work/venv/bin/python" -c 'import redislock; print("python:", redislock.__version__)') ||
  die "the installed module does not import"
REDISLOCK_LIB=$lib ruby -I "$root/bindings/ruby/lib" -e 'require "redislock"; puts "ruby: #{RedisLock::Native::LIBRARY_PATH}"' ||
  die "Ruby cannot load $lib after pip install ."
REDISLOCK_LIB=$lib php -r 'require $argv[1]; echo "php: ", \RedisLock\FFI::libraryVersion(), "\n";' "$root/bindings/php/autoload.php" ||
  die "PHP cannot load $lib after pip install ."
echo "check-checkout: pip install . left $lib as it was; Ruby and PHP load it"
