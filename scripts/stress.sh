#!/usr/bin/env bash
# Run a command again and again with every core kept busy beside it, the way
# a CI machine is busy while a compiler runs, and stop at the first failure.
#
#   scripts/stress.sh [-n RUNS] [-j JOBS] [-l spin|build] [--] COMMAND [ARGS...]
#
#   -n RUNS   how many runs in a row must pass (default 1; $STRESS_RUNS)
#   -j JOBS   busy processes beside the command (default: the number of
#             cores, so that each core is shared; $STRESS_JOBS)
#   -l LOAD   spin: JOBS processes that only burn CPU (the default;
#             $STRESS_LOAD); build: JOBS rustc jobs compiling this project
#             in a loop into target/stress-build (CPU, memory and disk, as a
#             compiler beside the tests)
#
# Each run's output goes to target/stress/run-K.log; the last lines of a
# failed run are printed. Exits with the failed run's status, 0 when all
# RUNS passed. `make test-stress` and `make test-stress-redlock` use it.
set -uo pipefail

runs=${STRESS_RUNS:-1}
jobs=${STRESS_JOBS:-$(nproc)}
load=${STRESS_LOAD:-spin}
while [ $# -gt 0 ]; do
  case $1 in
    -n) runs=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -l) load=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "stress: unknown option $1 (see the head of $0)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "stress: usage: $0 [-n RUNS] [-j JOBS] [-l spin|build] COMMAND..." >&2; exit 2; }
case $runs$jobs in *[!0-9]*) echo "stress: -n and -j take numbers" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
logs=$root/target/stress
mkdir -p "$logs"

pids=()
stop_load() {
  [ ${#pids[@]} -gt 0 ] || return 0
  # Each loader leads its own process group (setsid): its children go too.
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
  wait "${pids[@]}" 2>/dev/null
  pids=()
}
trap 'stop_load' EXIT
trap 'stop_load; exit 130' INT TERM

case $load in
  spin)
    for _ in $(seq "$jobs"); do
      setsid bash -c 'while :; do :; done' &
      pids+=($!)
    done ;;
  build)
    # Its own target directory: the command's builds are never touched.
    setsid bash -c '
      while :; do
        CARGO_TARGET_DIR="$1/target/stress-build" cargo build -q --release -j "$2" \
          --manifest-path "$1/Cargo.toml" >/dev/null 2>&1
        CARGO_TARGET_DIR="$1/target/stress-build" cargo clean -q -p redislock >/dev/null 2>&1
      done' _ "$root" "$jobs" &
    pids+=($!) ;;
  *) echo "stress: -l spin or -l build, not $load" >&2; exit 2 ;;
esac
echo "stress: $jobs $load job(s) beside: $*"

for k in $(seq "$runs"); do
  log=$logs/run-$k.log
  start=$(date +%s)
  "$@" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  if [ $rc -ne 0 ]; then
    tail -n 60 "$log"
    echo "stress: run $k of $runs FAILED (exit $rc) after ${took} s under load; log: $log"
    exit $rc
  fi
  echo "stress: run $k of $runs passed in ${took} s under load"
done
echo "stress: $runs of $runs runs passed under load ($jobs $load job(s))"
