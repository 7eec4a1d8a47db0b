package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** executeLocked: the body's value or exception, released after, renewed meanwhile, loss reported. */
class ExecuteLockedTest extends ServerTest {
  @AfterEach
  void clearTheFlag() {
    Thread.interrupted();
  }

  /** A checked exception of the body's own. */
  static final class BodyFailed extends Exception {
    private static final long serialVersionUID = 1L;

    BodyFailed(String message) {
      super(message);
    }
  }

  @Test
  void itReturnsTheBodysValueAndReleases(TestInfo t) throws Exception {
    String k = key(t);
    String value = client.executeLocked(k, LockOptions.DEFAULT, lock -> {
      assertEquals(lock.tokenString(), server.call("GET", k), "held while the body runs");
      assertEquals(k, lock.name());
      return "done:" + lock.fence();
    });
    assertTrue(value.startsWith("done:"), value);
    assertNull(server.call("GET", k), "released after");
  }

  @Test
  void aBodyThatThrowsReleasesAndTheSameExceptionComesOut(TestInfo t) throws Exception {
    String k = key(t);
    BodyFailed thrown = new BodyFailed("the body's own");
    BodyFailed caught = assertThrows(BodyFailed.class, () -> client.executeLocked(k, LockOptions.DEFAULT, lock -> {
      throw thrown;
    }));
    assertSame(thrown, caught);
    assertNull(server.call("GET", k), "released after the throw");
    IllegalStateException unchecked = new IllegalStateException("unchecked");
    assertSame(unchecked, assertThrows(IllegalStateException.class,
        () -> client.executeLocked(k, LockOptions.DEFAULT, lock -> {
          throw unchecked;
        })));
    assertNull(server.call("GET", k));
  }

  @Test
  void theLockIsRenewedWhileTheBodyRuns(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      long start = System.nanoTime();
      boolean held = c.executeLocked(k, LockOptions.ttl(Duration.ofMillis(900)), lock -> {
        Servers.waitUntil("two TTLs and renewals", 60,
            () -> System.nanoTime() - start > 1_800_000_000L && c.stats().renewalsOk() >= 2);
        return lock.owned();
      });
      assertTrue(held, "still held past its TTL");
      assertNull(server.call("GET", k));
    }
  }

  @Test
  void aLockLostWhileTheBodyRanMakesItThrowAfterTheBodyReturns(TestInfo t) throws Exception {
    String k = key(t);
    AtomicBoolean bodyReturned = new AtomicBoolean();
    LockNotOwnedException e = assertThrows(LockNotOwnedException.class,
        () -> client.executeLocked(k, LockOptions.ttl(Duration.ofMillis(600)), lock -> {
          server.call("SET", k, "another-owner");
          Servers.waitUntil("the renewal to find it lost", 60, lock::isLost);
          bodyReturned.set(true);
          return 1;
        }));
    assertTrue(bodyReturned.get(), "the body ran to its end");
    assertTrue(e.getMessage().contains(k), e.getMessage());
    assertEquals("another-owner", server.call("GET", k), "the new owner's key is left alone");
    server.call("DEL", k);
  }

  @Test
  void aLockLostWhileTheBodyRanAndFoundByAnExtendAlsoThrows(TestInfo t) throws Exception {
    String k = key(t);
    assertThrows(LockNotOwnedException.class, () -> client.executeLocked(k, LockOptions.DEFAULT, lock -> {
      server.call("DEL", k);
      assertThrows(LockNotOwnedException.class, () -> lock.extend(Duration.ofSeconds(30)));
      assertTrue(lock.isLost());
      return 1;
    }));
    assertNull(server.call("GET", k), "an expired lock is never re-created");
  }

  @Test
  void interruptOnLossInterruptsTheBodyWhenRenewalFindsItLost(TestInfo t) throws Exception {
    String k = key(t);
    AtomicBoolean interrupted = new AtomicBoolean();
    LockOptions opts = LockOptions.ttl(Duration.ofMillis(600)).interruptOnLoss(true);
    assertThrows(LockNotOwnedException.class, () -> client.executeLocked(k, opts, lock -> {
      server.call("SET", k, "another-owner");
      try {
        Thread.sleep(TimeUnit.SECONDS.toMillis(60));
      } catch (InterruptedException e) {
        interrupted.set(true);
        assertTrue(lock.isLost(), "interrupted because it was lost");
      }
      return 1;
    }));
    assertTrue(interrupted.get(), "the body was interrupted at the loss");
    assertEquals("another-owner", server.call("GET", k));
    server.call("DEL", k);
  }

  @Test
  void withoutInterruptOnLossTheBodyIsNotInterrupted(TestInfo t) throws Exception {
    String k = key(t);
    AtomicBoolean wasInterrupted = new AtomicBoolean();
    assertThrows(LockNotOwnedException.class, () -> client.executeLocked(k, LockOptions.ttl(Duration.ofMillis(600)),
        lock -> {
          // Listeners run in order on one executor: once this one ran, any registered before it did.
          CountDownLatch ran = new CountDownLatch(1);
          lock.onLost(ran::countDown);
          server.call("SET", k, "another-owner");
          assertTrue(ran.await(60, TimeUnit.SECONDS), "the loss was found");
          wasInterrupted.set(Thread.currentThread().isInterrupted());
          return 1;
        }));
    assertFalse(wasInterrupted.get());
    server.call("DEL", k);
  }
}
