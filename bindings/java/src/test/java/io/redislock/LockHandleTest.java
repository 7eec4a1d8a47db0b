package io.redislock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

class LockHandleTest extends ServerTest {
  @Test
  void acquireHoldsTheKeyWithItsTokenAndTtlAndReleaseRemovesIt(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle lock = client.acquire(k, LockOptions.ttl(Duration.ofSeconds(10)).waitFor(Duration.ZERO));
    assertEquals(k, lock.name());
    assertEquals(32, lock.token().length, "128 random bits as hex");
    assertEquals(new String(lock.token(), StandardCharsets.US_ASCII), server.call("GET", k));
    long pttl = (Long) server.call("PTTL", k);
    assertTrue(pttl > 5_000 && pttl <= 10_000, "pttl " + pttl);
    assertNull(client.tryAcquire(k), "a second owner while held");
    lock.release();
    assertNull(server.call("GET", k));
    assertTrue(lock.isReleased());
    assertThrows(LockNotOwnedException.class, lock::release, "released twice");
    lock.close(); // idempotent once released
  }

  @Test
  void tryWithResourcesReleasesAndACallersTokenIsStored(TestInfo t) throws Exception {
    String k = key(t);
    try (LockHandle lock = client.acquire(k, LockOptions.DEFAULT.token("job-42"))) {
      assertEquals("job-42", server.call("GET", k));
      assertEquals("job-42", lock.tokenString());
      assertTrue(client.isOwnedBy(k, "job-42"));
      assertFalse(client.isOwnedBy(k, "someone-else"));
    }
    assertNull(server.call("GET", k));
  }

  @Test
  void theTokenIsReadableAfterTheReleaseWhenNeverReadBefore(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle lock = client.acquire(k);
    String stored = (String) server.call("GET", k);
    lock.release();
    assertEquals(stored, new String(lock.token(), StandardCharsets.US_ASCII), "released, then read");
    LockHandle forgotten = client.acquire(k);
    stored = (String) server.call("GET", k);
    forgotten.forget();
    assertEquals(stored, forgotten.tokenString(), "forgotten, then read");
    assertTrue(client.releaseToken(k, forgotten.tokenString()));
  }

  @Test
  void fencesGrowAndAreKeptAfterTheRelease(TestInfo t) throws Exception {
    String k = key(t);
    long last = 0;
    for (int i = 0; i < 5; i++) {
      LockHandle lock = client.acquire(k, LockOptions.DEFAULT.fenced(i % 2 == 0));
      long f = lock.fence();
      assertTrue(f > last, f + " after " + last);
      assertEquals(f, lock.fence(), "answered from memory");
      lock.release();
      assertEquals(f, lock.fence(), "kept after the release");
      last = f;
    }
    LockHandle unfenced = client.acquire(k);
    unfenced.release();
    assertThrows(LockNotOwnedException.class, unfenced::fence, "released before a fence was drawn");
  }

  @Test
  void extendSetsTheRemainingTimeAndALostLockSaysSo(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle lock = client.acquire(k, LockOptions.ttl(Duration.ofSeconds(2)));
    lock.extend(Duration.ofSeconds(60));
    assertTrue((Long) server.call("PTTL", k) > 30_000);
    assertTrue(lock.owned());
    server.call("SET", k, "another-owner");
    assertFalse(lock.owned(), "asked of the server");
    assertFalse(lock.isLost(), "owned() does not mark it lost");
    assertThrows(LockNotOwnedException.class, () -> lock.extend(Duration.ofSeconds(5)));
    assertTrue(lock.isLost());
    assertEquals("another-owner", server.call("GET", k), "the new owner's key is left alone");
    LockNotOwnedException e = assertThrows(LockNotOwnedException.class, lock::close);
    assertEquals(LockException.Kind.NOT_OWNED, e.kind());
    assertEquals("another-owner", server.call("GET", k));
    server.call("DEL", k);
  }

  @Test
  void autoRenewKeepsItPastItsTtlAndLostListenersRunOnTheExecutor(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle lock = client.acquire(k, LockOptions.ttl(Duration.ofMillis(600)).autoRenew(true));
    long renewals = client.stats().renewalsOk();
    Servers.waitUntil("three renewals", 30, () -> client.stats().renewalsOk() >= renewals + 3);
    assertTrue(lock.owned(), "renewed past its TTL");
    CountDownLatch ran = new CountDownLatch(1);
    AtomicReference<String> thread = new AtomicReference<>();
    lock.onLost(() -> {
      thread.set(Thread.currentThread().getName());
      ran.countDown();
    });
    server.call("SET", k, "taken");
    assertTrue(ran.await(30, TimeUnit.SECONDS), "the listener ran");
    assertEquals("redislock-callbacks", thread.get(), "on the callback executor, not the renewal thread");
    assertTrue(lock.isLost());
    assertThrows(LockNotOwnedException.class, lock::release);
    assertEquals("taken", server.call("GET", k));
    server.call("DEL", k);
  }

