#!/usr/bin/env bash
# make dist-check, C: the Debian packages and the relocatable tarball,
# installed as a user would, each used by a C program that takes a lock on
# a throwaway server.
#
#   scripts/dist/check-c.sh DIST [INSTALL_DIR]
#
# 1. The tarball, unpacked under a path with a space; a C program built
#    through its .pc (pkg-config, with an rpath), then once more linked
#    statically against libredislock.a (pkg-config --static).
# 2. Bad libraries: a copy truncated to 4 KB, one of another architecture
#    (e_machine aarch64) and one of another ELF class, each dlopen()ed.
# 3. The three .debs, with apt-get (root): a C program built with
#    `pkg-config --cflags --libs redislock` only; `redislock --version`,
#    `redislock run` and `redislock doctor` from the package; then purged,
#    and the files and the ldconfig entry checked gone. Stops, before
#    touching anything, when a libredislock is already installed.
# With INSTALL_DIR: the tarball is left unpacked at INSTALL_DIR/prefix and
# the CLI of the .deb extracted at INSTALL_DIR/cli-root/usr/bin/redislock.
#
# Each program reports redislock_version() of the library it loaded; it
# must equal Cargo.toml's version, and the library must be the installed
# one (ldd).
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

usage="usage: scripts/dist/check-c.sh DIST [INSTALL_DIR]"
dist=${1:?$usage}
install_dir=${2:-}
[ -d "$dist" ] || die "check-c: no directory $dist"
dist=$(cd "$dist" && pwd)
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  die "check-c: cargo or rustc is on the PATH: run with PATH=\$(without_cargo) (see scripts/dist/common.sh)"
fi
[ -z "${REDISLOCK_LIB+x}" ] || die "check-c: REDISLOCK_LIB is set: unset it, the check uses only what it installs"
for tool in cc pkg-config ldd ldconfig dpkg-deb apt-get; do
  command -v $tool >/dev/null || die "check-c: no $tool on the PATH"
done
[ "$(id -u)" = 0 ] || die "check-c: installing the .debs needs root (apt-get install)"

debversion=$version-1
runtime=libredislock$abi
dev=libredislock-dev
cli=redislock
runtime_deb=$dist/${runtime}_${debversion}_amd64.deb
dev_deb=$dist/${dev}_${debversion}_amd64.deb
cli_deb=$dist/${cli}_${debversion}_amd64.deb
tarball=$dist/libredislock-$version-x86_64-linux-gnu.tar.gz
for f in "$runtime_deb" "$dev_deb" "$cli_deb" "$tarball"; do
  [ -f "$f" ] || die "check-c: $f is missing (make dist)"
done
size() { du -h "$1" | cut -f1; }

# Never replace or remove a user's own installation.
for pkg in "$runtime" "$dev" "$cli"; do
  if dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null | grep -qv '^not-installed$'; then
    die "check-c: the package $pkg is already on this machine ($(dpkg-query -W -f='${Version} ${db:Status-Status}' "$pkg")): the check installs and purges its own; remove yours first (apt-get purge $pkg) or run the check elsewhere"
  fi
done
if grep -q libredislock <<<"$(ldconfig -p)"; then
  die "check-c: a libredislock is already on the loader's path ($(ldconfig -p | grep libredislock | sed 's/.*=> //' | tr '\n' ' ')): it would shadow the packaged one; remove it (make install puts it in /usr/local/lib) or run the check elsewhere"
fi
# pkg-config and the loader as a fresh shell has them.
unset PKG_CONFIG_PATH PKG_CONFIG_LIBDIR LD_LIBRARY_PATH
if pkg-config --exists redislock 2>/dev/null; then
  die "check-c: pkg-config already finds a redislock.pc ($(pkg-config --variable=pcfiledir redislock)): remove that installation first"
fi
if command -v redislock >/dev/null; then
  die "check-c: a redislock command is already on the PATH ($(command -v redislock)): remove it first"
fi

ensure_redis
work=$(scratch check-c)

