package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.DoctorReport.Finding;
import io.redislock.DoctorReport.Severity;
import io.redislock.Servers.Server;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** stats(): the counters move as the client works; doctor(): the checks of `redislock doctor`. */
class StatsDoctorTest {
  static Server server;

  @BeforeAll
  static void start() throws IOException {
    server = Servers.main();
  }

  private static String key(TestInfo t) {
    return "java:" + t.getTestMethod().get().getName();
  }

  @Test
  void theCountersMoveAsTheClientWorks(TestInfo t) throws Exception {
    String k = key(t);
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      ClientStats s0 = c.stats();
      assertEquals(0, s0.acquiredAtOnce());
      assertEquals(0, s0.heldNow());
      assertEquals(0, s0.waitTimes().count());

      LockHandle lock = c.acquire(k);
      ClientStats s1 = c.stats();
      assertEquals(1, s1.acquiredAtOnce());
      assertEquals(1, s1.acquiredLocks());
      assertEquals(1, s1.heldNow());
      assertEquals(1, s1.waitTimes().count());

      assertThrows(LockTimeoutException.class, () -> c.acquire(k, LockOptions.DEFAULT.waitFor(Duration.ofMillis(100))));
      ClientStats s2 = c.stats();
      assertEquals(1, s2.acquireTimedOut());
      assertEquals(2, s2.waitTimes().count(), "every acquisition is timed, whatever its outcome");
      assertEquals(0, s2.waitersNow());

      lock.extend(Duration.ofSeconds(20));
      lock.release();
      ClientStats s3 = c.stats();
      assertEquals(1, s3.extendsOk());
      assertEquals(1, s3.releasesOk());
      assertEquals(0, s3.heldNow());
      assertEquals(1, s3.heldTimes().count());
      assertEquals(0, s3.releasesNotOwner());

      LockHandle lost = c.acquire(k);
      server.call("SET", k, "someone-else");
      assertThrows(LockNotOwnedException.class, lost::release);
      server.call("DEL", k);
      ClientStats s4 = c.stats();
      assertEquals(1, s4.releasesNotOwner());
      assertEquals(1, s4.locksLost());
      assertEquals(2, s4.acquiredAtOnce());

      try (LockHandle permits = c.semaphore(k, 3).acquire(2)) {
        assertEquals(2, c.stats().permitsHeldNow());
        assertEquals(1, c.stats().acquiredSemaphores());
        assertNotNull(permits);
      }
      assertEquals(0, c.stats().permitsHeldNow());

      ClientStats s = c.stats();
      Map<String, Object> m = s.asMap();
      assertEquals(s.acquiredAtOnce(), m.get("acquired_at_once"));
      assertEquals(s.acquireTimedOut(), m.get("acquire_timed_out"));
      assertEquals(s.releasesOk(), m.get("releases_ok"));
      assertEquals(s.heldNow(), m.get("held_now"));
      assertEquals(s.permitsHeldNow(), m.get("permits_held_now"));
      for (String name : m.keySet()) {
        assertTrue(name.matches("[a-z]+(_[a-z]+)*"), "snake_case: " + name);
      }
      assertTrue(m.get("wait") instanceof Map, "the wait histogram as a map");
      Map<?, ?> wait = (Map<?, ?>) m.get("wait");
      assertEquals(s.waitTimes().count(), wait.get("count"));
      assertTrue(wait.containsKey("p99_us") && wait.containsKey("buckets"), wait.toString());
      assertTrue(m.get("held") instanceof Map);
      Histogram w = s.waitTimes();
      assertEquals(w.count(), java.util.Arrays.stream(w.buckets()).sum(), "every wait is in a bucket");
      assertTrue(w.max().compareTo(w.p50()) >= 0);
      assertTrue(w.sum().compareTo(w.max()) >= 0);
    }
  }

  private static List<String> checks(DoctorReport r) {
    return r.findings().stream().map(Finding::check).collect(Collectors.toList());
  }

  private static void consistent(DoctorReport r) {
    boolean anyUnsafe = r.findings().stream().anyMatch(f -> f.severity() == Severity.UNSAFE);
    assertEquals(!anyUnsafe, r.isSafe(), "safe exactly when no finding is UNSAFE:\n" + r.text());
    assertFalse(r.text().isEmpty());
    for (Finding f : r.findings()) {
      assertFalse(f.check().isEmpty(), f.toString());
      assertFalse(f.message().isEmpty(), f.toString());
      if (f.severity() == Severity.UNSAFE) {
        assertFalse(f.fix().isEmpty(), "an unsafe finding says what to change: " + f);
      }
    }
  }

  @Test
  void doctorReportsTheChecksOfTheServer() throws Exception {
    try (RedisLockClient c = RedisLockClient.open(server.url())) {
      DoctorReport r = c.doctor();
      consistent(r);
      List<String> checks = checks(r);
      assertTrue(checks.contains("eviction") && checks.contains("scripting") && checks.contains("lock-cycle"),
          checks.toString());
      Finding eviction = r.findings().stream().filter(f -> f.check().equals("eviction")).findFirst().get();
      assertEquals(Severity.OK, eviction.severity(), "noeviction, redis-server's default");
      assertEquals("127.0.0.1:" + server.port, eviction.server());
      assertTrue(r.text().contains("eviction"), r.text());
      assertEquals(r.text(), r.toString());
    }
  }

  @Test
  void doctorFindsAnEvictionPolicyUnsafe() throws Exception {
    try (Server s = new Server();
        RedisLockClient c = RedisLockClient.open(s.url())) {
      s.call("CONFIG", "SET", "maxmemory", "1gb");
      s.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru");
      DoctorReport r = c.doctor();
      consistent(r);
      assertFalse(r.isSafe(), r.text());
      Finding eviction = r.findings().stream().filter(f -> f.check().equals("eviction")).findFirst().get();
      assertEquals(Severity.UNSAFE, eviction.severity(), eviction.toString());
      assertTrue(eviction.message().contains("allkeys-lru"), eviction.message());
    }
  }

  @Test
  void doctorOnADeadPortIsAConnectionError() throws Exception {
    int port = Servers.freePort();
    try (RedisLockClient c = RedisLockClient.open("redis://127.0.0.1:" + port + "/0?connect_timeout=2s")) {
      LockConnectionException e = assertThrows(LockConnectionException.class, c::doctor);
      assertEquals(LockException.Kind.CONNECTION, e.kind());
    }
  }
}
