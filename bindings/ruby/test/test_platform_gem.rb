# frozen_string_literal: true

require_relative "helper"
require "rbconfig"
require "rubygems/package"

# The platform gem of `make dist` (scripts/dist/gem.sh), made from a stage
# holding a stripped copy of the library this suite runs against: its name,
# its files, the same bytes twice, and, installed into a fresh GEM_HOME, a
# require that loads the library inside the gem (no $REDISLOCK_LIB) and locks.
class TestPlatformGem < Minitest::Test
  include Helpers

  def test_platform_gem_carries_and_loads_its_library
    Dir.mktmpdir("redislock-platform-gem-") do |dir|
      stage = File.join(dir, "stage")
      FileUtils.mkdir_p(File.join(stage, "lib"))
      so = File.join(stage, "lib", "libredislock.so")
      out, status = Open3.capture2e("strip", "-o", so, RedisLock.library_path)
      assert status.success?, out

      name = "redislock-#{RedisLock::VERSION}-x86_64-linux.gem"
      gems = %w[a b].map do |d|
        out, status = Open3.capture2e(File.join(ROOT, "scripts", "dist", "gem.sh"), stage, File.join(dir, d))
        assert status.success?, out
        assert_equal [name], Dir.children(File.join(dir, d))
        File.join(dir, d, name)
      end
      assert_equal File.binread(gems[0]), File.binread(gems[1]), "the same stage gives the same gem"

      package = Gem::Package.new(gems[0])
      assert_equal "x86_64-linux", package.spec.platform.to_s
      assert_includes package.contents, "lib/redislock/libredislock.so"
      refute(package.contents.any? { |f| f.start_with?("test/") }, "tests stay out of the gem")

      home = File.join(dir, "home")
      env = { "GEM_HOME" => home, "GEM_PATH" => ([home] + Gem.path).join(":"), "REDISLOCK_LIB" => nil,
              "RUBYLIB" => nil, "RUBYOPT" => nil }
      out, status = Open3.capture2e(env, "gem", "install", "--local", "--no-document", gems[0], chdir: dir)
      assert status.success?, out

      script = "require 'redislock'; c = RedisLock::Client.new(ARGV[0]); " \
               "print RedisLock.library_path, ' ', RedisLock.library_version, ' ', " \
               "c.lock('#{key_for}', ttl: 1) { |l| l.token.bytesize }"
      out, err, status = Open3.capture3(env, RbConfig.ruby, "-w", "-e", script, server.url, chdir: dir)
      assert status.success?, err
      assert_empty err
      inside = File.join(home, "gems", "redislock-#{RedisLock::VERSION}-x86_64-linux", "lib", "redislock",
                         "libredislock.so")
      assert_equal "#{inside} #{RedisLock::VERSION} 32", out
    end
  end
end
