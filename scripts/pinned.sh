#!/usr/bin/env bash
# Downloads from PyPI at the exact version and hashes of a lock file.
#
#   scripts/pinned.sh download LOCK NAME DEST [PIP-ARGS...]
#       pip download NAME's entry of requirements/LOCK.txt (its version and
#       the sha256 of each of its files) into DEST, hash-checked, without its
#       dependencies; PIP-ARGS choose the file (--only-binary=:all:
#       --platform ..., or --no-binary=:all: for the sdist). Prints the path
#       of the file downloaded.
#   scripts/pinned.sh version LOCK NAME
#       NAME's version in requirements/LOCK.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "pinned: $*" >&2; exit 1; }

# entry LOCK NAME: NAME's requirement line in the lock, its continuation
# lines joined (name==version --hash=... --hash=...), without comments.
entry() {
  local lock=$root/requirements/$1.txt
  [ -f "$lock" ] || die "no $lock"
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$lock" | grep -v '^ *#' |
    awk -v name="$2" 'BEGIN { IGNORECASE = 1 } index(tolower($1), tolower(name) "==") == 1 { sub(/ *;[^-]*/, " "); print; exit }'
}

case ${1:-} in
  version)
    [ $# -eq 3 ] || die "usage: pinned.sh version LOCK NAME"
    line=$(entry "$2" "$3")
    [ -n "$line" ] || die "$3 is not in requirements/$2.txt (make deps-update)"
    v=${line%% *}
    echo "${v#*==}"
    ;;
  download)
    [ $# -ge 4 ] || die "usage: pinned.sh download LOCK NAME DEST [PIP-ARGS...]"
    lock=$2 name=$3 dest=$4
    shift 4
    line=$(entry "$lock" "$name")
    [ -n "$line" ] || die "$name is not in requirements/$lock.txt (make deps-update)"
    mkdir -p "$dest"
    req=$(mktemp)
    trap 'rm -f "$req"' EXIT
    printf '%s\n' "$line" >"$req"
    before=$(ls -1 "$dest")
    python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes -r "$req" -d "$dest" "$@" >&2 ||
      die "pip download of ${line%% *} (hash-checked, from requirements/$lock.txt) failed"
    new=$(comm -13 <(echo "$before") <(ls -1 "$dest") | head -1)
    if [ -z "$new" ]; then
      # Already there from an earlier run: pip checked its hash again.
      v=${line%% *}
      new=$(ls -1 "$dest" | grep -i "^${name//-/[-_]}-${v#*==}[-.]" | head -1)
    fi
    [ -n "$new" ] || die "pip download left no file of ${line%% *} in $dest"
    echo "$dest/$new"
    ;;
  *) die "usage: pinned.sh download LOCK NAME DEST [PIP-ARGS...] | version LOCK NAME" ;;
esac
