package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Task;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** Counting semaphores: each holder a handle with its own token, lease and fence. */
class SemaphoreTest extends ServerTest {
  /** The holders' tokens on the server. */
  private static Set<String> holders(String k) throws IOException {
    Set<String> out = new TreeSet<>();
    for (Object m : (List<?>) server.call("ZRANGE", "{" + k + "}:sem", "0", "-1")) {
      out.add((String) m);
    }
    return out;
  }

  @Test
  void aThirdHolderWaitsForOneOfTwoToRelease(TestInfo t) throws Exception {
    String k = key(t);
    RedisSemaphore sem = client.semaphore(k, 2);
    assertEquals(k, sem.name());
    assertEquals(2, sem.limit());
    LockHandle a = sem.tryAcquire();
    LockHandle b = sem.tryAcquire();
    assertNotNull(a);
    assertNotNull(b);
    assertNull(sem.tryAcquire(), "both permits are taken");
    assertNull(sem.tryAcquire(1, Duration.ofMillis(200)), "within a short wait too");
    a.release();
    LockHandle c = sem.tryAcquire();
    assertNotNull(c, "a permit came free");
    assertEquals(Set.of(b.tokenString(), c.tokenString()), holders(k));
    b.release();
    c.release();
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"), "nothing left of the name");
  }

  @Test
  void aWaiterIsHandedThePermitOfARelease(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle a = client.semaphore(k, 1).tryAcquire();
    assertNotNull(a);
    try (RedisLockClient other = RedisLockClient.open(server.url())) {
      Task<LockHandle> waiter = Servers.spawn("sem-waiter",
          () -> other.semaphore(k, 1).acquire(1, LockOptions.DEFAULT.waitFor(Duration.ofSeconds(60))));
      Servers.waitUntil("the waiter to queue", 30, () -> other.stats().waitersNow() == 1);
      a.release();
      LockHandle b = waiter.get(60);
      assertEquals(Set.of(b.tokenString()), holders(k));
      assertEquals(1, other.stats().acquiredSemaphores());
      b.release();
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }

  @Test
  void twoPermitsOfALimitOfThree(TestInfo t) throws Exception {
    String k = key(t);
    RedisSemaphore sem = client.semaphore(k, 3);
    LockHandle two = sem.tryAcquire(2);
    assertNotNull(two);
    assertNull(sem.tryAcquire(2), "2 + 2 > 3");
    LockHandle one = sem.tryAcquire(1);
    assertNotNull(one, "2 + 1 fit");
    assertNull(sem.tryAcquire(1), "all three taken");
    assertEquals(3, client.stats().permitsHeldNow());
    two.release();
    LockHandle again = sem.tryAcquire(2);
    assertNotNull(again, "the two permits came back");
    again.release();
    one.release();
    assertEquals(0, client.stats().permitsHeldNow());
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }

  @Test
  void eachHolderHasItsOwnTokenFenceAndLease(TestInfo t) throws Exception {
    String k = key(t);
    RedisSemaphore sem = client.semaphore(k, 2);
    LockHandle a = sem.acquire(1, LockOptions.ttl(Duration.ofSeconds(20)));
    LockHandle b = sem.acquire(1, LockOptions.ttl(Duration.ofSeconds(20)));
    assertNotEquals(a.tokenString(), b.tokenString());
    assertEquals(Set.of(a.tokenString(), b.tokenString()), holders(k), "the tokens are the holders");
    long fa = a.fence();
    long fb = b.fence();
    assertTrue(fb > fa, "the later holder's fence is greater: " + fb + " after " + fa);
    double before = Double.parseDouble((String) server.call("ZSCORE", "{" + k + "}:sem", b.tokenString()));
    a.extend(Duration.ofSeconds(60));
    double scoreA = Double.parseDouble((String) server.call("ZSCORE", "{" + k + "}:sem", a.tokenString()));
    double scoreB = Double.parseDouble((String) server.call("ZSCORE", "{" + k + "}:sem", b.tokenString()));
    assertTrue(scoreA > scoreB + 30_000, "a's lease alone was extended: " + scoreA + " vs " + scoreB);
    assertEquals(before, scoreB, "renewing one holder never extends another");
    a.release();
    assertTrue(b.owned(), "b holds on after a's release");
    b.release();
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }

  @Test
  void aFiniteWaitThrowsLockTimeoutException(TestInfo t) throws Exception {
    String k = key(t);
    RedisSemaphore sem = client.semaphore(k, 1);
    try (LockHandle held = sem.acquire()) {
      assertNotNull(held);
      LockTimeoutException e = assertThrows(LockTimeoutException.class,
          () -> sem.acquire(1, LockOptions.DEFAULT.waitFor(Duration.ofMillis(300))));
      assertEquals(LockException.Kind.TIMEOUT, e.kind());
      assertFalse(held.isLost());
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"), "neither holder nor waiter left");
  }
}