# The program every installation is checked with: a lock that is really
# held (a second owner is refused), its fence, a release, the version.
cat >"$work/lock.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <redislock.h>

static int fail(const char *what, redislock_status s) {
  char msg[512];
  redislock_last_error(msg, sizeof msg);
  fprintf(stderr, "lock.c: %s: %s: %s\n", what, redislock_status_str(s), msg);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: lock URL KEY\n");
    return 2;
  }
  const uint8_t *key = (const uint8_t *)argv[2];
  size_t key_len = strlen(argv[2]);
  redislock_client *client = NULL;
  redislock_status s = redislock_client_open(argv[1], &client);
  if (s != REDISLOCK_OK) return fail("redislock_client_open", s);
  redislock_lock *lock = NULL;
  s = redislock_acquire(client, key, key_len, 10000, 5000, NULL, 0, &lock);
  if (s != REDISLOCK_OK) return fail("redislock_acquire", s);
  uint64_t fence = redislock_lock_fence(lock);
  if (fence == 0) return fail("redislock_lock_fence", REDISLOCK_INTERNAL);
  redislock_lock *other = NULL;
  s = redislock_acquire(client, key, key_len, 10000, 0, NULL, 0, &other);
  if (s != REDISLOCK_NOT_ACQUIRED) {
    fprintf(stderr, "lock.c: a second owner got %s, not REDISLOCK_NOT_ACQUIRED\n", redislock_status_str(s));
    return 1;
  }
  s = redislock_release(lock);
  if (s != REDISLOCK_OK) return fail("redislock_release", s);
  printf("version %s fence %llu\n", redislock_version(), (unsigned long long)fence);
  redislock_client_free(client);
  return 0;
}
EOF

# run_lock EXE LIBRARY LABEL: run the program; it must load LIBRARY (ldd)
# and report $version.
run_lock() {
  local exe=$1 lib=$2 label=$3 loaded out seen
  if [ -n "$lib" ]; then
    loaded=$(ldd "$exe" | sed -n 's/^\s*libredislock\.so[^ ]* => \(.*\) (0x.*/\1/p')
    [ -n "$loaded" ] || die "check-c: $label: ldd finds no libredislock for $exe: $(ldd "$exe")"
    [ "$(readlink -f "$loaded")" = "$(readlink -f "$lib")" ] ||
      die "check-c: $label: the program loads $loaded, not $lib"
  elif grep -q libredislock <<<"$(ldd "$exe")"; then
    die "check-c: $label: a static build still needs a shared libredislock: $(ldd "$exe" | grep libredislock)"
  fi
  out=$("$exe" "$REDIS_URL" "check-c:$label" 2>&1) ||
    die "check-c: $label: the C program failed: $out"
  seen=$(echo "$out" | sed -n 's/^version \([^ ]*\) fence [1-9][0-9]*$/\1/p')
  [ "$seen" = "$version" ] ||
    die "check-c: $label: redislock_version() is '$seen', not $version (output: $out)"
}

# cc_pc OUT PKG_CONFIG_ARGS... [-- EXTRA_CC_ARGS...]: compile lock.c with
# what pkg-config prints, read as a shell (and make) reads it, so that an
# escaped space in a path stays one argument.
cc_pc() {
  local out=$1 flags extra=() args
  shift
  local pc=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do pc+=("$1"); shift; done
  [ $# -eq 0 ] || { shift; extra=("$@"); }
  flags=$(pkg-config "${pc[@]}" redislock) || die "check-c: pkg-config ${pc[*]} redislock failed"
  case $flags in *"$root"*) die "check-c: pkg-config names the repository: $flags" ;; esac
  eval "args=($flags)"
  cc -std=c11 -Wall -Werror "$work/lock.c" -o "$out" "${args[@]}" "${extra[@]}" ||
    die "check-c: cc lock.c $flags ${extra[*]} failed"
}

started=$SECONDS

