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
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** The java.util.concurrent.locks.Lock view: thread-owned, reentrant, watchdog-renewed. */
class RedisLockTest extends ServerTest {
  @Test
  void getLockGivesTheSameObjectPerName(TestInfo t) {
    String k = key(t);
    RedisLock a = client.getLock(k);
    assertSame(a, client.getLock(k));
    assertNotSame(a, client.getLock(k + ":other"));
    assertEquals(k, a.name());
    a.lock();
    try {
      assertSame(a, client.getLock(k), "while held");
    } finally {
      a.unlock();
    }
  }

  @Test
  void itIsReentrantAndCountsTheHoldsOfThisThread(TestInfo t) throws Exception {
    String k = key(t);
    RedisLock lock = client.getLock(k);
    assertEquals(0, lock.getHoldCount());
    assertFalse(lock.isHeldByCurrentThread());
    lock.lock();
    String token = (String) server.call("GET", k);
    assertNotNull(token, "held on the server");
    assertTrue(lock.tryLock());
    assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
    assertEquals(3, lock.getHoldCount());
    assertTrue(lock.isHeldByCurrentThread());
    assertEquals(token, server.call("GET", k), "one acquisition for every hold");
    lock.unlock();
    lock.unlock();
    assertEquals(1, lock.getHoldCount());
    assertEquals(token, server.call("GET", k), "still held after two of three unlocks");
    lock.unlock();
    assertEquals(0, lock.getHoldCount());
    assertFalse(lock.isHeldByCurrentThread());
    assertNull(server.call("GET", k), "released by the last unlock");
  }

  @Test
  void unlockByAThreadThatDoesNotHoldItIsIllegal(TestInfo t) throws Exception {
    String k = key(t);
    RedisLock lock = client.getLock(k);
    assertThrows(IllegalMonitorStateException.class, lock::unlock, "nobody holds it");
    lock.lock();
    try {
      Task<Throwable> other = Servers.spawn("other-thread", () -> {
        assertFalse(lock.isHeldByCurrentThread());
        assertEquals(0, lock.getHoldCount());
        return assertThrows(IllegalMonitorStateException.class, lock::unlock);
      });
      assertNotNull(other.get(30));
      assertTrue(lock.isHeldByCurrentThread(), "the holder still holds it");
      assertNotNull(server.call("GET", k));
    } finally {
      lock.unlock();
    }
    assertNull(server.call("GET", k));
    assertThrows(IllegalMonitorStateException.class, lock::unlock, "released already");
  }

  @Test
  void tryLockFailsWhileAnotherThreadOrAnotherClientHoldsIt(TestInfo t) throws Exception {
    String k = key(t);
    RedisLock lock = client.getLock(k);
    lock.lock();
    try (RedisLockClient other = RedisLockClient.open(server.url())) {
      assertFalse(Servers.spawn("same-jvm", lock::tryLock).get(30), "another thread of this client");
      assertFalse(Servers.spawn("same-jvm-waiting", () -> lock.tryLock(200, TimeUnit.MILLISECONDS)).get(30));
      RedisLock theirs = other.getLock(k);
      assertFalse(theirs.tryLock(), "another client (another process) while the server lock is held");
      assertFalse(theirs.tryLock(200, TimeUnit.MILLISECONDS));
      assertFalse(theirs.isHeldByCurrentThread());
    } finally {
      lock.unlock();
    }
    assertNull(server.call("GET", k));
  }

  @Test
  void tryLockWithAWaitGetsItWhenTheHolderUnlocks(TestInfo t) throws Exception {
    String k = key(t);
    RedisLock lock = client.getLock(k);
    // Another client: the server's queue and its hand-off.
    try (RedisLockClient other = RedisLockClient.open(server.url())) {
      lock.lock();
      Task<String> waiter = Servers.spawn("other-client-waiter", () -> {
        RedisLock theirs = other.getLock(k);
        if (!theirs.tryLock(60, TimeUnit.SECONDS)) {
          return null;
        }
        try {
          return (String) server.call("GET", k);
        } finally {
          theirs.unlock();
        }
      });
      Servers.waitUntil("the other client's waiter", 30, () -> other.stats().waitersNow() == 1);
      String mine = (String) server.call("GET", k);
      lock.unlock();
      String theirs = waiter.get(60);
      assertNotNull(theirs, "the waiter got it");
      assertFalse(theirs.equals(mine), "under its own token");
      assertEquals(1, other.stats().acquiredHandedOver(), "handed over by the unlock");
    }
    // Another thread of this client: the local queue first.
    lock.lock();
    Task<Boolean> local = Servers.spawn("same-client-waiter", () -> {
      boolean ok = lock.tryLock(60, TimeUnit.SECONDS);
      if (ok) {
        lock.unlock();
      }
      return ok;
    });
    Servers.waitUntil("the local waiter to block", 30,
        () -> local.thread.getState() == Thread.State.TIMED_WAITING);
    lock.unlock();
    assertTrue(local.get(60));
    assertNull(server.call("GET", k));
  }

