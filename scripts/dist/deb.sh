#!/usr/bin/env bash
# The Debian/Ubuntu packages (amd64), built with dpkg-deb from the stage:
#
#   scripts/dist/deb.sh STAGE DIST
#     -> DIST/libredislock<abi>_<v>-1_amd64.deb   the shared library (Multi-Arch: same):
#          usr/lib/x86_64-linux-gnu/libredislock.so.<v> and the soname link .so.<abi>,
#          DEBIAN/shlibs, DEBIAN/triggers (ldconfig)
#        DIST/libredislock-dev_<v>-1_amd64.deb    the .so link, the header, the static
#          library, redislock.pc, the PHP preload header (usr/share/redislock)
#        DIST/redislock_<v>-1_amd64.deb           the command line, usr/bin/redislock
#
# The files come through scripts/install.sh (DESTDIR, stripped). Runtime
# Depends come from dpkg-shlibdeps; the shlibs line from
# packaging/debian/shlibs, the copyright from packaging/debian/copyright.
# Reproducible: every mtime is the last commit's (or $SOURCE_DATE_EPOCH),
# owner root, names sorted by dpkg-deb.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

packaging deb "$@" lib/libredislock.so lib/libredislock.a bin/redislock
for tool in dpkg-deb dpkg-shlibdeps; do
  command -v $tool >/dev/null || die "deb: no $tool (apt-get install dpkg-dev)"
done
epoch=$SOURCE_DATE_EPOCH

debversion=$version-1
arch=amd64
multiarch=x86_64-linux-gnu
libdir=usr/lib/$multiarch
runtime=libredislock$abi
dev=libredislock-dev
cli=redislock
maintainer=$(sed -n 's/^Upstream-Contact: //p' "$root/packaging/debian/copyright")
[ -n "$maintainer" ] || die "deb: no Upstream-Contact in packaging/debian/copyright"

# dpkg-shlibdeps wants a debian/control and the packages' trees under
# debian/<package>/, as in a source package.
work=$(scratch deb)
mkdir -p "$work/debian"
printf 'Source: redislock\n\nPackage: %s\nArchitecture: any\n\nPackage: %s\nArchitecture: any\n\nPackage: %s\nArchitecture: any\n' \
  "$runtime" "$dev" "$cli" >"$work/debian/control"

# Everything installed once, then divided.
all=$work/all
DESTDIR=$all LIBDIR=/$libdir "$root/scripts/install.sh" /usr "$stage/lib" >/dev/null
for f in "$all/$libdir/libredislock.so.$version" "$all/$libdir/libredislock.so.$abi" \
  "$all/$libdir/libredislock.so" "$all/$libdir/libredislock.a" "$all/$libdir/pkgconfig/redislock.pc" \
  "$all/usr/include/redislock.h" "$all/usr/share/redislock/redislock_preload.h"; do
  [ -e "$f" ] || [ -L "$f" ] || die "deb: scripts/install.sh left no ${f#"$all"/}"
done
grep -qx "#define FFI_LIB \"/$libdir/libredislock.so.$abi\"" "$all/usr/share/redislock/redislock_preload.h" ||
  die "deb: the preload header does not name /$libdir/libredislock.so.$abi"
soname=$(objdump -p "$all/$libdir/libredislock.so.$version" | sed -n 's/^ *SONAME *//p')
[ "$soname" = "libredislock.so.$abi" ] ||
  die "deb: the library's soname is '$soname', not libredislock.so.$abi (Cargo.toml's abi): rebuild the stage"

tree() { echo "$work/debian/$1"; }
move() { # package path...: move the paths from the full install into the package's tree
  local pkg=$1 p
  shift
  for p in "$@"; do
    mkdir -p "$(tree "$pkg")/$(dirname "$p")"
    mv "$all/$p" "$(tree "$pkg")/$p"
  done
}
move "$runtime" "$libdir/libredislock.so.$version" "$libdir/libredislock.so.$abi"
move "$dev" "$libdir/libredislock.so" "$libdir/libredislock.a" "$libdir/pkgconfig/redislock.pc" \
  usr/include/redislock.h usr/share/redislock/redislock_preload.h
