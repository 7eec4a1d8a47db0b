#!/usr/bin/env bash
# Install what `make test` / `make demo` need and is missing, or say clearly
# what to install. Debian/Ubuntu as root: apt-get; elsewhere: a message.
set -euo pipefail

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }

have redis-server    || need_apt+=(redis-server)
have redis-cli       || need_apt+=(redis-tools)
have redis-benchmark || need_apt+=(redis-tools)
have openssl         || need_apt+=(openssl)
have cc              || need_apt+=(gcc)
have valgrind        || need_apt+=(valgrind)
have pkg-config      || need_apt+=(pkg-config)
have git             || need_apt+=(git)
have python3         || need_apt+=(python3)
if have python3; then
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
else
  need_apt+=(python3-venv)
fi

have php             || need_apt+=(php-cli)
have phpunit         || need_apt+=(phpunit)
[ -f /usr/share/php/Predis/Autoloader.php ] || need_apt+=(php-nrk-predis)
# Debian names PHP's own extensions by version (php8.2-opcache, -common: FFI).
php_ver=$( (have php && php -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;') || echo 8.2)
if have php; then
  php -m | grep -qx redis          || need_apt+=(php-redis)
  php -m | grep -qx 'Zend OPcache' || need_apt+=("php$php_ver-opcache")
  php -m | grep -qx FFI            || need_apt+=("php$php_ver-common")
else
  need_apt+=(php-redis "php$php_ver-opcache")
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  # shellcheck disable=SC2207
  pkgs=($(printf '%s\n' "${need_apt[@]}" | sort -u))
  if have apt-get && [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${pkgs[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
    # The package may start a system redis on 6379; the tests never use it.
  else
    echo "deps: missing ${pkgs[*]}." >&2
    echo "      Install them (Debian/Ubuntu: sudo apt-get install ${pkgs[*]}), or run this as root." >&2
    exit 1
  fi
fi

if ! have cargo; then
  echo "deps: cargo is missing: install a Rust toolchain (https://rustup.rs), version 1.88 or newer." >&2
  exit 1
fi
for comp in rustfmt clippy; do
  if ! cargo "${comp/rustfmt/fmt}" --version >/dev/null 2>&1; then
    if have rustup; then
      echo "deps: adding the $comp component with rustup"
      rustup component add "$comp"
    else
      echo "deps: cargo $comp is missing (rustup component add $comp)." >&2
      exit 1
    fi
  fi
done
