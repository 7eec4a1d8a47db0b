# frozen_string_literal: true

require_relative "helper"

# Semaphores and read-write locks from Ruby: the same core as every binding.
class TestShared < Minitest::Test
  include Helpers

  def test_at_most_limit_holders_and_fifo_hand_off
    key = key_for
    a = client.acquire_semaphore(key, limit: 2, ttl: 10)
    b = client.acquire_semaphore(key, limit: 2, ttl: 10)
    assert_raises(RedisLock::Timeout) { client.acquire_semaphore(key, limit: 2, ttl: 10, wait: 0) }
    assert_nil raw.get(key), "never collides with the lock of the same name"
    refute_nil client.try_acquire(key, ttl: 1)&.tap(&:release), "the plain lock is free"
    waiter = Thread.new { client.acquire_semaphore(key, limit: 2, ttl: 10, wait: 60) }
    wait_until("the waiter to queue") { client.stats[:waiters_now] == 1 }
    a.release
    c = waiter.value
    assert c.owned?
    assert_operator c.fence, :>, b.fence
    [b, c].each(&:release)
    wait_until("nothing of the name left") { keys_of(key).empty? && keys_of("{#{key}}").empty? }
  end

  def test_the_block_forms_and_readers_and_writers
    key = key_for
    value = client.read_lock(key, ttl: 5) do
      client.read_lock(key, ttl: 5) { :two_readers }
    end
    assert_equal :two_readers, value
    writer = client.acquire_write(key, ttl: 5)
    assert_raises(RedisLock::Timeout) { client.acquire_read(key, ttl: 5, wait: 0) }
    writer.release
    assert_equal 3, client.semaphore(key, limit: 3, permits: 3, ttl: 5) { 3 }
    assert_raises(RedisLock::Timeout) do
      client.write_lock(key, ttl: 5) { client.acquire_write(key, ttl: 5, wait: 0.05) }
    end
  end
end
