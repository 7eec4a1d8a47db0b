# frozen_string_literal: true

module RedisLock
  # A lock held by this process: the plain lock, permits of a semaphore, or
  # one side of a read-write lock. Made by Client.
  #
  # Garbage-collected while still held, it is released (best effort) in the
  # process that took it; in a child made by fork it is inert: releasing or
  # collecting it there frees the child's memory and leaves the parent's
  # lock held. One thread at a time may use a Lock.
  class Lock
    # The name it was taken under (a String).
    attr_reader :name

    # @api private: made by Client
    def initialize(handle, name)
      @handle = FFI::AutoPointer.new(handle, Native.method(:redislock_lock_free))
      @name = name
    end

    # Release it. Raises NotOwned when it expired or another owner took it
    # (the new owner's key is left alone), or when it was released already;
    # Unconfirmed (a NotOwned) when the outcome is unknown.
    def release
      RedisLock.check(Native.redislock_release(take_handle))
      nil
    end

    # Release it if still held, ignoring every error (the end of a block
    # that raised). Nothing when it was released already.
    def release_quietly
      return if @handle.nil?

      Native.redislock_lock_free(take_handle)
      nil
    end

    # Drop this handle and keep the lock on the server until its TTL runs
    # out or Client#release_token(name, token) releases it, from this or
    # another process (#token stays readable). Background renewal stops.
    def forget
      Native.redislock_lock_forget(take_handle)
      nil
    end

    # True once released (or forgotten) through this handle.
    def released?
      @handle.nil?
    end

    # Set the remaining time to `ttl` seconds (not added to it). Raises
    # NotOwned, and the lock turns lost, when it expired or another owner
    # took it: an expired lock is never re-created. (Given a Module, this is
    # Object#extend.)
    def extend(ttl, *modules)
      return super if ttl.is_a?(Module)
      raise ArgumentError, "extend takes one TTL in seconds, got #{modules.size + 1} arguments" unless modules.empty?

      RedisLock.check(Native.redislock_extend(handle, Units.ttl_ms(ttl)))
      self
    end

    # Renew in the background at about a third of the TTL until released.
    def auto_renew
      RedisLock.check(Native.redislock_lock_auto_renew(handle))
      self
    end

    # True once background renewal or an extend found the lock gone (it
    # expired, or another owner took it): work done "under" it from then
    # on is unprotected. Reads a flag: no round trip.
    def lost?
      Native.redislock_lock_is_lost(handle)
    end

    # Whether this handle still holds its lock, asked of the server now (one
    # round trip; over Redlock, of a majority). False does not mark it lost.
    def owned?
      out = FFI::MemoryPointer.new(:bool)
      RedisLock.check(Native.redislock_lock_owned(handle, out))
      out.read(:bool)
    end

    # The token stored under the key (a binary String). Still readable
    # after the release, as the fence once drawn is.
    def token
      (@token ||= read_token(handle)).dup
    end

    # The fencing number: greater than any handed out before for this name
    # to an earlier holder, also across a server restart that lost the
    # counter (it is at least the server's clock in microseconds, about
    # 1.8e15, and below 2**53). Drawn on the first call with a check that
    # the lock is still held (one round trip; `fenced: true` at acquire draws
    # it there); later calls answer from memory, also after the release.
    # Raises NotOwned when the lock was lost, or released, before that.
    def fence
      if @handle.nil?
        return @fence if @fence

        raise NotOwned.new("the lock #{name.inspect} was released before its fence was drawn",
                           status: Native::NOT_OWNER)
      end
      out = FFI::MemoryPointer.new(:uint64)
      RedisLock.check(Native.redislock_lock_draw_fence(handle, out))
      out.read(:uint64)
    end

    def inspect
      state = if released? then "released"
              elsif lost? then "lost"
              else "held"
              end
      "#<#{self.class.name} #{name.inspect} #{state}>"
    end

    private

    def handle
      @handle or raise NotOwned.new("the lock #{name.inspect} was already released through this handle",
                                    status: Native::NOT_OWNER)
    end

    def read_token(h)
      n = Native.redislock_lock_token(h, nil, 0)
      buf = FFI::MemoryPointer.new(:uint8, [n, 1].max)
      Native.redislock_lock_token(h, buf, n)
      buf.read_bytes(n)
    end

    # The raw handle, given up by this object (the callee frees it).
    def take_handle
      h = handle
      fence = Native.redislock_lock_fence_if_drawn(h)
      @fence = fence unless fence.zero?
      @token ||= read_token(h)
      @handle = nil
      h.autorelease = false
      FFI::Pointer.new(h.address)
    end
  end
end
