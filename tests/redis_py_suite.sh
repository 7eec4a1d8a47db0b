#!/bin/sh
# redis-py's own lock tests, run against redislock.compat.redis_py.Lock.
#
#   tests/redis_py_suite.sh [PYTHON]
#
# PYTHON (default $REDIS_PY_SUITE_PYTHON, else target/venv-test/bin/python)
# is a virtualenv's interpreter with the redislock wheel, redis and pytest
# installed (make test-python makes one). The script:
#   1. fetches the sdist of the installed redis-py version from PyPI (pip
#      download; kept in target/redis-py-suite/ for the next run) and takes
#      its tests/ (test_lock.py, test_asyncio/test_lock.py, their conftest.py
#      and helpers) and pyproject.toml (pytest settings) into a temporary
#      directory; redis-py's own package is not extracted, so the installed
#      one is tested. With $REDIS_PY_SUITE_SDIST_SHA256 set, the sdist's
#      SHA-256 must be that (hex), or the script stops (exit 2);
#   2. installs what those conftest files import (packaging, pytest-asyncio,
#      pytest-timeout) with the virtualenv's pip into target/redis-py-suite/
#      (not into the virtualenv): the newest releases, or, with
#      $REDIS_PY_SUITE_REQUIREMENTS set to a requirements file with hashes,
#      exactly what it lists (pip install --require-hashes -r FILE, every
#      dependency pinned with its hash: pip refuses anything else);
#   3. starts a throwaway redis-server on a free loopback port (never 6379,
#      as tests/python/redis_server.py does; $REDIS_SERVER chooses the
#      binary, e.g. Valkey's, as for every suite) and stops it afterwards;
#   4. runs the tests with a pytest plugin that puts our classes where the
#      test modules have redis-py's (`Lock`, which their `get_lock` passes
#      as `lock_class=`), and checks each test's outcome against
#      EXPECTED_FAILURES below.
# It prints how many of redis-py's tests pass and exits 1 when a test fails
# that is not an expected failure (or an expected failure passes: the list
# is then out of date), 2 when it cannot run.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${1:-${REDIS_PY_SUITE_PYTHON:-$ROOT/target/venv-test/bin/python}}
case $PY in /*) ;; */*) PY=$(pwd)/$PY ;; esac
if ! "$PY" -c 'import redis, pytest, redislock.compat.redis_py' 2>/dev/null; then
    echo "redis_py_suite: $PY needs redislock (the wheel), redis and pytest installed" >&2
    exit 2
fi

VERSION=$("$PY" -c 'import redis; print(redis.__version__)')
CACHE=${REDIS_PY_SUITE_CACHE:-$ROOT/target/redis-py-suite}
mkdir -p "$CACHE"
SDIST=$(ls "$CACHE"/redis-"$VERSION".tar.gz 2>/dev/null || true)
if [ -z "$SDIST" ]; then
    echo "redis_py_suite: downloading the redis-py $VERSION sdist from PyPI"
    "$PY" -m pip download -q --no-deps --no-binary :all: "redis==$VERSION" -d "$CACHE" >&2
    SDIST=$CACHE/redis-$VERSION.tar.gz
fi
[ -f "$SDIST" ] || { echo "redis_py_suite: no sdist $SDIST" >&2; exit 2; }
if [ -n "${REDIS_PY_SUITE_SDIST_SHA256:-}" ]; then
    GOT=$("$PY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$SDIST")
    WANT=$(printf %s "$REDIS_PY_SUITE_SDIST_SHA256" | tr 'A-F' 'a-f')
    if [ "$GOT" != "$WANT" ]; then
        echo "redis_py_suite: $SDIST has SHA-256 $GOT, not $WANT (\$REDIS_PY_SUITE_SDIST_SHA256):" \
             "refusing to run its tests (a wrong pin for redis $VERSION, or a bad download: delete the file to fetch it again)" >&2
        exit 2
    fi
    echo "redis_py_suite: the redis-py $VERSION sdist has the expected SHA-256"
fi

