package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.redislock.Servers.Server;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Redlock over three independent servers: held on all three, still working
 * with one down, refused (no quorum) with two down. A Redlock call returns
 * once a majority answered, so the servers are watched with waitUntil.
 */
class RedlockTest {
  private static void waitForValue(Server s, String k, String value) {
    Servers.waitUntil(s.url() + " to hold " + value, 30, () -> {
      Object v = Servers.q(s, "GET", k);
      return value == null ? v == null : value.equals(v);
    });
  }

  @Test
  void aMajorityHoldsTheLockAndTwoDeadServersOfThreeAreNoQuorum() throws Exception {
    String k = "java:redlock";
    try (Server a = new Server();
        Server b = new Server();
        Server c = new Server();
        RedisLockClient client = RedisLockClient.open(List.of(a.url(), b.url(), c.url()))) {
      LockOptions opts = LockOptions.ttl(Duration.ofSeconds(30)).waitFor(Duration.ofSeconds(5));
      LockHandle lock = client.acquire(k, opts);
      for (Server s : List.of(a, b, c)) {
        waitForValue(s, k, lock.tokenString());
      }
      assertNull(client.tryAcquire(k), "held");
      lock.extend(Duration.ofSeconds(60));
      lock.release();
      for (Server s : List.of(a, b, c)) {
        waitForValue(s, k, null);
      }

      a.kill();
      LockHandle two = client.acquire(k, opts);
      assertNotNull(two, "two of three are a majority");
      waitForValue(b, k, two.tokenString());
      waitForValue(c, k, two.tokenString());
      assertNull(client.tryAcquire(k), "held with one server down");
      two.extend(Duration.ofSeconds(60));
      two.release();
      waitForValue(b, k, null);
      waitForValue(c, k, null);

      b.kill();
      LockQuorumException e = assertThrows(LockQuorumException.class, () -> client.acquire(k, opts));
      assertEquals(LockException.Kind.QUORUM, e.kind());
      waitForValue(c, k, null); // released again on the server that said yes
    }
  }
}
