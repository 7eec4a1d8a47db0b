# frozen_string_literal: true

# make demo: a Ruby worker (the gem in bindings/ruby, over FFI; the library
# from REDISLOCK_LIB). Once, then until the deadline: take the lock,
# increment the counter non-atomically (GET, then SET, with redis-rb),
# release. Prints "fence value acquired_ns release_ns" per acquisition: the
# counter as read, CLOCK_MONOTONIC after the acquisition and before the
# release. With LIMIT, a permit of the semaphore `demo:pool` of LIMIT
# instead, counted with INCR `demo:pool:done`, held 1 ms, the value
# reported as 0.
#
#   ruby worker.rb REDIS_PORT SECONDS [LIMIT]
# make dist-check: the installed gem ($GEM_HOME) instead.
$LOAD_PATH.unshift(File.expand_path("../../bindings/ruby/lib", __dir__)) unless ENV["REDISLOCK_DEMO_INSTALLED"]
require "redis"
require "redislock"

def now_ns
  Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
end

port = Integer(ARGV[0])
seconds = Float(ARGV[1])
limit = ARGV[2] ? Integer(ARGV[2]) : 0
client = RedisLock::Client.new("redis://127.0.0.1:#{port}")
raw = Redis.new(host: "127.0.0.1", port: port)
finish = now_ns + (seconds * 1e9).to_i
# A TTL and a wait no pause of a busy machine comes near.
hold = if limit.positive?
         ->(&work) { client.semaphore("demo:pool", limit: limit, ttl: 30, wait: 30, &work) }
       else
         ->(&work) { client.lock("demo:lock", ttl: 30, wait: 30, &work) }
       end
out = []
loop do
  # The block's value, once the lock is released.
  line = hold.call do |lock|
    acquired = now_ns
    if limit.positive?
      raw.incr("demo:pool:done")
      sleep 0.001
      value = 0
    else
      value = raw.get("demo:counter").to_i
      raw.set("demo:counter", value + 1)
    end
    fence = lock.fence
    release = now_ns
    "#{fence} #{value} #{acquired} #{release}"
  end
  out << line
  break if now_ns >= finish
end
puts out.join("\n")