# What redis-py's conftest files import, beyond redis and pytest: installed
# with the virtualenv's pip into a directory of their own (put on PYTHONPATH
# for this run only), so the virtualenv itself is left as it was.
# With $REDIS_PY_SUITE_REQUIREMENTS, exactly what that file pins (and
# hashes), in a directory named after the file's content.
DEPS=$CACHE/deps-$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ -n "${REDIS_PY_SUITE_REQUIREMENTS:-}" ]; then
    [ -f "$REDIS_PY_SUITE_REQUIREMENTS" ] || {
        echo "redis_py_suite: no requirements file $REDIS_PY_SUITE_REQUIREMENTS (\$REDIS_PY_SUITE_REQUIREMENTS)" >&2
        exit 2
    }
    DEPS=$DEPS-$("$PY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:16])' \
        "$REDIS_PY_SUITE_REQUIREMENTS")
    if [ ! -f "$DEPS/.installed" ]; then
        rm -rf "$DEPS"
        "$PY" -m pip install -q --require-hashes -r "$REDIS_PY_SUITE_REQUIREMENTS" --target "$DEPS" >&2 || {
            echo "redis_py_suite: pip could not install $REDIS_PY_SUITE_REQUIREMENTS" >&2
            exit 2
        }
        touch "$DEPS/.installed"
    fi
    PYTHONPATH=$DEPS "$PY" -c 'import packaging, pytest_asyncio, pytest_timeout' || {
        echo "redis_py_suite: $REDIS_PY_SUITE_REQUIREMENTS lacks packaging, pytest-asyncio or pytest-timeout" >&2
        exit 2
    }
elif ! PYTHONPATH=$DEPS "$PY" -c 'import packaging, pytest_asyncio, pytest_timeout' 2>/dev/null; then
    "$PY" -m pip install -q --target "$DEPS" --upgrade packaging pytest-asyncio pytest-timeout >&2
fi
PYTHONPATH=$DEPS "$PY" -c '
import importlib.metadata as m
print("redis_py_suite: with " + ", ".join(
    "%s %s" % (d, m.version(d)) for d in ("redis", "pytest", "packaging", "pytest-asyncio", "pytest-timeout")))'

WORK=$(mktemp -d /tmp/redislock-redis-py-suite.XXXXXX)
trap 'rm -rf "$WORK"' EXIT INT TERM
tar -xzf "$SDIST" -C "$WORK" "redis-$VERSION/tests" "redis-$VERSION/pyproject.toml"
SUITE=$WORK/redis-$VERSION

cat > "$WORK/redislock_suite_plugin.py" <<'EOF'
"""Put redislock's classes where redis-py's lock tests have redis-py's Lock."""
import pytest

SUBSTITUTES = {
    # test module's name -> (redis-py's class it must hold, our class)
    "tests.test_lock": ("redis.lock", "redislock.compat.redis_py"),
    "tests.test_asyncio.test_lock": ("redis.asyncio.lock", "redislock.compat.redis_py_asyncio"),
}


@pytest.fixture(autouse=True)
def _redislock_lock_class(request, monkeypatch):
    import importlib

    module = request.module
    if module.__name__ not in SUBSTITUTES:
        return
    theirs, ours = SUBSTITUTES[module.__name__]
    original = importlib.import_module(theirs).Lock
    if getattr(module, "Lock", None) is not original:
        pytest.fail(f"{module.__name__} no longer takes Lock from {theirs}: update the plugin")
    monkeypatch.setattr(module, "Lock", importlib.import_module(ours).Lock)
EOF

cat > "$WORK/run.py" <<'EOF'
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests", "python"))
import redis  # noqa: E402
from redis_server import RedisServer, server_info  # noqa: E402

# Tests that cannot pass, by design. Each says why. (Names without their
# parametrisation: the asyncio tests run as [single] and [pool].)
EXPECTED_FAILURES = {
    # redis-py's timeout=None means a key without expiry (the tests assert
    # TTL == -1). redislock refuses locks that never expire: ours get a TTL
    # renewed in the background while the holder lives.
    "tests.test_lock.TestLock.test_lock": "lock without expiry refused (TTL renewed instead)",
    "tests.test_lock.TestLock.test_lock_token": "lock without expiry refused (TTL renewed instead)",
    "tests.test_lock.TestLock.test_lock_token_thread_local_false":
        "lock without expiry refused (TTL renewed instead)",
    # redis-py 8.2: extend/reacquire of a timeout=0 lock. The drop-in
    # behaves as redis-py (extend raises LockNotOwnedError, reacquire
    # returns True and changes nothing), but the tests then assert
    # PTTL == -1, a key without expiry.
    "tests.test_lock.TestLock.test_extend_lock_zero_additional_time_replace_ttl_raises_error":
        "timeout=0: asserts a key without expiry (TTL renewed instead)",
    "tests.test_lock.TestLock.test_extend_lock_zero_timeout_without_replace_raises_error":
        "timeout=0: asserts a key without expiry (TTL renewed instead)",
    "tests.test_lock.TestLock.test_reacquire_lock_zero_timeout_keeps_lock":
        "timeout=0: asserts a key without expiry (TTL renewed instead)",
    # These replace redis.lock's internal clock (mod_time) and count the
    # polling sleeps ([0.05] * 8). redislock does not poll: a waiter is woken
    # when the lock is released, and waits out blocking_timeout on the real
    # clock.
    "tests.test_lock.TestLock.test_blocking_timeout": "patches redis-py's clock, counts polling sleeps",
    "tests.test_lock.TestLock.test_context_manager_blocking_timeout":
        "patches redis-py's clock, counts polling sleeps",
    # The asyncio twins of the above.
    "tests.test_asyncio.test_lock.TestLock.test_lock": "lock without expiry refused (TTL renewed instead)",
    "tests.test_asyncio.test_lock.TestLock.test_lock_token":
        "lock without expiry refused (TTL renewed instead)",
    "tests.test_asyncio.test_lock.TestLock.test_lock_token_thread_local_false":
        "lock without expiry refused (TTL renewed instead)",
    "tests.test_asyncio.test_lock.TestLock.test_extend_lock_zero_additional_time_replace_ttl_raises_error":
        "timeout=0: asserts a key without expiry (TTL renewed instead)",
    "tests.test_asyncio.test_lock.TestLock.test_extend_lock_zero_timeout_without_replace_raises_error":
        "timeout=0: asserts a key without expiry (TTL renewed instead)",
    "tests.test_asyncio.test_lock.TestLock.test_reacquire_lock_zero_timeout_keeps_lock":
        "timeout=0: asserts a key without expiry (TTL renewed instead)",
    "tests.test_asyncio.test_lock.TestLock.test_blocking_timeout":
        "patches redis-py's clock (asyncio), counts polling sleeps",
    # redis-py 8.2: acquire(sleep=...) overrides the constructor's sleep.
    # The drop-in takes the argument (and checks it), but these count the
    # polling sleeps on redis-py's clock, as test_blocking_timeout does.
    "tests.test_asyncio.test_lock.TestLock.test_acquire_sleep_overrides_constructor_sleep":
        "patches redis-py's clock (asyncio), counts polling sleeps",
    "tests.test_asyncio.test_lock.TestLock.test_blocking_timeout_sleep_overrides_constructor_sleep":
        "patches redis-py's clock (asyncio), counts polling sleeps",
}

# Tests that pass against redislock but race the clock by their own design,
# as they do against redis-py's Lock: a pause longer than the window below
# at the wrong moment (a busy machine pauses for 50-300 ms) fails them. They
# are run and checked like every other test; a failure says so, to tell this
# from a fault of redislock. (Their windows cover a round trip or two more
# with redislock: extend reads PTTL first, and the asyncio class releases
# and extends through another thread.)
TIMING_DEPENDENT = {
    "tests.test_lock.TestLock.test_extend_lock_float":
        "asserts PTTL within 500 ms of the TTL set, twice",
    "tests.test_asyncio.test_lock.TestLock.test_extend_lock_float":
        "asserts PTTL within 500 ms of the TTL set, twice",
    "tests.test_lock.TestLock.test_context_manager_not_raise_on_release_lock_error":
        "releases a 100 ms lock by hand inside its with-block: it must not expire first",
    "tests.test_asyncio.test_lock.TestLock.test_context_manager_not_raise_on_release_lock_error":
        "releases a 100 ms lock by hand inside its with-block: it must not expire first",
}

suite, work, python = os.environ["SUITE"], os.environ["WORK"], os.environ["PY"]
files = ["tests/test_lock.py"]
try:
    import redislock.compat.redis_py_asyncio  # noqa: F401
    files.append("tests/test_asyncio/test_lock.py")
except ImportError:
    print("redis_py_suite: no redislock.compat.redis_py_asyncio; asyncio tests not run")

server = RedisServer()
try:
    url = server.url
    with redis.Redis(port=server.port) as r:
        print("redis_py_suite: against %s %s (%s)" % (*server_info(r), server.bin))
    report = os.path.join(work, "report.xml")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (work, os.environ["DEPS"], os.environ.get("PYTHONPATH")) if p))
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "redislock_suite_plugin",
           "--redis-url", url, "--redis-mod-url", url, "--junitxml", report, "-o", "addopts=",
           *files]
    print("redis_py_suite:", " ".join(cmd[1:]))
    proc = subprocess.run(cmd, cwd=suite, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
finally:
    server.stop()

outcomes = {}
if os.path.exists(report):
    for case in ET.parse(report).iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[name] = "failed"
        elif case.find("skipped") is not None:
            outcomes[name] = "skipped"
        else:
            outcomes[name] = "passed"
if not outcomes:
    print(proc.stdout)
    print("redis_py_suite: pytest ran no tests")
    sys.exit(2)

bad = []
for module in sorted({n.rsplit(".", 2)[0] for n in outcomes}, key=len):
    mine = {n: o for n, o in outcomes.items() if n.startswith(module + ".") and
            n.count(".") - module.count(".") == 2}
    passed = sum(o == "passed" for o in mine.values())
    print(f"redis_py_suite: {module}: {passed} of {len(mine)} of redis-py's tests pass "
          f"against redislock ({sum(o == 'skipped' for o in mine.values())} skipped)")
    for name, outcome in sorted(mine.items()):
        why = EXPECTED_FAILURES.get(name.split("[")[0])  # any parametrisation
        if outcome == "failed" and why:
            print(f"  expected failure: {name[len(module) + 1:]}: {why}")
        elif outcome == "failed":
            racy = TIMING_DEPENDENT.get(name.split("[")[0])
            bad.append(f"unexpected failure: {name}" +
                       (f" (a test with a timing window of its own: {racy})" if racy else ""))
        elif outcome == "passed" and why:
            bad.append(f"listed as an expected failure but passes (update the list): {name}")
if bad:
    print(proc.stdout)
    print("\n".join(bad))
    sys.exit(1)
print("redis_py_suite: ok")
EOF

ROOT=$ROOT DEPS=$DEPS SUITE=$SUITE WORK=$WORK PY=$PY "$PY" "$WORK/run.py"
