# frozen_string_literal: true

module RedisLock
  # Every failure of a lock operation. `status` is the C API's status code.
  class Error < StandardError
    attr_reader :status

    def initialize(message = nil, status: nil)
      super(message)
      @status = status
    end
  end

  # The wait ran out while another owner held the lock.
  class Timeout < Error; end

  # Release, extend or fence: the lock expired or another owner took it (the
  # new owner's key is left alone); or this handle was released already.
  class NotOwned < Error; end

  # Release: the connection broke after the release was sent and, sent
  # again, the lock was no longer this owner's: most likely the first one
  # released it. The handle is gone either way.
  class Unconfirmed < NotOwned; end

  # The key exists and is not a lock; it was left untouched.
  class WrongType < Error; end

  # Redlock: no majority of the servers could be reached.
  class NoQuorum < Error; end

  # The server cannot be reached, an I/O error, or a timeout.
  class ConnectionError < Error; end

  # The server answered with an error (authentication, permissions, ...).
  class ServerError < Error; end

  # A bug in redislock (a caught panic): please report it.
  class InternalError < Error; end

  # A bad argument, refused before any I/O.
  class InvalidArgument < ::ArgumentError
    attr_reader :status

    def initialize(message = nil, status: Native::INVALID_ARGUMENT)
      super(message)
      @status = status
    end
  end

  ERRORS = {
    Native::NOT_ACQUIRED => Timeout,
    Native::NOT_OWNER => NotOwned,
    Native::CONNECTION => ConnectionError,
    Native::INVALID_ARGUMENT => InvalidArgument,
    Native::WRONG_TYPE => WrongType,
    Native::NO_QUORUM => NoQuorum,
    Native::SERVER => ServerError,
    Native::INTERNAL => InternalError,
    Native::UNCONFIRMED => Unconfirmed
  }.freeze
  private_constant :ERRORS

  # Raise the error of `status` with the library's message; nothing for OK.
  def self.check(status)
    return if status == Native::OK

    message = Native.last_error
    message = "redislock status #{status}" if message.empty?
    raise ERRORS.fetch(status, Error).new(message, status: status)
  end
end
