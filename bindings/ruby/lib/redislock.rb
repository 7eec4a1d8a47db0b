# frozen_string_literal: true

# redislock: one Redis lock for Rust, C, Python, PHP and Ruby, over the C
# API of libredislock. See docs/ruby.md.
#
#   client = RedisLock::Client.new("redis://127.0.0.1:6379/0")
#   client.lock("reports", ttl: 30, wait: 10) { |lock| lock.fence }
require_relative "redislock/version"
require_relative "redislock/native"
require_relative "redislock/errors"
require_relative "redislock/units"
require_relative "redislock/lock"
require_relative "redislock/report"
require_relative "redislock/client"

module RedisLock
  # The native library's version.
  def self.library_version
    Native.redislock_version
  end
end
