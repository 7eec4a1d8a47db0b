# frozen_string_literal: true

module RedisLock
  VERSION = "0.1.0"
end
