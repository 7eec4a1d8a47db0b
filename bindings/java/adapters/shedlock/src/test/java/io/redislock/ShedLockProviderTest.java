package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.shedlock.RedislockLockProvider;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * The ShedLock adapter against a real redis-server: one node at a time,
 * lockAtMostFor as the TTL, lockAtLeastFor kept after unlock, extend, and
 * ShedLock's rule that a lock is used once (unlocked or extended).
 */
class ShedLockProviderTest extends ServerTest {
  private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
    return new LockConfiguration(Instant.now(), name, atMost, atLeast);
  }

  private static long pttl(String key) throws Exception {
    return (Long) server.call("PTTL", key);
  }

  @Test
  void oneNodeAtATimeAndUnlockReleases(TestInfo t) throws Exception {
    String name = key(t);
    String key = RedislockLockProvider.DEFAULT_PREFIX + name;
    try (RedisLockClient otherNode = RedisLockClient.open(server.url())) {
      LockProvider a = new RedislockLockProvider(client);
      LockProvider b = new RedislockLockProvider(otherNode);
      Optional<SimpleLock> held = a.lock(config(name, Duration.ofSeconds(30), Duration.ZERO));
      assertTrue(held.isPresent());
      long ttl = pttl(key);
      assertTrue(ttl > 0 && ttl <= 30_000, "lockAtMostFor is the TTL: " + ttl);
      assertFalse(b.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).isPresent(), "b skips the task");
      held.get().unlock();
      assertNull(server.call("GET", key), "released: lockAtLeastFor is over");
      Optional<SimpleLock> next = b.lock(config(name, Duration.ofSeconds(30), Duration.ZERO));
      assertTrue(next.isPresent(), "b runs it next time");
      next.get().unlock();
    }
  }

  @Test
  void unlockKeepsItUntilLockAtLeastUntil(TestInfo t) throws Exception {
    String name = key(t);
    String key = RedislockLockProvider.DEFAULT_PREFIX + name;
    LockProvider p = new RedislockLockProvider(client);
    SimpleLock held = p.lock(config(name, Duration.ofSeconds(30), Duration.ofSeconds(2))).orElseThrow();
    held.unlock();
    assertNotNull(server.call("GET", key), "still held after unlock");
    long ttl = pttl(key);
    assertTrue(ttl > 0 && ttl <= 2_000, "left to expire at lockAtLeastUntil: " + ttl);
    assertFalse(p.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).isPresent());
    Servers.waitUntil("the lock to expire at lockAtLeastUntil", 30, () -> Servers.q(server, "GET", key) == null);
    SimpleLock again = p.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow();
    again.unlock();
  }

  @Test
  void extendSetsANewLockAtMostForAndTheOldLockIsSpent(TestInfo t) throws Exception {
    String name = key(t);
    String key = RedislockLockProvider.DEFAULT_PREFIX + name;
    LockProvider p = new RedislockLockProvider(client, RedislockLockProvider.DEFAULT_PREFIX);
    assertTrue(p instanceof ExtensibleLockProvider);
    SimpleLock first = p.lock(config(name, Duration.ofSeconds(5), Duration.ZERO)).orElseThrow();
    String token = (String) server.call("GET", key);
    SimpleLock second = first.extend(Duration.ofSeconds(60), Duration.ZERO).orElseThrow();
    long ttl = pttl(key);
    assertTrue(ttl > 5_000 && ttl <= 60_000, "extended to the new lockAtMostFor: " + ttl);
    assertEquals(token, server.call("GET", key), "the same holding");
    assertThrows(IllegalStateException.class, first::unlock, "the extended lock is spent");
    assertThrows(IllegalStateException.class, () -> first.extend(Duration.ofSeconds(1), Duration.ZERO));
    second.unlock();
    assertNull(server.call("GET", key));
    assertThrows(IllegalStateException.class, second::unlock, "unlocked once");
  }

  @Test
  void aLostLockIsNotExtendedAndItsUnlockIsQuiet(TestInfo t) throws Exception {
    String name = key(t);
    String key = RedislockLockProvider.DEFAULT_PREFIX + name;
    LockProvider p = new RedislockLockProvider(client);
    SimpleLock held = p.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow();
    assertTrue(client.forceRelease(key));
    assertFalse(held.extend(Duration.ofSeconds(30), Duration.ZERO).isPresent(), "gone: not extended");
    assertNull(server.call("GET", key), "an expired lock is never re-created");

    SimpleLock again = p.lock(config(name, Duration.ofSeconds(30), Duration.ofSeconds(10))).orElseThrow();
    assertTrue(client.forceRelease(key));
    again.unlock(); // lost: nothing to keep, and no error
    assertNull(server.call("GET", key));

    SimpleLock third = p.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow();
    assertTrue(client.forceRelease(key));
    third.unlock();
    assertNull(server.call("GET", key));
  }
}
