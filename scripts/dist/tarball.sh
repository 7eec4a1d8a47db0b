#!/usr/bin/env bash
# The C library as a relocatable prefix:
#
#   scripts/dist/tarball.sh STAGE DIST
#     -> DIST/libredislock-<v>-x86_64-linux-gnu.tar.gz
#
#   libredislock-<v>-x86_64-linux-gnu/
#     lib/libredislock.so.<v>, .so.<abi> -> .so.<v>, .so -> .so.<abi>
#     lib/libredislock.a
#     lib/pkgconfig/redislock.pc      prefix=${pcfiledir}/../..: right wherever unpacked
#     include/redislock.h
#     share/redislock/redislock_preload.h   FFI_LIB "libredislock.so.<abi>" (see README)
#     share/doc/redislock/README      (and the repository's LICENSE* files, if any)
#
# Files through scripts/install.sh (stripped, the links made there);
# reproducible: sorted names, owner 0, every mtime that of the last commit
# (or $SOURCE_DATE_EPOCH), gzip without a name or time.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

packaging tarball "$@" lib/libredislock.so lib/libredislock.a
epoch=$SOURCE_DATE_EPOCH

name=libredislock-$version-x86_64-linux-gnu
out=$dist/$name.tar.gz
work=$(scratch tarball)
tree=$work/$name

DESTDIR=$work "$root/scripts/install.sh" "/$name" "$stage/lib" >/dev/null
# The .pc finds the prefix from its own place; libdir and includedir
# follow it (install.sh wrote them relative to ${prefix}).
# shellcheck disable=SC2016 # ${pcfiledir} and ${prefix} are pkg-config's
sed -i -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' "$tree/lib/pkgconfig/redislock.pc"
# shellcheck disable=SC2016
grep -qxF 'libdir=${prefix}/lib' "$tree/lib/pkgconfig/redislock.pc" ||
  die "tarball: redislock.pc's libdir is not relative to its prefix"
# The preload header cannot know where the tree will be: it names the
# soname, which the dynamic loader finds on its path; the README says how
# to name the unpacked library instead.
sed -i -e "s|^#define FFI_LIB .*|#define FFI_LIB \"libredislock.so.$abi\"|" \
  "$tree/share/redislock/redislock_preload.h"

doc=$tree/share/doc/redislock
install -d "$doc"
for f in "$root"/LICENSE* "$root"/COPYING*; do
  if [ -f "$f" ]; then install -m 0644 "$f" "$doc/"; fi
done
license=$(sed -n '0,/^license = "\(.*\)"/s//\1/p' "$root/Cargo.toml")
cat >"$doc/README" <<EOF
redislock $version: the C library, for x86_64 Linux with glibc 2.17 or newer

One Redis distributed lock for Rust, C, Python, PHP, Ruby and Node.js.
License: $license.

This directory is a relocatable prefix: unpack it anywhere.

  lib/libredislock.so.$version   the shared library (soname libredislock.so.$abi)
  lib/libredislock.a            the static library
  lib/pkgconfig/redislock.pc    pkg-config, right wherever the tree lies
  include/redislock.h           the C API, each function's contract in it
  share/redislock/redislock_preload.h
                                PHP's FFI declarations for php-fpm's ffi.preload

Build a program against it (a prefix with a space in its path works in
Makefiles, whose commands a shell reads, and with eval):

  dir=/opt/$name
  export PKG_CONFIG_PATH=\$dir/lib/pkgconfig
  cc app.c \$(pkg-config --cflags --libs redislock) -Wl,-rpath,\$dir/lib -o app

or statically (nothing to find at run time):

  cc app.c \$(pkg-config --cflags redislock) \\
     \$(pkg-config --static --libs redislock | sed 's/-lredislock /-l:libredislock.a /') -o app

Without an rpath, set LD_LIBRARY_PATH=\$dir/lib, or add \$dir/lib to
/etc/ld.so.conf.d/ and run ldconfig.

PHP under php-fpm: redislock_preload.h names "libredislock.so.$abi", which
the dynamic loader finds only on its path. To load this tree's copy, name
it there once unpacked:

  sed -i "s|^#define FFI_LIB .*|#define FFI_LIB \"\$dir/lib/libredislock.so.$abi\"|" \\
      \$dir/share/redislock/redislock_preload.h

(the Composer package carries its own library and prints this header with
its path: see its documentation, docs/php.md in the repository).

redislock_version() returns "$version"; docs/c.md in the repository says
which later libraries a program built against this one accepts.
EOF
chmod 0644 "$doc/README"

tar --sort=name --format=gnu --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$work" -cf - "$name" | gzip "${DIST_GZIP_LEVEL:--9}" -n >"$out.tmp"
mv "$out.tmp" "$out"
echo "dist: $(basename "$out") ($(du -h "$out" | cut -f1))"
