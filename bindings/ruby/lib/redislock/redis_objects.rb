# frozen_string_literal: true

require_relative "../redislock"

module RedisLock
  # A drop-in for redis-objects' Redis::Lock over this library's lock.
  #
  #   require "redislock/redis_objects"   # after redis-objects: Redis::Lock is now this class
  #
  #   Redis::Lock.new("reports", redis, expiration: 30, timeout: 5).lock { build_report }
  #   class Job; include Redis::Objects; lock :run, timeout: 5; end   # job.run_lock.lock { ... }
  #
  # What changes (docs/ruby.md): the key holds a random token (not a client
  # timestamp, nor an empty string); only the owner releases it; a lock always has a TTL (without
  # :expiration, a 60 s lease renewed while the block runs); #clear is
  # refused. Old and new processes must not share a lock name during the
  # switch: they do not recognise each other's values.
  module RedisObjects
    # Seconds of the lease when no :expiration is given: renewed in the
    # background while the block runs, so only a dead process's lock waits
    # this long before someone else may take it.
    RENEWED_TTL = 60

    # The redis-objects interface of Redis::Lock.
    class Lock
      # Raised when :timeout ran out (a RedisLock::Timeout, so both rescues work).
      class LockTimeout < RedisLock::Timeout; end

      attr_reader :key, :options

      # `key`: the lock's name. `redis`: a redis-rb client (its host, port,
      # database, user and password are used), a URL String, a
      # RedisLock::Client, or nil for the default (Redis::Objects.redis,
      # $redis, then REDIS_URL, then redis://127.0.0.1:6379/0).
      # `options`: :timeout (seconds to wait, default 5; 0 tries once) and
      # :expiration (seconds the lock lives; nil: renewed while held).
      def initialize(key, redis = nil, options = {})
        if redis.is_a?(Hash) && options.empty?
          options = redis
          redis = nil
        end
        @key = Units.bytes(key, "key")
        @options = options.dup
        @options[:timeout] ||= 5
        @redis = redis
        @client = RedisObjects.client_for(redis)
        Units.wait_ms(@options[:timeout])
        Units.ttl_ms(@options[:expiration], "expiration") if @options[:expiration]
      end

      # The connection the lock was made with (as redis-objects gives it).
      def redis
        @redis || @client
      end

      # Run the block holding the lock and return its value; release
      # afterwards (only this owner's lock: one that expired and was taken
      # meanwhile is left to its new owner). Raises LockTimeout when
      # :timeout ran out.
      def lock(&block)
        raise ArgumentError, "Block not given" unless block

        expiration = @options[:expiration]
        lock = begin
          @client.acquire(@key, ttl: expiration || RENEWED_TTL, wait: @options[:timeout],
                                auto_renew: expiration.nil?)
        rescue RedisLock::Timeout => e
          raise LockTimeout, "Timeout on lock #{@key} exceeded #{@options[:timeout]} sec (#{e.message})"
        end
        begin
          yield
        ensure
          lock.release_quietly
        end
      end

      # redis-objects deletes the key whoever holds it; breaking another
      # process's lock is what this library is for avoiding, and a lock
      # here always expires by its TTL.
      def clear
        raise NotImplementedError, "redislock: Redis::Lock#clear would break another process's lock; " \
                                   "a lock here always ends with its TTL (or its owner's release)"
      end
      alias delete clear
    end

    class << self
      # Make Redis::Lock this class (redis-objects, or redis-rb, must be loaded).
      def replace!
        raise NameError, "redislock: load redis-objects (or redis) before redislock/redis_objects" \
          unless defined?(::Redis)

        # redis-objects autoloads Redis::Lock: load its file now, so that a
        # later `require "redis/lock"` (Redis::Objects' `lock` macro) is a
        # no-op instead of reopening our class with another superclass.
        original = ::Redis.autoload?(:Lock)
        require original if original
        ::Redis.send(:remove_const, :Lock) if ::Redis.const_defined?(:Lock, false)
        ::Redis.const_set(:Lock, Lock)
      end

      # The client for what Redis::Lock.new was given: the process's shared
      # client of its URL (the library keeps one per URL).
      def client_for(redis)
        return redis if redis.is_a?(RedisLock::Client)

        RedisLock::Client.new(url_of(redis || default_redis), shared: true)
      end

      # The URL of a redis-rb client (4.x: _client.options; 5.x: _client.config).
      def url_of(redis)
        return redis if redis.is_a?(String)

        inner = redis.respond_to?(:_client) ? redis._client : redis
        conf = if inner.respond_to?(:config) then config_hash(inner.config)
               elsif inner.respond_to?(:options) then inner.options
               else
                 raise InvalidArgument, "redislock: cannot tell where #{redis.class} connects; pass a URL"
               end
        build_url(conf)
      end

      private

      def default_redis
        if defined?(::Redis::Objects) && ::Redis::Objects.respond_to?(:redis)
          begin
            return ::Redis::Objects.redis
          rescue StandardError
            nil # not configured: fall through
          end
        end
        (defined?($redis) && $redis) || ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0")
      end

      def config_hash(config)
        %i[scheme host port path db username password ssl].to_h do |k|
          [k, config.respond_to?(k) ? config.public_send(k) : nil]
        end
      end

      def build_url(conf)
        user = conf[:username].to_s
        pass = conf[:password].to_s
        auth = if pass.empty? then ""
               else "#{escape(user)}:#{escape(pass)}@"
               end
        db = conf[:db].to_i
        if conf[:path]
          query = db.zero? ? "" : "?db=#{db}"
          return "unix://#{conf[:path]}#{query}"
        end
        scheme = conf[:ssl] || conf[:scheme].to_s == "rediss" ? "rediss" : "redis"
        "#{scheme}://#{auth}#{conf[:host] || '127.0.0.1'}:#{conf[:port] || 6379}/#{db}"
      end

      def escape(str)
        str.gsub(/[^A-Za-z0-9\-._~]/) { |c| c.bytes.map { |b| format("%%%02X", b) }.join }
      end
    end
  end
end

RedisLock::RedisObjects.replace! if defined?(::Redis)
