# frozen_string_literal: true

# The Ruby tests' harness: throwaway redis-servers on free loopback ports
# (never 6379; $REDIS_SERVER chooses the binary, as for every suite of the
# project: Valkey in `make test-valkey`), redis-rb (Debian's ruby-redis) to
# look at the server, and waiting for events with generous deadlines.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))

require "minitest/autorun"
require "fileutils"
require "open3"
require "redis"
require "socket"
require "tmpdir"
require "redislock"

ROOT = File.expand_path("../../..", __dir__)

# One redis-server process.
class RedisServer
  attr_reader :port

  def self.bin
    name = ENV.fetch("REDIS_SERVER", "")
    name = "redis-server" if name.empty?
    name.include?("/") ? File.expand_path(name, ROOT) : name
  end

  def initialize
    @dir = Dir.mktmpdir("redislock-rb-")
    20.times do
      @port = free_port
      return if launch
    end
    raise "could not start #{self.class.bin} on a free port (see #{@dir}/redis.log)"
  end

  def url
    "redis://127.0.0.1:#{@port}/0"
  end

  # A redis-rb client of this server, to look at keys.
  def raw
    @raw ||= Redis.new(host: "127.0.0.1", port: @port, timeout: 10)
  end

  def stop
    return unless @pid

    Process.kill("KILL", @pid)
    Process.wait(@pid)
    @pid = nil
    @raw&.close
    @raw = nil
  end

  def destroy
    stop
    FileUtils.rm_rf(@dir)
  end

  private

  def free_port
    loop do
      s = TCPServer.new("127.0.0.1", 0)
      port = s.addr[1]
      s.close
      return port unless port == 6379
    end
  end

  def launch
    @pid = Process.spawn(self.class.bin, "--port", @port.to_s, "--bind", "127.0.0.1", "--save", "",
                         "--appendonly", "no", "--dir", @dir, "--logfile", "redis.log",
                         in: File::NULL, out: File::NULL, err: File::NULL)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      return false if Process.wait(@pid, Process::WNOHANG)

      begin
        return true if Redis.new(host: "127.0.0.1", port: @port, timeout: 1).ping == "PONG"
      rescue Redis::BaseConnectionError
        sleep 0.02
      end
    end
    false
  end
end

# Servers are started once per test process and stopped at its end.
module Servers
  @servers = {}

  def self.get(name)
    @servers[name] ||= RedisServer.new
  end

  Minitest.after_run { @servers.each_value(&:destroy) }
end

module Helpers
  def server
    Servers.get(:main)
  end

  def raw
    server.raw
  end

  def client
    @client ||= RedisLock::Client.new(server.url)
  end

  # A name no other test uses.
  def key_for(tag = "k")
    "rb:#{self.class.name}:#{name}:#{tag}"
  end

  # Wait until the block is truthy, for at most `seconds` (generous: these
  # machines pause while compilers run).
  def wait_until(what, seconds: 20)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    loop do
      value = yield
      return value if value
      raise Minitest::Assertion, "timed out after #{seconds} s waiting for #{what}" \
        if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.01
    end
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # Keys of the server that belong to `prefix` (the lock names of one test).
  def keys_of(prefix)
    raw.keys("#{prefix}*")
  end
end
