# frozen_string_literal: true

require_relative "lib/redislock/version"

Gem::Specification.new do |spec|
  spec.name = "redislock"
  spec.version = RedisLock::VERSION
  spec.summary = "One Redis lock for Ruby, Python, PHP, C and Rust: FIFO hand-off, fencing, fork-safe"
  spec.description = <<~TEXT
    A Redis distributed lock (and semaphores and read-write locks) over the C API of
    libredislock, the same core that the Python, PHP and C bindings use, so that every
    language of a fleet takes the same lock the same way. Needs libredislock.so
    (cargo build --release, or make install, in the redislock repository).
  TEXT
  spec.authors = ["redislock developers"]
  spec.licenses = ["MIT", "Apache-2.0"]
  spec.files = Dir[File.join(__dir__, "lib", "**", "*.rb")].map { |f| f.delete_prefix("#{__dir__}/") }
  spec.require_paths = ["lib"]
  spec.required_ruby_version = ">= 2.7"
  spec.add_dependency "ffi", ">= 1.15"
end
