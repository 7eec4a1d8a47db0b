# frozen_string_literal: true

require_relative "lib/redislock/version"

# Two gems from this one spec:
#
# - the plain gem (`gem build redislock.gemspec` in bindings/ruby): the Ruby
#   files alone; the library comes from $REDISLOCK_LIB, the repository's
#   build tree or the system (see lib/redislock/native.rb);
# - the platform gem of `make dist` (scripts/dist/gem.sh builds it from a
#   copy of this directory with the stripped library at
#   lib/redislock/libredislock.so): redislock-<v>-x86_64-linux.gem, which
#   loads the library it carries.
Gem::Specification.new do |spec|
  spec.name = "redislock"
  spec.version = RedisLock::VERSION
  spec.summary = "One Redis lock for Ruby, Python, PHP, C and Rust: FIFO hand-off, fencing, fork-safe"
  spec.description = <<~TEXT
    A Redis distributed lock (and semaphores and read-write locks) over the C API of
    libredislock, the same core that the Python, PHP and C bindings use, so that every
    language of a fleet takes the same lock the same way. The x86_64-linux gem carries
    libredislock.so (glibc 2.17 or newer); elsewhere build the library from source
    (cargo build --release, or make install, in the redislock repository).
  TEXT
  spec.authors = ["redislock developers"]
  spec.licenses = ["MIT", "Apache-2.0"]
  spec.files = Dir[File.join(__dir__, "lib", "**", "*.rb")].map { |f| f.delete_prefix("#{__dir__}/") }
  # The licence texts, where they sit beside the gemspec (make dist puts them there).
  spec.files += %w[LICENSE-MIT LICENSE-APACHE].select { |f| File.file?(File.join(__dir__, f)) }
  spec.require_paths = ["lib"]
  spec.required_ruby_version = ">= 2.7"
  spec.add_dependency "ffi", ">= 1.15"

  native = File.join(__dir__, "lib", "redislock", "libredislock.so")
  if File.file?(native)
    # The platform follows the library's ELF machine, never the building host's.
    machine = File.binread(native, 2, 18).unpack1("v")
    spec.platform = { 62 => "x86_64-linux", 183 => "aarch64-linux" }.fetch(machine) do
      raise "redislock.gemspec: #{native} is for ELF machine #{machine}, not x86_64 or aarch64 Linux"
    end
    spec.files << "lib/redislock/libredislock.so"
    spec.requirements << "Linux with glibc 2.17 or newer (the bundled libredislock.so)"
  end
end