# 1. The tarball, unpacked where nothing expects it.
place="$work/un usual place"
mkdir -p "$place"
tar -xzf "$tarball" -C "$place"
top=libredislock-$version-x86_64-linux-gnu
prefix=$place/$top
[ "$(tar -tzf "$tarball" | cut -d/ -f1 | sort -u)" = "$top" ] ||
  die "check-c: the tarball holds more than $top/"
[ "$(tar -tvzf "$tarball" | awk '{print $2}' | sort -u)" = "0/0" ] ||
  die "check-c: the tarball's files are not owned by 0/0"
for f in lib/libredislock.so.$version lib/libredislock.so.$abi lib/libredislock.so lib/libredislock.a \
  lib/pkgconfig/redislock.pc include/redislock.h share/redislock/redislock_preload.h share/doc/redislock/README; do
  [ -e "$prefix/$f" ] || die "check-c: the tarball has no $top/$f"
done
if [ "$(readlink "$prefix/lib/libredislock.so.$abi")" != "libredislock.so.$version" ] ||
  [ "$(readlink "$prefix/lib/libredislock.so")" != "libredislock.so.$abi" ]; then
  die "check-c: the tarball's links are not .so -> .so.$abi -> .so.$version"
fi
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
modversion=$(pkg-config --modversion redislock)
[ "$modversion" = "$version" ] || die "check-c: the tarball's redislock.pc says $modversion, not $version"
cc_pc "$work/lock-tarball" --cflags --libs -- "-Wl,-rpath,$prefix/lib"
run_lock "$work/lock-tarball" "$prefix/lib/libredislock.so.$abi" tarball
# Static: the archive in place of -lredislock, what Libs.private lists after it.
static_flags=$(pkg-config --static --libs redislock)
static_args=() cflags_args=()
eval "static_args=(${static_flags/-lredislock /-l:libredislock.a })"
eval "cflags_args=($(pkg-config --cflags redislock))"
cc -std=c11 -Wall -Werror "${cflags_args[@]}" "$work/lock.c" -o "$work/lock-static" "${static_args[@]}" ||
  die "check-c: the static build failed: cc lock.c \$(pkg-config --cflags redislock) ${static_flags/-lredislock /-l:libredislock.a }"
run_lock "$work/lock-static" "" "tarball, static"
unset PKG_CONFIG_PATH
echo "check-c: tarball $(basename "$tarball") ($(size "$tarball")): unpacked under '$place', pkg-config and rpath: redislock_version() $version; static ($(size "$work/lock-static") program): $version"

# 2. Bad libraries: glibc's dlopen must fail with the file's name.
cat >"$work/dl.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "%s\n", dlerror());
    return 3;
  }
  puts("loaded");
  return 0;
}
EOF
cc -Wall -Werror "$work/dl.c" -o "$work/dl" -ldl || die "check-c: cc dl.c failed"
bad=$work/bad
mkdir -p "$bad"
good=$bad/libredislock.so.$version
cp "$prefix/lib/libredislock.so.$version" "$good"
"$work/dl" "$good" >/dev/null || die "check-c: dlopen of the unspoilt copy failed"
cp "$good" "$bad/wrong-machine.so" # e_machine (offset 18) = 183, aarch64
printf '\267\000' | dd of="$bad/wrong-machine.so" bs=1 seek=18 conv=notrunc status=none
cp "$good" "$bad/wrong-class.so" # EI_CLASS (offset 4) = 1, 32-bit
printf '\001' | dd of="$bad/wrong-class.so" bs=1 seek=4 conv=notrunc status=none
head -c 40 "$good" >"$bad/short.so"
for f in wrong-machine wrong-class short; do
  rc=0
  msg=$("$work/dl" "$bad/$f.so" 2>&1) || rc=$?
  [ "$rc" = 3 ] || die "check-c: dlopen of a $f library: exit $rc, not an error ($msg)"
  case $msg in *"$bad/$f.so"*) ;; *) die "check-c: dlopen of a $f library: the error does not name the file: $msg" ;; esac