  @Test
  void anotherThreadMayReleaseAHandle(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle lock = client.acquire(k);
    CompletableFuture.runAsync(lock::release).get(30, TimeUnit.SECONDS);
    assertNull(server.call("GET", k));
    LockHandle again = client.tryAcquire(k);
    assertNotNull(again, "free after the other thread's release");
    again.release();
  }

  @Test
  void forgetKeepsTheLockForItsTokenAndTheTokenCallsWork(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle lock = client.acquire(k);
    byte[] token = lock.token();
    long fence = lock.fence();
    lock.forget();
    assertArrayEquals(token, ((String) server.call("GET", k)).getBytes(StandardCharsets.US_ASCII));
    assertEquals(fence, client.fenceToken(k, token).getAsLong());
    assertTrue(client.extendToken(k, token, Duration.ofSeconds(50)));
    assertTrue((Long) server.call("PTTL", k) > 40_000);
    assertTrue(client.releaseToken(k, token));
    assertFalse(client.releaseToken(k, token), "released already");
    assertFalse(client.extendToken(k, token, Duration.ofSeconds(5)), "never re-created");
    assertTrue(client.fenceToken(k, token).isEmpty());
    assertNull(server.call("GET", k));
  }

  @Test
  void forceReleaseTakesItFromItsHolder(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle lock = client.acquire(k);
    assertTrue(client.forceRelease(k));
    assertFalse(client.forceRelease(k), "nobody holds it");
    assertThrows(LockNotOwnedException.class, lock::release);
  }

  @Test
  void aKeyOfAnotherTypeIsLeftAlone(TestInfo t) throws Exception {
    String k = key(t);
    server.call("RPUSH", k, "x");
    LockWrongTypeException e = assertThrows(LockWrongTypeException.class, () -> client.tryAcquire(k));
    assertTrue(e.getMessage().contains(k), e.getMessage());
    assertEquals(List.of("x"), server.call("LRANGE", k, "0", "-1"));
    server.call("DEL", k);
  }

  @Test
  void aFiniteWaitRunsOutWithATimeout(TestInfo t) throws Exception {
    String k = key(t);
    try (LockHandle held = client.acquire(k)) {
      assertNotNull(held);
      LockTimeoutException e = assertThrows(LockTimeoutException.class,
          () -> client.acquire(k, LockOptions.DEFAULT.waitFor(Duration.ofMillis(200))));
      assertEquals(LockException.Kind.TIMEOUT, e.kind());
      assertNull(client.tryAcquire(k, LockOptions.DEFAULT.waitFor(Duration.ofMillis(100))));
    }
  }

