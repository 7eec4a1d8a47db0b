package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Server;
import io.redislock.Servers.Task;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.function.Executable;

/**
 * Interrupts: an interruptible wait ends with InterruptedException (flag
 * cleared, nothing held, out of the server's queue), an uninterruptible one
 * waits on and keeps the flag, and release, extend and close work on an
 * interrupted thread.
 */
class InterruptTest extends ServerTest {
  @AfterEach
  void clearTheFlag() {
    Thread.interrupted();
  }

  /** What the interrupted waiter saw. */
  private record Outcome(long caughtAt, boolean flagAfter, String error) {}

  /**
   * {@code waitFor} on a thread of its own while another client holds the
   * lock; interrupt it once it is queued on the server; check that it ended
   * with InterruptedException, flag cleared, out of the queue, and that the
   * holder's release leaves the lock free for a third client.
   */
  private static void interruptAWaiter(String k, RedisLockClient waiting, Callable<Boolean> waitFor)
      throws Exception {
    LockHandle held = client.acquire(k); // the holder
    Task<Outcome> waiter = Servers.spawn("interrupted-waiter", () -> {
      try {
        waitFor.call();
        return new Outcome(System.nanoTime(), Thread.currentThread().isInterrupted(), "returned");
      } catch (InterruptedException e) {
        return new Outcome(System.nanoTime(), Thread.currentThread().isInterrupted(), null);
      }
    });
    Servers.waitUntil("the waiter to queue", 30, () -> waiting.stats().waitersNow() == 1);
    assertEquals(1L, server.call("LLEN", "{" + k + "}:queue"), "queued on the server");
    long interruptedAt = System.nanoTime();
    waiter.thread.interrupt();
    Outcome o = waiter.get(30);
    assertNull(o.error, "the wait ended with InterruptedException");
    long ms = (o.caughtAt - interruptedAt) / 1_000_000;
    System.out.println("interrupt latency (" + k + "): " + ms + " ms");
    assertTrue(ms < 5_000, "ended within 5 s of the interrupt: " + ms + " ms");
    assertFalse(o.flagAfter, "the flag is cleared with the exception");
    assertEquals(0, waiting.stats().waitersNow());
    assertEquals(0, waiting.stats().heldNow(), "nothing held");
    assertEquals(0L, server.call("LLEN", "{" + k + "}:queue"), "the waiter left the server's queue");
    held.release();
    try (RedisLockClient third = RedisLockClient.open(server.url())) {
      LockHandle next = third.tryAcquire(k);
      assertNotNull(next, "free after the release: not handed to the interrupted waiter");
      assertEquals(next.tokenString(), server.call("GET", k));
      next.release();
    }
  }

