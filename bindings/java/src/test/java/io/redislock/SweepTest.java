package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Server;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A RedisLock whose owner thread ended without unlocking is released, not renewed for ever. */
class SweepTest {
  @Test
  void aLockWhoseOwnerThreadEndedIsReleasedAndTheNextThreadTakesIt() throws Exception {
    Server server = Servers.main();
    String k = "java:swept";
    // A short watchdog: without the sweep it would be renewed for as long as the JVM runs.
    try (RedisLockClient client = RedisLockClient.open(server.url(),
        ClientOptions.DEFAULT.watchdogTtl(Duration.ofMillis(900)))) {
      RedisLock lock = client.getLock(k);
      Thread owner = new Thread(lock::lock, "forgetful-owner");
      owner.start();
      owner.join(30_000);
      assertNotNull(server.call("GET", k), "held by the thread that ended");
      Servers.waitUntil("the sweep's release", 30, () -> {
        try {
          return server.call("GET", k) == null;
        } catch (IOException e) {
          throw new RuntimeException(e);
        }
      });
      // The server deleted the key before it replied: the release is
      // counted once its reply is read. A key that expired is never counted.
      Servers.waitUntil("the sweep's release to be counted (released, not expired)", 30,
          () -> client.stats().releasesOk() >= 1);
      assertTrue(lock.tryLock(30, TimeUnit.SECONDS), "another thread of the JVM takes it after the sweep");
      assertEquals(1, lock.getHoldCount());
      lock.unlock();
    }
  }
}
