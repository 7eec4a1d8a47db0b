# frozen_string_literal: true

require_relative "helper"
require "redislock/redis_objects"

# The Redis::Lock shape of redis-objects over this library's lock, with
# redis-rb (Debian's ruby-redis) as the connection it is given.
class TestRedisObjects < Minitest::Test
  include Helpers

  def test_requiring_it_makes_redis_lock_this_class
    assert_same RedisLock::RedisObjects::Lock, Redis::Lock
    assert_operator Redis::Lock::LockTimeout, :<, RedisLock::Timeout
  end

  def test_a_class_that_includes_redis_objects_after_the_switch
    # redis-objects autoloads Redis::Lock and its `lock` macro requires
    # "redis/lock": after the switch that must keep this class.
    dir = Dir.mktmpdir("redis-objects-shape-")
    FileUtils.mkdir_p(File.join(dir, "redis"))
    File.write(File.join(dir, "redis", "lock_shape_probe.rb"), "class Redis; class Lock < Struct.new(:key); end; end\n")
    $LOAD_PATH.unshift(dir)
    Redis.send(:remove_const, :Lock)
    Redis.autoload(:Lock, "redis/lock_shape_probe")
    RedisLock::RedisObjects.replace!
    require "redis/lock_shape_probe" # what the macro's require does: nothing now
    assert_same RedisLock::RedisObjects::Lock, Redis::Lock
  ensure
    $LOAD_PATH.delete(dir)
    FileUtils.rm_rf(dir)
    Redis.send(:remove_const, :Lock) if Redis.const_defined?(:Lock, false)
    Redis.const_set(:Lock, RedisLock::RedisObjects::Lock)
  end

  def test_lock_with_expiration_holds_a_token_with_that_ttl
    key = key_for
    lock = Redis::Lock.new(key, raw, expiration: 5, timeout: 1)
    assert_equal key, lock.key
    token, pttl = lock.lock { [raw.get(key), raw.pttl(key)] }
    assert_match(/\A[0-9a-f]{32}\z/, token, "a random token, not a timestamp")
    assert_includes 4000..5000, pttl
    assert_nil raw.get(key)
  end

  def test_without_expiration_a_lease_is_renewed_while_the_block_runs
    key = key_for
    assert_equal :ok, Redis::Lock.new(key, raw).lock {
      assert_operator raw.pttl(key), :>, 50_000
      :ok
    }
  end

  def test_timeout_raises_lock_timeout_and_the_owner_check_spares_a_new_owner
    key = key_for
    holder = Redis::Lock.new(key, raw, expiration: 0.2, timeout: 0)
    holder.lock do
      error = assert_raises(Redis::Lock::LockTimeout) { Redis::Lock.new(key, raw, timeout: 0.1).lock { nil } }
      assert_match(/Timeout on lock #{Regexp.escape(key)} exceeded 0.1 sec/, error.message)
      wait_until("the short lock to expire") { raw.get(key).nil? }
      raw.set(key, "new owner")
    end
    assert_equal "new owner", raw.get(key), "released only its own lock (redis-objects deletes blindly)"
  end

  def test_constructor_forms_and_refusals
    key = key_for
    assert_equal 1, Redis::Lock.new(key, server.url, timeout: 1).lock { 1 }
    assert_equal 2, Redis::Lock.new(key, RedisLock::Client.new(server.url)).lock { 2 }
    assert_raises(ArgumentError) { Redis::Lock.new(key, raw).lock }
    assert_raises(ArgumentError) { Redis::Lock.new(key, raw, timeout: -1) }
    assert_raises(ArgumentError) { Redis::Lock.new(key, raw, expiration: 0) }
    assert_raises(NotImplementedError) { Redis::Lock.new(key, raw).clear }
    with_password = Redis.new(host: "127.0.0.1", port: 1, password: "p@ss", db: 3)
    assert_equal "redis://:p%40ss@127.0.0.1:1/3", RedisLock::RedisObjects.url_of(with_password)
  end
end
