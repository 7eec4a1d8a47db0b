#!/usr/bin/env bash
# Install the C library: shared and static libraries, the header, a
# pkg-config file, and the PHP FFI declarations for php-fpm
# (PREFIX/share/redislock/redislock_preload.h).
#
#   scripts/install.sh PREFIX [BUILD_DIR]    (BUILD_DIR defaults to target/release;
#                                             a relative one is read from the repository)
#
# LIBDIR and INCLUDEDIR may be set to override PREFIX/lib and PREFIX/include.
# DESTDIR (for packagers) is put in front of every path written to: the
# files land under $DESTDIR$PREFIX while redislock.pc and the preload
# header name the real paths under PREFIX.
#
# What is installed is stripped as Debian's dh_strip does (the shared
# library of every symbol not needed, the static one of its debug info,
# both of the .comment and .note sections); the build tree's files are
# copied, never touched.
#
#   libredislock.so.<version>                 the library
#   libredislock.so.<abi> -> .so.<version>    its soname (abi: [package.metadata.
#   libredislock.so -> .so.<abi>              redislock] of crates/redislock-ffi/Cargo.toml)
#   libredislock.a
#   .debug/libredislock.so.<version>.debug    the debug info, when the build has it
# shellcheck source-path=SCRIPTDIR source=dist/common.sh
source "$(dirname "$0")/dist/common.sh" # root, version, abi
cd "$root"

usage="usage: [DESTDIR=DIR] [LIBDIR=DIR] [INCLUDEDIR=DIR] scripts/install.sh PREFIX [BUILD_DIR]"
prefix=${1:?$usage}
build=${2:-target/release}
[ "$prefix" = / ] || prefix=${prefix%/}
libdir=${LIBDIR:-${prefix%/}/lib}
includedir=${INCLUDEDIR:-${prefix%/}/include}
datadir=${prefix%/}/share/redislock
destdir=${DESTDIR:-}
strip=${STRIP:-strip}

fail() {
  echo "install: $*" >&2
  exit 1
}
for f in "$build/libredislock.so" "$build/libredislock.a" include/redislock.h \
  bindings/php/redislock_preload.h bindings/c/redislock.pc.in; do
  [ -f "$f" ] || fail "$f is missing: build first (make build)"
done
command -v "$strip" >/dev/null || fail "no $strip (apt-get install binutils, or set STRIP)"
command -v objcopy >/dev/null || fail "no objcopy (apt-get install binutils)"

# A path of the .pc relative to ${prefix} when it lies under PREFIX, so that
# the file stays right when the prefix is moved (make dist's tarball).
# shellcheck disable=SC2016 # ${prefix} is pkg-config's, written as is
pc_path() {
  case $1 in
    "$prefix") echo '${prefix}' ;;
    "${prefix%/}"/*) echo '${prefix}'/"${1#"${prefix%/}"/}" ;;
    *) echo "$1" ;;
  esac
}
# A replacement text for sed: \, | and & taken literally.
sed_text() { printf '%s' "$1" | sed -e 's/[\\|&]/\\&/g'; }

lib=libredislock.so
install -d "$destdir$libdir/pkgconfig" "$destdir$includedir" "$destdir$datadir"
install -m 0755 "$build/$lib" "$destdir$libdir/$lib.$version"
# A build with debug info keeps it apart, in .debug/ beside the library,
# named by its .gnu_debuglink: gdb and valgrind read it from there (symbols
# in backtraces, valgrind's suppressions by function name). The stage of
# make dist has none, so the packages carry no such file.
debug_file=
if objdump -h "$build/$lib" | grep -q ' \.debug_info '; then
  debug_file=$lib.$version.debug
  install -d "$destdir$libdir/.debug"
  objcopy --only-keep-debug "$build/$lib" "$destdir$libdir/.debug/$debug_file"
  chmod 0644 "$destdir$libdir/.debug/$debug_file"
fi
"$strip" --strip-unneeded --remove-section=.comment --remove-section=.note "$destdir$libdir/$lib.$version"
if [ -n "$debug_file" ]; then
  (cd "$destdir$libdir" && objcopy --add-gnu-debuglink=".debug/$debug_file" "$lib.$version")
fi
ln -sfn "$lib.$version" "$destdir$libdir/$lib.$abi"
ln -sfn "$lib.$abi" "$destdir$libdir/$lib"
install -m 0644 "$build/libredislock.a" "$destdir$libdir/libredislock.a"
"$strip" --strip-debug --remove-section=.comment --remove-section=.note --enable-deterministic-archives \
  "$destdir$libdir/libredislock.a"
install -m 0644 include/redislock.h "$destdir$includedir/redislock.h"
# The PHP FFI declarations for php-fpm's ffi.preload, naming this library.
sed -e "s|^#define FFI_LIB .*|#define FFI_LIB \"$(sed_text "$libdir/$lib.$abi")\"|" \
  bindings/php/redislock_preload.h >"$destdir$datadir/redislock_preload.h"
chmod 0644 "$destdir$datadir/redislock_preload.h"
sed -e "s|@PREFIX@|$(sed_text "$prefix")|" -e "s|@LIBDIR@|$(sed_text "$(pc_path "$libdir")")|" \
  -e "s|@INCLUDEDIR@|$(sed_text "$(pc_path "$includedir")")|" -e "s|@VERSION@|$version|" \
  bindings/c/redislock.pc.in >"$destdir$libdir/pkgconfig/redislock.pc"
chmod 0644 "$destdir$libdir/pkgconfig/redislock.pc"
echo "installed redislock $version into $destdir$prefix (pkg-config: $destdir$libdir/pkgconfig)"
