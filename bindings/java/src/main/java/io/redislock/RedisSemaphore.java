package io.redislock;

import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * The counting semaphore {@code name} admitting {@code limit} permits: each
 * holder gets a {@link LockHandle} with its own lease, token and fence
 * (Redisson's expirable permit id is the handle). Waiters are served in
 * arrival order with no barging. The limit is each call's: there is no
 * {@code addPermits}, and no release without a handle.
 */
public final class RedisSemaphore {
  private final RedisLockClient client;
  private final byte[] key;
  private final int limit;

  RedisSemaphore(RedisLockClient client, byte[] key, int limit) {
    this.client = client;
    this.key = key;
    this.limit = limit;
  }

  public String name() {
    return RedisLockClient.text(key);
  }

  public int limit() {
    return limit;
  }

  /** One permit, waiting for ever, 30 s lease. */
  public LockHandle acquire() throws InterruptedException {
    return acquire(1, LockOptions.DEFAULT);
  }

  public LockHandle acquire(int permits) throws InterruptedException {
    return acquire(permits, LockOptions.DEFAULT);
  }

  /**
   * {@code permits} (1 to the limit) with the lease and wait of {@code opts} (by default for ever).
   *
   * @throws LockTimeoutException when a finite wait ran out
   */
  public LockHandle acquire(int permits, LockOptions opts) throws InterruptedException {
    return client.take(RedisLockClient.Kind.SEMAPHORE, key, opts, -1, limit, count(permits), true, true);
  }

  /** {@link #acquire(int, LockOptions)}, not interruptible. */
  public LockHandle acquireUninterruptibly(int permits, LockOptions opts) {
    try {
      return client.take(RedisLockClient.Kind.SEMAPHORE, key, opts, -1, limit, count(permits), false, true);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  /** One attempt at one permit: the handle, or null when none is free. */
  public @Nullable LockHandle tryAcquire() {
    return tryAcquire(1);
  }

  /** One attempt at {@code permits}: the handle, or null. */
  public @Nullable LockHandle tryAcquire(int permits) {
    try {
      return client.take(RedisLockClient.Kind.SEMAPHORE, key, LockOptions.DEFAULT, 0, limit, count(permits), false,
          false);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  /** {@code permits} within {@code wait}: the handle, or null when the wait ran out. */
  public @Nullable LockHandle tryAcquire(int permits, Duration wait) throws InterruptedException {
    return tryAcquire(permits, LockOptions.DEFAULT.waitFor(wait));
  }

  /** {@code permits} with the lease and wait of {@code opts} (by default one attempt): the handle, or null. */
  public @Nullable LockHandle tryAcquire(int permits, LockOptions opts) throws InterruptedException {
    return client.take(RedisLockClient.Kind.SEMAPHORE, key, opts, 0, limit, count(permits), true, false);
  }

  private int count(int permits) {
    return Units.count(permits, "permits", limit);
  }
}