leftover=$(cd "$all" && find . ! -type d)
[ -z "$leftover" ] || die "deb: installed but in no package: $leftover"
mkdir -p "$(tree "$cli")/usr/bin"
install -m 0755 "$stage/bin/redislock" "$(tree "$cli")/usr/bin/redislock"
strip --remove-section=.comment --remove-section=.note "$(tree "$cli")/usr/bin/redislock"
# Its manual page, checked against the command's own help so that it
# cannot miss a subcommand or an option of `run`.
man=$root/packaging/debian/redislock.1
for word in $("$stage/bin/redislock" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' | grep -vx help) \
  $("$stage/bin/redislock" run --help | grep -o -- '--[a-z][a-z-]*' | grep -vx -- --help | sort -u); do
  roff=${word//-/'\-'}
  grep -qF -- "$roff" "$man" || die "deb: packaging/debian/redislock.1 does not mention $word (redislock --help does)"
done
mkdir -p "$(tree "$cli")/usr/share/man/man1"
sed -e "s/@VERSION@/$version/g" "$man" | gzip -9n >"$(tree "$cli")/usr/share/man/man1/redislock.1.gz"
chmod 0644 "$(tree "$cli")/usr/share/man/man1/redislock.1.gz"
# Debian's shape: shared libraries are not executable.
chmod 0644 "$(tree "$runtime")/$libdir/libredislock.so.$version"

# Each package's documentation: the copyright and a Debian changelog.
changes=$work/changelog.Debian
cat >"$changes" <<EOF
redislock ($debversion) unstable; urgency=medium

  * redislock $version, built by make dist (the project's CHANGELOG.md says
    what changed).

 -- $maintainer  $(LC_ALL=C date -u -R -d "@$epoch")
EOF
for pkg in "$runtime" "$dev" "$cli"; do
  doc=$(tree "$pkg")/usr/share/doc/$pkg
  install -d "$doc"
  install -m 0644 "$root/packaging/debian/copyright" "$doc/copyright"
  gzip -9n <"$changes" >"$doc/changelog.Debian.gz"
  chmod 0644 "$doc/changelog.Debian.gz"
done

# Runtime dependencies, as dpkg-shlibdeps finds them for the ELF files,
# with one correction: the libc6 minimum is the newest glibc symbol version
# the files use (objdump -T; scripts/dist.sh checked it is at most 2.17).
# Debian's libc6 symbols file raises some symbols above the version that
# introduced them for programs compiled against Debian's own headers (it
# says sysconf needs 2.34: since 2.34 the headers turn SIGSTKSZ into
# sysconf(_SC_SIGSTKSZ), a value older glibc rejects). Ours were compiled
# against glibc 2.17's (zig), and Rust does not use the C headers, so the
# symbol versions are the whole requirement.
shlibdeps() { # package file...
  local pkg=$1 line files=() f floor minver
  shift
  files=("${@/#/debian/$pkg/}")
  # (-O prints the debug lines of -v -v and the result to stdout, together)
  (cd "$work" && dpkg-shlibdeps -v -v -O "${files[@]}") >"$work/shlibdeps.log" 2>&1 ||
    die "deb: dpkg-shlibdeps failed for $pkg: $(grep -v 'debug:' "$work/shlibdeps.log")"
  line=$(grep '^shlibs:Depends=' "$work/shlibdeps.log") ||
    die "deb: dpkg-shlibdeps printed no shlibs:Depends for $pkg"
  line=${line#shlibs:Depends=}
  [ -n "$line" ] || die "deb: dpkg-shlibdeps found no dependency for $pkg"
  minver=$(echo "$line" | sed -n 's/.*libc6 (>= \([0-9.]*\)).*/\1/p')
  if [ -n "$minver" ]; then
    floor=$(highest_glibc "${files[@]/#/$work/}")
    [ -n "$floor" ] || die "deb: no glibc symbol versions in $pkg's files"
    if [ "$minver" != "$floor" ] && version_le "$floor" "$minver"; then
      line=${line/libc6 (>= $minver)/libc6 (>= $floor)}
    fi
  fi
  echo "$line"
}
runtime_depends=$(shlibdeps "$runtime" "$libdir/libredislock.so.$version")
cli_depends=$(shlibdeps "$cli" usr/bin/redislock)

long_description=" redislock is one Redis lock for C, Python, PHP, Ruby, Node.js and Rust
 programs, and for shell scripts: fenced (every holder gets an increasing
 fencing number), fair (waiters are served in order, woken by pub/sub),
 renewed in the background, and safe across fork(). It works with a single
 server, Sentinel, Cluster and Redlock over independent servers."

control() { # package section depends extra-fields synopsis text
  local pkg=$1 section=$2 depends=$3 extra=$4 synopsis=$5 text=$6 size
  # Installed-Size as dpkg-gencontrol counts it: KiB per file, rounded up; 1 per other entry.
  size=$(cd "$(tree "$pkg")" && find . -mindepth 1 ! -path './DEBIAN*' -printf '%y %s\n' |
    awk '$1 == "f" { s += int(($2 + 1023) / 1024); next } { s += 1 } END { print s }')
  mkdir -p "$(tree "$pkg")/DEBIAN"
  {
    echo "Package: $pkg"
    echo "Source: redislock"
    echo "Version: $debversion"
    echo "Architecture: $arch"
    [ -z "$extra" ] || echo "$extra"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $size"
    echo "Depends: $depends"
    echo "Section: $section"
    echo "Priority: optional"
    echo "Description: $synopsis"
    echo "$long_description"
    echo " ."
    echo " $text"
  } >"$(tree "$pkg")/DEBIAN/control"
}
control "$runtime" libs "$runtime_depends" "Multi-Arch: same" \
  "distributed lock on Redis - shared library" \
  "This package contains the shared library, libredislock.so.$abi."
control "$dev" libdevel "$runtime (= $debversion)" "" \
  "distributed lock on Redis - development files" \
  "This package contains the header, the static library, the pkg-config file
 and the declarations for PHP's FFI preloading (/usr/share/redislock)."
control "$cli" utils "$cli_depends" "" \
  "distributed lock on Redis - command line" \
  "This package contains the redislock command: flock(1) across machines
 (redislock run), who holds a lock (redislock status), and what in a
 server's setup makes locks unsafe (redislock doctor)."

sed -e '/^#/d' -e "s/@ABI@/$abi/g" "$root/packaging/debian/shlibs" >"$(tree "$runtime")/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$(tree "$runtime")/DEBIAN/triggers"

for pkg in "$runtime" "$dev" "$cli"; do
  t=$(tree "$pkg")
  (cd "$t" && find . -type f ! -path './DEBIAN/*' -printf '%P\n' | LC_ALL=C sort | xargs -r -d '\n' md5sum) \
    >"$t/DEBIAN/md5sums"
  find "$t" -type d -exec chmod 0755 {} +
  find "$t/DEBIAN" -type f -exec chmod 0644 {} +
  find "$t" -exec touch -h -d "@$epoch" {} +
  out=$dist/${pkg}_${debversion}_$arch.deb
  # shellcheck disable=SC2086 # DIST_DEB_COMPRESSION is several options
  dpkg-deb --root-owner-group ${DIST_DEB_COMPRESSION:--Zxz} --build "$t" "$out.tmp" >/dev/null
  mv "$out.tmp" "$out"
  echo "dist: $(basename "$out") ($(du -h "$out" | cut -f1))"
done
