package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.redislock.Servers.Server;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * ClientOptions' connect, command and Redlock node timeouts: checked before
 * any I/O, handed to the core as URL parameters, and the ones that end a
 * call to a server that does not answer. The core's error names the timeout
 * that ran out and its value, which is what these tests read (not the
 * machine's clock, beyond lower bounds the core guarantees).
 */
class ClientTimeoutTest {
  private static final List<Function<Duration, ClientOptions>> SETTERS = List.of(
      d -> ClientOptions.DEFAULT.connectTimeout(d),
      d -> ClientOptions.DEFAULT.commandTimeout(d),
      d -> ClientOptions.DEFAULT.nodeTimeout(d));

  @Test
  void badTimeoutsAreRefusedBeforeAnyIo() {
    for (Function<Duration, ClientOptions> set : SETTERS) {
      for (Duration bad : List.of(Duration.ZERO, Duration.ofMillis(-1), Duration.ofNanos(-1),
          Duration.ofHours(1).plusNanos(1), Duration.ofDays(365), Duration.ofSeconds(Long.MAX_VALUE))) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> set.apply(bad), bad.toString());
        assertTrue(e.getMessage().contains("1 ms to 1 hour"), e.getMessage());
      }
      assertThrows(NullPointerException.class, () -> set.apply(null));
      set.apply(Duration.ofHours(1)); // the longest
      set.apply(Duration.ofNanos(1)); // rounded up to 1 ms
    }
  }

  @Test
  void theDefaultsAreTheUrlsAndTheSettersKeepEachOther() {
    assertNull(ClientOptions.DEFAULT.connectTimeout());
    assertNull(ClientOptions.DEFAULT.commandTimeout());
    assertNull(ClientOptions.DEFAULT.nodeTimeout());
    assertEquals("redis://h:1/0", ClientOptions.DEFAULT.url("redis://h:1/0"));
    ClientOptions o = ClientOptions.DEFAULT.connectTimeout(Duration.ofMillis(250))
        .commandTimeout(Duration.ofSeconds(3)).nodeTimeout(Duration.ofMillis(80))
        .watchdogTtl(Duration.ofSeconds(9)).shared(true).callbackExecutor(Runnable::run);
    assertEquals(Duration.ofMillis(250), o.connectTimeout());
    assertEquals(Duration.ofSeconds(3), o.commandTimeout());
    assertEquals(Duration.ofMillis(80), o.nodeTimeout());
    assertEquals(Duration.ofSeconds(9), o.watchdogTtl());
    assertNull(ClientOptions.DEFAULT.connectTimeout(), "DEFAULT is unchanged");
  }

  @Test
  void theTimeoutsBecomeUrlParameters() {
    ClientOptions both = ClientOptions.DEFAULT.connectTimeout(Duration.ofMillis(250))
        .commandTimeout(Duration.ofMillis(1500));
    assertEquals("redis://h:1/0?connect_timeout=250ms&command_timeout=1500ms", both.url("redis://h:1/0"));
    assertEquals("unix:///run/r.sock?db=2&connect_timeout=250ms&command_timeout=1500ms",
        both.url("unix:///run/r.sock?db=2"));
    assertEquals("redis://h:1?connect_timeout=250ms&command_timeout=1500ms", both.url("redis://h:1?"));
    assertEquals("redis://h:1/?db=1&connect_timeout=250ms&command_timeout=1500ms", both.url("redis://h:1/?db=1&"));
    // The query ends where a fragment begins: the parameters go before it.
    assertEquals("redis+cluster://h:1,h:2?connect_timeout=250ms&command_timeout=1500ms#x",
        both.url("redis+cluster://h:1,h:2#x"));
    // Whole milliseconds, rounded up; minutes and hours as milliseconds.
    assertEquals("redis://h:1?node_timeout=1ms", ClientOptions.DEFAULT.nodeTimeout(Duration.ofNanos(1)).url("redis://h:1"));
    assertEquals("redis://h:1?command_timeout=3600000ms",
        ClientOptions.DEFAULT.commandTimeout(Duration.ofHours(1)).url("redis://h:1"));
    // Given twice, the URL's and the options': the option wins. Every
    // occurrence of the URL's own parameter goes (its name read
    // percent-decoded, with a value or without); the rest stays as it was.
    assertEquals("redis://h:1?connect_timeout=250ms&command_timeout=1500ms",
        both.url("redis://h:1?command_timeout=5s"));
    assertEquals("redis://h:1/0?db=0&connect_timeout=250ms&command_timeout=1500ms",
        both.url("redis://h:1/0?db=0&command%5Ftimeout=5s"));
    assertEquals("redis://h:1?connect_timeout=250ms&command_timeout=1500ms", both.url("redis://h:1?command_timeout"));
    assertEquals("redis://u:p%40ss@h:1/0?db=0&node_timeout=9s&connect_timeout=250ms&command_timeout=1500ms#frag",
        both.url("redis://u:p%40ss@h:1/0?command_timeout=5s&db=0&connect_timeout=1s&node_timeout=9s"
            + "&command_timeout=7s&connect%5ftimeout=3s#frag"));
    assertEquals("redis://h:1?connect_timeout=1s&db=0&command_timeout=1500ms",
        ClientOptions.DEFAULT.commandTimeout(Duration.ofMillis(1500)).url("redis://h:1?connect_timeout=1s&db=0"),
        "a timeout the options do not set is the URL's");
    // Another parameter of the same prefix is not the same one.
    assertEquals("redis://h:1?command_timeouts=1&connect_timeout=250ms&command_timeout=1500ms",
        both.url("redis://h:1?command_timeouts=1"));
  }

  /** A listening socket nobody reads: connecting works, no reply ever comes. */
  @Test
  void aCommandTimeoutEndsACallToAServerThatDoesNotAnswer() throws Exception {
    try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        RedisLockClient c = RedisLockClient.open("redis://127.0.0.1:" + silent.getLocalPort() + "/0",
            ClientOptions.DEFAULT.commandTimeout(Duration.ofMillis(300)))) {
      long start = System.nanoTime();
      LockException e = assertThrows(LockException.class, () -> c.tryAcquire("java:timeout"));
      long tookMs = (System.nanoTime() - start) / 1_000_000;
      assertSame(LockConnectionException.class, e.getClass(), e.toString());
      assertTrue(e.getMessage().contains("command timeout 300ms"), e.getMessage());
      assertTrue(tookMs >= 300, "failed after " + tookMs + " ms, before the command timeout");
    }
  }

  /**
   * The URL says 5 s and the options 300 ms: the option wins, on every URL
   * of a Redlock list too (well under the URL's 5 s and the default 2 s).
   */
  @Test
  void theOptionWinsOverTheUrlsParameter() throws Exception {
    try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        RedisLockClient c = RedisLockClient.open(
            "redis://127.0.0.1:" + silent.getLocalPort() + "/0?connect_timeout=5s&command_timeout=5s",
            ClientOptions.DEFAULT.connectTimeout(Duration.ofMillis(300)).commandTimeout(Duration.ofMillis(300)))) {
      long start = System.nanoTime();
      LockConnectionException e = assertThrows(LockConnectionException.class, () -> c.tryAcquire("java:timeout"));
      long tookMs = (System.nanoTime() - start) / 1_000_000;
      assertTrue(e.getMessage().contains("300ms"), e.getMessage());
      assertTrue(tookMs >= 300 && tookMs < 1900, "failed after " + tookMs + " ms: not the option's 300 ms");
    }
    List<ServerSocket> silent = new ArrayList<>();
    try {
      List<String> urls = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        ServerSocket s = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        silent.add(s);
        urls.add("redis://127.0.0.1:" + s.getLocalPort() + "?node_timeout=5s&command_timeout=5s");
      }
      try (RedisLockClient c = RedisLockClient.open(urls, ClientOptions.DEFAULT
          .nodeTimeout(Duration.ofMillis(300)).commandTimeout(Duration.ofMillis(300)))) {
        long start = System.nanoTime();
        LockException e = assertThrows(LockException.class,
            () -> c.tryAcquire("java:timeout", LockOptions.ttl(Duration.ofSeconds(30))));
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        assertTrue(e.getMessage().contains("300ms"), e.getMessage());
        assertTrue(tookMs < 1900, "Redlock failed after " + tookMs + " ms: not the option's 300 ms");
      }
    } finally {
      for (ServerSocket s : silent) {
        s.close();
      }
    }
  }

  /** Longer than the default (2 s): the option, not the default, decides. */
  @Test
  void aCommandTimeoutLongerThanTheDefaultIsWaitedOut() throws Exception {
    try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        RedisLockClient c = RedisLockClient.open("redis://127.0.0.1:" + silent.getLocalPort() + "/0",
            ClientOptions.DEFAULT.commandTimeout(Duration.ofMillis(2600)))) {
      long start = System.nanoTime();
      LockConnectionException e = assertThrows(LockConnectionException.class, () -> c.tryAcquire("java:timeout"));
      long tookMs = (System.nanoTime() - start) / 1_000_000;
      assertTrue(e.getMessage().contains("command timeout 2.6s"), e.getMessage());
      assertTrue(tookMs >= 2600, "failed after " + tookMs + " ms, before the command timeout");
    }
  }

  /**
   * A listening socket whose accept queue is full: the kernel drops the
   * client's SYN, so connecting hangs until the connect timeout.
   */
  @Test
  void aConnectTimeoutEndsAConnectThatHangs() throws Exception {
    List<Socket> queued = new ArrayList<>();
    try (ServerSocket full = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      InetSocketAddress at = new InetSocketAddress(InetAddress.getLoopbackAddress(), full.getLocalPort());
      boolean hangs = false;
      for (int i = 0; i < 20 && !hangs; i++) {
        Socket s = new Socket();
        queued.add(s);
        try {
          s.connect(at, 500);
        } catch (SocketTimeoutException e) {
          hangs = true;
        }
      }
      if (!hangs) {
        fail("connecting to a listening socket with a full accept queue never hung on this system");
      }
      try (RedisLockClient c = RedisLockClient.open("redis://127.0.0.1:" + full.getLocalPort() + "/0",
          ClientOptions.DEFAULT.connectTimeout(Duration.ofMillis(400)))) {
        long start = System.nanoTime();
        LockConnectionException e = assertThrows(LockConnectionException.class, () -> c.tryAcquire("java:timeout"));
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        assertTrue(e.getMessage().contains("connect timeout 400ms"), e.getMessage());
        assertTrue(tookMs >= 400, "failed after " + tookMs + " ms, before the connect timeout");
      }
    } finally {
      for (Socket s : queued) {
        closeQuietly(s);
      }
    }
  }

  /**
   * Redlock, one server answering and two silent: no majority once the node
   * timeout ran out (longer than the default for a 30 s TTL, 2 s).
   */
  @Test
  void aNodeTimeoutEndsARedlockAcquireWithoutAMajority() throws Exception {
    try (Server live = new Server();
        ServerSocket a = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        ServerSocket b = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        RedisLockClient c = RedisLockClient.open(
            List.of(live.url(), "redis://127.0.0.1:" + a.getLocalPort(), "redis://127.0.0.1:" + b.getLocalPort()),
            ClientOptions.DEFAULT.nodeTimeout(Duration.ofMillis(2700)))) {
      long start = System.nanoTime();
      LockQuorumException e = assertThrows(LockQuorumException.class,
          () -> c.tryAcquire("java:timeout", LockOptions.ttl(Duration.ofSeconds(30))));
      long tookMs = (System.nanoTime() - start) / 1_000_000;
      assertTrue(e.getMessage().contains("node timeout 2.7s"), e.getMessage());
      assertTrue(tookMs >= 2700, "no quorum after " + tookMs + " ms, before the node timeout; " + e.getMessage());
      Servers.waitUntil("the live node's grant taken back", 30, () -> {
        try {
          return live.call("EXISTS", "java:timeout").equals(0L);
        } catch (IOException x) {
          return false;
        }
      });
    }
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException e) {
      // closing a socket that never connected
    }
  }
}
