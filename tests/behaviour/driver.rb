# frozen_string_literal: true

# The behaviour table's scenarios in Ruby (tests/behaviour/run.py runs it
# and says what each line means).
require "redislock"

URL = ENV.fetch("BEHAVIOUR_URL")
$stdout.sync = true

def ask(question)
  puts "? #{question}"
  $stdin.gets.to_s.strip
end

def pttl(key)
  Integer(ask("pttl #{key}"))
end

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# The library's classes from its base down to e's, or e's class.
def chain(error)
  short = ->(c) { c.name.split("::").last }
  return short.call(error.class) unless error.is_a?(RedisLock::Error)

  error.class.ancestors.select { |c| c.is_a?(Class) && c <= RedisLock::Error }.reverse.map(&short).join(" ⊃ ")
end

def say(id, value)
  puts "#{id}\t#{value}"
end

def gone(key)
  deadline = now + 10
  until pttl(key) == -2
    raise "#{key} still there after 10 s" if now > deadline

    sleep 0.05
  end
end

def scenario(id)
  value = begin
    yield RedisLock::Client.new(URL)
  rescue StandardError => e
    chain(e)
  end
  say(id, value)
end

scenario("ttl-default") do |client|
  client.lock("behaviour:ttl-default") { "#{(pttl('behaviour:ttl-default') / 1000.0).ceil} s" }
end

scenario("ttl-unit") do |client|
  left = client.lock("behaviour:ttl-unit", ttl: 2) { pttl("behaviour:ttl-unit") }
  left > 1000 && left <= 2000 ? "s" : "PTTL #{left}"
end

scenario("wait-default") do |client|
  holder = client.acquire("behaviour:wait-default", ttl: 1)
  started = now
  lock = client.acquire("behaviour:wait-default")
  waited = now - started
  lock.release
  holder.release_quietly
  waited >= 0.5 ? "waits" : "#{lock.inspect} after #{waited.round(1)} s"
end

scenario("try-held") do |client|
  client.lock("behaviour:try-held") { client.try_acquire("behaviour:try-held").inspect }
end

scenario("wait-timeout") do |client|
  client.lock("behaviour:wait-timeout") do
    client.lock("behaviour:wait-timeout", wait: 0.2) { "acquired" }
  end
end

scenario("release-expired") do |client|
  lock = client.acquire("behaviour:release-expired", ttl: 0.2)
  gone("behaviour:release-expired")
  client.lock("behaviour:release-expired", wait: 0) { lock.release }
  "released"
end

scenario("unconfirmed") do |_client|
  lock = RedisLock::Client.new(ENV.fetch("BEHAVIOUR_CUTTER"))
                          .acquire("behaviour:unconfirmed", token: "behaviour-unconfirmed")
  ask("arm behaviour-unconfirmed")
  begin
    lock.release
    "released"
  rescue RedisLock::NotOwned => e
    chain(e)
  rescue RedisLock::Error => e
    "not caught as not-owned: #{chain(e)}"
  end
end

scenario("fence-first") do |client|
  fence = client.lock("behaviour:fence-first", &:fence)
  (fence - (Time.now.to_r * 1_000_000)).abs < 60_000_000 ? "server µs" : fence
end

scenario("fence-after-release") do |client|
  lock = client.acquire("behaviour:fence-after-release")
  lock.release
  lock.fence
end

scenario("fence-read-after-release") do |client|
  lock = client.acquire("behaviour:fence-read-after-release")
  fence = lock.fence
  lock.release
  lock.fence == fence ? "same" : lock.fence
end

scenario("token-after-release") do |client|
  lock = client.acquire("behaviour:token-after-release")
  token = lock.token
  lock.release
  after = lock.token
  after == token ? "same" : after.inspect
end

scenario("name") do |client|
  client.lock("behaviour:name") { |lock| lock.name.class.name }
end

scenario("scoped-renews") do |client|
  left = client.lock("behaviour:scoped-renews", ttl: 0.3) do
    sleep 0.9
    pttl("behaviour:scoped-renews")
  end
  left.positive? ? "renewed" : "PTTL #{left} at the end of the work"
end

def silent(url, **timeouts)
  started = now
  begin
    RedisLock::Client.new(url, **timeouts).try_acquire("behaviour:timeout")
    "acquired"
  rescue StandardError => e
    took = now - started
    took < 1.9 ? chain(e) : "after #{took.round(1)} s: #{chain(e)}"
  end
end

scenario("timeout-option") do |_client|
  silent(ENV.fetch("BEHAVIOUR_SILENT"), connect_timeout: 0.3, command_timeout: 0.3)
end

scenario("timeout-url") do |_client|
  silent("#{ENV.fetch('BEHAVIOUR_SILENT')}?connect_timeout=300ms&command_timeout=300ms")
end

scenario("timeout-both") do |_client|
  silent("#{ENV.fetch('BEHAVIOUR_SILENT')}?connect_timeout=5s&command_timeout=5s",
         connect_timeout: 0.3, command_timeout: 0.3)
end

scenario("bad-ttl") do |client|
  client.acquire("behaviour:bad-ttl", ttl: 0)
  "acquired"
end

scenario("wrong-type") do |client|
  client.try_acquire("behaviour:wrong-type")
  "acquired"
end

scenario("no-server") do |_client|
  RedisLock::Client.new(ENV.fetch("BEHAVIOUR_DEAD")).try_acquire("behaviour:no-server")
  "acquired"
end
