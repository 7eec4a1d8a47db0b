# frozen_string_literal: true

# What an uncontended lock cycle costs from Ruby, against the hand-written
# helper it replaces: `client.lock(name) {}` (take, run the empty block,
# release), and redis-rb's `SET name token NX PX ttl` then a compare-and-
# delete script. Both send two requests a cycle, so the difference is the
# binding and the library. Rounds of CYCLES cycles of each, interleaved;
# prints the median microseconds per cycle of each and their ratio.
#
#   ruby examples/ruby/cycle_cost.rb redis://127.0.0.1:6379/0 [ROUNDS] [CYCLES]
$LOAD_PATH.unshift(File.expand_path("../../bindings/ruby/lib", __dir__))
require "redis"
require "redislock"
require "securerandom"
require "uri"

url = ARGV[0] or abort "usage: ruby #{$PROGRAM_NAME} REDIS_URL [ROUNDS] [CYCLES]"
rounds = Integer(ARGV[1] || 11)
cycles = Integer(ARGV[2] || 2000)
client = RedisLock::Client.new(url)
uri = URI(url)
raw = Redis.new(host: uri.host, port: uri.port || 6379, db: uri.path.delete_prefix("/").to_i)
cad = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
sha = raw.script(:load, cad)

def per_cycle_us(cycles)
  start = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
  cycles.times { yield }
  (Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - start) / 1000.0 / cycles
end

ours = []
helper = []
rounds.times do
  ours << per_cycle_us(cycles) { client.lock("cost:redislock", ttl: 30) { nil } }
  helper << per_cycle_us(cycles) do
    token = SecureRandom.hex(16)
    raw.set("cost:helper", token, nx: true, px: 30_000) or raise "helper: lock held"
    raw.evalsha(sha, keys: ["cost:helper"], argv: [token])
  end
end
median = ->(xs) { xs.sort[xs.size / 2] }
printf("client.lock { }             %7.1f us a cycle\n", median.(ours))
printf("SET NX PX + compare-and-del %7.1f us a cycle\n", median.(helper))
printf("ratio                       %7.2f\n", median.(ours) / median.(helper))
