#!/usr/bin/env bash
# Install the C library: shared and static libraries, the header, a
# pkg-config file, and the PHP FFI declarations for php-fpm
# (PREFIX/share/redislock/redislock_preload.h).
#
#   scripts/install.sh PREFIX [BUILD_DIR]    (BUILD_DIR defaults to target/release)
#
# LIBDIR and INCLUDEDIR may be set to override PREFIX/lib and PREFIX/include.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${1:?usage: scripts/install.sh PREFIX [BUILD_DIR]}
build=${2:-target/release}
libdir=${LIBDIR:-$prefix/lib}
includedir=${INCLUDEDIR:-$prefix/include}
version=$(sed -n '0,/^version = "\(.*\)"/s//\1/p' Cargo.toml)
major=${version%%.*}

for f in "$build/libredislock.so" "$build/libredislock.a"; do
  [ -f "$f" ] || { echo "install: $f is missing: build first (make build)" >&2; exit 1; }
done

install -d "$libdir/pkgconfig" "$includedir"
install -m 0755 "$build/libredislock.so" "$libdir/libredislock.so.$version"
ln -sf "libredislock.so.$version" "$libdir/libredislock.so.$major"
ln -sf "libredislock.so.$major" "$libdir/libredislock.so"
install -m 0644 "$build/libredislock.a" "$libdir/libredislock.a"
install -m 0644 include/redislock.h "$includedir/redislock.h"
# The PHP FFI declarations for php-fpm's ffi.preload, naming this library.
install -d "$prefix/share/redislock"
sed -e "s|^#define FFI_LIB .*|#define FFI_LIB \"$libdir/libredislock.so.$major\"|" \
    bindings/php/redislock_preload.h > "$prefix/share/redislock/redislock_preload.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$libdir|" -e "s|@INCLUDEDIR@|$includedir|" \
    -e "s|@VERSION@|$version|" bindings/c/redislock.pc.in > "$libdir/pkgconfig/redislock.pc"
echo "installed redislock $version into $prefix (pkg-config: $libdir/pkgconfig)"
