# frozen_string_literal: true

require_relative "../redislock"
require_relative "redis_objects_model"

# redis-objects when it is installed (its Redis::Objects, whose Redis::Lock
# the switch then replaces), else the lock part of Redis::Objects below.
if defined?(::Redis) && !::Redis.const_defined?(:Objects, false)
  begin
    require "redis/objects"
  rescue LoadError
    ::Redis.const_set(:Objects, RedisLock::RedisObjects::Model)
  end
end

module RedisLock
  # A drop-in for redis-objects' Redis::Lock over this library's lock.
  #
  #   require "redislock/redis_objects"   # after redis-objects: Redis::Lock is now this class
  #
  #   Redis::Lock.new("reports", redis, expiration: 30, timeout: 5).lock { build_report }
  #   class Job; include Redis::Objects; lock :run, timeout: 5; end   # job.run_lock.lock { ... }
  #
  # What changes (docs/ruby.md): the key holds a random token (not a client
  # timestamp, nor an empty string); only the owner releases it; a lock
  # always has a TTL (without :expiration, a 60 s lease renewed while the
  # block runs); #clear takes the lock from its holder through the library
  # (waking the next waiter). Old and new processes must not share a lock
  # name during the switch: they do not recognise each other's values.
  module RedisObjects
    # Seconds of the lease when no :expiration is given: renewed in the
    # background while the block runs, so only a dead process's lock waits
    # this long before someone else may take it.
    RENEWED_TTL = 60

    # The redis-objects interface of Redis::Lock (RedisObjects::Lock below):
    # a class first named Redis::Lock when redis-rb is loaded, so that logs
    # and `x.class.name` say what redis-objects says. With redis-objects
    # loaded, the commands every redis-objects object has (exists?, ttl,
    # expire, type, rename, ...) come from its Redis::Helpers::CoreCommands,
    # run on #redis (without it: KeyCommands, the same key commands);
    # delete/del/clear are this library's forced release.
    klass = Class.new do
      attr_reader :key, :options

      # As redis-objects: `Redis::Lock.new(key, redis = nil, options = {})`.
      # `key`: the lock's name (a String or Symbol; an Array is joined with
      # ":"). `redis`: a redis-rb client or a ConnectionPool of them (its
      # host, port, database, user, password and TLS are used), a URL
      # String, a RedisLock::Client, or nil for the default
      # (Redis::Objects.redis, $redis, then REDIS_URL, then
      # redis://127.0.0.1:6379/0, looked up at each use, as redis-objects
      # does). `options`: :timeout (seconds to wait, default 5; 0 tries
      # once) and :expiration (seconds the lock lives; nil: renewed while
      # held). Options may be nil (redis-objects passes nil for a lock
      # declared on a superclass).
      def initialize(key, *args)
        @key = key.is_a?(Array) ? key.flatten.join(":") : key
        Units.bytes(@key, "key")
        options = args.last.is_a?(Hash) ? args.pop : {}
        @options = options.dup
        @options[:timeout] ||= 5
        Units.wait_ms(@options[:timeout])
        Units.ttl_ms(@options[:expiration], "expiration") if @options[:expiration]
        connect(args.first)
      end

      # The redis-rb connection the lock was made with (as redis-objects
      # gives it): the one given, one made from the URL given, or the
      # default (Redis::Objects.redis, looked up now).
      def redis
        return @myredis if @myredis
        return @url_redis ||= @connect.call if @connect
        if @client
          raise InvalidArgument, "this Redis::Lock was made with a RedisLock::Client, which has no " \
                                 "redis-rb connection: give Redis::Lock.new a redis-rb client or a URL"
        end

        RedisObjects.default_redis
      end

      # Run the block holding the lock and return its value; release
      # afterwards (only this owner's lock: one that expired and was taken
      # meanwhile is left to its new owner). Raises LockTimeout when
      # :timeout ran out.
      def lock(&block)
        raise ArgumentError, "Block not given" unless block

        expiration = @options[:expiration]
        lock = begin
          lock_client.acquire(@key, ttl: expiration || RENEWED_TTL, wait: @options[:timeout],
                                    auto_renew: expiration.nil?)
        rescue RedisLock::Timeout => e
          raise self.class::LockTimeout, "Timeout on lock #{@key} exceeded #{@options[:timeout]} sec (#{e.message})"
        end
        begin
          yield
        ensure
          lock.release_quietly
        end
      end

      # Remove the lock whoever holds it, as redis-objects' `clear` does (an
      # admin's "unlock" of a lock whose owner crashed), through the
      # library's forced release: the oldest waiter is handed the lock at
      # once instead of waiting out a TTL, and fences stay monotonic. The
      # holder, if it is still working, no longer excludes anyone: its
      # release then leaves the new owner's lock alone. Returns 1 when a
      # holder was removed, 0 when nobody held it (redis-objects returns
      # DEL's count). A key of another type is left alone (WrongType).
      def delete
        lock_client.force_release(@key) ? 1 : 0
      end
      alias del delete
      alias clear delete

      # A lock has no value (as redis-objects).
      def value
        nil
      end

      # What redis-objects' objects serialise: key, options and value;
      # never the connection or its credentials.
      def to_hash
        { "key" => @key, "options" => @options, "value" => value }
      end

      def as_json(*)
        to_hash
      end

      def to_json(*args)
        to_hash.to_json(*args)
      end

      def inspect
        "#<#{self.class.name} #{@key.inspect} #{@options.inspect}>"
      end
      alias to_s inspect

      # YAML shows what JSON shows.
      def encode_with(coder)
        to_hash.each { |k, v| coder[k] = v }
      end

      # A lock holds a connection and its credentials: it is not marshalled
      # (rebuild it from #key and #options).
      def marshal_dump
        raise TypeError, "a Redis::Lock holds a connection and is not marshalled; rebuild it from key and options"
      end

      private

      # Keep what `redis` was given, without keeping a URL's password where
      # an inspection could show it (a URL is held by the connection factory).
      def connect(redis)
        case redis
        when nil then nil
        when RedisLock::Client then @client = redis
        when String
          @client = RedisObjects.client_for(redis)
          url = redis
          @connect = -> { ::Redis.new(url: url) }
        else
          @myredis = RedisObjects.proxy(redis)
        end
      end

      # This library's client for the connection: the process's shared
      # client of its URL, looked up again when the default connection
      # changed (Redis::Objects.redis = ...).
      def lock_client
        return @client if @client

        conn = redis
        @lock_client = nil unless @lock_for.equal?(conn)
        @lock_for = conn
        @lock_client ||= RedisObjects.client_for(conn)
      end
    end

    class << self
      # Make Redis::Lock this class (redis-objects, or redis-rb, must be loaded).
      def replace!(klass = Lock)
        raise NameError, "redislock: load redis-objects (or redis) before redislock/redis_objects" \
          unless defined?(::Redis)

        # redis-objects autoloads Redis::Lock: load its file now, so that a
        # later `require "redis/lock"` (Redis::Objects' `lock` macro) is a
        # no-op instead of reopening our class with another superclass.
        original = ::Redis.autoload?(:Lock)
        require original if original
        ::Redis.send(:remove_const, :Lock) if ::Redis.const_defined?(:Lock, false)
        ::Redis.const_set(:Lock, klass)
        # The commands every redis-objects object has; the class's own
        # methods (delete, clear, to_hash, ...) take precedence.
        # Without redis-objects, the same commands from this library.
        core = defined?(::Redis::Helpers::CoreCommands) ? ::Redis::Helpers::CoreCommands : KeyCommands
        klass.include(core) unless klass < core
        klass
      end

      # The client for a redis-rb connection (or a URL): the process's
      # shared client of its URL (the library keeps one per URL).
      def client_for(redis)
        return redis if redis.is_a?(RedisLock::Client)

        RedisLock::Client.new(url_of(redis), shared: true)
      end

      # The URL of a redis-rb client (4.x: _client.options; 5.x: _client.config),
      # or of the first of a ConnectionPool's.
      def url_of(redis)
        return redis if redis.is_a?(String)
        return redis.with { |conn| url_of(conn) } if redis.respond_to?(:with) && !redis.respond_to?(:_client)

        inner = redis.respond_to?(:_client) ? redis._client : redis
        conf = if inner.respond_to?(:config) then config_hash(inner.config)
               elsif inner.respond_to?(:options) then inner.options
               else
                 raise InvalidArgument, "redislock: cannot tell where #{redis.class} connects; pass a URL"
               end
        build_url(conf)
      end

      # redis-objects' proxy for a ConnectionPool (each command checks a
      # connection out), as its objects wrap what they are given.
      def proxy(redis)
        return redis unless defined?(::Redis::Objects::ConnectionPoolProxy)

        ::Redis::Objects::ConnectionPoolProxy.proxy_if_needed(redis)
      end

      # The connection of a lock given none: Redis::Objects.redis, then
      # $redis, then a connection to REDIS_URL (or the local default).
      def default_redis
        if defined?(::Redis::Objects) && ::Redis::Objects.respond_to?(:redis)
          begin
            return ::Redis::Objects.redis
          rescue StandardError
            nil # not configured: fall through
          end
        end
        (defined?($redis) && $redis) || (@default_redis ||= ::Redis.new(url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0")))
      end

      private

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

    # Named Redis::Lock first when redis-rb is loaded (the switch), else
    # only RedisLock::RedisObjects::Lock.
    replace!(klass) if defined?(::Redis)
    # Raised when :timeout ran out (a RedisLock::Timeout, so both rescues work).
    klass.const_set(:LockTimeout, Class.new(RedisLock::Timeout))
    Lock = klass
  end
end
