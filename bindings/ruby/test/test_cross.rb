# frozen_string_literal: true

require_relative "helper"

# The same lock shared with Python and PHP processes: each excludes the
# others on the same key, and a release in one process hands the lock to a
# Ruby waiter (no polling).
class TestCrossLanguage < Minitest::Test
  include Helpers

  PYTHON = ENV.fetch("PYTHON", File.join(ROOT, "target/venv-test/bin/python"))
  HOLDERS = {
    python: [PYTHON, File.join(ROOT, "tests/holders/holder.py")],
    php: ["php", File.join(ROOT, "tests/holders/holder.php")]
  }.freeze

  def setup
    raise "#{PYTHON} not found: run `make python-env` (make test-ruby does)" unless File.executable?(PYTHON)
  end

  def env
    { "REDISLOCK_LIB" => ENV.fetch("REDISLOCK_LIB", File.join(ROOT, "target/debug/libredislock.so")) }
  end

  # Start a holder of `key` in `lang`; returns [stdin, stdout, thread, token].
  def hold(lang, key)
    stdin, stdout, thread = Open3.popen2(env, *HOLDERS.fetch(lang), server.url, key)
    token = stdout.gets or flunk("the #{lang} holder printed nothing (exit #{thread.value})")
    [stdin, stdout, thread, [token.strip].pack("H*")]
  end

  def try_from(lang, key)
    out, status = Open3.capture2(env, *HOLDERS.fetch(lang), server.url, "try:#{key}")
    assert status.success?, "the #{lang} try failed: #{out}"
    out.strip
  end

  %i[python php].each do |lang|
    define_method("test_a_#{lang}_holder_excludes_ruby_and_hands_it_over_on_release") do
      key = key_for(lang)
      stdin, stdout, thread, token = hold(lang, key)
      assert_equal token, raw.get(key).b, "the key holds the #{lang} holder's token"
      assert_nil client.try_acquire(key, ttl: 5), "held by #{lang}"
      c = RedisLock::Client.new(server.url)
      waiter = Thread.new do
        lock = c.acquire(key, ttl: 5, wait: 60)
        [lock, now]
      end
      wait_until("the Ruby waiter to queue") { c.stats[:waiters_now] == 1 }
      stdin.puts("release")
      stdin.close
      released_at = Float(stdout.gets)
      lock, acquired_at = waiter.value
      assert_equal "released", stdout.gets&.strip
      assert thread.value.success?
      assert_equal 1, c.stats[:acquired_handed_over], "the #{lang} release handed the lock over: no polling"
      assert_equal lock.token, raw.get(key).b
      # The figure, for the record (not a timing assertion: the count above
      # is the mechanism): from the holder's release call to the acquire's
      # return in this process.
      puts format("\n  hand-off %s -> ruby: %.2f ms", lang, (acquired_at - released_at) * 1000) if ENV["VERBOSE"]
      lock.release
    end

    define_method("test_a_ruby_holder_excludes_#{lang}") do
      key = key_for(lang)
      lock = client.acquire(key, ttl: 30)
      assert_equal "held", try_from(lang, key)
      lock.release
      assert_equal "free", try_from(lang, key)
    end
  end
end
