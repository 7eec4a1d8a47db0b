#!/usr/bin/env bash
# What `make bench` needs beyond `make test`'s dependencies (scripts/deps.sh):
# hiredis (Debian's libhiredis-dev), the C client of the hand-written helper
# that bench/c/ measures the C API against. Debian/Ubuntu as root: apt-get;
# elsewhere: a message saying what to install.
set -euo pipefail

have_hiredis() {
  pkg-config --exists hiredis 2>/dev/null || [ -f /usr/include/hiredis/hiredis.h ]
}

have_hiredis && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "bench deps: installing libhiredis-dev with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends libhiredis-dev >/dev/null
else
  echo "bench deps: hiredis is missing (the C benchmarks' helper client)." >&2
  echo "      Install it (Debian/Ubuntu: sudo apt-get install libhiredis-dev), or run this as root." >&2
  exit 1
fi
have_hiredis || { echo "bench deps: libhiredis-dev installed, but hiredis.h is not found" >&2; exit 1; }