done
# Truncated to 4 KB (headers whole, segments past the end): glibc maps the
# segments and dies of SIGBUS reading them. Not an error a C program can
# catch; the language loaders check the size before dlopen(). Recorded here
# so that a change in glibc's behaviour shows.
head -c 4096 "$good" >"$bad/truncated.so"
rc=0
msg=$("$work/dl" "$bad/truncated.so" 2>&1) || rc=$?
case $rc in
  0) die "check-c: dlopen of a library truncated to 4 KB succeeded" ;;
  3) case $msg in *"$bad/truncated.so"*) truncated="an error naming the file" ;;
       *) die "check-c: dlopen of a truncated library: the error does not name the file: $msg" ;; esac ;;
  *) truncated="glibc dies of signal $((rc - 128)) (dlopen cannot report it)" ;;
esac
echo "check-c: bad libraries: wrong machine, wrong class, 40 bytes: dlopen errors naming the file; truncated to 4 KB: $truncated"

# 3. The Debian packages.
installed=0
purge() {
  [ "$installed" = 1 ] || return 0
  installed=0
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "$runtime" "$dev" "$cli" >"$work/apt-purge.log" 2>&1 ||
    { cat "$work/apt-purge.log" >&2; return 1; }
}
on_exit purge
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "$runtime_deb" "$dev_deb" "$cli_deb" >"$work/apt-install.log" 2>&1 ||
  die "check-c: apt-get install of the .debs failed:
$(tail -20 "$work/apt-install.log")"
for pkg in "$runtime" "$dev" "$cli"; do
  [ "$(dpkg-query -W -f='${Version} ${db:Status-Status}' "$pkg")" = "$debversion installed" ] ||
    die "check-c: $pkg is not installed at $debversion: $(dpkg-query -W -f='${Version} ${db:Status-Status}' "$pkg")"
done
dpkg --verify "$runtime" "$dev" "$cli" || die "check-c: dpkg --verify finds the installed files changed"
files=$(dpkg -L "$runtime" "$dev" "$cli" | while read -r f; do if [ ! -d "$f" ]; then echo "$f"; fi; done)
multiarch=x86_64-linux-gnu
syslib=/usr/lib/$multiarch/libredislock.so.$abi
grep -q "libredislock.so.$abi .*=> .*/libredislock.so.$abi$" <<<"$(ldconfig -p)" ||
  die "check-c: after the install ldconfig does not list libredislock.so.$abi (the trigger): $(ldconfig -p | grep redislock)"
grep -qx "#define FFI_LIB \"$syslib\"" /usr/share/redislock/redislock_preload.h ||
  die "check-c: /usr/share/redislock/redislock_preload.h does not name $syslib"
modversion=$(pkg-config --modversion redislock)
[ "$modversion" = "$version" ] || die "check-c: the installed redislock.pc says $modversion, not $version"
[ "$(pkg-config --variable=libdir redislock)" = "/usr/lib/$multiarch" ] ||
  die "check-c: the installed redislock.pc's libdir is not /usr/lib/$multiarch"
cc_pc "$work/lock-deb" --cflags --libs
run_lock "$work/lock-deb" "$syslib" ".deb"

# The command line from the package.
[ "$(command -v redislock)" = /usr/bin/redislock ] ||
  die "check-c: the redislock on the PATH is $(command -v redislock), not the package's /usr/bin/redislock"
cli_version=$(redislock --version) || die "check-c: redislock --version failed"
[ "$cli_version" = "redislock $version" ] || die "check-c: redislock --version says '$cli_version', not 'redislock $version'"
key=check-c:cli:$$
# The command runs while the lock is held: `redislock status` (exit 1: held)
# sees this run's token, and the C program cannot take the lock.
# shellcheck disable=SC2016 # expanded by the command's shell
run_out=$(redislock run --url "$REDIS_URL" --ttl 10s "$key" -- \
  sh -c 'echo "child fence=$REDISLOCK_FENCE token=$REDISLOCK_TOKEN"; redislock status --url "$1" "$2"; echo "status exit=$?"' \
  sh "$REDIS_URL" "$key" 2>&1) || die "check-c: redislock run failed: $run_out"