  @Test
  void aLeaseExpiresWithoutRenewal(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      RedisLock lock = c.getLock(k);
      lock.lock(1500, TimeUnit.MILLISECONDS);
      long pttl = (Long) server.call("PTTL", k);
      assertTrue(pttl > 0 && pttl <= 1500, "pttl " + pttl);
      Servers.waitUntil("the lease to run out", 30, () -> Servers.q(server, "EXISTS", k).equals(0L));
      assertEquals(0, c.stats().renewalsOk(), "an explicit lease is never renewed");
      assertTrue(lock.isHeldByCurrentThread(), "this thread does not know yet");
      assertThrows(LockNotOwnedException.class, lock::unlock);
      assertFalse(lock.isHeldByCurrentThread(), "cleared by the failed unlock");
      assertTrue(lock.tryLock(), "free again");
      lock.unlock();
    }
  }

  @Test
  void theWatchdogKeepsItPastSeveralTtls(TestInfo t) throws Exception {
    String k = key(t);
    Duration ttl = Duration.ofMillis(900);
    try (RedisLockClient c = RedisLockClient.open(server.url(), ClientOptions.DEFAULT.watchdogTtl(ttl))) {
      RedisLock lock = c.getLock(k);
      long start = System.nanoTime();
      lock.lock();
      long pttl = (Long) server.call("PTTL", k);
      assertTrue(pttl > 0 && pttl <= 900, "the watchdog TTL, pttl " + pttl);
      String token = (String) server.call("GET", k);
      Servers.waitUntil("three TTLs and renewals", 60,
          () -> System.nanoTime() - start > 3 * ttl.toNanos() && c.stats().renewalsOk() >= 3);
      assertEquals(token, server.call("GET", k), "still held by the same acquisition");
      assertNull(client.tryAcquire(k), "another client is still excluded");
      assertFalse(lock.isLost());
      lock.unlock();
      assertNull(server.call("GET", k));
      System.out.println("watchdog renewals over " + (System.nanoTime() - start) / 1_000_000 + " ms: "
          + c.stats().renewalsOk());
    }
  }

  @Test
  void unlockOfALockLostOnTheServerThrowsAndClearsTheLocalState(TestInfo t) throws Exception {
    String k = key(t);
    RedisLock lock = client.getLock(k);
    lock.lock();
    lock.lock();
    server.call("SET", k, "another-owner");
    assertThrows(LockNotOwnedException.class, () -> {
      lock.unlock(); // the inner hold: no I/O
      lock.unlock();
    });
    assertFalse(lock.isHeldByCurrentThread());
    assertEquals(0, lock.getHoldCount());
    assertEquals("another-owner", server.call("GET", k), "the new owner's key is left alone");
    server.call("DEL", k);
    assertTrue(Servers.spawn("next-thread", () -> {
      boolean ok = lock.tryLock(30, TimeUnit.SECONDS);
      if (ok) {
        lock.unlock();
      }
      return ok;
    }).get(60), "another thread can take it after");
  }

  @Test
  void newConditionIsUnsupported(TestInfo t) {
    assertThrows(UnsupportedOperationException.class, () -> client.getLock(key(t)).newCondition());
  }

  private int counter; // guarded by the lock only

  @Test
  void eightThreadsIncrementAPlainFieldUnderTheLock(TestInfo t) throws Exception {
    String k = key(t);
    RedisLock lock = client.getLock(k);
    counter = 0;
    List<Task<Void>> tasks = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      tasks.add(Servers.spawn("incrementer-" + i, () -> {
        for (int j = 0; j < 50; j++) {
          lock.lock();
          try {
            int v = counter;
            Thread.yield();
            counter = v + 1;
          } finally {
            lock.unlock();
          }
        }
        return null;
      }));
    }
    for (Task<Void> task : tasks) {
      task.get(60);
    }
    assertEquals(400, counter);
    assertNull(server.call("GET", k));
  }
}
