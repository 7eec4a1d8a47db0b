#!/usr/bin/env bash
# make dist-check: the Python artifacts, installed as a user would.
#
#   scripts/dist/check-python.sh DIST [INSTALL_DIR]
#
# (a) The wheel, redislock-<v>-cp39-abi3-manylinux*.whl (exactly one):
#     `pip install --no-index` into a fresh venv (INSTALL_DIR/venv when
#     given, left there; else a scratch one), with no cargo on the PATH and
#     no REDISLOCK_LIB. From a scratch working directory: import redislock,
#     take a lock on $REDIS_URL (a throwaway server unless set), and check
#     that redislock.__version__, the installed distribution's version,
#     the version compiled into the extension module the process loaded
#     (redislock._native.__version__, the core's redislock::VERSION) and
#     Cargo.toml's are one, and that the module is the venv's. Then the
#     extension module's glibc floor (objdump -T: nothing newer than 2.17),
#     and `auditwheel show` when $DIST_TOOLS_BIN has auditwheel (skipped
#     with a note otherwise).
# (b) The sdist, redislock-<v>.tar.gz: its files first (the Python package,
#     the workspace's manifest and lock file, the core crate crates/redislock
#     and the pyo3 crate bindings/python, the workspace root's library
#     tests/harness and the example its manifest names; nothing else of the
#     repository). Then `pip install` into a second fresh
#     venv, which builds it with cargo (the PATH of $DIST_CARGO_PATH, which
#     must be set) and maturin, which pip's build isolation fetches from
#     PyPI: so this step needs the network (`--no-index` cannot work here).
#     Then the same import and lock. $DIST_SDIST_CARGO_TARGET_DIR: a cargo
#     target directory kept across runs (spares a full rebuild);
#     $DIST_SDIST_PROFILE: the cargo profile (e.g. dev; default: maturin's,
#     release); $DIST_SDIST_ENV: a file of exports to build in (make test
#     gives the zig environment scripts/dist.sh wrote, with its target
#     directory: the sdist's build then reuses the dependencies the wheel's
#     build compiled). DIST_SKIP_SDIST=1 skips (b), saying so. Give the sdist a
#     target directory of its own, never one the repository's builds use:
#     cargo hashes a path package by its path relative to the workspace,
#     so the sdist's crate and the checkout's share artifacts there, and
#     the sdist's could be taken as fresh from the checkout's build.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: scripts/dist/check-python.sh DIST [INSTALL_DIR]"; fi
dist=$(cd "$1" && pwd) || die "python: no directory $1"

# What a user's machine has: no Rust toolchain, no override of the library.
if command -v cargo >/dev/null; then die "python: cargo is on the PATH ($(command -v cargo)): run with PATH=\$(without_cargo)"; fi
[ -z "${REDISLOCK_LIB:-}" ] || die "python: REDISLOCK_LIB is set ($REDISLOCK_LIB): the check must use the wheel's own library"
py=$(command -v python3) || die "python: no python3 on the PATH"
command -v objdump >/dev/null || die "python: no objdump (apt-get install binutils)"