echo "$run_out" | grep -q '^child fence=[1-9][0-9]* token=run:' ||
  die "check-c: redislock run's command did not get the lock's fence and token: $run_out"
echo "$run_out" | grep -q '^status exit=1$' ||
  die "check-c: redislock status did not see the lock held during redislock run: $run_out"
rc=0
redislock status --url "$REDIS_URL" "$key" >/dev/null || rc=$?
[ "$rc" = 0 ] || die "check-c: the lock is still held after redislock run ended (status exit $rc)"
rc=0
redislock run --url "$REDIS_URL" --ttl 10s "$key" -- sh -c 'exit 7' || rc=$?
[ "$rc" = 7 ] || die "check-c: redislock run exited $rc, not its command's 7"
rc=0
doctor_out=$(redislock doctor --url "$REDIS_URL" 2>&1) || rc=$?
# docs/doctor.md: 0 nothing unsafe, 1 something unsafe (a throwaway server
# may be judged so); 64 and 69 mean it could not check at all.
case $rc in
  0 | 1) ;;
  *) die "check-c: redislock doctor could not check the server (exit $rc): $doctor_out" ;;
esac
echo "$doctor_out" | grep -q '^verdict: ' || die "check-c: redislock doctor printed no verdict: $doctor_out"
echo "$doctor_out" | grep -q '^ok *lock-cycle ' ||
  die "check-c: redislock doctor's lock cycle did not pass: $doctor_out"
doctor_verdict=$(echo "$doctor_out" | sed -n 's/^verdict: //p')

if [ -n "$install_dir" ]; then
  mkdir -p "$install_dir"
  install_dir=$(cd "$install_dir" && pwd)
  rm -rf "$install_dir/prefix" "$install_dir/cli-root"
  mkdir -p "$install_dir/prefix" "$install_dir/cli-root"
  tar -xzf "$tarball" -C "$install_dir/prefix" --strip-components=1
  dpkg-deb -x "$cli_deb" "$install_dir/cli-root"
fi

purge || die "check-c: apt-get purge of the packages failed"
for pkg in "$runtime" "$dev" "$cli"; do
  if dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null | grep -qv '^not-installed$'; then
    die "check-c: $pkg is still known to dpkg after the purge"
  fi
done
left=$(echo "$files" | while read -r f; do if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done)
[ -z "$left" ] || die "check-c: left behind after the purge: $left"
! grep -q libredislock <<<"$(ldconfig -p)" || die "check-c: ldconfig still lists libredislock after the purge"
echo "check-c: .debs $runtime ($(size "$runtime_deb")), $dev ($(size "$dev_deb")), $cli ($(size "$cli_deb")): installed with apt-get, C program via pkg-config: redislock_version() $version; redislock --version, run, doctor ($doctor_verdict); purged, nothing left"

# The installation the cross-language demo uses, checked in place: a
# second location for the relocatable tree.
if [ -n "$install_dir" ]; then
  export PKG_CONFIG_PATH=$install_dir/prefix/lib/pkgconfig
  cc_pc "$work/lock-prefix" --cflags --libs -- "-Wl,-rpath,$install_dir/prefix/lib"
  run_lock "$work/lock-prefix" "$install_dir/prefix/lib/libredislock.so.$abi" "INSTALL_DIR/prefix"
  unset PKG_CONFIG_PATH
  cli_version=$("$install_dir/cli-root/usr/bin/redislock" --version)
  [ "$cli_version" = "redislock $version" ] || die "check-c: the extracted CLI says '$cli_version'"
  echo "check-c: left in $install_dir: prefix/ (the tarball, redislock_version() $version) and cli-root/usr/bin/redislock ($cli_version)"
fi
echo "check-c: passed in $((SECONDS - started)) s"
