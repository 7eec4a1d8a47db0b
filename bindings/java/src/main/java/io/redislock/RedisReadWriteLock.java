package io.redislock;

import java.util.concurrent.locks.ReadWriteLock;

/**
 * The read-write lock {@code name} as a {@link ReadWriteLock}: any number of
 * readers hold it at once while no writer holds it or waits for it (a
 * queued writer stops new readers), or one writer. Both sides are
 * {@link RedisLock}s: owned by a thread, reentrant within one side. A
 * thread that holds one side and asks for the other gets
 * {@link IllegalMonitorStateException} at once (it would wait for itself).
 */
public final class RedisReadWriteLock implements ReadWriteLock {
  private final RedisLock read;
  private final RedisLock write;

  RedisReadWriteLock(RedisLockClient client, byte[] key) {
    this.read = new RedisLock(client, key, RedisLockClient.Kind.READ, this);
    this.write = new RedisLock(client, key, RedisLockClient.Kind.WRITE, this);
    read.sibling = write;
    write.sibling = read;
  }

  @Override
  public RedisLock readLock() {
    return read;
  }

  @Override
  public RedisLock writeLock() {
    return write;
  }
}
