# frozen_string_literal: true

require_relative "helper"

# The lock from Ruby against a live server: the wire format, the block form,
# errors, threads, interrupts, fork and the garbage collector.
class TestLock < Minitest::Test
  include Helpers

  def test_the_key_holds_the_token_and_the_ttl
    key = key_for
    lock = client.acquire(key, ttl: 5)
    assert_equal lock.token, raw.get(key).b, "the key's value is the token and nothing else"
    assert_equal 32, lock.token.bytesize
    assert_includes 4000..5000, raw.pttl(key)
    assert_equal key, lock.name
    lock.release
    assert_nil raw.get(key), "released: the key is gone"
    assert lock.released?
  end

  def test_a_caller_token_and_binary_names
    key = "#{key_for}\x00\xff".b
    lock = client.acquire(key, ttl: 5, token: "request-42")
    assert_equal "request-42", raw.get(key)
    assert_equal "request-42", lock.token
    assert client.owned_by?(key, "request-42")
    refute client.owned_by?(key, "someone-else")
    assert client.extend_token(key, "request-42", 9)
    assert_operator raw.pttl(key), :>, 5000
    refute client.release_token(key, "someone-else")
    assert_equal "request-42", raw.get(key), "a wrong token releases nothing"
    lock.forget
    assert client.release_token(key, "request-42")
    assert_nil raw.get(key)
  end

  def test_the_block_returns_its_value_and_releases
    key = key_for
    value = client.lock(key, ttl: 5, wait: 1) do |lock|
      assert_equal lock.token, raw.get(key).b
      :done
    end
    assert_equal :done, value
    assert_nil raw.get(key)
  end

  def test_the_block_releases_when_it_raises
    key = key_for
    error = assert_raises(RuntimeError) { client.lock(key, ttl: 5) { raise "boom" } }
    assert_equal "boom", error.message
    assert_nil raw.get(key), "released although the block raised"
    assert_raises(ArgumentError) { client.lock(key, ttl: 5) }
  end

  def test_the_block_raises_not_owned_when_the_lock_was_lost_while_it_ran
    key = key_for
    error = assert_raises(RedisLock::NotOwned) do
      client.lock(key, ttl: 5) do
        raw.set(key, "thief")
        :unprotected
      end
    end
    assert_match(/lost while it ran/, error.message)
    assert_equal "thief", raw.get(key), "the new owner's key is left alone"
  end

  def test_the_block_forms_renew_by_default
    key = key_for
    left = client.lock(key, ttl: 0.3) do |lock|
      sleep 0.9
      refute lock.lost?
      raw.pttl(key)
    end
    assert_operator left, :>, 0, "renewed: the block outlasted its TTL of 300 ms and still held the lock"
    c = RedisLock::Client.new(server.url)
    renewed = lambda do |what|
      before = c.stats[:renewals_ok]
      wait_until("a renewal of the #{what}") { c.stats[:renewals_ok] > before }
    end
    c.semaphore(key_for("semaphore"), limit: 2, ttl: 0.3) { renewed.call("permit") }
    c.read_lock(key_for("rw"), ttl: 0.3) { renewed.call("read lock") }
    c.write_lock(key_for("rw"), ttl: 0.3) { renewed.call("write lock") }
    error = assert_raises(RedisLock::NotOwned, "auto_renew: false leaves it to its TTL") do
      client.lock(key_for("not renewed"), ttl: 0.2, auto_renew: false) { sleep 0.5 }
    end
    assert_match(/lost while it ran/, error.message)
  end

  def test_a_block_that_releases_the_lock_itself
    key = key_for
    assert_equal 1, client.lock(key, ttl: 5) { |lock| lock.release && 1 || 1 }
  end

  def test_try_acquire_and_the_timeout
    key = key_for
    lock = client.acquire(key, ttl: 10)
    assert_nil client.try_acquire(key, ttl: 1)
    started = now
    error = assert_raises(RedisLock::Timeout) { client.acquire(key, ttl: 1, wait: 0.2) }
    assert_operator now - started, :>=, 0.19
    assert_match(/held by another owner/, error.message)
    assert_kind_of RedisLock::Error, error
    assert_equal RedisLock::Native::NOT_ACQUIRED, error.status
    lock.release
  end

  def test_expiry_makes_release_and_extend_raise_not_owned
    key = key_for
    lock = client.acquire(key, ttl: 0.05)
    wait_until("the key to expire") { raw.get(key).nil? }
    other = client.acquire(key, ttl: 10)
    assert_raises(RedisLock::NotOwned) { lock.extend(10) }
    assert lock.lost?
    error = assert_raises(RedisLock::NotOwned) { lock.release }
    assert_includes error.message, key
    assert_equal other.token, raw.get(key).b, "the new owner is spared"
    assert_raises(RedisLock::NotOwned) { lock.release }
    other.release
  end

  def test_extend_sets_the_remaining_time_and_object_extend_still_works
    key = key_for
    lock = client.acquire(key, ttl: 2)
    assert_same lock, lock.extend(20)
    assert_operator raw.pttl(key), :>, 15_000
    mod = Module.new { def hello = :hi }
    lock.extend(mod)
    assert_equal :hi, lock.hello
    assert_raises(ArgumentError) { lock.extend(5, mod) }
    assert_equal "#<RedisLock::Client 127.0.0.1:1>", RedisLock::Client.new("redis://user:s3cret@127.0.0.1:1/0").inspect
    lock.release
  end

  # After a release, the fence drawn while held (by a fenced acquire, a
  # read, a hand-off) is still the answer; with none drawn, NotOwned, never nil.
  def test_a_fence_read_after_release
    key = key_for
    fenced = client.acquire(key, ttl: 5, fenced: true)
    drawn = fenced.fence
    fenced.release
    assert_equal drawn, fenced.fence
    read = client.acquire(key, ttl: 5)
    drawn = read.fence
    read.release_quietly
    assert_equal drawn, read.fence
    never = client.acquire(key, ttl: 5)
    never.release
    error = assert_raises(RedisLock::NotOwned) { never.fence }
    assert_match(/released before its fence was drawn/, error.message)
  end

  # The token, never read while held, after release, release_quietly and forget.
  def test_the_token_after_the_release
    key = key_for
    %i[release release_quietly forget].each do |how|
      lock = client.acquire(key, ttl: 5)
      stored = raw.get(key).b
      lock.public_send(how)
      assert_equal stored, lock.token, "after #{how}"
      assert client.release_token(key, lock.token) if how == :forget
    end
  end

  def test_fences_grow_and_owned_asks_the_server
    key = key_for
    a = client.acquire(key, ttl: 5)
    fa = a.fence
    assert_operator fa, :>, 1_000_000_000_000_000, "at least the server's clock in microseconds"
    assert_equal fa, a.fence, "answered from memory the second time"
    assert a.owned?
    assert_equal fa, client.fence_token(key, a.token), "by token: the holder's number"
    a.release
    b = client.acquire(key, ttl: 5, fenced: true)
    assert_operator b.fence, :>, fa
    assert_nil client.fence_token(key, "not-the-owner")
    raw.set(key, "thief")
    refute b.owned?
    refute b.lost?, "owned? does not mark it lost"
    assert_raises(RedisLock::NotOwned) { b.release }
  end

  def test_auto_renew_keeps_it_and_notices_a_theft
    key = key_for
    lock = client.acquire(key, ttl: 0.3, auto_renew: true)
    wait_until("two renewals") { client.stats[:renewals_ok] >= 2 }
    assert_equal lock.token, raw.get(key).b
    raw.set(key, "thief")
    wait_until("the renewal to find the lock stolen") { lock.lost? }
    assert_raises(RedisLock::NotOwned) { lock.release }
    assert_equal "thief", raw.get(key)
  end

  def test_bad_input_is_refused_before_any_io
    dead = RedisLock::Client.new("redis://127.0.0.1:1/0") # nothing listens: I/O would fail differently
    [
      -> { dead.acquire("", ttl: 1) },
      -> { dead.acquire(nil, ttl: 1) },
      -> { dead.acquire(42, ttl: 1) },
      -> { dead.acquire("k", ttl: 0) },
      -> { dead.acquire("k", ttl: -1) },
      -> { dead.acquire("k", ttl: 0.0001) },
      -> { dead.acquire("k", ttl: 31 * 24 * 3600) },
      -> { dead.acquire("k", ttl: Float::NAN) },
      -> { dead.acquire("k", ttl: "30") },
      -> { dead.acquire("k", ttl: 1, wait: -1) },
      -> { dead.acquire("k", ttl: 1, wait: Float::INFINITY) },
      -> { dead.acquire("k", ttl: 1, token: "") },
      -> { dead.acquire("k" * 1_000_000, ttl: 1) },
      -> { dead.acquire_semaphore("k", limit: 0) },
      -> { dead.acquire_semaphore("k", limit: 2, permits: 3) },
      -> { dead.extend_token("k", "t", 0) },
      -> { RedisLock::Client.new("http://127.0.0.1") },
      -> { RedisLock::Client.new("redis://127.0.0.1:99999") },
      -> { RedisLock::Client.new("redis://\xff\xfe") },
      -> { RedisLock::Client.new("redis://127.0.0.1\0:1") },
      -> { RedisLock::Client.new([]) },
      -> { RedisLock::Client.new(nil) }
    ].each_with_index do |call, i|
      error = assert_raises(ArgumentError, "case #{i}") { call.call }
      assert_kind_of RedisLock::InvalidArgument, error, "case #{i}: #{error.message}"
      refute_empty error.message
    end
    assert_equal 0, dead.stats[:connection_errors], "nothing was sent"
  end

  def test_a_dead_server_is_a_connection_error_and_a_wrong_type_is_left_alone
    dead = RedisLock::Client.new("redis://127.0.0.1:1/0?connect_timeout=1s")
    error = assert_raises(RedisLock::ConnectionError) { dead.acquire("k", ttl: 1, wait: 0) }
    assert_kind_of RedisLock::Error, error
    key = key_for
    raw.rpush(key, "a list")
    assert_raises(RedisLock::WrongType) { client.acquire(key, ttl: 1, wait: 0) }
    assert_equal ["a list"], raw.lrange(key, 0, -1)
  end

  def test_timeouts_set_by_client_options
    silent = TCPServer.new("127.0.0.1", 0) # the kernel accepts its connections; nothing answers
    url = "redis://127.0.0.1:#{silent.addr[1]}/0"
    started = now
    error = assert_raises(RedisLock::ConnectionError) do
      RedisLock::Client.new(url, command_timeout: 0.3).try_acquire(key_for)
    end
    assert_operator now - started, :<, 1.5, "300 ms, not the default 2 s"
    assert_match(/command timeout 300ms/, error.message)
    error = assert_raises(RedisLock::ConnectionError, "an option beside the URL's own parameters") do
      RedisLock::Client.new("#{url}?connect_timeout=1s", command_timeout: Rational(1, 4)).try_acquire(key_for)
    end
    assert_match(/command timeout 250ms/, error.message)
    error = assert_raises(RedisLock::NoQuorum, "every URL of a Redlock list takes the options") do
      RedisLock::Client.new([url, "#{url}?db=1", "#{url}?db=2"], node_timeout: 0.2).try_acquire(key_for)
    end
    assert_match(/node timeout 200ms/, error.message)

    # Given both in the URL (5 s) and as an option (300 ms): the option wins,
    # well under the URL's 5 s and the default 2 s, on every URL of a list.
    started = now
    error = assert_raises(RedisLock::ConnectionError, "the option wins over the URL's parameter") do
      RedisLock::Client.new("#{url}?connect_timeout=5s&command_timeout=5s",
                            connect_timeout: 0.3, command_timeout: 0.3).try_acquire(key_for)
    end
    assert_operator now - started, :<, 1.9, "300 ms, not the URL's 5 s nor the default 2 s"
    assert_match(/300ms/, error.message)
    started = now
    error = assert_raises(RedisLock::Error, "the option wins on every URL of a Redlock list") do
      RedisLock::Client.new(Array.new(3) { "#{url}?node_timeout=5s&command%5Ftimeout=5s" },
                            command_timeout: 0.3, node_timeout: 0.3).try_acquire(key_for, ttl: 30)
    end
    assert_operator now - started, :<, 1.9, "Redlock: 300 ms, not the URL's 5 s"
    assert_match(/300ms/, error.message)
    # What the library is given: every occurrence of the URL's own parameter
    # goes (its name percent-decoded, with a value or without); the rest stays.
    with = ->(u, **t) { RedisLock::Units.with_timeouts(u, t.transform_keys(&:to_s)) }
    assert_equal "redis://h:1?command_timeout=300ms", with.("redis://h:1?command_timeout=5s", command_timeout: 0.3)
    assert_equal "redis://h:1?command_timeout=300ms", with.("redis://h:1?command_timeout", command_timeout: 0.3)
    assert_equal "redis://u:p%40ss@h:1/0?db=0&node_timeout=9s&command_timeout=300ms#frag",
                 with.("redis://u:p%40ss@h:1/0?command_timeout=5s&db=0&node_timeout=9s&command%5ftimeout=7s#frag",
                       command_timeout: 0.3)
    assert_equal "redis://h:1?connect_timeout=1s&db=0&command_timeout=300ms",
                 with.("redis://h:1?connect_timeout=1s&db=0", command_timeout: 0.3)
    assert_equal "redis://h:1/?db=1&connect_timeout=250ms", with.("redis://h:1/?db=1&", connect_timeout: 0.25)
    assert_equal "redis://h:1?connect_timeout=250ms", with.("redis://h:1?", connect_timeout: 0.25)

    full = Socket.new(:INET, :STREAM) # a backlog of one, taken: the kernel drops the next SYNs
    full.bind(Addrinfo.tcp("127.0.0.1", 0))
    full.listen(0)
    filler = Socket.tcp("127.0.0.1", full.local_address.ip_port)
    error = assert_raises(RedisLock::ConnectionError) do
      RedisLock::Client.new("redis://127.0.0.1:#{full.local_address.ip_port}/0", connect_timeout: 0.3)
                       .try_acquire(key_for)
    end
    assert_match(/connect timeout 300ms/, error.message)

    [
      -> { RedisLock::Client.new(url, connect_timeout: 0) },
      -> { RedisLock::Client.new(url, command_timeout: -1) },
      -> { RedisLock::Client.new(url, node_timeout: 3601) },
      -> { RedisLock::Client.new(url, connect_timeout: Float::NAN) },
      -> { RedisLock::Client.new(url, command_timeout: "1s") }
    ].each_with_index do |call, i|
      error = assert_raises(RedisLock::InvalidArgument, "case #{i}") { call.call }
      refute_empty error.message
    end
  ensure
    silent&.close
    filler&.close
    full&.close
  end

  def test_a_closed_client
    c = RedisLock::Client.new(server.url)
    lock = c.acquire(key_for, ttl: 5)
    c.close
    assert_raises(RedisLock::Error) { c.acquire(key_for, ttl: 1) }
    lock.release # its lock keeps what it needs
  end

  def test_threads_keep_a_non_atomic_counter_exact
    key = key_for
    counter = key_for("counter")
    raw.set(counter, 0)
    threads = Array.new(8) do
      Thread.new do
        25.times do
          client.lock(key, ttl: 10, wait: 60) do
            v = raw.get(counter).to_i
            Thread.pass
            raw.set(counter, v + 1)
          end
        end
      end
    end
    threads.each(&:join)
    assert_equal 200, raw.get(counter).to_i
    assert_nil raw.get(key)
  end

  def test_waiting_releases_the_gvl
    key = key_for
    holder = client.acquire(key, ttl: 10)
    waiter = Thread.new { client.acquire(key, ttl: 5, wait: 30) }
    wait_until("the waiter to queue") { client.stats[:waiters_now] == 1 }
    # Ruby code runs on another thread while the waiter is inside the library.
    spins = 0
    deadline = now + 0.2
    spins += 1 while now < deadline
    assert_operator spins, :>, 1000
    holder.release
    lock = waiter.value
    assert_equal lock.token, raw.get(key).b
    assert_operator client.stats[:acquired_handed_over], :>=, 1, "handed over by the release, no polling"
    lock.release
  end

  def test_thread_raise_and_timeout_end_a_wait_and_the_waiter_leaves_the_queue
    key = key_for
    holder = client.acquire(key, ttl: 30)
    waiter = Thread.new do
      client.acquire(key, ttl: 5, wait: 60)
    rescue RuntimeError => e
      e
    end
    wait_until("the waiter to queue") { client.stats[:waiters_now] == 1 }
    waiter.raise(RuntimeError, "stop waiting")
    error = wait_until("the waiter to end", seconds: 30) { waiter.join(0.1) && waiter.value }
    assert_equal "stop waiting", error.message
    require "timeout"
    assert_raises(Timeout::Error) { Timeout.timeout(0.2) { client.acquire(key, ttl: 5) } }
    wait_until("no waiter left") { client.stats[:waiters_now].zero? }
    holder.release
    fresh = client.try_acquire(key, ttl: 1)
    refute_nil fresh, "nobody queued: a newcomer takes it at once"
    fresh.release
    assert_empty keys_of(key), "nothing of the name is left"
  end

  def test_a_lock_collected_while_held_is_released
    key = key_for
    lambda_scope = -> { client.acquire(key, ttl: 30).token }
    token = lambda_scope.call
    assert_equal token, raw.get(key).b
    wait_until("the collector to release it") do
      GC.start(full_mark: true, immediate_sweep: true)
      raw.get(key).nil?
    end
    assert_nil raw.get(key)
  end

  def test_a_forked_child_leaves_the_parents_lock_held
    key = key_for
    lock = client.acquire(key, ttl: 30)
    token = lock.token
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      ok = begin
        mine = client.acquire("#{key}:child", ttl: 5) # the child's own connections
        mine.release
        lock.release_quietly # inert here
        GC.start
        raw_child = Redis.new(host: "127.0.0.1", port: server.port)
        raw_child.get(key).b == token
      rescue StandardError => e
        writer.write(e.full_message)
        false
      end
      writer.write(ok ? "ok" : "not held")
      writer.close
      exit!(0)
    end
    writer.close
    Process.wait(pid)
    assert_equal "ok", reader.read
    assert_equal lock.token, raw.get(key).b, "the parent's lock survived the child"
    lock.release
  end

  def test_stats_count
    c = RedisLock::Client.new(server.url)
    c.lock(key_for, ttl: 1) { nil }
    stats = c.stats
    assert_equal 1, stats[:acquired_at_once]
    assert_equal 1, stats[:releases_ok]
    assert_equal 0, stats[:held_now]
    assert_equal RedisLock::Client::STATS.sort, stats.keys.sort
  end

  def test_one_shared_client_per_url
    a = RedisLock::Client.new(server.url, shared: true)
    b = RedisLock::Client.new(server.url, shared: true)
    before = b.stats[:acquired_at_once] # other tests may use the shared client of this URL
    a.lock(key_for, ttl: 1) { nil }
    assert_equal before + 1, b.stats[:acquired_at_once], "the same connections and counters"
  end
end