  @Test
  void badArgumentsAreRefusedBeforeAnyIo() throws Exception {
    long before = Servers.calls(server, "set") + Servers.calls(server, "evalsha");
    assertThrows(NullPointerException.class, () -> client.acquire((String) null));
    assertThrows(IllegalArgumentException.class, () -> client.acquire(""));
    assertThrows(IllegalArgumentException.class, () -> client.acquire(new byte[0], LockOptions.DEFAULT));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.ttl(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.ttl(Duration.ofMillis(-5)));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.ttl(Duration.ofDays(31)));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.DEFAULT.waitFor(Duration.ofSeconds(-1)));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.DEFAULT.token(new byte[0]));
    assertThrows(IllegalArgumentException.class, () -> client.semaphore("s", 0));
    assertThrows(IllegalArgumentException.class, () -> client.semaphore("s", 2).tryAcquire(3));
    assertThrows(IllegalArgumentException.class, () -> client.releaseToken("k", new byte[0]));
    assertThrows(IllegalArgumentException.class, () -> RedisLockClient.open("http://nope"));
    assertThrows(IllegalArgumentException.class, () -> RedisLockClient.open("redis://h\0ost"));
    assertThrows(IllegalArgumentException.class, () -> RedisLockClient.open(List.of()));
    assertThrows(NullPointerException.class, () -> RedisLockClient.open((String) null));
    assertEquals(before, Servers.calls(server, "set") + Servers.calls(server, "evalsha"), "nothing reached the server");
  }

  @Test
  void binaryNamesAndNonAsciiNamesAreTheirBytes() throws Exception {
    byte[] name = {'j', 0, (byte) 0xff, 'x'};
    try (LockHandle lock = client.acquire(name, LockOptions.DEFAULT)) {
      assertArrayEquals(name, lock.nameBytes());
      assertEquals(1L, server.call("EXISTS", name));
    }
    try (LockHandle lock = client.acquire("java:zürich ✓")) {
      assertEquals(1L, server.call("EXISTS", "java:zürich ✓"));
      assertEquals("java:zürich ✓", lock.name());
    }
  }

  @Test
  void aDeadServerIsAConnectionErrorNamingIt() throws Exception {
    int port = Servers.freePort();
    try (RedisLockClient dead = RedisLockClient.open("redis://127.0.0.1:" + port + "/0?connect_timeout=2s")) {
      LockConnectionException e = assertThrows(LockConnectionException.class, () -> dead.tryAcquire("k"));
      assertTrue(e.getMessage().contains("127.0.0.1:" + port), e.getMessage());
      assertEquals(LockException.Kind.CONNECTION, e.kind());
    }
  }

  @Test
  void aClosedClientRefusesCallsAndItsLocksStayValid(TestInfo t) throws Exception {
    String k = key(t);
    RedisLockClient c = RedisLockClient.open(server.url());
    LockHandle lock = c.acquire(k);
    c.close();
    c.close();
    assertThrows(IllegalStateException.class, () -> c.tryAcquire(k));
    assertTrue(lock.owned());
    lock.release();
    assertNull(server.call("GET", k));
  }

  @Test
  void aHandleNobodyReleasedIsReleasedWhenCollected(TestInfo t) throws Exception {
    String k = key(t);
    dropped(k);
    Servers.waitUntil("the collected handle's release", 60, () -> {
      System.gc();
      try {
        return server.call("GET", k) == null;
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    });
  }

  private static void dropped(String k) throws InterruptedException {
    LockHandle lock = client.acquire(k);
    assertNotEquals(0, lock.token().length);
  }

  @Test
  void addrAndRedactNeverShowAPassword() {
    try (RedisLockClient c = RedisLockClient.open("redis://user:s3cret@127.0.0.1:1/0")) {
      assertFalse(c.addr().contains("s3cret"), c.addr());
      assertFalse(c.toString().contains("s3cret"), c.toString());
    }
    String r = RedisLockClient.redact("redis://user:s3cret@127.0.0.1:1/0");
    assertFalse(r.contains("s3cret"), r);
    assertTrue(r.contains("***"), r);
    assertTrue(RedisLockClient.nativeVersion().matches("\\d+\\.\\d+\\.\\d+.*"), RedisLockClient.nativeVersion());
  }

  @Test
  void closingAClientUnderCallsOfOtherThreadsFreesItOnceTheyAreOut(TestInfo t) throws Exception {
    String k = key(t);
    for (int round = 0; round < 20; round++) {
      RedisLockClient c = RedisLockClient.open(server.url());
      CountDownLatch started = new CountDownLatch(4);
      List<CompletableFuture<Integer>> users = new java.util.ArrayList<>();
      for (int i = 0; i < 4; i++) {
        String name = k + ":" + i;
        users.add(CompletableFuture.supplyAsync(() -> {
          started.countDown();
          int cycles = 0;
          while (true) {
            try {
              LockHandle h = c.tryAcquire(name);
              if (h != null) {
                h.release();
              }
              cycles++;
            } catch (IllegalStateException closed) {
              return cycles;
            }
          }
        }));
      }
      assertTrue(started.await(30, TimeUnit.SECONDS));
      Thread.sleep(5);
      c.close();
      for (CompletableFuture<Integer> u : users) {
        assertTrue(u.get(30, TimeUnit.SECONDS) >= 0, "a user thread ended only by the close");
      }
    }
    for (int i = 0; i < 4; i++) {
      assertNull(server.call("GET", k + ":" + i), "every lock released");
    }
  }

  @Test
  void twoThreadsReleasingOneHandleReleaseItOnce(TestInfo t) throws Exception {
    String k = key(t);
    for (int round = 0; round < 50; round++) {
      LockHandle lock = client.acquire(k);
      CountDownLatch go = new CountDownLatch(1);
      List<CompletableFuture<String>> racers = new java.util.ArrayList<>();
      for (int i = 0; i < 2; i++) {
        racers.add(CompletableFuture.supplyAsync(() -> {
          try {
            go.await();
            lock.release();
            return "released";
          } catch (LockNotOwnedException e) {
            return "refused";
          } catch (InterruptedException e) {
            throw new RuntimeException(e);
          }
        }));
      }
      go.countDown();
      List<String> outcomes = new java.util.ArrayList<>();
      for (CompletableFuture<String> r : racers) {
        outcomes.add(r.get(30, TimeUnit.SECONDS));
      }
      java.util.Collections.sort(outcomes);
      assertEquals(List.of("refused", "released"), outcomes);
      assertNull(server.call("GET", k));
    }
  }
}