shopt -s nullglob
wheels=("$dist"/redislock-"$version"-cp39-abi3-manylinux*.whl)
shopt -u nullglob
[ ${#wheels[@]} -eq 1 ] ||
  die "python: ${#wheels[@]} wheels match $dist/redislock-$version-cp39-abi3-manylinux*.whl, expected exactly one: ${wheels[*]:-none}"
wheel=${wheels[0]}
sdist=$dist/redislock-$version.tar.gz
if [ "${DIST_SKIP_SDIST:-}" != 1 ]; then
  [ -f "$sdist" ] || die "python: no $sdist (make dist)"
  [ -n "${DIST_CARGO_PATH:-}" ] ||
    die "python: DIST_CARGO_PATH is not set: the sdist builds with cargo, and the check needs the PATH that has it (or DIST_SKIP_SDIST=1)"
  PATH=$DIST_CARGO_PATH command -v cargo >/dev/null || die "python: no cargo on DIST_CARGO_PATH ($DIST_CARGO_PATH)"
fi

work=$(scratch python-check)
mkdir "$work/cwd"
# The program each venv runs, from a directory that holds nothing else.
cat >"$work/check.py" <<'EOF'
"""Import redislock as an application does, check where it and its library came from, take a lock."""
import importlib.metadata
import json
import os
import sys

expected, venv = sys.argv[1], os.path.realpath(sys.argv[2])

import redislock  # noqa: E402
import redislock._native as native  # noqa: E402


def inside(path):
    return os.path.realpath(path).startswith(venv + os.sep)


assert inside(redislock.__file__), f"redislock was imported from {redislock.__file__}, not from the venv {venv}"
assert inside(native.__file__), f"the extension module is {native.__file__}, not the venv's"
assert redislock.__version__ == expected, f"redislock.__version__ is {redislock.__version__}"
dist_version = importlib.metadata.version("redislock")
assert dist_version == expected, f"the installed distribution is version {dist_version}"
# The objects this process mapped: the extension module, and no other
# redislock library (no system libredislock.so, no build tree).
with open("/proc/self/maps") as maps:
    mapped = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
ours = sorted(f for f in mapped if "redislock" in os.path.basename(f) or f == os.path.realpath(native.__file__))
assert ours == [os.path.realpath(native.__file__)], f"redislock objects mapped: {ours}"
# The version compiled into the very module loaded (the core's).
lib_version = native.__version__
assert lib_version == expected, f"the version compiled into {native.__file__} is {lib_version}"

client = redislock.Client(os.environ["REDIS_URL"])
name = f"dist-check:python:{os.getpid()}"
lock = client.lock(name, ttl=10.0)
assert lock.acquire(blocking=True, timeout=5), "the lock was not acquired"
assert isinstance(lock.fence, int)
other = client.lock(name, ttl=10.0)
assert not other.acquire(blocking=False), "a second acquisition while the lock is held"
lock.release()
assert other.acquire(blocking=False), "the lock is not free after its release"
other.release()
print(json.dumps({"version": redislock.__version__, "library": lib_version, "module": native.__file__}))
EOF

ensure_redis

# run_check VENV LABEL: the program above with that venv's python, no cargo.
run_check() {
  local out
  out=$(cd "$work/cwd" && env -u PYTHONPATH -u PYTHONHOME PYTHONNOUSERSITE=1 "$1/bin/python" -I "$work/check.py" "$version" "$1") ||
    die "python: $2: import redislock and a lock failed (see above)"
  python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print("redislock %s, its module compiled as %s" % (r["version"], r["library"]))' "$out"
}

# new_venv DIR [with-pip]: a fresh venv; without a pip of its own (ensurepip
# takes seconds) unless asked, when python3's pip can install into another
# interpreter (pip >= 22.3, --python): the same installation, quicker.
outside_pip=
pip_help=$("$py" -m pip --help 2>/dev/null || true)
if grep -q -- '--python ' <<<"$pip_help"; then outside_pip=1; fi
new_venv() {
  if [ -n "$outside_pip" ] && [ "${2:-}" != with-pip ]; then
    "$py" -m venv --without-pip "$1"
  else
    "$py" -m venv "$1"
  fi
}
pip_into() { # VENV ARGS...
  local venv=$1
  shift
  if [ -x "$venv/bin/pip" ]; then "$venv/bin/pip" "$@"; else "$py" -m pip --python "$venv/bin/python" "$@"; fi
}

elapsed() { # since START (date +%s%N): seconds, 1 decimal
  local ms=$((($(date +%s%N) - $1) / 1000000))
  echo "$((ms / 1000)).$((ms % 1000 / 100))"
}

# (a) The wheel.
# The venv left in INSTALL_DIR is a whole one, with its pip.
if [ $# -eq 2 ]; then
  mkdir -p "$2"
  venv=$(cd "$2" && pwd)/venv
  rm -rf "$venv"
  with="with-pip"
else
  venv=$work/venv
  with=
fi
started=$(date +%s%N)
new_venv "$venv" $with || die "python: python3 -m venv $venv failed (apt-get install python3-venv)"
pip_into "$venv" install --no-index --no-cache-dir --disable-pip-version-check -q "$wheel" ||
  die "python: pip install --no-index $wheel failed"
seen=$(run_check "$venv" "the wheel")
echo "python: pip install --no-index $(basename "$wheel") ($(stat -c %s "$wheel") bytes) into a fresh venv, and a lock, in $(elapsed "$started") s: $seen"

unzipped=$work/wheel
python3 -m zipfile -e "$wheel" "$unzipped"
shopt -s nullglob
objects=("$unzipped"/redislock/*.so)
shopt -u nullglob
[ ${#objects[@]} -eq 1 ] || die "python: ${#objects[@]} shared objects in redislock/ of $wheel, expected one"
symbols=$(objdump -T "${objects[0]}") || die "python: objdump -T ${objects[0]} failed"
top=$(highest_glibc "${objects[0]}")
[ -n "$top" ] || die "python: no glibc symbol in the wheel's $(basename "${objects[0]}")"
version_le "$top" "$glibc_floor" ||
  die "python: the wheel's $(basename "${objects[0]}") needs glibc $top, above $glibc_floor: $(grep "GLIBC_$top" <<<"$symbols" | awk '{print $NF}' | tr '\n' ' ')"
echo "python: the wheel's $(basename "${objects[0]}") ($(stat -c %s "${objects[0]}") bytes): highest glibc symbol $top (floor $glibc_floor)"

if [ -n "${DIST_TOOLS_BIN:-}" ] && [ -x "$DIST_TOOLS_BIN/auditwheel" ]; then
  report=$("$DIST_TOOLS_BIN/auditwheel" show "$wheel" 2>&1) || die "python: auditwheel show $wheel failed: $report"
  # The policy auditwheel finds must be one the file name carries.
  policy=$(tr '\n' ' ' <<<"$report" | sed -n 's/.*consistent with the following platform tag: *"\([^"]*\)".*/\1/p')
  [ -n "$policy" ] || die "python: auditwheel show said: $report"
  case $(basename "$wheel") in
    *"$policy"*) ;;
    *) die "python: auditwheel says $policy, not in the wheel's name $(basename "$wheel")" ;;
  esac
  echo "python: auditwheel show: consistent with $policy, as the wheel's name says"
else
  echo "python: auditwheel skipped (DIST_TOOLS_BIN does not name a directory with auditwheel)"
fi
if [ $# -eq 2 ]; then echo "python: the wheel installed in $venv"; fi

# (b) The sdist.
if [ "${DIST_SKIP_SDIST:-}" = 1 ]; then
  echo "python: the sdist check skipped (DIST_SKIP_SDIST=1)"
  exit 0
fi
# What the sdist carries: the workspace as far as the module's build needs
# it, and nothing else of the repository (a file outside these is one
# pyproject.toml's exclude list does not know yet).
listing=$(tar -tzf "$sdist") || die "python: $sdist is not a tar.gz"
top=redislock-$version
for f in PKG-INFO pyproject.toml Cargo.toml Cargo.lock README.md LICENSE-MIT LICENSE-APACHE \
  python/redislock/__init__.py python/redislock/py.typed crates/redislock/Cargo.toml crates/redislock/build.rs \
  crates/redislock/src/lib.rs crates/redislock/README.md bindings/python/Cargo.toml bindings/python/src/lib.rs \
  tests/harness/lib.rs examples/async_contention.rs; do
  grep -qxF "$top/$f" <<<"$listing" || die "python: $top/$f is missing from $(basename "$sdist")"
done
stray=$(grep -vE "^$top/$|^$top/.*/$|^$top/((PKG-INFO|pyproject\.toml|Cargo\.toml|Cargo\.lock|README\.md|LICENSE-MIT|LICENSE-APACHE|examples/async_contention\.rs)|(python/redislock|crates/redislock|bindings/python|tests/harness)/.+)\$" <<<"$listing" || true)
[ -z "$stray" ] || die "python: $(basename "$sdist") carries files the Python module's build does not need (pyproject.toml's exclude): $(tr '\n' ' ' <<<"$stray")"
echo "python: $(basename "$sdist"): $(wc -l <<<"$listing") files, the core crate and the pyo3 crate among them, nothing else of the repository"

svenv=$work/venv-sdist
# The venv's bin first: the build backend runs its `maturin` from there.
build_env=(PATH="$svenv/bin:$DIST_CARGO_PATH")
if [ -n "${DIST_SDIST_CARGO_TARGET_DIR:-}" ]; then
  mkdir -p "$DIST_SDIST_CARGO_TARGET_DIR"
  # The dependencies are reused, never redislock itself: the sdist's files
  # carry a fixed old time, so cargo would take its last build as fresh.
  find "$DIST_SDIST_CARGO_TARGET_DIR" -type d -path '*/.fingerprint/redislock-*' -prune -exec rm -rf {} +
  build_env+=(CARGO_TARGET_DIR="$(cd "$DIST_SDIST_CARGO_TARGET_DIR" && pwd)")
fi
maturin_args=${DIST_SDIST_PROFILE:+--profile $DIST_SDIST_PROFILE}
if [ -n "${DIST_SDIST_ENV:-}" ]; then
  [ -f "$DIST_SDIST_ENV" ] || die "python: DIST_SDIST_ENV=$DIST_SDIST_ENV: no such file"
  # shellcheck disable=SC1090
  DIST_TARGET=$(source "$DIST_SDIST_ENV" && echo "$DIST_TARGET")
  maturin_args="$maturin_args --target $DIST_TARGET"
fi
[ -z "$maturin_args" ] || build_env+=(MATURIN_PEP517_ARGS="${maturin_args# }")
started=$(date +%s%N)
new_venv "$svenv" || die "python: python3 -m venv $svenv failed"
# The build backend (build-system.requires: maturin) at the version and
# hashes of requirements/build.txt, installed first: pip's build isolation
# would fetch whatever maturin PyPI serves that day, unchecked.
pip_into "$svenv" install --no-cache-dir --disable-pip-version-check -q --require-hashes -r "$root/requirements/build.txt" ||
  die "python: pip install of the build backend (requirements/build.txt) failed"
(cd "$work/cwd" && export "${build_env[@]}" && if [ -n "${DIST_SDIST_ENV:-}" ]; then source "$DIST_SDIST_ENV"; fi && pip_into "$svenv" install --no-cache-dir --disable-pip-version-check -q --no-build-isolation --no-deps "$sdist") ||
  die "python: pip install $sdist (a build with cargo and maturin $("$root/scripts/pinned.sh" version build maturin)) failed"
built=$(elapsed "$started")
seen=$(run_check "$svenv" "the sdist")
echo "python: pip install $(basename "$sdist") ($(stat -c %s "$sdist") bytes; built with cargo${DIST_SDIST_PROFILE:+, profile $DIST_SDIST_PROFILE}) in $built s, and a lock: $seen"
