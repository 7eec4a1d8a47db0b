#!/usr/bin/env bash
# make dist: the Ruby platform gem, redislock-<v>-x86_64-linux.gem: the Ruby
# files of bindings/ruby/lib and the stage's stripped libredislock.so at
# lib/redislock/libredislock.so, where RedisLock::Native looks first (after
# $REDISLOCK_LIB), by a path computed from its own file.
#
#   scripts/dist/gem.sh STAGE DIST
#
# Built by `gem build` from a copy of bindings/ruby (the gemspec picks the
# platform from the library's ELF machine), never in the repository. The
# same inputs give the same bytes: file modes are normalised and the time
# in the gem is SOURCE_DATE_EPOCH (default: the last commit's).
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

[ $# -eq 2 ] || die "usage: scripts/dist/gem.sh STAGE DIST"
stage=$1
dist=$2
so=$stage/lib/libredislock.so
name=redislock-$version-x86_64-linux.gem

[ -f "$so" ] || die "gem: no $so (scripts/dist.sh makes the stage)"
command -v gem >/dev/null || die "gem: no gem command (apt-get install ruby)"

# What goes in must be what the name says: x86_64, the ABI's soname, stripped.
shipped_elf gem "$so"
sonames=$(readelf -d "$so")
grep -q "(SONAME).*\[libredislock\.so\.$abi\]" <<<"$sonames" || die "gem: $so has no soname libredislock.so.$abi"
source_date_epoch

work=$(scratch gem)
mkdir -p "$work/src/lib"
cp "$root/bindings/ruby/redislock.gemspec" "$work/src/"
(cd "$root/bindings/ruby/lib" && find . -name '*.rb' -exec cp --parents -t "$work/src/lib/" {} +) ||
  die "gem: could not copy bindings/ruby/lib"
install -m 0755 "$so" "$work/src/lib/redislock/libredislock.so"
install -m 0644 "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$work/src/"
find "$work/src" -type d -exec chmod 0755 {} + && find "$work/src" -type f -name '*.rb' -exec chmod 0644 {} +
chmod 0644 "$work/src/redislock.gemspec"

if ! out=$(cd "$work/src" && gem build redislock.gemspec --output "$work/$name" 2>&1); then
  echo "$out" >&2
  die "gem: gem build failed"
fi
# The platform and the files, read back from the gem itself.
ruby -rrubygems/package -e '
  spec = Gem::Package.new(ARGV[0]).spec
  abort "gem: platform #{spec.platform}, expected x86_64-linux" unless spec.platform.to_s == "x86_64-linux"
  abort "gem: version #{spec.version}, expected #{ARGV[1]}" unless spec.version.to_s == ARGV[1]
  missing = %w[lib/redislock.rb lib/redislock/native.rb lib/redislock/libredislock.so] - spec.files
  abort "gem: missing from the gem: #{missing.join(", ")}" unless missing.empty?
' "$work/$name" "$version" || die "gem: $work/$name is not the gem expected"

mkdir -p "$dist"
mv "$work/$name" "$dist/$name"
echo "dist: $dist/$name ($(($(stat -c %s "$dist/$name") / 1024)) KiB)"
