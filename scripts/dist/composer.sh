#!/usr/bin/env bash
# The Composer package: scripts/dist/composer.sh STAGE DIST
#   -> DIST/redislock-php-<v>.tar.gz
#
# One top-level directory, redislock-php-<v>/, holding the package as
# Composer installs it:
#   composer.json          bindings/php/composer.json with "version": "<v>"
#                          (written here from Cargo.toml: the committed file
#                          has none, as Composer advises for a package in VCS)
#   src/, autoload.php, preload.php, redislock.h, redislock_preload.h
#   bin/redislock-preload-header   the ffi.preload header for php-fpm
#   lib/libredislock.so    the stage's stripped library (RedisLock\FFI loads
#                          it first, by its absolute path)
# Users unpack it and point a path repository at the directory
# ({"type": "path", "url": ".../redislock-php-<v>", "options": {"symlink":
# false}}), or drop the tarball into an artifact repository (which needs
# ext-zip, even for .tar.gz; Composer finds composer.json in the one
# top-level directory). Deterministic: names sorted, owners 0, times from
# SOURCE_DATE_EPOCH or the last commit, gzip without a name or time.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

stage=${1:?usage: scripts/dist/composer.sh STAGE DIST}
dist=${2:?usage: scripts/dist/composer.sh STAGE DIST}
php=$root/bindings/php
lib=$stage/lib/libredislock.so
name=redislock-php-$version
out=$dist/$name.tar.gz

shipped_elf composer "$lib"
sonames=$(readelf -d "$lib")
grep -q "Library soname: \[libredislock.so.$abi\]" <<<"$sonames" || die "composer: $lib has no SONAME libredislock.so.$abi"
for f in composer.json autoload.php preload.php redislock.h redislock_preload.h bin/redislock-preload-header src/FFI.php; do
  [ -f "$php/$f" ] || die "composer: bindings/php/$f is missing"
done
const=$(sed -n "s/^ *public const VERSION = '\(.*\)';/\1/p" "$php/src/FFI.php")
[ "$const" = "$version" ] || die "composer: RedisLock\\FFI::VERSION is '$const', Cargo.toml says $version"
mkdir -p "$dist"

tmp=$(scratch composer)
pkg=$tmp/$name
mkdir -p "$pkg/lib" "$pkg/bin"
cp -R "$php/src" "$pkg/src"
install -m 0644 "$php/autoload.php" "$php/preload.php" "$php/redislock.h" "$php/redislock_preload.h" "$pkg/"
install -m 0755 "$php/bin/redislock-preload-header" "$pkg/bin/"
install -m 0644 "$lib" "$pkg/lib/libredislock.so"
for f in LICENSE LICENSE-MIT LICENSE-APACHE COPYING; do
  if [ -f "$root/$f" ]; then install -m 0644 "$root/$f" "$pkg/"; fi
done
if [ -f "$php/README.md" ]; then install -m 0644 "$php/README.md" "$pkg/"; fi

# composer.json with "version" right after "name" (Composer's artifact
# repository and Packagist-less installs need it; the lint compares it).
python3 - "$php/composer.json" "$version" >"$pkg/composer.json" <<'EOF'
import json, sys
with open(sys.argv[1]) as f:
    spec = json.load(f)
spec.pop("version", None)
out = {}
for key, value in spec.items():
    out[key] = value
    if key == "name":
        out["version"] = sys.argv[2]
if "version" not in out:
    sys.exit("bindings/php/composer.json has no name")
print(json.dumps(out, indent=4, ensure_ascii=False))
EOF
grep -q "\"version\": \"$version\"" "$pkg/composer.json" || die "composer: no version written into composer.json"

find "$pkg" -type d -exec chmod 0755 {} +
find "$pkg" -type f ! -path "$pkg/bin/*" -exec chmod 0644 {} +
source_date_epoch
epoch=$SOURCE_DATE_EPOCH
tar --format=ustar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  -C "$tmp" -cf - "$name" | gzip -9n >"$out.tmp"
mv "$out.tmp" "$out"
echo "dist: $out ($(stat -c %s "$out") bytes; $(tar -tzf "$out" | grep -vc '/$') files)"
