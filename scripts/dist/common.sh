# Shared by the scripts of `make dist` and `make dist-check` (sourced, not run).
#
#   root      the repository (packaging scripts read files from it; the
#             checks never hand a path into it to what they install)
#   version   the workspace's version (Cargo.toml, [workspace.package]):
#             every artifact and file name follows it
#   abi       the C ABI's number: the soname is libredislock.so.$abi and the
#             runtime Debian package libredislock$abi
#             (crates/redislock-ffi/Cargo.toml, [package.metadata.redislock] abi)
#   die MSG   print "dist: MSG" to stderr and exit 1
#   without_cargo       a PATH with no cargo, rustc or rustup on it
#   ensure_redis        start a throwaway redis-server on a free loopback port
#                       unless REDIS_URL is set; sets REDIS_PORT and REDIS_URL,
#                       stops the server when the calling shell exits
#   scratch NAME        a fresh temporary directory, removed when the script exits
#   kept NAME [ARGS]    where a check installs: with a second argument (its
#                       INSTALL_DIR), INSTALL_DIR/NAME, emptied; else a scratch one
#   shipped_elf WHO FILE   FILE is an x86_64 shared object, stripped
#   source_date_epoch   export SOURCE_DATE_EPOCH (default: the last commit's time)
#   glibc_floor         the oldest glibc every shipped object runs on (2.17)
#   highest_glibc FILE...   the newest GLIBC_ symbol version the files use
#   version_le A B      A is at most B (sort -V)
#   packaging WHO STAGE DIST FILE...   a packaging script's arguments: the
#                       stage's FILEs exist; sets $stage and $dist (absolute,
#                       dist made) and SOURCE_DATE_EPOCH
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
version=$(sed -n '0,/^version = "\(.*\)"/s//\1/p' "$root/Cargo.toml")
abi=$(sed -n '/^\[package.metadata.redislock\]/,/^\[/s/^abi = "\(.*\)"/\1/p' "$root/crates/redislock-ffi/Cargo.toml")
[ -n "$version" ] || { echo "dist: no version in $root/Cargo.toml" >&2; exit 1; }
[ -n "$abi" ] || { echo "dist: no abi in [package.metadata.redislock] of $root/crates/redislock-ffi/Cargo.toml" >&2; exit 1; }

die() {
  echo "dist: $*" >&2
  exit 1
}

# Every directory of PATH that holds cargo, rustc or rustup is dropped.
without_cargo() {
  local out="" dir
  local IFS=:
  for dir in $PATH; do
    if [ -n "$dir" ] && { [ -e "$dir/cargo" ] || [ -e "$dir/rustc" ] || [ -e "$dir/rustup" ]; }; then
      continue
    fi
    out=${out:+$out:}$dir
  done
  echo "$out"
}

_dist_cleanup=()
_dist_exit() {
  local i
  for ((i = ${#_dist_cleanup[@]} - 1; i >= 0; i--)); do eval "${_dist_cleanup[$i]}" || true; done
}
trap _dist_exit EXIT
# on_exit CMD: run CMD when the shell exits (last registered, first run)
on_exit() { _dist_cleanup+=("$1"); }

# One directory per script, removed at its exit; `scratch` makes fresh ones
# inside it (it runs in $(…), a subshell whose own exit handlers are lost).
_dist_tmp=$(mktemp -d "${TMPDIR:-/tmp}/redislock-dist.XXXXXX")
on_exit "rm -rf '$_dist_tmp'"
scratch() {
  mktemp -d "$_dist_tmp/${1:-dist}.XXXXXX"
}

kept() {
  local name=$1 dir
  shift
  if [ $# -ge 2 ]; then
    mkdir -p "$2"
    dir=$(cd "$2" && pwd)/$name
    rm -rf "$dir"
  else
    dir=$(scratch "$name")/$name
  fi
  mkdir -p "$dir"
  echo "$dir"
}

# (readelf's output in a variable first: `readelf | grep -q` fails under
# pipefail when grep stops reading early.)
shipped_elf() {
  local who=$1 file=$2 out
  [ -f "$file" ] || die "$who: no $file (scripts/dist.sh makes the stage)"
  command -v readelf >/dev/null || die "$who: no readelf (apt-get install binutils)"
  out=$(readelf -h "$file") || die "$who: $file is not an ELF file"
  grep -q 'Machine:.*X86-64' <<<"$out" || die "$who: $file is not built for x86_64"
  grep -q 'Type:.*DYN' <<<"$out" || die "$who: $file is not a shared object"
  out=$(readelf -SW "$file")
  if grep -Eq ' \.(symtab|debug_[a-z]+) ' <<<"$out"; then
    die "$who: $file is not stripped (scripts/dist.sh strips the stage)"
  fi
}

source_date_epoch() {
  if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null) ||
      die "no git history and no SOURCE_DATE_EPOCH: set SOURCE_DATE_EPOCH"
  fi
  export SOURCE_DATE_EPOCH
}

glibc_floor=2.17

highest_glibc() {
  local f
  for f in "$@"; do objdump -T "$f" || die "objdump -T $f failed"; done |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1
}

version_le() {
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$2" ]
}

packaging() {
  local who=$1 f
  stage=${2:?usage: scripts/dist/$who.sh STAGE DIST}
  dist=${3:?usage: scripts/dist/$who.sh STAGE DIST}
  shift 3
  for f in "$@"; do
    [ -f "$stage/$f" ] || die "$who: $stage/$f is missing (scripts/dist.sh makes the stage)"
  done
  stage=$(cd "$stage" && pwd)
  mkdir -p "$dist"
  dist=$(cd "$dist" && pwd)
  source_date_epoch
}

ensure_redis() {
  if [ -n "${REDIS_URL:-}" ]; then
    REDIS_PORT=${REDIS_PORT:-$(echo "$REDIS_URL" | sed -n 's|.*:\([0-9]*\)/*[0-9]*$|\1|p')}
    export REDIS_URL REDIS_PORT
    return
  fi
  local server=${REDIS_SERVER:-redis-server} port dir pid i
  command -v "$server" >/dev/null || die "no $server on the PATH (apt-get install redis-server, or set REDIS_SERVER)"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  dir=$(scratch redis)
  "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --logfile "$dir/log" --daemonize no &
  pid=$!
  on_exit "kill $pid 2>/dev/null; wait $pid 2>/dev/null"
  for i in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    kill -0 "$pid" 2>/dev/null || die "$server on port $port exited: $(tail -5 "$dir/log")"
    sleep 0.05
  done
  REDIS_PORT=$port
  REDIS_URL="redis://127.0.0.1:$port"
  export REDIS_URL REDIS_PORT
}
