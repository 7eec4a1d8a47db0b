# frozen_string_literal: true

module RedisLock
  module RedisObjects
    # What an application written for redis-objects uses of it around a
    # lock, for a process that runs the switch without redis-objects
    # installed: `Redis::Objects` (when redis-objects is not there, the
    # switch names this module so) with its connection setting, and the
    # `lock` helper of `include Redis::Objects`, its class methods
    # `obtain_lock` and `clear_lock` and the key naming
    # `<model prefix>:<id>:<name>_lock`, as redis-objects documents them.
    # Its counters, lists, sets and values are not here: an application
    # that uses them keeps redis-objects (and the switch replaces only
    # its Redis::Lock).
    module Model
      class NotConnected < StandardError; end
      class NilObjectId < StandardError; end
      class UndefinedLock < StandardError; end

      class << self
        # The connection every model and lock uses unless given its own (a
        # redis-rb client or a ConnectionPool of them).
        attr_writer :redis

        # Redis::Objects.redis, else $redis; NotConnected when neither is set.
        def redis
          @redis || (defined?($redis) && $redis) ||
            raise(NotConnected, "Redis::Objects.redis not set to a Redis.new connection")
        end

        def included(klass)
          klass.extend(ClassMethods)
          klass.include(InstanceMethods)
        end
      end

      # The model's class methods.
      module ClassMethods
        # A connection of this class (and its subclasses) only.
        attr_writer :redis

        def redis
          class_redis || Model.redis
        end

        # The connection set on this class or a superclass, or nil.
        def class_redis
          @redis || (superclass.class_redis if superclass.respond_to?(:class_redis))
        end

        # The fields declared here: { :resort_lock => options }.
        def redis_objects
          @redis_objects ||= {}
        end

        # The first part of the keys: the class's own name (without its
        # namespace) in snake_case, unless set; of `klass` when given.
        attr_writer :redis_prefix

        def redis_prefix(klass = self)
          return klass.redis_prefix unless klass.equal?(self)

          @redis_prefix ||= Model.snake_case(name.to_s.split("::").last.to_s)
        end

        # The method giving a record's id (default :id), inherited.
        def redis_id_field(field = nil)
          @redis_id_field = field if field
          @redis_id_field || (superclass.respond_to?(:redis_id_field) ? superclass.redis_id_field : :id)
        end

        # Declare a lock: `lock :reorder, timeout: 5, expiration: 15` gives
        # each record `reorder_lock` (a Redis::Lock named
        # "<prefix>:<id>:reorder_lock"). Options: those of Redis::Lock
        # (:timeout, default 5 s; :expiration), :global (one lock for the
        # class: "<prefix>::<name>_lock", also a class method), :key (the
        # key instead: a String interpolated in the record, or a Proc given
        # the record) and :redis (this lock's own connection).
        def lock(name, options = {})
          options = options.dup
          options[:timeout] ||= 5
          field = :"#{name}_lock"
          redis_objects[field] = options.merge(type: :lock)
          ivar = :"@#{field}"
          if options[:global]
            define_singleton_method(field) do
              instance_variable_get(ivar) ||
                instance_variable_set(ivar, ::Redis::Lock.new(redis_field_key(field), redis_field_redis(field),
                                                              redis_options(field)))
            end
            define_method(field) { self.class.public_send(field) }
          else
            define_method(field) do
              instance_variable_get(ivar) ||
                instance_variable_set(ivar, ::Redis::Lock.new(redis_field_key(field), redis_field_redis(field),
                                                              redis_options(field)))
            end
          end
        end

        # Hold the lock `name` of the record `id` while the block runs, and
        # return the block's value (LockTimeout when :timeout ran out).
        def obtain_lock(name, id, &block)
          raise ArgumentError, "Missing block to #{self.name}.obtain_lock" unless block

          field = declared_lock(name)
          ::Redis::Lock.new(redis_field_key(field, id), redis_field_redis(field), redis_options(field)).lock(&block)
        end

        # Delete the key of the lock `name` of the record `id` whoever
        # holds it (the admin's unlock of a crashed process's lock): a plain
        # DEL, returning its count.
        def clear_lock(name, id)
          redis.del(redis_field_key(declared_lock(name), id))
        end

        # The options the field was declared with, here or in a superclass.
        def redis_options(field)
          owner = declaring_class(field)
          owner ? owner.redis_objects[field.to_sym] : {}
        end

        # The field's own :redis, else the class's connection, else nil: the
        # lock then looks up Redis::Objects.redis (and the switch's other
        # defaults) at each use.
        def redis_field_redis(field)
          redis_options(field)[:redis] || class_redis
        end

        # The key of a field of the record `id` (or of the class, :global).
        def redis_field_key(field, id = nil, record = self)
          owner = declaring_class(field) || self
          options = owner.redis_objects[field.to_sym] || {}
          if (key = options[:key])
            return key.call(record) if key.respond_to?(:call)

            return record.instance_eval("%(#{key})", __FILE__, __LINE__) # "game:#{id}:x", as documented
          end
          if id.nil? && !options[:global]
            raise NilObjectId, "#{field} of #{owner.name}: a record with a nil id (unsaved?) has no key"
          end

          "#{redis_prefix(owner)}:#{id}:#{field}"
        end

        # The class (this or an ancestor) that declared the field.
        def declaring_class(field)
          return self if redis_objects.key?(field.to_sym)

          superclass.declaring_class(field) if superclass.respond_to?(:declaring_class)
        end

        private

        def declared_lock(name)
          field = :"#{name}_lock"
          return field if declaring_class(field)

          raise UndefinedLock, "Undefined lock :#{name} for class #{self.name}"
        end
      end

      # The record's methods.
      module InstanceMethods
        def redis
          self.class.redis
        end

        def redis_objects
          self.class.redis_objects
        end

        def redis_options(field)
          self.class.redis_options(field)
        end

        def redis_field_redis(field)
          self.class.redis_field_redis(field)
        end

        def redis_field_key(field)
          self.class.redis_field_key(field, public_send(self.class.redis_id_field), self)
        end
      end

      # "TeamRoster" -> "team_roster", "HTTPJob" -> "http_job".
      def self.snake_case(word)
        word.gsub(/([A-Z]+)([A-Z][a-z])/, '\1_\2').gsub(/([a-z\d])([A-Z])/, '\1_\2').downcase
      end
    end

    # The key commands every redis-objects object has (redis-objects'
    # Redis::Helpers::CoreCommands), on #redis, for a lock made without
    # redis-objects loaded.
    module KeyCommands
      def exists?
        redis.exists?(key)
      end

      def exists
        redis.exists(key)
      end

      def type
        redis.type(key)
      end

      def ttl
        redis.ttl(key)
      end

      def pttl
        redis.pttl(key)
      end

      def expire(seconds)
        redis.expire(key, seconds)
      end

      def expireat(unix_time)
        redis.expireat(key, unix_time)
      end

      def persist
        redis.persist(key)
      end
    end
  end
end
