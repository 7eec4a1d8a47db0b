# frozen_string_literal: true

require_relative "helper"
require "json"
require "pp"
require "yaml"
# What a Rails application has: ActiveSupport's Object#as_json, which
# serialises an object's instance variables.
require "active_support"
require "active_support/core_ext/object/json"
require "redislock/redis_objects"

# No public object of the gem shows a password given in a URL, however it
# is rendered: inspect, to_s, pp, JSON (ActiveSupport's as_json and
# to_json), YAML, Marshal, its instance variables, and the messages of
# the errors it raises.
class TestNoPasswordLeak < Minitest::Test
  include Helpers

  PASSWORD = "s3cr3t-Pa55"
  ESCAPED_PASSWORD = "p@ss:w/rd" # given URL-escaped: p%40ss%3Aw%2Frd

  def secrets
    [PASSWORD, ESCAPED_PASSWORD, "p%40ss%3Aw%2Frd"]
  end

  # A server that asks for PASSWORD (its raw connection authenticated before).
  def guarded
    srv = Servers.get(:guarded)
    srv.raw.config(:set, "requirepass", PASSWORD) unless @configured
    @configured = true
    srv
  end

  def url
    "redis://default:#{PASSWORD}@127.0.0.1:#{guarded.port}/0"
  end

  def renderings(obj)
    out = { "inspect" => obj.inspect, "to_s" => obj.to_s, "pp" => PP.pp(obj, +"") }
    out["as_json"] = guard { obj.as_json.inspect }
    out["to_json"] = guard { obj.to_json }
    out["to_yaml"] = guard { obj.to_yaml }
    out["Marshal"] = guard { Marshal.dump(obj).b.force_encoding(Encoding::UTF_8).scrub }
    obj.instance_variables.each { |iv| out["ivar #{iv}"] = obj.instance_variable_get(iv).inspect }
    if obj.is_a?(Exception)
      out["message"] = obj.message
      out["full_message"] = obj.full_message(highlight: false)
    end
    out
  end

  # What a rendering gave, or the message of the error it raised.
  def guard
    yield.to_s
  rescue StandardError => e
    "#{e.class}: #{e.message}"
  end

  def assert_no_secret(what, obj)
    renderings(obj).each do |how, text|
      secrets.each do |secret|
        refute_includes text, secret, "#{what} shows the password through #{how}"
      end
    end
  end

  def test_clients_locks_reports_stats_and_the_redis_objects_switch
    c = RedisLock::Client.new(url)
    redlock = RedisLock::Client.new([url, "redis://u:p%40ss%3Aw%2Frd@127.0.0.1:#{guarded.port}/1"])
    name = key_for
    lock = c.acquire(name, ttl: 30, fenced: true)
    sem = c.acquire_semaphore("#{name}:s", limit: 2)
    read = c.acquire_read("#{name}:rw")
    report = c.doctor
    objects = {
      "Client" => c, "Redlock Client" => redlock, "Lock" => lock, "semaphore Lock" => sem,
      "read Lock" => read, "Report" => report, "stats" => c.stats
    }
    report.findings.each_with_index { |f, i| objects["Finding #{i}"] = f }
    with_password = Redis.new(host: "127.0.0.1", port: guarded.port, password: PASSWORD)
    objects["Redis::Lock (redis-rb)"] = Redis::Lock.new("#{name}:ro", with_password, expiration: 5)
    objects["Redis::Lock (URL)"] = Redis::Lock.new("#{name}:ro", url)
    objects["Redis::Lock (Client)"] = Redis::Lock.new("#{name}:ro", c)
    objects.each { |what, obj| assert_no_secret(what, obj) }
    assert_equal 1, objects["Redis::Lock (redis-rb)"].lock { 1 }, "the lock works with that password"
    [lock, sem, read].each(&:release)
    write = c.acquire_write("#{name}:rw")
    assert_no_secret("write Lock", write)
    write.release
    assert_no_secret("released Lock", lock)
    assert_includes c.inspect, "127.0.0.1:#{guarded.port}", "a client still says where it connects"
  ensure
    with_password&.close
  end

  def test_errors
    listener = TCPServer.new("127.0.0.1", 0)
    port = listener.addr[1]
    listener.close
    refused = assert_raises(RedisLock::ConnectionError) do
      RedisLock::Client.new("redis://u:#{PASSWORD}@127.0.0.1:#{port}/0?connect_timeout=200ms").acquire("x", wait: 0)
    end
    assert_no_secret("a connection error", refused)
    wrong = assert_raises(RedisLock::Error) do
      RedisLock::Client.new("redis://default:not-#{PASSWORD}@127.0.0.1:#{guarded.port}/0").acquire("x", wait: 0)
    end
    assert_no_secret("a refused password", wrong)
    [
      "redis://u:#{PASSWORD}@127.0.0.1:notaport/0",
      "redis://u:#{PASSWORD}@127.0.0.1:1/notadb",
      "redis+sentinel://127.0.0.1:1/m?sentinel_password=#{PASSWORD}&db=x",
      "redis://u:p%40ss%3Aw%2Frd@[::1/0"
    ].each do |bad|
      e = assert_raises(ArgumentError, bad) { RedisLock::Client.new(bad) }
      assert_no_secret("the error for #{bad}", e)
    end
  end
end
