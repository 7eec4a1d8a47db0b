package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * {@link RedisLockClient#acquireAsync}: the future completes with the lock,
 * or with the blocking call's exceptions; ending it ends the wait and leaves
 * nothing queued on the server; a lock handed over as it is cancelled is
 * released; closing the client fails the futures still waiting. On Java 17
 * (no virtual threads: the blocking calls stay native waits).
 */
class AsyncAcquireTest extends ServerTest {
  private static long queued(String k) {
    return call("LLEN", "{" + k + "}:queue");
  }

  private static long exists(String k) {
    return call("EXISTS", k);
  }

  private static long call(Object... args) {
    try {
      return (Long) server.call(args);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static Throwable failure(CompletableFuture<LockHandle> f) throws Exception {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(30, TimeUnit.SECONDS));
    return e.getCause();
  }

  @Test
  void aFreeLockCompletesAndAHeldOneAfterItsRelease(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle first = client.acquireAsync(k).get(30, TimeUnit.SECONDS);
    assertEquals(first.tokenString(), server.call("GET", k), "held on the server");

    CompletableFuture<LockHandle> next = client.acquireAsync(k, LockOptions.ttl(Duration.ofSeconds(20)));
    Servers.waitUntil("the waiter to queue", 30, () -> queued(k) == 1);
    assertFalse(next.isDone(), "completed while the lock was held");
    first.release();
    LockHandle second = next.get(30, TimeUnit.SECONDS);
    assertEquals(second.tokenString(), server.call("GET", k), "handed over");
    assertNotEquals(first.tokenString(), second.tokenString());
    second.release();
    assertEquals(0L, exists(k));

    // The byte[] form, fenced, with the caller's token.
    byte[] name = k.getBytes(StandardCharsets.UTF_8);
    LockOptions opts = LockOptions.ttl(Duration.ofSeconds(20)).fenced(true).token("mine");
    LockHandle fenced = client.acquireAsync(name, opts).get(30, TimeUnit.SECONDS);
    assertEquals("mine", server.call("GET", k));
    assertTrue(fenced.fence() > 0);
    fenced.release();
  }

  @Test
  void theFutureCompletesOnTheCallbackExecutor(TestInfo t) throws Exception {
    List<String> ran = new ArrayList<>();
    Executor mine = r -> {
      synchronized (ran) {
        ran.add(Thread.currentThread().getName());
      }
      Thread th = new Thread(r, "my-callbacks");
      th.start();
    };
    try (RedisLockClient c = RedisLockClient.open(server.url(), ClientOptions.DEFAULT.callbackExecutor(mine))) {
      CompletableFuture<String> where = c.acquireAsync(key(t)).thenApply(lock -> {
        lock.releaseQuietly();
        return Thread.currentThread().getName();
      });
      assertEquals("my-callbacks", where.get(30, TimeUnit.SECONDS), "stages run on the callback executor");
    }
  }

  @Test
  void autoRenewKeepsAnAsyncLockPastItsTtl(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle lock = client.acquireAsync(k, LockOptions.ttl(Duration.ofMillis(600)).autoRenew(true))
        .get(30, TimeUnit.SECONDS);
    Servers.sleep(1_500);
    assertEquals(lock.tokenString(), server.call("GET", k), "renewed past its 600 ms TTL");
    lock.release();
  }

  @Test
  void failuresCompleteWithTheBlockingCallsExceptions(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle held = client.acquire(k);
    Throwable e = failure(client.acquireAsync(k, LockOptions.DEFAULT.waitFor(Duration.ZERO)));
    assertInstanceOf(LockTimeoutException.class, e, "one attempt on a held lock");
    e = failure(client.acquireAsync(k, LockOptions.DEFAULT.waitFor(Duration.ofMillis(300))));
    assertInstanceOf(LockTimeoutException.class, e, "a bounded wait that ran out");
    assertTrue(e.getMessage().contains(k), e.getMessage());
    assertEquals(0L, queued(k), "the timed-out waiter left the queue");
    held.release();

    server.call("HSET", k + ":hash", "f", "v");
    assertInstanceOf(LockWrongTypeException.class, failure(client.acquireAsync(k + ":hash")));

    int port = Servers.freePort(); // nothing listens there
    try (RedisLockClient dead = RedisLockClient.open("redis://127.0.0.1:" + port + "?connect_timeout=200ms")) {
      assertInstanceOf(LockConnectionException.class, failure(dead.acquireAsync(k)));
    }

    // Bad arguments are refused at once, as by the blocking call.
    assertThrows(IllegalArgumentException.class, () -> client.acquireAsync(""));
    assertThrows(NullPointerException.class, () -> client.acquireAsync(k, null));
    RedisLockClient closed = RedisLockClient.open(server.url());
    closed.close();
    assertThrows(IllegalStateException.class, () -> closed.acquireAsync(k));
  }

  @Test
  void cancelEndsTheWaitAndLeavesNothingQueued(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle held = client.acquire(k);
    CompletableFuture<LockHandle> waiting = client.acquireAsync(k);
    Servers.waitUntil("the waiter to queue", 30, () -> queued(k) == 1);
    // The client counts its waiter once the queueing call has answered,
    // a moment after the server queued it.
    Servers.waitUntil("the client to count its waiter", 30, () -> client.stats().waitersNow() == 1);
    assertTrue(waiting.cancel(true));
    assertTrue(waiting.isCancelled());
    Servers.waitUntil("the cancelled waiter to leave the queue", 30, () -> queued(k) == 0);
    Servers.waitUntil("the client to count no waiter", 30, () -> client.stats().waitersNow() == 0);
    held.release();
    assertEquals(0L, exists(k), "free after the release: not handed to the cancelled waiter");

    // A timeout of the caller's (orTimeout) ends the wait the same way.
    held = client.acquire(k);
    CompletableFuture<LockHandle> bounded = client.acquireAsync(k).orTimeout(300, TimeUnit.MILLISECONDS);
    assertInstanceOf(TimeoutException.class, failure(bounded));
    Servers.waitUntil("the timed-out waiter to leave the queue", 30, () -> queued(k) == 0);
    held.release();
    assertEquals(0L, exists(k));
  }

  /**
   * Cancel in the same moment as the release that hands the lock over, in
   * both orders with a little skew: whichever wins, the lock ends up free
   * (released by the cancelled side), never held by nobody until its TTL.
   */
  @Test
  void aCancelRacingTheHandOffNeverLeaksTheLock(TestInfo t) throws Exception {
    String k = key(t);
    int delivered = 0;
    for (int round = 0; round < 30; round++) {
      LockHandle held = client.acquire(k, LockOptions.ttl(Duration.ofSeconds(60)));
      CompletableFuture<LockHandle> waiting = client.acquireAsync(k, LockOptions.ttl(Duration.ofSeconds(60)));
      Servers.waitUntil("the waiter to queue", 30, () -> queued(k) == 1);
      long skewNs = round * 50_000L;
      if (round % 2 == 0) {
        held.release();
        spin(skewNs);
        waiting.cancel(true);
      } else {
        waiting.cancel(true);
        spin(skewNs);
        held.release();
      }
      if (!waiting.isCancelled()) {
        delivered++;
        waiting.get().release(); // it completed before the cancel: an ordinary holder
      }
      Servers.waitUntil("the lock to be free again", 30, () -> exists(k) == 0 && queued(k) == 0);
    }
    System.out.println("acquireAsync cancel race: the hand-off won " + delivered + " of 30 rounds");
    Servers.waitUntil("no handle left", 30, () -> client.stats().heldNow() == 0);
  }

  private static void spin(long ns) {
    long until = System.nanoTime() + ns;
    while (System.nanoTime() < until) {
      Thread.onSpinWait();
    }
  }

  @Test
  void closingTheClientFailsTheWaitingFutures(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle held = client.acquire(k);
    RedisLockClient c = RedisLockClient.open(server.url());
    CompletableFuture<LockHandle> waiting = c.acquireAsync(k);
    Servers.waitUntil("the waiter to queue", 30, () -> queued(k) == 1);
    c.close();
    Throwable e = failure(waiting);
    assertInstanceOf(IllegalStateException.class, e);
    assertTrue(e.getMessage().contains("closed"), e.getMessage());
    Servers.waitUntil("the waiter to leave the queue", 30, () -> queued(k) == 0);
    held.release();
    assertEquals(0L, exists(k), "not handed to the closed client's waiter");
    assertNull(server.call("GET", k));
    LockHandle free = client.tryAcquire(k);
    assertNotNull(free, "free for another client");
    free.release();
  }
}
