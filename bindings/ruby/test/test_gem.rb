# frozen_string_literal: true

require_relative "helper"
require "rubygems/package"

# `gem build` works offline, and the gem it makes loads and locks.
class TestGem < Minitest::Test
  include Helpers

  def test_gem_build_and_install_offline
    Dir.mktmpdir("redislock-gem-") do |dir|
      FileUtils.cp_r(File.expand_path("..", __dir__), File.join(dir, "src"))
      out, status = Open3.capture2e("gem", "build", "redislock.gemspec", chdir: File.join(dir, "src"))
      assert status.success?, out
      gem = File.join(dir, "src", "redislock-#{RedisLock::VERSION}.gem")
      files = Gem::Package.new(gem).contents
      assert_includes files, "lib/redislock.rb"
      assert_includes files, "lib/redislock/redis_objects.rb"
      refute(files.any? { |f| f.start_with?("test/") }, "tests stay out of the gem")
      out, status = Open3.capture2e({ "GEM_HOME" => File.join(dir, "home") }, "gem", "install", "--local",
                                    "--ignore-dependencies", "--no-document", gem)
      assert status.success?, out
      script = "require 'redislock'; c = RedisLock::Client.new(ARGV[0]); " \
               "print c.lock('#{key_for}', ttl: 1) { |l| l.token.bytesize }"
      out, status = Open3.capture2e({ "GEM_HOME" => File.join(dir, "home"), "GEM_PATH" => Gem.path.join(":") },
                                    "ruby", "-e", script, server.url)
      assert status.success?, out
      assert_equal "32", out
    end
  end
end
