# frozen_string_literal: true

require_relative "helper"

# A server that lies never talks the library into a grant (issue 51).
#
# tests/fake/fake_redis.py --all serves, on one port per kind, a fake Redis
# that answers the commands deciding a grant (SET ... NX ... GET and the
# acquire scripts) with a broken reply of that kind. For every kind, in a
# thread of its own (the FFI calls release the GVL) and with a client of its
# own (command_timeout=1s, connect_timeout=1s): a try-acquire, then an
# acquire that waits 0.3 s. Each must not crash the process, never return a
# held lock, fail with the expected error (ConnectionError for every kind
# but error_reply, ServerError there; a plain "not acquired" only where the
# server's reply did say "held", as EXPECTED says), and end within
# command_timeout + connect_timeout + wait + 1.5 s; all kinds together grow
# the RSS by less than 64 MB.
#
# The fake server uses no real server: the Valkey pass of make test
# (REDIS_SERVER=...valkey-server) would only repeat these tests, so they are
# skipped there.
class TestBrokenReplies < Minitest::Test
  FAKE = File.join(ROOT, "tests", "fake", "fake_redis.py")
  COMMAND_TIMEOUT = 1.0
  CONNECT_TIMEOUT = 1.0
  WAIT = 0.3
  SLACK = 1.5
  RSS_GROWTH_KB = 64 * 1024

  # What each call may end in, per kind: [try-acquire, waiting acquire].
  # :connection (ConnectionError), :server (ServerError), :not_acquired (a
  # try_acquire that says the lock is held: nil), :timeout (the wait ran
  # out: RedisLock::Timeout). :granted is never right.
  CONNECTION = [%i[connection], %i[connection]].freeze
  EXPECTED = {
    "negative_bulk" => CONNECTION,
    "negative_array" => CONNECTION,
    # The first reply on a connection is a true "held"; the nil sent 5 ms
    # after it must never be read as the next command's reply. Found at once
    # (when both were read together) it is a protocol error.
    "reply_twice" => [%i[not_acquired connection], %i[timeout connection]],
    # A frame before any command is a protocol error; the replies after it
    # say "held".
    "unsolicited" => [%i[connection], %i[timeout connection]],
    "dribble" => CONNECTION,
    "silent" => CONNECTION,
    "random_bytes" => CONNECTION,
    "truncated" => CONNECTION,
    "huge_bulk" => CONNECTION,
    "huge_array" => CONNECTION,
    "deep_nesting" => CONNECTION,
    "resp3" => CONNECTION,
    "int_overflow" => CONNECTION,
    "int_for_array" => CONNECTION,
    "array_for_int" => CONNECTION,
    "wrong_string" => CONNECTION,
    "trailing_garbage" => CONNECTION,
    "error_reply" => [%i[server], %i[server]],
    "bulk_too_long" => CONNECTION,
    "close_at_once" => CONNECTION,
    "empty_array" => CONNECTION
  }.freeze

  def self.valkey?
    ENV.fetch("REDIS_SERVER", "").include?("valkey")
  end

  def self.rss_kb
    File.foreach("/proc/self/status") do |line|
      return line.split[1].to_i if line.start_with?("VmRSS:")
    end
    raise "no VmRSS in /proc/self/status"
  end

  def self.url(port)
    "redis://127.0.0.1:#{port}/0?command_timeout=#{COMMAND_TIMEOUT}s&connect_timeout=#{CONNECT_TIMEOUT}s"
  end

  def self.now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # [outcome, message] of one call.
  def self.call(client, name, wait)
    if wait.zero?
      lock = client.try_acquire(name, ttl: 10)
      return [:not_acquired, ""] if lock.nil?
    else
      lock = client.acquire(name, ttl: 10, wait: wait)
    end
    begin
      lock.release
    rescue RedisLock::Error
      nil
    end
    [:granted, ""]
  rescue RedisLock::ConnectionError => e
    [:connection, e.message]
  rescue RedisLock::ServerError => e
    [:server, e.message]
  rescue RedisLock::Timeout => e
    [:timeout, e.message]
  rescue StandardError, SystemStackError => e
    [e.class.name, e.message]
  end

  # [[call, [outcome, message], elapsed, wait]...] for a try-acquire, then a
  # waiting acquire, on a client of this kind's own.
  def self.run_kind(kind, port)
    client = RedisLock::Client.new(url(port))
    [0, WAIT].each_with_index.map do |wait, n|
      t = now
      res = call(client, "k:#{kind}:#{n}", wait)
      elapsed = now - t
      sleep 0.05 # a leftover frame is there when the next call is sent
      [wait.zero? ? "try_acquire" : "acquire(wait: #{WAIT})", res, elapsed, wait]
    end
  ensure
    client&.close
  end

  # Run in a forked child process, after the others: a reply nested
  # 10,000 deep has overflowed the 1 MB machine stack of a Ruby thread
  # inside the library, and Ruby's SystemStackError then came out of every
  # thread running at that moment, hiding what the other kinds do; what the
  # library's state is after that is nobody's guess, so the child is thrown
  # away (the kind still runs in a thread of its own there).
  SOLO = %w[deep_nesting].freeze

  def self.run_threads(ports, out)
    threads = ports.map do |kind, port|
      Thread.new do
        out[kind] = run_kind(kind, port)
      rescue StandardError, SystemStackError => e
        out[kind] = [["thread", [e.class.name, e.message], 0.0, 0]]
      end
    end
    threads.each { |t| t.join(60) }
  end

  def self.run_in_child(kind, port)
    rd, wr = IO.pipe
    pid = fork do
      rd.close
      out = {}
      run_threads({ kind => port }, out)
      wr.write(Marshal.dump(out[kind]))
      wr.close
      exit!(0)
    end
    wr.close
    data = rd.read
    rd.close
    _, status = Process.wait2(pid)
    return Marshal.load(data) unless data.empty?

    [["process", ["died", status.inspect], 0.0, 0]]
  end

  # Every kind at once (SOLO after), with the fake server started and
  # stopped around: {kind => calls}, the RSS growth in kB and the kinds the
  # server lists. Made once; a failure to make it fails every test.
  def self.results
    @results ||= begin
      listed = IO.popen(["python3", FAKE, "--list"], &:read).split
      before = rss_kb
      out = {}
      # --lifetime: it exits by itself then, which ends any call still hung on it.
      io = IO.popen(["python3", FAKE, "--all", "--lifetime", "60"], in: File::NULL)
      begin
        ports = {}
        io.each_line do |line|
          break if line.strip == "ready"

          kind, port = line.split
          ports[kind] = Integer(port)
        end
        run_threads(ports.reject { |k, _| SOLO.include?(k) }, out)
        ports.select { |k, _| SOLO.include?(k) }.each { |k, port| out[k] = run_in_child(k, port) }
      ensure
        Process.kill("KILL", io.pid)
        io.close
      end
      { calls: out, rss_growth_kb: rss_kb - before, listed: listed }
    rescue StandardError => e
      { error: e }
    end
    raise @results[:error] if @results[:error]

    @results
  end

  def setup
    skip "the fake server uses no real server: not repeated on Valkey" if self.class.valkey?
  end

  def test_every_kind_the_fake_server_has_is_in_the_table
    assert_equal EXPECTED.keys, self.class.results[:listed],
                 "tests/fake/fake_redis.py --list and EXPECTED differ: give each new kind its expected outcome"
  end

  EXPECTED.each_key do |kind|
    define_method("test_a_broken_reply_is_never_a_grant_#{kind}") do
      calls = self.class.results[:calls][kind]
      refute_nil calls, "#{kind} did not finish"
      failures = calls.flat_map do |what, (out, message), elapsed, wait|
        allowed = EXPECTED[kind][wait.zero? ? 0 : 1]
        bad = []
        if out == :granted
          bad << "#{kind} #{what}: GRANTED a lock the server never gave"
        elsif !allowed.include?(out)
          bad << "#{kind} #{what}: #{out} (expected #{allowed.join(' or ')}): #{message}"
        end
        bound = COMMAND_TIMEOUT + CONNECT_TIMEOUT + wait + SLACK
        bad << format("%s %s: took %.2f s (bound %.1f s)", kind, what, elapsed, bound) if elapsed > bound
        bad
      end
      assert_empty failures, failures.join("; ")
    end
  end

  def test_no_unbounded_memory
    grown = self.class.results[:rss_growth_kb]
    assert_operator grown, :<, RSS_GROWTH_KB,
                    "RSS grew by #{grown / 1024} MB over every kind (bound #{RSS_GROWTH_KB / 1024} MB)"
  end
end
