# frozen_string_literal: true

require_relative "helper"

# Redlock: an Array of URLs. A call returns once a majority answered, so
# checks of every node wait for the stragglers.
class TestRedlock < Minitest::Test
  include Helpers

  def nodes
    @nodes ||= %i[n1 n2 n3].map { |n| Servers.get(n) }
  end

  def redlock
    @redlock ||= RedisLock::Client.new(nodes.map(&:url))
  end

  def holding(key, token)
    nodes.count { |n| n.raw.get(key)&.b == token }
  end

  def test_a_lock_on_every_node_released_everywhere
    key = key_for
    lock = redlock.acquire(key, ttl: 10)
    assert_operator holding(key, lock.token), :>=, 2, "a majority holds the token"
    wait_until("every node to hold it") { holding(key, lock.token) == 3 }
    assert_nil redlock.try_acquire(key, ttl: 1)
    assert_nil client_of(nodes[0]).try_acquire(key, ttl: 1), "a single-server client is excluded too"
    lock.release
    wait_until("every node to let it go") { nodes.all? { |n| n.raw.get(key).nil? } }
  end

  def test_the_block_form_and_a_waiter
    key = key_for
    counter = key_for("counter")
    nodes[0].raw.set(counter, 0)
    threads = Array.new(4) do
      Thread.new do
        c = RedisLock::Client.new(nodes.map(&:url))
        10.times do
          c.lock(key, ttl: 10, wait: 60) do
            v = nodes[0].raw.get(counter).to_i
            nodes[0].raw.set(counter, v + 1)
          end
        end
      end
    end
    threads.each(&:join)
    assert_equal 40, nodes[0].raw.get(counter).to_i
  end

  def test_no_quorum_with_two_of_three_nodes_down
    down = Array.new(2) { RedisServer.new }
    alive = Servers.get(:n1)
    c = RedisLock::Client.new([alive.url, *down.map(&:url)].map { |u| "#{u}?connect_timeout=1s" })
    down.each(&:stop)
    error = assert_raises(RedisLock::NoQuorum) { c.acquire(key_for, ttl: 5, wait: 0) }
    assert_kind_of RedisLock::Error, error
    refute_empty error.message
    wait_until("the grant on the live node to be undone") { alive.raw.get(key_for).nil? }
  ensure
    down&.each(&:destroy)
  end

  def test_one_shared_client_per_list_of_urls
    a = RedisLock::Client.new(nodes.map(&:url), shared: true)
    b = RedisLock::Client.new(nodes.map(&:url), shared: true)
    before = b.stats[:acquired_at_once]
    a.lock(key_for, ttl: 5) { nil }
    assert_equal before + 1, b.stats[:acquired_at_once], "the same Redlock client"
    other = RedisLock::Client.new(nodes.reverse.map(&:url), shared: true)
    assert_equal 0, other.stats[:acquired_at_once], "another order is another client"
  end

  def client_of(node)
    RedisLock::Client.new(node.url)
  end
end
