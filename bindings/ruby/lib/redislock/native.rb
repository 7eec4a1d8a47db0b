# frozen_string_literal: true

require "ffi"

module RedisLock
  # The C API of libredislock (include/redislock.h), bound with the ffi gem.
  #
  # The library is the first that loads of: $REDISLOCK_LIB, the build tree
  # of the repository this file sits in (target/release, then target/debug),
  # then the system's library path (libredislock.so.0, as `make install`
  # puts it). Calls that may wait on the network release the GVL
  # (`blocking: true`): other Ruby threads run meanwhile.
  module Native
    extend FFI::Library

    # Status values, as in include/redislock.h.
    OK = 0
    NOT_ACQUIRED = 1
    NOT_OWNER = 2
    CONNECTION = 3
    INVALID_ARGUMENT = 4
    WRONG_TYPE = 5
    NO_QUORUM = 6
    SERVER = 7
    INTERNAL = 8
    UNCONFIRMED = 9

    # Where the library is looked for, in order.
    def self.candidates
      env = ENV.fetch("REDISLOCK_LIB", "")
      return [env] unless env.empty?

      root = File.expand_path("../../../..", __dir__)
      found = %w[target/release target/debug].map { |dir| File.join(root, dir, "libredislock.so") }
      found.select { |path| File.file?(path) } + ["libredislock.so.0"]
    end

    begin
      ffi_lib candidates
    rescue LoadError => e
      raise LoadError, "redislock: cannot load libredislock (tried #{candidates.join(', ')}): #{e.message}\n" \
                       "Build it (cargo build --release, or make install) or point REDISLOCK_LIB at libredislock.so"
    end

    attach_function :redislock_client_open, [:string, :pointer], :int
    attach_function :redislock_client_open_redlock, [:pointer, :size_t, :pointer], :int
    attach_function :redislock_client_open_shared, [:string, :pointer], :int
    attach_function :redislock_client_open_redlock_shared, [:pointer, :size_t, :pointer], :int
    attach_function :redislock_client_free, [:pointer], :void

    # client, key, key_len, ttl_ms, wait_ms, token, token_len, out
    attach_function :redislock_acquire,
                    [:pointer, :pointer, :size_t, :uint64, :int64, :pointer, :size_t, :pointer], :int,
                    blocking: true
    attach_function :redislock_acquire_fenced,
                    [:pointer, :pointer, :size_t, :uint64, :int64, :pointer, :size_t, :pointer], :int,
                    blocking: true
    # client, key, key_len, limit, permits, ttl_ms, wait_ms, out
    attach_function :redislock_acquire_semaphore,
                    [:pointer, :pointer, :size_t, :uint32, :uint32, :uint64, :int64, :pointer], :int,
                    blocking: true
    # client, key, key_len, ttl_ms, wait_ms, out
    attach_function :redislock_acquire_read, [:pointer, :pointer, :size_t, :uint64, :int64, :pointer], :int,
                    blocking: true
    attach_function :redislock_acquire_write, [:pointer, :pointer, :size_t, :uint64, :int64, :pointer], :int,
                    blocking: true
    attach_function :redislock_set_interrupt, [:pointer, :pointer], :void

    attach_function :redislock_release, [:pointer], :int, blocking: true
    attach_function :redislock_extend, [:pointer, :uint64], :int, blocking: true
    attach_function :redislock_lock_auto_renew, [:pointer], :int
    attach_function :redislock_lock_is_lost, [:pointer], :bool
    attach_function :redislock_lock_free, [:pointer], :void, blocking: true
    attach_function :redislock_lock_forget, [:pointer], :void
    attach_function :redislock_lock_token, [:pointer, :pointer, :size_t], :size_t
    attach_function :redislock_lock_draw_fence, [:pointer, :pointer], :int, blocking: true
    attach_function :redislock_lock_fence_if_drawn, [:pointer], :uint64
    attach_function :redislock_lock_owned, [:pointer, :pointer], :int, blocking: true

    # client, key, key_len, token, token_len, ...
    attach_function :redislock_release_token, [:pointer, :pointer, :size_t, :pointer, :size_t], :int,
                    blocking: true
    attach_function :redislock_extend_token, [:pointer, :pointer, :size_t, :pointer, :size_t, :uint64], :int,
                    blocking: true
    attach_function :redislock_is_owned_by, [:pointer, :pointer, :size_t, :pointer, :size_t, :pointer], :int,
                    blocking: true
    attach_function :redislock_fence_token, [:pointer, :pointer, :size_t, :pointer, :size_t, :pointer], :int,
                    blocking: true

    # client, key, key_len, removed (bool*)
    attach_function :redislock_force_release, [:pointer, :pointer, :size_t, :pointer], :int, blocking: true
    attach_function :redislock_client_addr, [:pointer, :pointer, :size_t], :size_t

    attach_function :redislock_client_stats, [:pointer, :pointer], :int

    # Severities of struct redislock_finding (enum redislock_severity).
    SEVERITY_OK = 0
    SEVERITY_WARNING = 1
    SEVERITY_UNSAFE = 2

    # struct redislock_finding: read from the library's memory, never made
    # here (the enum is a C int; the strings belong to the report).
    class Finding < FFI::Struct
      layout :severity, :int,
             :check, :pointer,
             :server, :pointer,
             :message, :pointer,
             :fix, :pointer
    end

    # client, out (a redislock_report*): a few round trips per server.
    attach_function :redislock_doctor, [:pointer, :pointer], :int, blocking: true
    attach_function :redislock_report_count, [:pointer], :size_t
    attach_function :redislock_report_finding, [:pointer, :size_t], :pointer
    attach_function :redislock_report_is_safe, [:pointer], :bool
    attach_function :redislock_report_text, [:pointer], :pointer
    attach_function :redislock_report_free, [:pointer], :void

    attach_function :redislock_last_error, [:pointer, :size_t], :size_t
    attach_function :redislock_version, [], :string

    # The interpreter's own functions that tell whether a thread has an
    # interrupt pending (Thread#raise, Thread#kill, Timeout, a signal for the
    # main thread). A wait polls it through redislock_set_interrupt without
    # taking the GVL: a plain read of the thread's interrupt flag.
    module Interpreter
      extend FFI::Library
      ffi_lib FFI::CURRENT_PROCESS
      attach_function :rb_thread_current, [], :pointer
      INTERRUPTED = ffi_libraries.first.find_function("rb_thread_interrupted")
    end

    # The message of this thread's last failure.
    def self.last_error
      n = redislock_last_error(nil, 0)
      return "" if n.zero?

      buf = FFI::MemoryPointer.new(:char, n + 1)
      redislock_last_error(buf, n + 1)
      buf.read_string(n).force_encoding(Encoding::UTF_8)
    end

    # The NUL-terminated UTF-8 string at `ptr` ("" for NULL), frozen.
    def self.utf8(ptr)
      return "" if ptr.null?

      ptr.read_string.force_encoding(Encoding::UTF_8).freeze
    end

    # The bytes of a String in native memory (binary-safe; NUL allowed).
    def self.bytes(str)
      mem = FFI::MemoryPointer.new(:uint8, [str.bytesize, 1].max)
      mem.put_bytes(0, str)
      mem
    end
  end
end