  @Test
  void lockInterruptiblyEndsWithInterruptedExceptionAndLeavesTheQueue(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      RedisLock lock = c.getLock(k);
      interruptAWaiter(k, c, () -> {
        lock.lockInterruptibly();
        lock.unlock();
        return true;
      });
      assertFalse(lock.isHeldByCurrentThread());
      assertTrue(Servers.spawn("next-thread", () -> {
        boolean ok = lock.tryLock();
        if (ok) {
          lock.unlock();
        }
        return ok;
      }).get(30), "the local queue was left too");
    }
  }

  @Test
  void acquireEndsWithInterruptedExceptionAndLeavesTheQueue(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      interruptAWaiter(k, c, () -> {
        c.acquire(k).release();
        return true;
      });
    }
  }

  @Test
  void tryLockWithAWaitEndsWithInterruptedException(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      interruptAWaiter(k, c, () -> {
        if (c.getLock(k).tryLock(60, TimeUnit.SECONDS)) {
          c.getLock(k).unlock();
        }
        return true;
      });
    }
  }

  /** An uninterruptible wait: keeps waiting, takes the lock, returns with the flag set. */
  private static void interruptAnUninterruptibleWaiter(String k, RedisLockClient waiting, Callable<Runnable> take)
      throws Exception {
    LockHandle held = client.acquire(k); // the holder
    Task<Boolean> waiter = Servers.spawn("uninterruptible-waiter", () -> {
      Runnable unlock = take.call();
      boolean flag = Thread.currentThread().isInterrupted();
      unlock.run(); // on an interrupted thread
      return flag && Thread.currentThread().isInterrupted();
    });
    Servers.waitUntil("the waiter to queue", 30, () -> waiting.stats().waitersNow() == 1);
    waiter.thread.interrupt();
    // An interruptible wait would end within ~100 ms: give it several times that.
    Servers.sleep(600);
    assertFalse(waiter.isDone(), "still waiting after the interrupt");
    assertEquals(1, waiting.stats().waitersNow());
    held.release();
    assertTrue(waiter.get(60), "took the lock and returned with the flag still set (kept through the unlock)");
    assertEquals(1, waiting.stats().releasesOk(), "released on the interrupted thread");
    assertNull(server.call("GET", k));
  }

  @Test
  void lockKeepsWaitingThroughAnInterruptAndKeepsTheFlag(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      RedisLock lock = c.getLock(k);
      interruptAnUninterruptibleWaiter(k, c, () -> {
        lock.lock();
        return lock::unlock;
      });
    }
  }

  @Test
  void acquireUninterruptiblyKeepsWaitingThroughAnInterruptAndKeepsTheFlag(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      interruptAnUninterruptibleWaiter(k, c, () -> {
        LockHandle h = c.acquireUninterruptibly(k, LockOptions.DEFAULT.waitForever());
        return h::release;
      });
    }
  }

  @Test
  void interruptedOnEntryThrowsBeforeAnyIo(TestInfo t) throws Exception {
    String k = key(t);
    // A server of its own: every command it runs is this test's.
    try (Server quiet = new Server();
        RedisLockClient c = RedisLockClient.open(quiet.url())) {
      long before = Servers.commandsButInfo(quiet);
      RedisLock lock = c.getLock(k);
      Executable[] calls = {
        () -> c.acquire(k),
        () -> c.acquire(k, LockOptions.DEFAULT.waitFor(Duration.ofSeconds(5))),
        () -> c.tryAcquire(k, LockOptions.DEFAULT.waitFor(Duration.ofSeconds(5))),
        () -> c.acquireRead(k),
        () -> c.acquireWrite(k),
        () -> c.semaphore(k, 2).acquire(),
        lock::lockInterruptibly,
        () -> lock.tryLock(5, TimeUnit.SECONDS),
        () -> c.executeLocked(k, LockOptions.DEFAULT, h -> 1),
      };
      for (Executable call : calls) {
        Thread.currentThread().interrupt();
        assertThrows(InterruptedException.class, call);
        assertFalse(Thread.interrupted(), "the flag is cleared with the exception");
      }
      assertFalse(lock.isHeldByCurrentThread());
      assertEquals(before, Servers.commandsButInfo(quiet), "the server saw no command");
      assertEquals(0, c.stats().waitTimes().count(), "no acquisition was attempted");
    }
  }

  @Test
  void releaseExtendAndCloseWorkOnAnInterruptedThread(TestInfo t) throws Exception {
    String k = key(t);
    RedisLockClient c = RedisLockClient.open(server.url());
    LockHandle lock = c.acquire(k, LockOptions.ttl(Duration.ofSeconds(5)));
    RedisLock rl = c.getLock(k + ":view");
    try {
      Thread.currentThread().interrupt();
      lock.extend(Duration.ofSeconds(60));
      assertTrue((Long) server.call("PTTL", k) > 30_000, "extended");
      assertTrue(lock.owned());
      assertTrue(lock.fence() > 0);
      lock.release();
      assertNull(server.call("GET", k), "released");
      LockHandle again = c.tryAcquire(k);
      assertNotNull(again, "a try-once acquire works too");
      again.close();
      assertNull(server.call("GET", k), "closed");
      rl.lock();
      assertNotNull(server.call("GET", k + ":view"), "lock() takes it on an interrupted thread");
      rl.unlock();
      assertNull(server.call("GET", k + ":view"), "unlocked");
      LockHandle kept = c.acquireUninterruptibly(k, LockOptions.DEFAULT);
      c.close();
      assertTrue(kept.owned(), "the client's close left its lock alone");
      kept.release();
      assertTrue(Thread.currentThread().isInterrupted(), "none of them cleared the flag");
    } finally {
      Thread.interrupted();
      c.close();
    }
    assertNull(server.call("GET", k));
  }
}
