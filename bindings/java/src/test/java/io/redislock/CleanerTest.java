package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Server;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Handles that became unreachable while held are released off the
 * cleaner's thread, by a pool that a dead or frozen server does not hold
 * up, and a release that waited too long is dropped to its TTL.
 */
class CleanerTest extends ServerTest {
  /** Take {@code n} locks and drop their handles (nothing keeps them). */
  private static void takeAndDrop(RedisLockClient c, String prefix, int n) throws InterruptedException {
    for (int i = 0; i < n; i++) {
      assertNotNull(c.acquire(prefix + i, LockOptions.ttl(Duration.ofMinutes(5))));
    }
  }

  @Test
  void aFrozenServerDoesNotHoldUpTheReleasesOfAnotherServer(TestInfo t) throws Exception {
    String k = key(t);
    int n = 20;
    long deadline = Releaser.deadlineNanos;
    Releaser.deadlineNanos = TimeUnit.MINUTES.toNanos(10); // this test's releases are never dropped
    try (Server frozen = new Server();
        RedisLockClient dead = RedisLockClient.open(frozen.url());
        RedisLockClient live = RedisLockClient.open(server.url())) {
      takeAndDrop(dead, k + ":frozen:", n);
      // Every command of its clients now waits: a release waits out the command timeout (2 s).
      frozen.call("CLIENT", "PAUSE", "600000", "ALL");
      Servers.waitUntil("the frozen server's handles to reach the release pool", 60, () -> {
        System.gc();
        return Releaser.pending() >= n;
      });
      takeAndDrop(live, k + ":live:", 1);
      Servers.waitUntil("the live server's lock to be released", 30, () -> {
        System.gc();
        return Servers.q(server, "GET", k + ":live:0") == null;
      });
      // Released while most of the frozen server's releases still wait: not behind them.
      int left = Releaser.pending();
      System.out.println("frozen server's releases still pending when the live one was done: " + left + " of " + n);
      assertTrue(left >= n / 2, "the live release came after the frozen ones: " + left + " pending");
      frozen.kill(); // what is left fails at once (connection refused)
      Servers.waitUntil("the pool to drain", 60, () -> Releaser.pending() == 0);
    } finally {
      Releaser.deadlineNanos = deadline;
    }
  }

  @Test
  void aReleaseThatWaitedPastTheDeadlineIsDroppedToItsTtl(TestInfo t) throws Exception {
    String k = key(t);
    long deadline = Releaser.deadlineNanos;
    long dropped = Releaser.DROPPED.get();
    Releaser.deadlineNanos = -1; // every queued release is late
    try {
      takeAndDrop(client, k + ":", 1);
      Servers.waitUntil("the release to be dropped", 60, () -> {
        System.gc();
        return Releaser.DROPPED.get() > dropped;
      });
    } finally {
      Releaser.deadlineNanos = deadline;
    }
    assertNotNull(server.call("GET", k + ":0"), "left to its TTL, not released");
    assertTrue((Long) server.call("PTTL", k + ":0") > 0);
    assertEquals(1L, server.call("DEL", k + ":0"));
  }
}
