#!/usr/bin/env bash
# make lint: one version. Cargo.toml's version is the source; every binding's
# own literal, the PHP loader's soname, and every artifact name written in
# README.md and docs/ must follow it (and the soname its [package.metadata.
# redislock] abi). The Python package, the .pc file and the Debian control
# files are generated from Cargo.toml and need no check here.
source "$(dirname "$0")/dist/common.sh"
cd "$root"
bad=0
expect() { # file what found
  if [ "$3" != "$4" ]; then
    echo "check-versions: $1: $2 is '${3}', Cargo.toml says '$4'" >&2
    bad=1
  fi
}
expect bindings/node/package.json version \
  "$(node -p 'require("./bindings/node/package.json").version')" "$version"
expect bindings/ruby/lib/redislock/version.rb VERSION \
  "$(sed -n 's/^ *VERSION = "\(.*\)"/\1/p' bindings/ruby/lib/redislock/version.rb)" "$version"
expect bindings/php/src/FFI.php VERSION \
  "$(sed -n "s/^ *public const VERSION = '\(.*\)';/\1/p" bindings/php/src/FFI.php)" "$version"
expect bindings/php/src/FFI.php SONAME \
  "$(sed -n "s/^ *public const SONAME = '\(.*\)';/\1/p" bindings/php/src/FFI.php)" "libredislock.so.$abi"
expect bindings/java/src/main/java/io/redislock/NativeLib.java VERSION \
  "$(sed -n 's/^ *static final String VERSION = "\(.*\)";/\1/p' bindings/java/src/main/java/io/redislock/NativeLib.java)" "$version"
expect bindings/java/pom.xml version \
  "$(sed -n '0,/<artifactId>redislock<\/artifactId>/d; s/^ *<version>\(.*\)<\/version>.*/\1/p' bindings/java/pom.xml | head -1)" "$version"
expect bindings/go/version.go Version \
  "$(sed -n 's/^const Version = "\(.*\)"$/\1/p' bindings/go/version.go)" "$version"
composer_version=$(php -r 'echo json_decode(file_get_contents("bindings/php/composer.json"), true)["version"] ?? "";')
[ -z "$composer_version" ] || expect bindings/php/composer.json version "$composer_version" "$version"
# The Debian shlibs (a template: @ABI@ is filled in): a minimum no newer
# than this version.
shlib_min=$(grep -v '^#' packaging/debian/shlibs | sed -n 's/.*(>= *\([^)]*\)).*/\1/p' | head -1)
[ -n "$shlib_min" ] && version_le "$shlib_min" "$version" ||
  expect packaging/debian/shlibs "the minimum version (at most Cargo.toml's)" "$shlib_min" "$version"
# Artifact names in the documentation: redislock-1.2.3…, libredislock0_1.2.3…, redislock_1.2.3…
while IFS=: read -r file line name; do
  found=$(grep -oE '[0-9]+\.[0-9]+\.[0-9]+' <<<"$name" | head -1)
  expect "$file:$line" "the artifact name $name" "$found" "$version"
done < <(git ls-files README.md 'docs/*.md' |
  xargs grep -noE '\b(lib)?redislock[a-z0-9-]*[-_:][0-9]+\.[0-9]+\.[0-9]+' || true)
while IFS=: read -r file line name; do
  expect "$file:$line" "the Debian runtime package's file $name" "${name%_}" "libredislock$abi"
done < <(git ls-files README.md 'docs/*.md' | xargs grep -noE '\blibredislock[0-9]+_' || true)
[ $bad = 0 ] || die "versions differ from Cargo.toml's $version (abi $abi): see above"
echo "check-versions: every version is $version (abi $abi)"
