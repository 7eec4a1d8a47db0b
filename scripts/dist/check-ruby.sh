#!/usr/bin/env bash
# make dist-check: the Ruby platform gem, installed as a user would.
#
#   scripts/dist/check-ruby.sh DIST [INSTALL_DIR]
#
# `gem install --local dist/redislock-<v>-x86_64-linux.gem` into a fresh
# GEM_HOME (INSTALL_DIR/gems when given, left there for the demo; else a
# scratch directory), its ffi dependency satisfied by Debian's ruby-ffi
# (installed with apt-get when missing) through rubygems-integration; then
# a program written into a scratch directory does `require "redislock"`
# (GEM_HOME and GEM_PATH, no -I, no RUBYLIB), takes a lock on a throwaway
# redis-server, and checks that RedisLock::VERSION and the loaded library's
# redislock_version() are both $version, and that the library mapped into
# the process is the one inside GEM_HOME.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: scripts/dist/check-ruby.sh DIST [INSTALL_DIR]"; fi
if command -v cargo >/dev/null; then die "ruby: cargo is on the PATH; run with PATH=\$(without_cargo)"; fi
[ -z "${REDISLOCK_LIB:-}" ] || die "ruby: REDISLOCK_LIB is set ($REDISLOCK_LIB); the check must find the gem's own library"
for tool in ruby gem; do command -v $tool >/dev/null || die "ruby: no $tool command (apt-get install ruby)"; done

gemfile=$(cd "$1" && pwd)/redislock-$version-x86_64-linux.gem
[ -f "$gemfile" ] || die "ruby: no $gemfile (make dist)"

tmp=$(scratch ruby)
home=$(kept gems "$@")

# Nothing of the caller's Ruby setup leaks in.
unset RUBYLIB RUBYOPT GEM_HOME GEM_PATH BUNDLE_GEMFILE
# The distribution's gem directories (Debian: rubygems-integration, where
# ruby-ffi's gemspec is), without the user's and the site's `gem install`
# directories, where another redislock could hide.
system_path=$(ruby -e 'puts((Gem.default_path - [Gem.user_dir, Gem.default_dir]).join(":"))')
export GEM_HOME=$home GEM_PATH=$home:$system_path

if ! ruby -e 'gem "ffi", ">= 1.15"; require "ffi"' 2>/dev/null; then
  command -v apt-get >/dev/null || die "ruby: the ffi gem is missing (install Debian's ruby-ffi, or gem install ffi)"
  echo "ruby: installing Debian's ruby-ffi"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q ruby-ffi >/dev/null ||
    die "ruby: apt-get install ruby-ffi failed"
fi

started=$(date +%s.%N)
if ! out=$(cd "$tmp" && gem install --local --no-document "$gemfile" 2>&1); then
  echo "$out" >&2
  die "ruby: gem install --local $gemfile failed"
fi
installed=$(date +%s.%N)

ensure_redis

mkdir -p "$tmp/app"
cat >"$tmp/app/check.rb" <<'RUBY'
# frozen_string_literal: true

require "redislock"

version, home, url = ARGV
bad = ->(msg) { abort "ruby: #{msg}" }
home = File.realpath(home)
spec = Gem.loaded_specs["redislock"] or bad.call("redislock was not activated as a gem")
bad.call("platform #{spec.platform}, expected x86_64-linux") unless spec.platform.to_s == "x86_64-linux"
inside = ->(path) { File.realpath(path).start_with?("#{home}/") }
bad.call("the gem came from #{spec.full_gem_path}, not #{home}") unless inside.call(spec.full_gem_path)
bad.call("RedisLock::VERSION is #{RedisLock::VERSION}, expected #{version}") unless RedisLock::VERSION == version
native = RedisLock.library_version
bad.call("the library is #{native}, expected #{version}") unless native == version
mapped = File.readlines("/proc/self/maps").map { |l| l.split(" ", 6)[5].to_s.strip }
                .select { |f| File.basename(f).start_with?("libredislock") }.uniq
bad.call("libredislock mapped #{mapped.size} times: #{mapped.inspect}") unless mapped.size == 1
bad.call("the library mapped is #{mapped[0]}, not inside #{home}") unless inside.call(mapped[0])
bad.call("RedisLock.library_path says #{RedisLock.library_path}, mapped is #{mapped[0]}") \
  unless File.realpath(RedisLock.library_path) == File.realpath(mapped[0])

client = RedisLock::Client.new(url)
fence = client.lock("dist-check:ruby", ttl: 10, wait: 10) { |lock| lock.fence }
bad.call("no fence: #{fence.inspect}") unless fence.is_a?(Integer) && fence.positive?
File.write("loaded.txt", ($LOADED_FEATURES + mapped).join("\n"))
ffi = Gem.loaded_specs["ffi"]
puts "RedisLock::VERSION #{RedisLock::VERSION}, library #{native} at #{mapped[0]}, " \
     "ffi #{ffi ? "#{ffi.version} from #{ffi.full_gem_path}" : FFI::VERSION}, fence #{fence}"
RUBY

if ! seen=$(cd "$tmp/app" && ruby -w check.rb "$version" "$home" "$REDIS_URL" 2>&1); then
  echo "$seen" >&2
  die "ruby: the installed gem failed"
fi
if grep -qv '^RedisLock::VERSION ' <<<"$seen"; then die "ruby: unexpected output: $seen"; fi
if grep -F "$root/" "$tmp/app/loaded.txt"; then die "ruby: files from the repository were loaded (above)"; fi

printf 'ruby: installed %s (%s KiB) into %s in %.1f s; %s\n' "$(basename "$gemfile")" \
  "$(($(stat -c %s "$gemfile") / 1024))" "$([ $# -eq 2 ] && echo "$home" || echo 'a scratch GEM_HOME')" \
  "$(awk "BEGIN { print $installed - $started }")" "$seen"
