package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Task;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The same lock shared with Python and PHP processes (tests/holders): each
 * excludes the others on the same key, and a release in one process hands
 * the lock to a Java waiter (no polling).
 */
class CrossLanguageTest extends ServerTest {
  private static List<String> command(String lang) {
    Path holders = Servers.ROOT.resolve("tests/holders");
    if (lang.equals("python")) {
      String python = System.getenv().getOrDefault("PYTHON",
          Servers.ROOT.resolve("target/venv-test/bin/python").toString());
      assertTrue(Files.isExecutable(Path.of(python)),
          python + " not found: run `make python-env` (make test-java does)");
      return List.of(python, holders.resolve("holder.py").toString());
    }
    return List.of("php", holders.resolve("holder.php").toString());
  }

  private static Process run(String lang, String key) throws IOException {
    List<String> cmd = new ArrayList<>(command(lang));
    cmd.add(server.url());
    cmd.add(key);
    // REDISLOCK_LIB is inherited: the PHP holder loads the library under test.
    return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
  }

  /** The holder's next line, waiting at most 60 s (it never hangs the suite). */
  private static String line(BufferedReader out, String lang) throws Exception {
    String l = Servers.spawn(lang + "-holder-output", out::readLine).get(60);
    assertNotNull(l, "the " + lang + " holder printed nothing more");
    return l.strip();
  }

  private void aForeignHolderExcludesJavaAndHandsItOverOnRelease(String lang) throws Exception {
    String k = "java:cross:" + lang + ":hand-off";
    Process p = run(lang, k);
    try (BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        OutputStream in = p.getOutputStream();
        RedisLockClient waiting = RedisLockClient.open(server.url())) {
      byte[] token = HexFormat.of().parseHex(line(out, lang));
      assertEquals(new String(token, StandardCharsets.UTF_8), server.call("GET", k),
          "the key holds the token the " + lang + " holder printed");
      assertNull(client.tryAcquire(k), "held by " + lang);
      assertFalse(client.getLock(k).tryLock(100, TimeUnit.MILLISECONDS), "the Lock view too");
      Task<LockHandle> waiter = Servers.spawn("java-waiter",
          () -> waiting.acquire(k, LockOptions.ttl(Duration.ofSeconds(5)).waitFor(Duration.ofSeconds(60))));
      Servers.waitUntil("the Java waiter to queue", 30, () -> waiting.stats().waitersNow() == 1);
      in.write("release\n".getBytes(StandardCharsets.UTF_8));
      in.flush();
      line(out, lang); // the holder's time of release
      assertEquals("released", line(out, lang));
      LockHandle lock = waiter.get(60);
      assertEquals(1, waiting.stats().acquiredHandedOver(), "the " + lang + " release handed the lock over");
      assertEquals(lock.tokenString(), server.call("GET", k));
      lock.release();
      assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the holder exits");
      assertEquals(0, p.exitValue());
    } finally {
      p.destroyForcibly();
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }

  /** {@code holder URL try:KEY}: "held" or "free". */
  private static String tryFrom(String lang, String k) throws Exception {
    Process p = run(lang, "try:" + k);
    try {
      String out = Servers.spawn(lang + "-try-output",
          () -> new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip()).get(60);
      assertTrue(p.waitFor(30, TimeUnit.SECONDS));
      assertEquals(0, p.exitValue(), "the " + lang + " try failed: " + out);
      return out;
    } finally {
      p.destroyForcibly();
    }
  }

  private void aJavaHolderExcludes(String lang) throws Exception {
    String k = "java:cross:" + lang + ":java-holds";
    LockHandle lock = client.acquire(k);
    assertEquals("held", tryFrom(lang, k));
    assertEquals(lock.tokenString(), server.call("GET", k), "the try left Java's lock alone");
    lock.release();
    assertEquals("free", tryFrom(lang, k));
    RedisLock view = client.getLock(k);
    view.lock();
    try {
      assertEquals("held", tryFrom(lang, k), "the Lock view excludes too");
    } finally {
      view.unlock();
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }

  @Test
  void aPythonHolderExcludesJavaAndHandsItOverOnRelease() throws Exception {
    aForeignHolderExcludesJavaAndHandsItOverOnRelease("python");
  }

  @Test
  void aPhpHolderExcludesJavaAndHandsItOverOnRelease() throws Exception {
    aForeignHolderExcludesJavaAndHandsItOverOnRelease("php");
  }

  @Test
  void aJavaHolderExcludesPython() throws Exception {
    aJavaHolderExcludes("python");
  }

  @Test
  void aJavaHolderExcludesPhp() throws Exception {
    aJavaHolderExcludes("php");
  }
}
