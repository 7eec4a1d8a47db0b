package io.redislock.spring;

import io.redislock.RedisLock;
import io.redislock.RedisLockClient;
import java.util.Objects;
import org.springframework.integration.support.locks.ExpirableLockRegistry;

/**
 * Spring Integration's {@code LockRegistry} over redislock: {@link #obtain}
 * gives the {@link RedisLock} of {@code prefix + key}, a
 * {@link java.util.concurrent.locks.Lock} owned by the thread that takes it,
 * reentrant, and renewed by a watchdog while held (so there is no TTL to
 * choose and nothing to renew by hand). Every process that names the same
 * lock, in any language redislock serves, takes the same lock.
 *
 * <pre>{@code
 * @Bean
 * RedislockLockRegistry lockRegistry(RedisLockClient client) {
 *   return new RedislockLockRegistry(client, "orders:");
 * }
 * }</pre>
 *
 * <p>Keys are Strings, as for Spring's own {@code RedisLockRegistry}. The
 * same key gives the same lock object while it is in use (the client keeps
 * it), so {@link #expireUnusedOlderThan} has nothing to remove. Closing the
 * registry's client is its owner's business: the registry holds no
 * resource of its own. Thread-safe.
 */
public final class RedislockLockRegistry implements ExpirableLockRegistry<RedisLock> {
  private final RedisLockClient client;
  private final String prefix;

  /** The locks of {@code client}, named by their keys as they are. */
  public RedislockLockRegistry(RedisLockClient client) {
    this(client, "");
  }

  /** The locks of {@code client}, named {@code prefix + key}. */
  public RedislockLockRegistry(RedisLockClient client, String prefix) {
    this.client = Objects.requireNonNull(client, "client");
    this.prefix = Objects.requireNonNull(prefix, "prefix");
  }

  /**
   * The lock of {@code lockKey} (a String): the same object for the same key
   * while it is in use.
   *
   * @throws IllegalArgumentException when the key is not a String, or the
   *     name is empty
   */
  @Override
  public RedisLock obtain(Object lockKey) {
    Objects.requireNonNull(lockKey, "lockKey");
    if (!(lockKey instanceof String)) {
      throw new IllegalArgumentException("lock keys are Strings, not " + lockKey.getClass().getName());
    }
    return client.getLock(prefix + lockKey);
  }

  /**
   * Nothing to do: the client keeps a lock object only while it is in use,
   * and a lock that is held is never dropped.
   */
  @Override
  public void expireUnusedOlderThan(long age) {
    // The client's cache of lock objects lets go of unused ones by itself.
  }

  @Override
  public String toString() {
    return "RedislockLockRegistry{" + client.addr() + ", prefix=" + prefix + "}";
  }
}
