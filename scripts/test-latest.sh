#!/usr/bin/env bash
# make test-latest: the suites whose subject comes from a registry, run at
# the version the lock files pin and at the newest one the registry serves
# today, side by side. Not part of make test: a peer's release must not turn
# CI red, but it should be seen the day it happens.
#
#   - redis-py's own lock suites (tests/redis_py_suite.sh: its sdist's
#     tests/test_lock.py and tests/test_asyncio/test_lock.py) against the
#     drop-in, with redis-py at requirements/test.txt's version, then at the
#     newest (with the newest pytest-asyncio and pytest-timeout too);
#   - the Python tests that run a peer from PyPI (the rollout against
#     redis-py's own Lock, the redis-py drop-in's tests, Celery's
#     single-instance tasks), pinned, then with the newest redis-py, Celery
#     and pytest;
#   - the Node.js tests that run node-redlock and ioredis (the adapter's
#     contract, the rollout against node-redlock), with
#     tests/node-tools/package-lock.json, then with the newest node-redlock
#     (pre-releases included: 5.0.0-beta.2 is newer than the `latest` tag)
#     and ioredis.
# The pinned side reuses make test's virtualenv (make python-env) and
# target/node-tools (installed by the Makefile's NPM_LOCKED); the newest
# side is made in target/latest/ each run.
# Prints one line per suite: the pass count pinned and newest, with the
# versions. Exits 1 when a suite fails at either version (the newest may
# need a change before the lock files move to it), 0 when all pass.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

venv=target/venv-test
latest=target/latest
lib=$root/target/debug/libredislock.so
die() { echo "test-latest: $*" >&2; exit 2; }
[ -x "$venv/bin/python" ] || die "no $venv: run make python-env first (make test-latest does)"
compgen -G "target/wheels-test/redislock-*.whl" >/dev/null || die "no wheel in target/wheels-test (make wheel)"
[ -f "$lib" ] || cargo build --quiet -p redislock-ffi || die "cargo build -p redislock-ffi failed"

rows=()
failed=0
row() { # SUITE PINNED NEWEST
  rows+=("$1" "  pinned: $2" "  newest: $3")
  case "$2 $3" in *FAILED*) failed=1 ;; esac
}

# newest_pypi NAME: the newest version of NAME that PyPI serves.
newest_pypi() {
  python3 -m pip index versions "$1" 2>/dev/null | sed -n "s/^$1 (\(.*\))\$/\1/p"
}

# --- Python: a virtualenv with the newest releases -------------------------
rm -rf "$latest/venv"
mkdir -p "$latest"
python3 -m venv "$latest/venv" || die "python3 -m venv failed"
"$latest/venv/bin/pip" install -q --disable-pip-version-check --require-hashes -r requirements/pip.txt || die "pip (requirements/pip.txt)"
# Deliberately unpinned: the newest of each.
"$latest/venv/bin/pip" install -q --disable-pip-version-check --upgrade celery mypy prometheus_client pytest redis ||
  die "pip could not install the newest redis-py, Celery and pytest"
"$latest/venv/bin/pip" install -q --disable-pip-version-check --no-deps target/wheels-test/redislock-*.whl || die "the wheel"
pyver() { "$1/bin/python" -c "import importlib.metadata as m; print(m.version('$2'))"; }
redis_pinned=$(pyver "$venv" redis)
redis_newest=$(pyver "$latest/venv" redis)
celery_pinned=$(pyver "$venv" celery)
celery_newest=$(pyver "$latest/venv" celery)
[ "$redis_newest" = "$(newest_pypi redis)" ] || echo "test-latest: note: pip installed redis $redis_newest; PyPI lists $(newest_pypi redis) (a release for a newer Python?)"

# Each count below runs in a command substitution (a subshell): a failure
# shows in what it prints, "FAILED (...)", which row() looks for.

# redis_py_suite PYTHON CACHE [REQUIREMENTS]: "sync N/M, asyncio N/M" (or the failure)
redis_py_suite() {
  local out rc counts
  out=$(REDIS_PY_SUITE_CACHE=$2 REDIS_PY_SUITE_REQUIREMENTS=${3:-} tests/redis_py_suite.sh "$1" 2>&1)
  rc=$?
  echo "$out" >"$2.log"
  counts=$(sed -n "s/^redis_py_suite: tests\.\([a-z_.]*\): \([0-9]*\) of \([0-9]*\) of redis-py's tests pass.*/\1 \2\/\3/p" <<<"$out" |
    sed 's/^test_asyncio.test_lock/asyncio/; s/^test_lock/sync/' | paste -sd, - | sed 's/,/, /g')
  if [ $rc -ne 0 ]; then
    echo "FAILED (${counts:-no count}; $2.log)"
  else
    echo "${counts:-?}"
  fi
}
mkdir -p target/redis-py-suite
scripts/pinned.sh download test redis target/redis-py-suite --no-binary=:all: >/dev/null || die "redis-py's sdist"
echo "test-latest: redis-py's own lock suites, redis-py $redis_pinned (pinned) and $redis_newest (newest)"
p=$(redis_py_suite "$venv/bin/python" "$root/target/redis-py-suite" "$root/requirements/redis-py-suite.txt")
n=$(redis_py_suite "$latest/venv/bin/python" "$root/$latest/redis-py-suite")
row "redis-py lock suites" "$redis_pinned: $p" "$redis_newest: $n"

