package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Task;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * close() ends the waits of its client: each waiting call fails with
 * IllegalStateException naming the close, leaves the server's queue, and
 * the lock goes to nobody of the closed client.
 */
class CloseTest extends ServerTest {
  /** A waiter's end: the exception it threw, or an error when it returned. */
  private static Task<Throwable> waiter(String name, Callable<Object> body) {
    return Servers.spawn(name, () -> {
      try {
        Object got = body.call();
        return new AssertionError("returned " + got);
      } catch (Throwable e) {
        return e;
      }
    });
  }

  private static void assertClosedError(Throwable e) {
    assertInstanceOf(IllegalStateException.class, e, "ended by the close: " + e);
    assertTrue(e.getMessage().contains("closed"), e.getMessage());
  }

  @Test
  void closeEndsWaitingAcquiresAndLeavesNothingQueued(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle held = client.acquire(k); // another client holds it
    RedisLockClient c = RedisLockClient.open(server.url());
    try {
      Task<Throwable> interruptible = waiter("waits-in-acquire", () -> c.acquire(k));
      Task<Throwable> uninterruptible = waiter("waits-uninterruptibly",
          () -> c.acquireUninterruptibly(k, LockOptions.DEFAULT.waitForever()));
      Servers.waitUntil("both to queue", 30, () -> c.stats().waitersNow() == 2);
      assertEquals(2L, server.call("LLEN", "{" + k + "}:queue"), "queued on the server");
      c.close();
      assertClosedError(interruptible.get(30));
      assertClosedError(uninterruptible.get(30));
      assertEquals(0L, server.call("LLEN", "{" + k + "}:queue"), "the waiters left the server's queue");
      assertEquals(held.tokenString(), server.call("GET", k), "the holder is left alone");
      held.release();
      assertNull(server.call("GET", k), "nobody of the closed client took it");
      assertTrue(c.toString().endsWith(", closed}"), c.toString());
    } finally {
      held.releaseQuietly();
      c.close();
    }
  }

  @Test
  void closeEndsTheWaitsOfItsLockViewsInTheServersQueueAndInTheJvm(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle held = client.acquire(k);
    RedisLockClient c = RedisLockClient.open(server.url());
    try {
      RedisLock lock = c.getLock(k);
      // lock() is not interruptible: only the close can end it. The first waits on
      // the server, the second in the JVM's queue behind it.
      Task<Throwable> first = waiter("lock-on-the-server", () -> {
        lock.lock();
        return "locked";
      });
      Servers.waitUntil("the first to queue on the server", 30, () -> c.stats().waitersNow() == 1);
      Task<Throwable> second = waiter("lock-in-the-jvm", () -> {
        lock.lock();
        return "locked";
      });
      Servers.waitUntil("the second to queue in the JVM", 30, () -> second.thread.getState() == Thread.State.WAITING);
      c.close();
      assertClosedError(first.get(30));
      assertClosedError(second.get(30));
      assertEquals(0L, server.call("LLEN", "{" + k + "}:queue"));
      held.release();
      assertNull(server.call("GET", k));
    } finally {
      held.releaseQuietly();
      c.close();
    }
  }

  @Test
  void aLockTakenBeforeTheCloseStaysValid(TestInfo t) throws Exception {
    String k = key(t);
    RedisLockClient c = RedisLockClient.open(server.url());
    LockHandle h = c.acquire(k);
    c.close();
    assertTrue(h.owned(), "still held after the close");
    h.release();
    assertNull(server.call("GET", k));
    assertNotNull(c.toString());
  }
}
