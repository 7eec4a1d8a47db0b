# frozen_string_literal: true

require_relative "helper"
# redis-objects itself (v1.7.0, vendored with its specs: see
# redis-objects/ORIGIN.md), then the switch, as docs/ruby.md says.
$LOAD_PATH.unshift(File.expand_path("redis-objects/lib", __dir__))
begin
  verbose, $VERBOSE = $VERBOSE, nil # its own warnings are not ours
  require "redis/objects"
ensure
  $VERBOSE = verbose
end
require "redislock/redis_objects"

# The Redis::Lock shape of redis-objects over this library's lock, with
# redis-rb (Debian's ruby-redis) as the connection it is given.
# (redis_objects_specs.rb runs redis-objects' own specs against it.)
class TestRedisObjects < Minitest::Test
  include Helpers

  def setup
    Redis::Objects.redis = raw
  end

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
    with_password = Redis.new(host: "127.0.0.1", port: 1, password: "p@ss", db: 3)
    assert_equal "redis://:p%40ss@127.0.0.1:1/3", RedisLock::RedisObjects.url_of(with_password)
  end

  def test_the_class_is_named_as_redis_objects_names_it
    assert_equal "Redis::Lock", Redis::Lock.name
    assert_equal "Redis::Lock::LockTimeout", Redis::Lock::LockTimeout.name
  end

  # redis-objects' `lock :name` passes nil options for a lock declared on a
  # superclass (STI models, subclassed jobs).
  def test_a_lock_declared_on_a_superclass_through_the_real_macro
    parent = Class.new do
      include Redis::Objects
      lock :job, timeout: 1
      def id = 7
      def self.name = "ParentJob"
    end
    child = Class.new(parent) { def self.name = "ChildJob" }
    lock = child.new.job_lock
    assert_kind_of Redis::Lock, lock
    assert_equal "parent_job:7:job_lock", lock.key, "named after the declaring class, as redis-objects does"
    assert_equal :done, lock.lock { raw.exists?(lock.key) && :done }
    assert_nil raw.get(lock.key)
  end

  def test_keys_connections_and_the_commands_every_redis_objects_object_has
    assert_equal "a:b:c", Redis::Lock.new(["a", %w[b c]]).key
    assert_same raw, Redis::Lock.new(key_for).redis, "the default connection, Redis::Objects.redis"
    given = Redis.new(url: server.url)
    assert_same given, Redis::Lock.new(key_for, given).redis
    from_url = Redis::Lock.new(key_for, server.url).redis
    assert_kind_of Redis, from_url
    assert_equal "PONG", from_url.ping
    assert_raises(RedisLock::InvalidArgument) { Redis::Lock.new(key_for, client).redis }

    key = key_for
    lock = Redis::Lock.new(key, raw, expiration: 30)
    refute lock.exists?
    seen = lock.lock { [lock.exists?, lock.type, lock.ttl] }
    assert_equal [true, "string", 30], seen
    refute lock.exists?
    assert_nil lock.value
    assert_equal({ "key" => key, "options" => { expiration: 30, timeout: 5 }, "value" => nil }, lock.to_hash)
  ensure
    given&.close
  end

  # clear/delete: redis-objects' admin unlock, through the core's forced
  # release: the waiter is handed the lock at once, not after the TTL.
  def test_clear_removes_a_crashed_holders_lock_and_hands_it_to_the_waiter
    key = key_for
    crashed = client.acquire(key, ttl: 600, fenced: true)
    broken_fence = crashed.fence
    crashed.forget # the process died: nobody will release it
    shared = RedisLock::RedisObjects.client_for(raw)
    before = shared.stats
    waiter = Thread.new { Redis::Lock.new(key, raw, timeout: 60).lock { RedisLock::Client.new(server.url).fence_token(key, raw.get(key)) } }
    wait_until("the waiter to queue") { raw.llen("{#{key}}:queue") == 1 }
    assert_equal 1, Redis::Lock.new(key, raw).clear
    fence = waiter.value
    after = shared.stats
    assert_equal 1, after[:acquired_handed_over] - before[:acquired_handed_over], "handed over by clear"
    assert_equal 0, after[:acquired_after_wait] - before[:acquired_after_wait], "not found free by a retry"
    assert_operator fence, :>, broken_fence, "fences stay monotonic"
    assert_equal 0, Redis::Lock.new(key, raw).delete, "nobody holds it"
    assert_empty keys_of(key)
  end

  def test_clear_takes_a_foreign_value_and_refuses_a_key_of_another_type
    key = key_for
    raw.set(key, Time.now.to_f.to_s) # redis-objects before 1.4.2
    assert_equal 1, Redis::Lock.new(key, raw).del
    assert_nil raw.get(key)
    raw.rpush(key, "x")
    assert_raises(RedisLock::WrongType) { Redis::Lock.new(key, raw).clear }
    assert_equal ["x"], raw.lrange(key, 0, -1)
  ensure
    raw.del(key)
  end
end
