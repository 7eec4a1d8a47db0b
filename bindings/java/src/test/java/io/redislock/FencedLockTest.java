package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Server;
import org.junit.jupiter.api.Test;

/**
 * getFencedLock: a RedisLock whose acquisition draws its fence in the same
 * round trip (Redisson's lockAndGetToken), counted on a server of its own:
 * lock() sends what one fenced acquisition of a handle sends, and fence()
 * sends nothing.
 */
class FencedLockTest {
  @Test
  void aFencedLockDrawsItsFenceInTheAcquisition() throws Exception {
    try (Server quiet = new Server();
        RedisLockClient c = RedisLockClient.open(quiet.url())) {
      // Warm up: connections made, scripts loaded, for both kinds of acquisition.
      c.acquire("warm", LockOptions.DEFAULT.fenced(true)).release();
      c.acquire("warm").release();
      LockOptions asLock = LockOptions.ttl(c.options().watchdogTtl()).autoRenew(true);

      long before = Servers.commandsButInfo(quiet);
      LockHandle h = c.acquire("fenced-handle", asLock.fenced(true));
      long fencedAcquisition = Servers.commandsButInfo(quiet) - before;
      long handleFence = h.fence();
      assertEquals(fencedAcquisition, Servers.commandsButInfo(quiet) - before, "fence() from memory");
      h.release();

      RedisLock lock = c.getFencedLock("fenced-lock");
      assertTrue(lock.isFenced());
      before = Servers.commandsButInfo(quiet);
      lock.lock();
      long locked = Servers.commandsButInfo(quiet) - before;
      long fence = lock.fence();
      long afterFence = Servers.commandsButInfo(quiet) - before;
      System.out.println("commands: fenced acquisition " + fencedAcquisition + ", fenced lock() " + locked
          + ", then fence() " + (afterFence - locked));
      assertEquals(fencedAcquisition, locked, "lock() is one fenced acquisition");
      assertEquals(locked, afterFence, "fence() sends nothing");
      assertTrue(fence > 0 && handleFence > 0);
      lock.unlock();

      // An unfenced lock draws its fence with one round trip more.
      RedisLock plain = c.getLock("plain-lock");
      assertFalse(plain.isFenced());
      plain.lock();
      before = Servers.commandsButInfo(quiet);
      assertTrue(plain.fence() > 0);
      assertTrue(Servers.commandsButInfo(quiet) - before >= 1, "the plain lock drew its fence now");
      plain.unlock();

      // The fences of one name rise, through either view.
      lock.lock();
      long next = lock.fence();
      lock.unlock();
      assertTrue(next > fence, next + " > " + fence);
    }
  }

  @Test
  void bothViewsOfANameShareTheirHolds() throws Exception {
    try (RedisLockClient c = RedisLockClient.open(Servers.main().url())) {
      RedisLock plain = c.getLock("java:views");
      RedisLock fenced = c.getFencedLock("java:views");
      assertSame(fenced, c.getFencedLock("java:views"), "one view per lock");
      plain.lock();
      assertTrue(fenced.isHeldByCurrentThread());
      fenced.lock(); // enters again, as a reentrant lock does
      assertEquals(2, plain.getHoldCount());
      assertTrue(fenced.fence() > 0, "drawn now: the acquisition was the plain view's");
      fenced.unlock();
      plain.unlock();
      assertFalse(fenced.isHeldByCurrentThread());
      assertEquals(null, Servers.main().call("GET", "java:views"));
      assertTrue(fenced.toString().contains("fenced"), fenced.toString());
    }
  }
}
