package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * A name that a Redisson RLock holds, during a rollout from Redisson (docs/java.md, "Coming from
 * Redisson"). Redisson keeps a lock as a hash at the name (field {@code <client id>:<thread id>},
 * value the hold count, with a PEXPIRE); redislock keeps a string token. Redisson itself cannot be
 * installed in this suite's environment (it comes from Maven Central), so this checks redislock's
 * side: on a name held in Redisson's format, every redislock acquisition fails with
 * LockWrongTypeException at once (it neither waits nor takes the name) and leaves the hash as it
 * was; a release by a token or a forced release never deletes it. The other direction: the key redislock
 * writes is a string, which Redis refuses to hash commands (the HEXISTS that Redisson's acquire
 * runs on a name that exists).
 */
class RedissonNameTest extends ServerTest {
  private static final String HOLDER = "6f1c0e1a-2b3c-4d5e-8f90-123456789abc:1";

  private static void holdAsRedisson(String k) throws IOException {
    server.call("HSET", k, HOLDER, "1");
    server.call("PEXPIRE", k, "30000");
  }

  private static void assertStillRedissons(String k) throws IOException {
    assertEquals("hash", server.call("TYPE", k));
    assertEquals(List.of(HOLDER, "1"), server.call("HGETALL", k));
    assertTrue((Long) server.call("PTTL", k) > 0, "its expiry kept");
  }

  @Test
  void aNameRedissonHoldsIsRefusedAsWrongTypeAndLeftAlone(TestInfo t) throws Exception {
    String k = key(t);
    holdAsRedisson(k);
    try {
      RedisLock lock = client.getLock(k);
      assertThrows(LockWrongTypeException.class, lock::tryLock);
      assertThrows(LockWrongTypeException.class, () -> lock.tryLock(5, TimeUnit.SECONDS), "no wait either");
      assertThrows(LockWrongTypeException.class, () -> client.tryAcquire(k));
      assertThrows(LockWrongTypeException.class, () -> client.acquire(k, LockOptions.ttl(java.time.Duration.ofSeconds(5))));
      assertStillRedissons(k);
      try {
        assertFalse(client.releaseToken(k, HOLDER), "released by its field's name");
      } catch (LockWrongTypeException expected) {
        // refused as a key of another type: as good
      }
      assertStillRedissons(k);
      try {
        assertFalse(client.forceRelease(k), "forced away");
      } catch (LockWrongTypeException expected) {
        // refused as a key of another type: as good
      }
      assertStillRedissons(k);
    } finally {
      server.call("DEL", k);
    }
  }

  @Test
  void aNameRedislockHoldsIsAStringThatHashCommandsRefuse(TestInfo t) throws Exception {
    String k = key(t);
    LockHandle h = client.acquire(k);
    try {
      assertEquals("string", server.call("TYPE", k));
      IOException e = assertThrows(IOException.class, () -> server.call("HEXISTS", k, HOLDER));
      assertTrue(e.getMessage().contains("WRONGTYPE"), e.getMessage());
      assertTrue(h.owned(), "the refused command changed nothing");
    } finally {
      h.release();
    }
  }
}
