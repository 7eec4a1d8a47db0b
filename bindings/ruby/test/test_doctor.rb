# frozen_string_literal: true

require_relative "helper"
require "minitest/mock"

# Client#doctor: the core's checks (redislock_doctor) through ruby-ffi, as a
# Report of Findings.
class TestDoctor < Minitest::Test
  include Helpers

  OK_CHECKS = %w[server eviction scripting time pubsub clients latency clock lock-cycle].freeze

  def by_check(report)
    report.findings.to_h { |f| [f.check, f] }
  end

  def test_a_default_server_is_safe_with_one_warning
    report = client.doctor
    text = report.to_s
    assert report.safe?, text
    assert report.frozen?
    assert report.findings.frozen?
    assert(report.findings.all? { |f| f.is_a?(RedisLock::Finding) && f.frozen? })
    by = by_check(report)
    OK_CHECKS.each do |check|
      f = by.fetch(check) { flunk "no #{check} finding in:\n#{text}" }
      assert_equal :ok, f.severity, "#{check}:\n#{text}"
      assert_equal "", f.fix, check
      assert_equal "127.0.0.1:#{server.port}", f.server, check
      refute_empty f.message, check
    end
    # The harness runs its servers without persistence.
    assert_equal :warning, by.fetch("persistence").severity, text
    assert_includes by.fetch("persistence").fix, "appendonly yes"
    assert_equal Encoding::UTF_8, by.fetch("persistence").message.encoding
    assert_empty(report.findings.reject { |f| %i[ok warning].include?(f.severity) }, text)
    assert_match(/\nverdict: safe for locks, 1 warning\z/, text)
    assert_equal Encoding::UTF_8, text.encoding
    assert_match(/safe: .*1 warning/, report.inspect)
  end

  def test_an_evicting_server_is_unsafe
    evicting = RedisServer.new
    begin
      evicting.raw.config(:set, "maxmemory", "100mb")
      evicting.raw.config(:set, "maxmemory-policy", "allkeys-lru")
      report = RedisLock::Client.new(evicting.url).doctor
      text = report.to_s
      refute report.safe?, text
      eviction = by_check(report).fetch("eviction")
      assert_equal :unsafe, eviction.severity, text
      assert_includes eviction.message, "allkeys-lru"
      refute_empty eviction.fix
      assert_includes text, "UNSAFE  eviction"
      assert_match(/\nverdict: UNSAFE: [^\n]*\z/, text)
    ensure
      evicting.destroy
    end
  end

  def test_an_unreachable_server_raises_connection_error
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] } # closed again: nobody listens there
    e = assert_raises(RedisLock::ConnectionError) { RedisLock::Client.new("redis://127.0.0.1:#{port}/0").doctor }
    assert_equal RedisLock::Native::CONNECTION, e.status
    assert_includes e.message, "cannot reach Redis"
  end

  def test_the_report_is_freed_also_when_reading_it_raises
    freed = []
    free = RedisLock::Native.method(:redislock_report_free)
    RedisLock::Native.stub(:redislock_report_free, ->(ptr) { freed << ptr.address && free.call(ptr) }) do
      RedisLock::Report.stub(:from_native, ->(_ptr) { raise IOError, "reading failed" }) do
        assert_raises(IOError) { client.doctor }
      end
    end
    assert_equal 1, freed.size
    refute_equal 0, freed[0]
  end

  def test_a_closed_client_raises
    c = RedisLock::Client.new(server.url)
    c.close
    assert_raises(RedisLock::Error) { c.doctor }
  end
end
