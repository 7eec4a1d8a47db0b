# frozen_string_literal: true

require "ffi"
require_relative "version"

module RedisLock
  # The C API of libredislock (include/redislock.h), bound with the ffi gem.
  #
  # The library is the first that loads of (see docs/ruby.md):
  #
  # 1. $REDISLOCK_LIB, when set: that file alone (a name without a slash,
  #    such as libredislock.so.0, is searched for by the dynamic loader);
  # 2. the library bundled in the platform gem, lib/redislock/libredislock.so
  #    beside this file (an absolute path: never the working directory);
  # 3. when this file sits in a checkout of the repository, its build tree:
  #    target/release, then target/debug;
  # 4. the system's libredislock.so.0 (`make install`, or the Debian package).
  #
  # Every file is looked at before it is handed to dlopen (an ELF shared
  # object for this machine, no segment past the end of the file: the
  # dynamic loader maps a truncated library and dies of SIGBUS on it). The
  # LoadError names every place tried and why each failed. The library
  # loaded must be this gem's version (RedisLock::VERSION, compared with its
  # redislock_version()): a stale libredislock.so.0 is refused, not used.
  #
  # Calls that may wait on the network release the GVL (`blocking: true`):
  # other Ruby threads run meanwhile.
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

    # The library the platform gem carries (scripts/dist/gem.sh puts it here).
    BUNDLED = File.join(__dir__, "libredislock.so")
    # The system's library: the soname, found by the dynamic loader.
    SYSTEM = "libredislock.so.0"

    # ELF machine numbers, for the messages.
    MACHINES = { 3 => "i386", 8 => "mips", 20 => "ppc", 21 => "ppc64", 22 => "s390x", 40 => "arm",
                 62 => "x86_64", 183 => "aarch64", 243 => "riscv64", 258 => "loongarch64" }.freeze
    private_constant :MACHINES

    # Where the library is looked for, in order: [what, path or name] pairs.
    def self.candidates
      env = ENV.fetch("REDISLOCK_LIB", "")
      return [["$REDISLOCK_LIB", env.include?("/") ? File.expand_path(env) : env]] unless env.empty?

      found = [["bundled", BUNDLED]]
      root = checkout
      found += %w[release debug].map { |dir| ["build tree", File.join(root, "target", dir, "libredislock.so")] } if root
      found << ["system", SYSTEM]
    end

    # The repository this file sits in (bindings/ruby/lib/redislock of a
    # checkout), or nil: an installed gem has no build tree.
    def self.checkout
      root = File.expand_path("../../../..", __dir__)
      root if File.file?(File.join(root, "Cargo.toml")) && File.file?(File.join(root, "include", "redislock.h"))
    end

    # Why the file at `path` cannot be loaded into this process, or nil when
    # it looks like a shared object dlopen may take.
    def self.unloadable(path)
      return "no such file" unless File.exist?(path)
      return "not a regular file" unless File.file?(path)

      elf_problem(path)
    rescue SystemCallError => e
      "cannot read it: #{e.message}"
    end

    # What is wrong with the ELF file at `path` for this process: nil when
    # it is a shared object of this machine whose loaded segments all lie
    # within the file.
    def self.elf_problem(path)
      size = File.size(path)
      head = File.binread(path, 64) || "".b
      return "not an ELF file (corrupted, or not a library)" unless head.start_with?("\x7FELF".b)

      wide = head.getbyte(4) == 2 # ELFCLASS64
      e = head.getbyte(5) == 2 ? ">" : "<" # ELFDATA2MSB or LSB
      return "truncated: #{size} bytes, shorter than an ELF header" if head.bytesize < (wide ? 64 : 52)

      half = ->(at) { head.byteslice(at, 2).unpack1("S#{e}") }
      machine = half.call(18)
      host = host_elf
      if host && (machine != host[:machine] || wide != host[:wide] || e != host[:endian])
        return "built for #{arch(machine, wide, e)}, " \
               "but this Ruby runs on #{arch(host[:machine], host[:wide], host[:endian])}"
      end
      return "not a shared library (ELF type #{half.call(16)})" unless half.call(16) == 3 # ET_DYN

      segments_problem(path, size, head, wide, e)
    end

    # A loaded segment (PT_LOAD) or the program header table past the end of
    # the file: a truncated library.
    def self.segments_problem(path, size, head, wide, e)
      word = wide ? "Q#{e}" : "L#{e}"
      phoff = head.byteslice(wide ? 32 : 28, wide ? 8 : 4).unpack1(word)
      entsize, count = head.byteslice(wide ? 54 : 42, 4).unpack("S#{e}S#{e}")
      table_end = phoff + (entsize * count)
      return "truncated: its program headers end at byte #{table_end}, the file has #{size}" if table_end > size
      return "corrupted: no program headers" if count.zero? || entsize < (wide ? 56 : 32)

      table = File.binread(path, entsize * count, phoff)
      ends = Array.new(count) do |i|
        ph = table.byteslice(i * entsize, entsize)
        next 0 unless ph.unpack1("L#{e}") == 1 # PT_LOAD

        offset, filesz = if wide then [ph.byteslice(8, 8).unpack1(word), ph.byteslice(32, 8).unpack1(word)]
                         else ph.byteslice(4, 16).unpack("L#{e}x8L#{e}")
                         end
        offset + filesz
      end
      return "corrupted: no loadable segment" if ends.max.zero?
      return "truncated: its segments end at byte #{ends.max}, the file has #{size}" if ends.max > size

      nil
    end

    # This process's ELF class, byte order and machine (from /proc/self/exe),
    # or nil where that cannot be read.
    def self.host_elf
      head = File.binread("/proc/self/exe", 20)
      return nil unless head&.bytesize == 20 && head.start_with?("\x7FELF".b)

      endian = head.getbyte(5) == 2 ? ">" : "<"
      { wide: head.getbyte(4) == 2, endian: endian, machine: head.byteslice(18, 2).unpack1("S#{endian}") }
    rescue SystemCallError
      nil
    end

    def self.arch(machine, wide, endian)
      name = MACHINES.fetch(machine) { "ELF machine #{machine}" }
      "#{name} (#{wide ? 64 : 32}-bit#{endian == '>' ? ', big-endian' : ''})"
    end

    # The file that holds the library loaded by the name `lib`: read from
    # /proc/self/maps (what the dynamic loader found), else `lib` itself.
    def self.locate(lib)
      address = ffi_libraries.first.find_function("redislock_version").address
      File.foreach("/proc/self/maps") do |line|
        range, _perms, _offset, _dev, _inode, file = line.split(" ", 6)
        low, high = range.split("-").map { |x| x.to_i(16) }
        return file.chomp if address >= low && address < high && file&.start_with?("/")
      end
      lib
    rescue SystemCallError
      lib
    end

    # Load the first candidate that loads; raise a LoadError naming each
    # place tried and why it failed.
    def self.load_library
      tried = []
      candidates.each do |what, lib|
        problem = lib.include?("/") ? unloadable(lib) : nil
        if problem.nil?
          begin
            ffi_lib lib
            return lib
          rescue LoadError => e
            problem = "failed to load: #{e.message.sub(/\ACould not open library '[^']*': /, '')}"
          end
        end
        tried << "  #{what} #{lib}: #{problem}"
      end
      raise LoadError, "redislock: cannot load libredislock; tried, in order:\n#{tried.join("\n")}\n" \
                       "Install the platform gem (redislock-#{VERSION}-x86_64-linux.gem), build the library " \
                       "(cargo build --release, or make install) or point REDISLOCK_LIB at libredislock.so"
    end
    private_class_method :unloadable, :elf_problem, :segments_problem, :host_elf, :arch, :locate, :load_library

    loaded = load_library
    begin
      attach_function :redislock_version, [], :string
    rescue FFI::NotFoundError
      raise LoadError, "redislock: #{loaded} is not libredislock (it has no redislock_version)"
    end
    # The file the library was loaded from: the path tried, or for a name
    # (libredislock.so.0) the file the dynamic loader found.
    LIBRARY_PATH = (loaded.include?("/") ? loaded : locate(loaded)).freeze
    if redislock_version != VERSION
      raise LoadError, "redislock: #{LIBRARY_PATH} is libredislock #{redislock_version}, but this gem is " \
                       "#{VERSION}: a stale library shadows the right one. Update or remove it, or point " \
                       "REDISLOCK_LIB at libredislock.so #{VERSION}"
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

    # The file the library was loaded from (absolute, unless the dynamic
    # loader's choice could not be read back).
    def self.library_path
      LIBRARY_PATH
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

  # The file the native library was loaded from (see Native).
  def self.library_path
    Native.library_path
  end
end
