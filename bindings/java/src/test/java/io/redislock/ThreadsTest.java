package io.redislock;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * The binding's threads run while something needs them and end after:
 * the sweeper while a RedisLock is held, the default callbacks thread
 * while listeners run. (UnloadTest checks the whole set in a JVM of its own.)
 */
class ThreadsTest extends ServerTest {
  private static boolean alive(String name) {
    return Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.isAlive() && t.getName().equals(name));
  }

  @Test
  void theSweeperRunsOnlyWhileARedisLockIsHeld(TestInfo t) throws Exception {
    Servers.waitUntil("no sweeper before (nothing held)", 30, () -> !RedisLock.Sweeper.running());
    RedisLock lock = client.getLock(key(t));
    lock.lock();
    try {
      assertTrue(RedisLock.Sweeper.running(), "started by the acquisition");
      assertTrue(alive("redislock-sweeper"));
    } finally {
      lock.unlock();
    }
    Servers.waitUntil("the sweeper to end once nothing is held", 30,
        () -> !RedisLock.Sweeper.running() && !alive("redislock-sweeper"));
  }

  @Test
  void theDefaultCallbacksThreadEndsWhenIdle(TestInfo t) throws Exception {
    LockHandle h = client.acquire(key(t), LockOptions.ttl(Duration.ofMillis(200)));
    Servers.waitUntil("the lock to expire", 30, () -> !h.owned());
    try {
      h.extend(Duration.ofSeconds(5));
    } catch (LockNotOwnedException expected) {
      // found lost
    }
    CountDownLatch ran = new CountDownLatch(1);
    h.onLost(ran::countDown); // known lost: runs at once on the executor
    assertTrue(ran.await(30, TimeUnit.SECONDS), "the listener ran");
    Servers.waitUntil("the callbacks thread to end when idle", 30, () -> !alive("redislock-callbacks"));
  }
}
