# frozen_string_literal: true

require_relative "helper"
require "json"
require "rbconfig"
require "redislock/redis_objects"

# The Redis::Lock switch (lib/redislock/redis_objects.rb) as an application
# written for redis-objects uses it: the three forms redis-objects documents
# (a standalone `Redis::Lock.new(key, redis, options)`, the `lock :name`
# helper of `include Redis::Objects`, and Redis::Lock available as soon as
# the library is loaded), with redis-rb (Debian's ruby-redis) as the
# connection. redis-objects itself is not installed here (Debian does not
# package it): the switch then provides the lock part of Redis::Objects
# (lib/redislock/redis_objects_model.rb), which these tests exercise.
# What redis-objects 1.7.0 does on the wire (SET key "" PX NX, DEL) is
# played with raw commands in the last tests; docs/ruby.md gives the
# figures measured by hand with redis-objects itself.
class TestRedisObjects < Minitest::Test
  include Helpers

  # A model as redis-objects documents them: any class with an `id`.
  class Roster
    include Redis::Objects
    lock :resort, timeout: 0.5
    lock :per_field
    lock :renumber, expiration: 30
    lock :global_mutex, global: true
    lock :by_string, key: 'custom:#{id}:k'
    lock :by_proc, key: ->(roster) { "proc:#{roster.id}:k" }
    attr_reader :id

    def initialize(id)
      @id = id
    end
  end

  class TeamRoster < Roster
    lock :trade
  end

  class Player
    include Redis::Objects
    redis_id_field :uid
    lock :transfer
    attr_reader :uid

    def initialize(uid)
      @uid = uid
    end
  end

  def setup
    Redis::Objects.redis = raw
  end

  def teardown
    Roster.redis = nil
    Player.redis = nil
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

  # A lock declared on a superclass (STI models, subclassed jobs) is named
  # after the declaring class and keeps its options; redis-objects' own
  # macro passes nil options there, which Redis::Lock.new takes as the
  # defaults.
  def test_a_lock_declared_on_a_superclass
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
    assert_equal 1, lock.options[:timeout]
    assert_equal :done, lock.lock { raw.exists?(lock.key) && :done }
    assert_nil raw.get(lock.key)
    assert_equal 5, Redis::Lock.new(key_for, raw, nil).options[:timeout], "nil options: the defaults"
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

  # --- Redis::Lock.new(key, redis, options): the standalone form ---

  # While one block runs, another Redis::Lock of the name neither enters
  # (timeout 0: LockTimeout at once) nor stops waiting: it queues, and runs
  # its block once the first ended.
  def test_a_lock_excludes_others_until_its_block_ends
    key = key_for
    log = Queue.new
    leave = Queue.new
    holder = Thread.new do
      Redis::Lock.new(key, raw, expiration: 60, timeout: 1).lock do
        log << [:holder_in, raw.get(key)]
        leave.pop
        log << [:holder_out]
        :holder_value
      end
    end
    _, token = log.pop
    assert_raises(Redis::Lock::LockTimeout) do
      Redis::Lock.new(key, raw, timeout: 0).lock { log << [:try_once_in] }
    end
    assert_equal token, raw.get(key), "the failed try left the holder's key alone"
    waiter = Thread.new { Redis::Lock.new(key, raw, timeout: 60).lock { log << [:waiter_in, raw.get(key)] && :waiter_value } }
    wait_until("the waiter to queue") { raw.llen("{#{key}}:queue") == 1 }
    assert log.empty?, "nobody entered while the holder ran: #{log.size} entries"
    leave << true
    assert_equal :holder_value, holder.value, "lock returns the block's value"
    assert_equal :waiter_value, waiter.value
    assert_equal [:holder_out], log.pop
    waiter_in, waiter_token = log.pop
    assert_equal :waiter_in, waiter_in
    refute_equal token, waiter_token, "each holder has its own token"
    assert_nil raw.get(key), "released after the last block"
  ensure # a failure leaves no thread behind holding or waiting
    leave << true
    [holder, waiter].compact.each { |t| t.join(90) }
  end

  def test_a_block_that_raises_releases_the_lock
    key = key_for
    lock = Redis::Lock.new(key, raw, expiration: 60)
    error = assert_raises(RuntimeError) { lock.lock { raise "boom" } }
    assert_equal "boom", error.message
    assert_nil raw.get(key)
    assert_equal :again, Redis::Lock.new(key, raw, timeout: 0).lock { :again }, "free again at once"
  end

  def test_timeout_waits_that_long_and_timeout_zero_tries_once
    key = key_for
    raw.set(key, "someone", px: 60_000)
    started = now
    error = assert_raises(Redis::Lock::LockTimeout) { Redis::Lock.new(key, raw, timeout: 0.3).lock { flunk "entered" } }
    assert_operator now - started, :>=, 0.3, "waited the whole :timeout"
    assert_kind_of RedisLock::Timeout, error
    assert_match(/exceeded 0.3 sec/, error.message)
    error = assert_raises(Redis::Lock::LockTimeout) { Redis::Lock.new(key, raw, timeout: 0).lock { flunk "entered" } }
    assert_match(/exceeded 0 sec/, error.message)
    assert_equal 0, raw.llen("{#{key}}:queue"), "no waiter left behind"
    assert_equal "someone", raw.get(key)
    assert_operator raw.pttl(key), :>, 50_000, "the holder's TTL untouched"
  ensure
    raw.del(key)
  end

  # With :expiration the server removes the key when it runs out, even
  # while the block still runs: another process may then take the lock,
  # and the first one's end leaves the new holder's key alone.
  def test_a_lock_held_past_its_expiration
    key = key_for
    lock = Redis::Lock.new(key, raw, expiration: 0.2)
    second = lock.lock do
      assert lock.exists?
      wait_until("the key to expire") { !lock.exists? }
      Redis::Lock.new(key, raw, timeout: 0, expiration: 30).lock { raw.get(key) }
    end
    assert_match(/\A[0-9a-f]{32}\z/, second)
    refute lock.exists?
    inner = Redis::Lock.new(key, raw, expiration: 0.2)
    inner.lock do
      wait_until("the key to expire") { !inner.exists? }
      raw.set(key, "foo", px: 60_000) # a key that happens to have that name
    end
    assert_equal "foo", raw.get(key), "not deleted by the lock that expired"
  ensure
    raw.del(key)
  end

  def test_exists_and_clear_and_json
    key = key_for
    lock = Redis::Lock.new(key, raw, expiration: 30, timeout: 1)
    refute lock.exists?
    assert_equal 0, lock.exists
    assert_equal(-2, lock.ttl)
    lock.lock do
      assert lock.exists?
      assert_equal 1, lock.clear, "clear takes the lock from its holder"
      refute lock.exists?
      assert_equal :taken, Redis::Lock.new(key, raw, timeout: 0).lock { :taken }
    end
    assert_equal 0, lock.delete
    assert_equal({ "key" => key, "options" => { "expiration" => 30, "timeout" => 1 }, "value" => nil },
                 JSON.parse(lock.to_json))
    assert_equal lock.to_hash, lock.as_json
  end

  # --- include Redis::Objects: the `lock` helper ---

  def test_the_lock_helper_names_keys_after_the_model
    roster = Roster.new(1)
    assert_kind_of Redis::Lock, roster.resort_lock
    assert_same roster.resort_lock, roster.resort_lock, "one Redis::Lock per record and name"
    assert_equal "roster:1:resort_lock", roster.resort_lock.key, "<prefix>:<id>:<name>_lock; no namespace"
    assert_equal "roster:1:per_field_lock", roster.per_field_lock.key
    assert_equal "team_roster:2:trade_lock", TeamRoster.new(2).trade_lock.key, "CamelCase to snake_case"
    assert_equal "roster:2:resort_lock", TeamRoster.new(2).resort_lock.key, "inherited: the declaring class's prefix"
    refute_respond_to Roster.new(1), :trade_lock, "a subclass's lock is not the parent's"
    assert_equal "custom:3:k", Roster.new(3).by_string_lock.key, ":key interpolated in the record"
    assert_equal "proc:3:k", Roster.new(3).by_proc_lock.key, ":key given as a Proc"
    assert_equal "player:u9:transfer_lock", Player.new("u9").transfer_lock.key, "redis_id_field"
    assert_equal "roster::global_mutex_lock", Roster.global_mutex_lock.key, ":global: one lock for the class"
    assert_same Roster.global_mutex_lock, Roster.new(4).global_mutex_lock
    assert_raises(Redis::Objects::NilObjectId) { Roster.new(nil).resort_lock }
  end

  def test_the_lock_helper_passes_its_options
    assert_equal({ timeout: 0.5, type: :lock }, Roster.new(1).resort_lock.options)
    assert_equal({ timeout: 5, type: :lock }, Roster.new(1).per_field_lock.options, "timeout 5 s by default")
    roster = Roster.new(key_for)
    value = roster.renumber_lock.lock { raw.pttl(roster.renumber_lock.key) }
    assert_includes 25_000..30_000, value, ":expiration: the lock's TTL"
    raw.set(roster.resort_lock.key, 1, px: 60_000)
    error = assert_raises(Redis::Lock::LockTimeout) { roster.resort_lock.lock { flunk "entered" } }
    assert_match(/exceeded 0.5 sec/, error.message, "the declared :timeout")
  ensure
    raw.del(roster.resort_lock.key) if roster
  end

  def test_obtain_lock_and_clear_lock_class_methods
    id = key_for
    roster = Roster.new(id)
    refute roster.per_field_lock.exists?
    seen = Roster.obtain_lock(:per_field, id) { [roster.per_field_lock.exists?, raw.get("roster:#{id}:per_field_lock")] }
    assert_equal true, seen[0]
    assert_match(/\A[0-9a-f]{32}\z/, seen[1])
    refute roster.per_field_lock.exists?
    raw.set(roster.per_field_lock.key, "crashed", px: 60_000)
    assert_equal 1, Roster.clear_lock(:per_field, id), "a plain DEL of the key"
    refute roster.per_field_lock.exists?
    assert_raises(Redis::Objects::UndefinedLock) { Roster.obtain_lock(:badness, id) { nil } }
    assert_raises(Redis::Objects::UndefinedLock) { Roster.clear_lock(:badness, id) }
    assert_raises(ArgumentError) { Roster.obtain_lock(:per_field, id) }
  end

  def test_the_global_lock_excludes_across_records
    outer = Roster.new(1).global_mutex_lock
    seen = outer.lock do
      assert Roster.global_mutex_lock.exists?
      assert_raises(Redis::Lock::LockTimeout) do
        Redis::Lock.new(Roster.global_mutex_lock.key, raw, timeout: 0).lock { flunk "entered" }
      end
      :inside
    end
    assert_equal :inside, seen
    refute Roster.global_mutex_lock.exists?
  end

  def test_connections_of_the_model_and_of_a_lock
    assert_same raw, Roster.new(1).per_field_lock.redis, "Redis::Objects.redis, looked up at each use"
    other = Redis.new(url: server.url)
    Player.redis = other
    assert_same other, Player.new("p").transfer_lock.redis, "the class's own connection"
    assert_same other, Player.redis
    assert_same other, Player.new("p").redis
    assert_equal 7, Player.new("p").transfer_lock.lock { 7 }
    field = Class.new do
      include Redis::Objects
      def self.name = "Field"
      def id = 1
    end
    field.lock :own, redis: other
    assert_same other, field.new.own_lock.redis, "a lock's own :redis"
  ensure
    other&.close
  end

  # --- the autoload form: Redis::Lock and Redis::Objects once loaded ---

  def run_ruby(script, load_path = [])
    args = [RbConfig.ruby, "-w", "-I", File.expand_path("../lib", __dir__)]
    load_path.each { |dir| args += ["-I", dir] }
    Open3.capture2e(*args, "-e", script)
  end

  def test_a_fresh_process_has_redis_lock_and_redis_objects_after_one_require
    out, status = run_ruby(<<~RUBY)
      require "redis"
      require "redislock/redis_objects"
      Redis::Objects.redis = Redis.new(url: #{server.url.inspect})
      x = Redis::Lock.new(#{key_for.inspect})
      puts x.class.name, x.lock { :value_of_the_block }, Redis::Objects.redis.exists?(x.key)
      class Team; include Redis::Objects; lock :trade_players, expiration: 15; def id = 1; end
      puts Team.new.trade_players_lock.key
    RUBY
    assert status.success?, out
    assert_equal ["Redis::Lock", "value_of_the_block", "false", "team:1:trade_players_lock"], out.lines.map(&:chomp)
  end

  # With redis-objects installed, the switch loads it (its counters, lists
  # ... and its Redis::Objects) and replaces only Redis::Lock. Here a file
  # at its path stands for it: what is checked is which one the switch picks.
  def test_an_installed_redis_objects_is_used_instead_of_the_lock_part
    dir = Dir.mktmpdir("installed-redis-objects-")
    FileUtils.mkdir_p(File.join(dir, "redis"))
    File.write(File.join(dir, "redis", "objects.rb"), "class Redis; module Objects; INSTALLED = true; end; end\n")
    out, status = run_ruby(<<~RUBY, [dir])
      require "redis"
      require "redislock/redis_objects"
      puts Redis::Objects.const_defined?(:INSTALLED), Redis::Lock.equal?(RedisLock::RedisObjects::Lock)
    RUBY
    assert status.success?, out
    assert_equal %w[true true], out.lines.map(&:chomp)
  ensure
    FileUtils.rm_rf(dir)
  end

  # --- what redis-objects 1.7.0 does on the wire, next to the switch ---
  #
  # redis-objects 1.7.0 takes a lock with `SET <key> "" PX <ms> NX` on the
  # key named as above (no prefix of its own), releases it with `DEL <key>`
  # and, given :expiration, takes a held key whose value reads as a past
  # time. docs/ruby.md gives what was measured with redis-objects itself.

  def test_a_switch_holder_makes_redis_objects_set_nx_fail_on_the_same_key
    roster = Roster.new(key_for)
    key = roster.renumber_lock.key
    taken = roster.renumber_lock.lock do
      assert_match(/\A[0-9a-f]{32}\z/, raw.get(key), "the switch's key is the model's key itself")
      raw.set(key, "", px: 30_000, nx: true)
    end
    assert_equal false, taken, "redis-objects' SET NX fails while the switch holds the name"
    assert_nil raw.get(key)
    assert_equal true, raw.set(key, "", px: 30_000, nx: true), "and succeeds once the switch released"
  ensure
    raw.del(key)
  end

  def test_a_redis_objects_holder_excludes_the_switch_until_its_del
    key = Roster.new(key_for).renumber_lock.key
    assert raw.set(key, "", px: 30_000, nx: true), "what redis-objects 1.7.0 writes when it takes the lock"
    assert_raises(Redis::Lock::LockTimeout) { Redis::Lock.new(key, raw, timeout: 0).lock { flunk "entered" } }
    assert_equal "", raw.get(key), "the foreign holder's value untouched"
    waiter = Thread.new { Redis::Lock.new(key, raw, timeout: 60, expiration: 30).lock { raw.get(key) } }
    wait_until("the switch to wait") { raw.llen("{#{key}}:queue") == 1 }
    assert_equal "", raw.get(key), "still the foreign holder's"
    assert_equal 1, raw.del(key), "redis-objects' release"
    assert_match(/\A[0-9a-f]{32}\z/, waiter.value, "the waiter took it after the DEL (nobody woke it: it retried)")
    assert_nil raw.get(key)
  ensure
    raw.del(key)
    waiter&.join(90)
  end

  def test_a_value_written_before_redis_objects_1_4_2_is_a_holder_not_a_time
    key = key_for
    raw.set(key, (Time.now.to_f - 60).to_s, px: 60_000) # an expiry time, already past
    assert_raises(Redis::Lock::LockTimeout) do
      Redis::Lock.new(key, raw, expiration: 30, timeout: 0).lock { flunk "read the value as a time" }
    end
  ensure
    raw.del(key)
  end
end