# pytest_count PYTHON LOG FILES...: "N passed" (or the failure)
pytest_count() {
  local py=$1 log=$2 out rc summary
  shift 2
  out=$(cd tests/python && REDISLOCK_LIB=$lib "$py" -m pytest -q -p no:cacheprovider "$@" 2>&1)
  rc=$?
  echo "$out" >"$log"
  summary=$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' <<<"$out" | tail -1 | sed 's/=//g; s/ in [0-9.]*s.*//; s/^ *//')
  if [ $rc -ne 0 ]; then
    echo "FAILED (${summary:-no summary}; $log)"
  else
    echo "$summary"
  fi
}
py_peer_tests=(test_rollout_python.py test_compat_redis_py.py test_celery.py)
echo "test-latest: ${py_peer_tests[*]}"
p=$(pytest_count "$root/$venv/bin/python" "$root/$latest/python-pinned.log" "${py_peer_tests[@]}")
n=$(pytest_count "$root/$latest/venv/bin/python" "$root/$latest/python-newest.log" "${py_peer_tests[@]}")
row "Python peers (redis-py, Celery)" "redis $redis_pinned, celery $celery_pinned: $p" "redis $redis_newest, celery $celery_newest: $n"

# --- Node.js: node-redlock and ioredis at their newest ---------------------
node_tools=target/node-tools
cmp -s tests/node-tools/package-lock.json "$node_tools/package-lock.json" && [ -d "$node_tools/node_modules" ] ||
  die "no $node_tools from tests/node-tools/package-lock.json: run make test-latest (it installs it)"
# The highest version published, pre-releases included (npm's `latest` tag
# of redlock is 4.2.0, below 5.0.0-beta.2).
newest_npm() {
  npm view "$1" versions --json 2>/dev/null | node -e '
    const v = JSON.parse(require("fs").readFileSync(0, "utf8"));
    const key = (s) => { const [core, pre] = s.split("-"); return [...core.split(".").map(Number), pre === undefined ? 1 : 0, pre || ""]; };
    const cmp = (a, b) => { const x = key(a), y = key(b); for (let i = 0; i < 4; i++) if (x[i] !== y[i]) return x[i] - y[i]; return x[4] < y[4] ? -1 : x[4] > y[4] ? 1 : 0; };
    console.log([].concat(v).sort(cmp).pop());'
}
redlock_newest=$(newest_npm redlock)
ioredis_newest=$(newest_npm ioredis)
[ -n "$redlock_newest" ] && [ -n "$ioredis_newest" ] || die "npm view redlock/ioredis failed"
rm -rf "$latest/node-tools" && mkdir -p "$latest/node-tools"
(cd "$latest/node-tools" && echo '{"name":"redislock-test-latest","private":true}' >package.json &&
  npm install --loglevel=error --no-audit --no-fund --no-package-lock "redlock@$redlock_newest" "ioredis@$ioredis_newest" >/dev/null) ||
  die "npm could not install redlock@$redlock_newest and ioredis@$ioredis_newest"
nodever() { node -p "require('$root/$1/node_modules/$2/package.json').version.replace(/^v/, '')"; }

# node_count TOOLS LOG: "N passed" of the Node.js peer tests with TOOLS' modules
node_tests=(test/redlock_contract.test.js test/rollout.test.js)
node_count() {
  local out rc pass fail
  out=$(cd bindings/node && REDISLOCK_NODE_TOOLS=$root/$1/node_modules REDISLOCK_LIB=$lib node --test --test-concurrency=1 "${node_tests[@]}" 2>&1)
  rc=$?
  echo "$out" >"$2"
  pass=$(sed -n 's/^# pass \([0-9]*\)/\1/p' <<<"$out" | tail -1)
  fail=$(sed -n 's/^# fail \([0-9]*\)/\1/p' <<<"$out" | tail -1)
  if [ $rc -ne 0 ]; then
    echo "FAILED (${pass:-?} passed, ${fail:-?} failed; $2)"
  else
    echo "${pass:-?} passed"
  fi
}
[ -f bindings/node/redislock.node ] || node bindings/node/build.js --debug >/dev/null || die "the Node.js addon did not build"
echo "test-latest: ${node_tests[*]}"
p=$(node_count "$node_tools" "$root/$latest/node-pinned.log")
n=$(node_count "$latest/node-tools" "$root/$latest/node-newest.log")
row "node-redlock + ioredis tests" "$(nodever "$node_tools" redlock), $(nodever "$node_tools" ioredis): $p" \
  "$(nodever "$latest/node-tools" redlock), $(nodever "$latest/node-tools" ioredis): $n"

echo
printf '%s\n' "${rows[@]}"
if [ $failed -ne 0 ]; then
  echo "test-latest: a suite failed (see its log above); the lock files stay where they are until it passes"
  exit 1
fi
echo "test-latest: every suite passes at the pinned and at the newest versions"
