package io.redislock;

/**
 * The body {@link RedisLockClient#executeLocked} runs with the lock held.
 *
 * @param <T> what it returns
 * @param <E> what it may throw
 */
@FunctionalInterface
public interface LockedFunction<T, E extends Exception> {
  T apply(LockHandle lock) throws E;
}
