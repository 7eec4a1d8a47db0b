# frozen_string_literal: true

module RedisLock
  # A connection pool and renewal thread for one Redis deployment (one URL),
  # or for several independent servers (an Array of URLs: Redlock). One
  # client may be used from many threads at once; a forked child may keep
  # using it (it opens its own connections).
  #
  # Times are seconds (any Numeric). `wait:` nil waits forever, 0 tries once.
  class Client
    # What #stats reads: the C API's counters and gauges, in its order.
    STATS = %i[
      acquired_at_once acquired_after_wait acquired_handed_over acquire_timed_out acquire_errors
      releases_ok releases_not_owner extends_ok extends_lost renewals_ok renewals_lost locks_lost
      handoffs_given handoffs_received connection_errors reconnects held_now waiters_now
    ].freeze

    # The leading part of struct redislock_stats (the library fills a
    # shorter struct than its own: the histograms stay out).
    class StatsStruct < FFI::Struct
      layout(:size, :uint32, :reserved, :uint32, *STATS.flat_map { |field| [field, :uint64] })
    end
    private_constant :StatsStruct

    # `url`: redis://, rediss://, unix://, redis+sentinel:// or
    # redis+cluster:// (see the C API), or an Array of them for Redlock.
    # `shared: true` gives this process's one client for that URL (or list),
    # whose connections outlive this object. `connect_timeout:`,
    # `command_timeout:` and `node_timeout:` (seconds, 0.001 to 3600; nil:
    # what the URL says, else the library's default) are handed to the
    # library as the URL parameters of those names, added to each URL; the
    # option wins over the URL's parameter (removed from each URL, every
    # occurrence, before the option's is added). Validates, does not connect.
    def initialize(url, shared: false, connect_timeout: nil, command_timeout: nil, node_timeout: nil)
      urls = url.is_a?(Array) ? url : [url]
      raise InvalidArgument, "url must be a String or an Array of them, got #{url.inspect}" if urls.empty?

      urls.each do |u|
        raise InvalidArgument, "url must be a String, got #{u.inspect}" unless u.is_a?(String)
        raise InvalidArgument, "url must not contain a NUL byte: #{u.inspect}" if u.include?("\0")
      end
      timeouts = { "connect_timeout" => connect_timeout, "command_timeout" => command_timeout,
                   "node_timeout" => node_timeout }.reject { |_, v| v.nil? }
      urls = urls.map { |u| Units.with_timeouts(u, timeouts) } unless timeouts.empty?
      out = FFI::MemoryPointer.new(:pointer)
      RedisLock.check(open(urls, shared, out))
      @handle = FFI::AutoPointer.new(out.read_pointer, Native.method(:redislock_client_free))
      # Where it connects, from the library: hosts and ports, never a user
      # name or password (the URLs themselves are not kept).
      n = Native.redislock_client_addr(@handle, nil, 0)
      buf = FFI::MemoryPointer.new(:char, [n, 1].max)
      Native.redislock_client_addr(@handle, buf, n)
      @addr = buf.read_string(n).force_encoding(Encoding::UTF_8).freeze
    end

    # Where the client connects (hosts and ports; never credentials).
    attr_reader :addr

    # Free the client now (also done when it is garbage-collected). Locks
    # taken through it stay valid.
    def close
      @handle&.free
      @handle = nil
    end

    # Take the lock `name` (a binary-safe String) and return its Lock.
    # `wait:` nil waits forever (for the lock: a dead server still fails),
    # 0 tries once. `token:` the caller's own (unique!) token; nil draws 128
    # random bits. `fenced: true` draws the fencing number in the acquire.
    # Raises Timeout when the wait ran out, WrongType when the key is not a
    # lock, ConnectionError, NoQuorum..., InvalidArgument before any I/O.
    def acquire(name, ttl: 30, wait: nil, token: nil, auto_renew: false, fenced: false)
      name, key, ttl_ms, wait_ms = prepare(name, ttl, wait)
      token = Units.bytes(token, "token") unless token.nil?
      tok = token && Native.bytes(token)
      fn = fenced ? :redislock_acquire_fenced : :redislock_acquire
      held(name, auto_renew) do |out|
        Native.public_send(fn, handle, key, name.bytesize, ttl_ms, wait_ms, tok, token ? token.bytesize : 0, out)
      end
    end

    # One attempt: the Lock, or nil when another owner holds it.
    def try_acquire(name, ttl: 30, token: nil, auto_renew: false, fenced: false)
      acquire(name, ttl: ttl, wait: 0, token: token, auto_renew: auto_renew, fenced: fenced)
    rescue Timeout
      nil
    end

    # Run the block with the lock `name` held and release it afterwards, also
    # when the block raises; returns the block's value. The lock is renewed
    # in the background while the block runs (`auto_renew: false` leaves it
    # to its TTL), so the block may outlast `ttl`; a process that dies leaves
    # it for at most `ttl`. When the block returned but the lock was lost
    # meanwhile (expired, or taken by another owner: found by renewal, an
    # extend or the release), its work ran unprotected: this raises NotOwned
    # instead of returning. Long work can check lock.lost? between its steps.
    def lock(name, ttl: 30, wait: nil, token: nil, auto_renew: true, fenced: false, &block)
      raise ArgumentError, "lock needs a block (or use acquire)" unless block

      hold(acquire(name, ttl: ttl, wait: wait, token: token, auto_renew: auto_renew, fenced: fenced), &block)
    end

    # Take `permits` of the counting semaphore `name`, which admits `limit`
    # permits in all (1 to 1,000,000; permits 1 to limit). Waiters are
    # served in arrival order; each holder has its own lease, token and
    # fence. Never collides with the lock of the same name.
    def acquire_semaphore(name, limit:, permits: 1, ttl: 30, wait: nil, auto_renew: false)
      Units.count(limit, "limit", 1_000_000)
      Units.count(permits, "permits", limit)
      name, key, ttl_ms, wait_ms = prepare(name, ttl, wait)
      held(name, auto_renew) do |out|
        Native.redislock_acquire_semaphore(handle, key, name.bytesize, limit, permits, ttl_ms, wait_ms, out)
      end
    end

    # The block form of #acquire_semaphore, as #lock (renewed while it runs).
    def semaphore(name, limit:, permits: 1, ttl: 30, wait: nil, auto_renew: true, &block)
      raise ArgumentError, "semaphore needs a block (or use acquire_semaphore)" unless block

      hold(acquire_semaphore(name, limit: limit, permits: permits, ttl: ttl, wait: wait,
                                   auto_renew: auto_renew), &block)
    end

    # Take the read-write lock `name` shared: any number of readers at once
    # while no writer holds it or waits for it.
    def acquire_read(name, ttl: 30, wait: nil, auto_renew: false)
      side(:redislock_acquire_read, name, ttl, wait, auto_renew)
    end

    # Take the read-write lock `name` exclusively.
    def acquire_write(name, ttl: 30, wait: nil, auto_renew: false)
      side(:redislock_acquire_write, name, ttl, wait, auto_renew)
    end

    # The block form of #acquire_read, as #lock (renewed while it runs).
    def read_lock(name, ttl: 30, wait: nil, auto_renew: true, &block)
      raise ArgumentError, "read_lock needs a block (or use acquire_read)" unless block

      hold(acquire_read(name, ttl: ttl, wait: wait, auto_renew: auto_renew), &block)
    end

    # The block form of #acquire_write, as #lock (renewed while it runs).
    def write_lock(name, ttl: 30, wait: nil, auto_renew: true, &block)
      raise ArgumentError, "write_lock needs a block (or use acquire_write)" unless block

      hold(acquire_write(name, ttl: ttl, wait: wait, auto_renew: auto_renew), &block)
    end

    # Release the lock `name` if `token` holds it (no handle needed): true,
    # or false when it does not (expired, or another owner; nothing changed).
    def release_token(name, token)
      by_token(name, token) { |*args| Native.redislock_release_token(*args) }
    end

    # Take the lock `name` from whoever holds it (this library's holder, or
    # any string another client stored there) and hand it to the oldest
    # waiter at once, as a release would: true when a holder was removed,
    # false when nobody held it. The operator's unlock, for a lock whose
    # owner is known to be gone; it breaks mutual exclusion if the owner is
    # still working (that owner's extend or release then raises NotOwned).
    # Fences stay monotonic. Only the plain lock `name`, never a semaphore
    # or read-write lock of that name; WrongType for a key of another type
    # (left alone).
    def force_release(name)
      name = Units.bytes(name, "name")
      out = FFI::MemoryPointer.new(:bool)
      RedisLock.check(Native.redislock_force_release(handle, Native.bytes(name), name.bytesize, out))
      out.read(:bool)
    end

    # Set the remaining time of the lock `name` to `ttl` seconds if `token`
    # holds it: true, or false when it does not (it is never re-created).
    def extend_token(name, token, ttl)
      ttl_ms = Units.ttl_ms(ttl)
      by_token(name, token) { |*args| Native.redislock_extend_token(*args, ttl_ms) }
    end

    # Whether `token` holds the lock `name` right now (one round trip).
    def owned_by?(name, token)
      out = FFI::MemoryPointer.new(:bool)
      by_token(name, token) { |*args| Native.redislock_is_owned_by(*args, out) }
      out.read(:bool)
    end

    # The fencing number of the lock `name` held with `token`, or nil when
    # `token` does not hold it.
    def fence_token(name, token)
      out = FFI::MemoryPointer.new(:uint64)
      by_token(name, token) { |*args| Native.redislock_fence_token(*args, out) } ? out.read(:uint64) : nil
    end

    # What this client did so far: a Hash of counters (acquired_at_once,
    # acquired_after_wait, acquired_handed_over, ... as in every binding) and
    # the gauges held_now and waiters_now. No round trip.
    def stats
      out = StatsStruct.new
      out[:size] = StatsStruct.size
      RedisLock.check(Native.redislock_client_stats(handle, out))
      STATS.to_h { |field| [field, out[field]] }
    end

    # Check every server this client's locks may reach for what makes a lock
    # unsafe or slow (eviction policy, scripting, TIME and pub/sub refused,
    # persistence, replicas without min-replicas-to-write, maxclients
    # headroom, cluster state, Sentinel quorum, round trip) and run one lock
    # cycle: the same checks as `redislock doctor`, made by the core. A few
    # round trips per server; nothing is left on the server. Returns a
    # Report whatever was found (see Report#safe?); raises ConnectionError
    # when the server (or every sentinel, or every cluster node) cannot be
    # reached, NoQuorum when a majority of Redlock servers cannot, and
    # ServerError when the server refuses the credentials.
    def doctor
      out = FFI::MemoryPointer.new(:pointer)
      RedisLock.check(Native.redislock_doctor(handle, out))
      report = out.read_pointer
      begin
        Report.from_native(report)
      ensure
        Native.redislock_report_free(report)
      end
    end

    def inspect
      "#<#{self.class.name} #{@addr}#{@handle ? '' : ' closed'}>"
    end
    alias to_s inspect

    # What JSON (ActiveSupport's as_json, to_json) shows: where it connects.
    def as_json(*)
      { "addr" => @addr }
    end

    def to_json(*args)
      as_json.to_json(*args)
    end

    # YAML shows where it connects, and nothing else.
    def encode_with(coder)
      coder["addr"] = @addr
    end

    private

    def open(urls, shared, out)
      if urls.size == 1
        shared ? Native.redislock_client_open_shared(urls[0], out) : Native.redislock_client_open(urls[0], out)
      else
        strings = urls.map { |u| FFI::MemoryPointer.from_string(u) }
        array = FFI::MemoryPointer.new(:pointer, urls.size)
        array.write_array_of_pointer(strings)
        fn = shared ? :redislock_client_open_redlock_shared : :redislock_client_open_redlock
        Native.public_send(fn, array, urls.size, out)
      end
    end

    def handle
      @handle or raise Error, "this client was closed"
    end

    def side(fn, name, ttl, wait, auto_renew)
      name, key, ttl_ms, wait_ms = prepare(name, ttl, wait)
      held(name, auto_renew) { |out| Native.public_send(fn, handle, key, name.bytesize, ttl_ms, wait_ms, out) }
    end

    # The arguments every acquire checks: the name, its bytes in native
    # memory, the TTL and the wait in milliseconds.
    def prepare(name, ttl, wait)
      name = Units.bytes(name, "name")
      ttl_ms = Units.ttl_ms(ttl)
      wait_ms = Units.wait_ms(wait)
      [name, Native.bytes(name), ttl_ms, wait_ms]
    end

    # Run the acquire in the block (given where the handle goes) with this
    # thread's interrupts (Thread#raise, Thread#kill, Timeout.timeout, a
    # signal to the main thread) ending the wait within about 100 ms: the
    # waiter leaves the queue and the interrupt is raised here. A lock
    # handed over at that very moment is released at once, never leaked.
    def held(name, auto_renew)
      out = FFI::MemoryPointer.new(:pointer) # zeroed: NULL until the library writes a handle
      lock = nil
      done = false
      thread = Thread.current # kept alive (and in place) while the wait may read it
      begin
        Native.redislock_set_interrupt(Native::Interpreter::INTERRUPTED, Native::Interpreter.rb_thread_current)
        RedisLock.check(yield out)
        lock = Lock.new(out.read_pointer, name.frozen? ? name : name.dup.freeze)
        lock.auto_renew if auto_renew
        done = true
        lock
      ensure
        Native.redislock_set_interrupt(nil, nil)
        if lock.nil?
          ptr = out.read_pointer
          Native.redislock_lock_free(ptr) unless ptr.null?
        elsif !done
          lock.release_quietly
        end
        thread.nil? # keeps `thread` referenced until here
      end
    end

    def hold(lock)
      begin
        result = yield lock
      rescue Exception # rubocop:disable Lint/RescueException -- released whatever ends the block
        lock.release_quietly
        raise
      end
      return result if lock.released? # the block released it itself

      lost = lock.lost?
      begin
        lock.release
      rescue NotOwned => e
        cause = e
      rescue Error => e
        raise unless lost

        cause = e
      end
      if lost || cause
        raise NotOwned.new("the block returned, but the lock #{lock.name.inspect} was lost while it ran " \
                           "(expired, or another owner took it), so its work ran unprotected" \
                           "#{cause ? ": #{cause.message}" : ''}", status: Native::NOT_OWNER)
      end
      result
    end

    def by_token(name, token)
      name = Units.bytes(name, "name")
      token = Units.bytes(token, "token")
      status = yield handle, Native.bytes(name), name.bytesize, Native.bytes(token), token.bytesize
      return false if status == Native::NOT_OWNER

      RedisLock.check(status)
      true
    end
  end
end
