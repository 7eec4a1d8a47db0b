package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Task;
import io.redislock.spring.RedislockLockRegistry;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.springframework.integration.support.locks.ExpirableLockRegistry;
import org.springframework.integration.support.locks.LockRegistry;

/**
 * The Spring Integration adapter against a real redis-server: what
 * LockRegistry's users rely on (one Lock object per key, thread-owned,
 * mutual exclusion between registries of different clients, as between
 * nodes), the key prefix, and String keys only.
 */
class SpringLockRegistryTest extends ServerTest {
  @Test
  void obtainGivesOneThreadOwnedLockPerKeyUnderThePrefix(TestInfo t) throws Exception {
    String k = key(t);
    LockRegistry<RedisLock> registry = new RedislockLockRegistry(client, "spring:");
    Lock lock = registry.obtain(k);
    assertSame(lock, registry.obtain(k));
    assertNotSame(lock, registry.obtain(k + ":other"));
    lock.lock();
    try {
      assertNotNull(server.call("GET", "spring:" + k), "held on the server under the prefix");
      assertNull(server.call("GET", k));
      assertSame(client.getLock("spring:" + k), lock, "the client's lock of that name");
      Task<Throwable> other = Servers.spawn("other-thread", () -> assertThrows(IllegalMonitorStateException.class,
          () -> registry.obtain(k).unlock()));
      assertNotNull(other.get(30), "another thread may not unlock it");
    } finally {
      lock.unlock();
    }
    assertNull(server.call("GET", "spring:" + k), "released by unlock");
  }

  /** Two nodes: registries over two clients take turns, never both inside. */
  @Test
  void registriesOfTwoClientsExcludeEachOther(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient otherNode = RedisLockClient.open(server.url())) {
      LockRegistry<RedisLock> a = new RedislockLockRegistry(client);
      LockRegistry<RedisLock> b = new RedislockLockRegistry(otherNode);
      Lock la = a.obtain(k);
      la.lock();
      Task<Boolean> tryB = Servers.spawn("node-b", () -> b.obtain(k).tryLock());
      assertFalse(tryB.get(30), "node b cannot take it while a holds it");
      AtomicInteger inside = new AtomicInteger();
      Task<Integer> waitB = Servers.spawn("node-b-waits", () -> {
        Lock lb = b.obtain(k);
        assertTrue(lb.tryLock(60, TimeUnit.SECONDS));
        try {
          return inside.incrementAndGet();
        } finally {
          lb.unlock();
        }
      });
      Servers.sleep(200);
      assertEquals(0, inside.get(), "b waits while a holds it");
      la.unlock();
      assertEquals(1, waitB.get(60), "b gets it once a lets go");
    }
  }

  @Test
  void keysAreStrings() {
    RedislockLockRegistry registry = new RedislockLockRegistry(client);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> registry.obtain(42));
    assertTrue(e.getMessage().contains("java.lang.Integer"), e.getMessage());
    assertThrows(NullPointerException.class, () -> registry.obtain(null));
    assertThrows(IllegalArgumentException.class, () -> registry.obtain(""), "an empty name");
  }

  @Test
  void expiringUnusedLocksLeavesAHeldOneAlone(TestInfo t) throws Exception {
    String k = key(t);
    ExpirableLockRegistry<RedisLock> registry = new RedislockLockRegistry(client);
    RedisLock lock = registry.obtain(k);
    lock.lock();
    try {
      registry.expireUnusedOlderThan(0);
      assertSame(lock, registry.obtain(k));
      assertTrue(lock.isHeldByCurrentThread());
      assertNotNull(server.call("GET", k));
    } finally {
      lock.unlock();
    }
  }
}
