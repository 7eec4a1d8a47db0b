// The behaviour table's scenarios in Java (tests/behaviour/run.py runs it
// and says what each line means). Run by Java's single-file launch:
//   java -cp redislock-<version>.jar:jna.jar tests/behaviour/Driver.java
// Non-ASCII text is written as Unicode escapes: Java 17 reads this source in the
// platform's charset, which need not be UTF-8.

import io.redislock.ClientOptions;
import io.redislock.LockException;
import io.redislock.LockHandle;
import io.redislock.LockNotOwnedException;
import io.redislock.LockOptions;
import io.redislock.RedisLockClient;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

public class Driver {
  static final String URL = System.getenv("BEHAVIOUR_URL");
  static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
  static final BufferedReader IN = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

  interface Scenario {
    Object run(RedisLockClient client) throws Exception;
  }

  static String ask(String question) {
    OUT.println("? " + question);
    OUT.flush();
    try {
      String line = IN.readLine();
      if (line == null) {
        throw new IllegalStateException("the runner closed stdin");
      }
      return line.strip();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static long pttl(String key) {
    return Long.parseLong(ask("pttl " + key));
  }

  /** The library's classes from its base down to e's, or e's class. */
  static String chain(Throwable e) {
    if (!(e instanceof LockException)) {
      return e.getClass().getSimpleName();
    }
    List<String> names = new ArrayList<>();
    for (Class<?> c = e.getClass(); c != null && LockException.class.isAssignableFrom(c); c = c.getSuperclass()) {
      names.add(c.getSimpleName());
    }
    Collections.reverse(names);
    return String.join(" \u2283 ", names);
  }

  static void say(String id, Object value) {
    OUT.println(id + "\t" + value);
    OUT.flush();
  }

  static double now() {
    return System.nanoTime() / 1e9;
  }

  static void gone(String key) throws InterruptedException {
    double deadline = now() + 10;
    while (pttl(key) != -2) {
      if (now() > deadline) {
        throw new IllegalStateException(key + " still there after 10 s");
      }
      Thread.sleep(50);
    }
  }

  static void scenario(String id, Scenario fn) {
    Object value;
    try (RedisLockClient client = RedisLockClient.open(URL)) {
      value = fn.run(client);
    } catch (Throwable e) { // the outcome is what is printed
      value = chain(e);
    }
    say(id, value);
  }

  static Object ttlDefault(RedisLockClient client) throws Exception {
    try (LockHandle lock = client.acquire("behaviour:ttl-default")) {
      return (long) Math.ceil(pttl("behaviour:ttl-default") / 1000.0) + " s";
    }
  }

  static Object ttlUnit(RedisLockClient client) throws Exception {
    long left;
    try (LockHandle lock = client.acquire("behaviour:ttl-unit", LockOptions.ttl(Duration.ofSeconds(2)))) {
      left = pttl("behaviour:ttl-unit");
    }
    return 1000 < left && left <= 2000 ? "Duration" : "PTTL " + left;
  }

  static Object waitDefault(RedisLockClient client) throws Exception {
    client.acquire("behaviour:wait-default", LockOptions.ttl(Duration.ofSeconds(1)));
    double started = now();
    LockHandle lock = client.acquire("behaviour:wait-default");
    double waited = now() - started;
    lock.release();
    return waited >= 0.5 ? "waits" : String.format("%s after %.1f s", lock, waited);
  }

  static Object tryHeld(RedisLockClient client) throws Exception {
    try (LockHandle holder = client.acquire("behaviour:try-held")) {
      return client.tryAcquire("behaviour:try-held");
    }
  }

  static Object waitTimeout(RedisLockClient client) throws Exception {
    try (LockHandle holder = client.acquire("behaviour:wait-timeout")) {
      try (LockHandle lock = client.acquire("behaviour:wait-timeout",
          LockOptions.DEFAULT.waitFor(Duration.ofMillis(200)))) {
        return "acquired";
      }
    }
  }

  static Object releaseExpired(RedisLockClient client) throws Exception {
    LockHandle lock = client.acquire("behaviour:release-expired", LockOptions.ttl(Duration.ofMillis(200)));
    gone("behaviour:release-expired");
    try (LockHandle other = client.tryAcquire("behaviour:release-expired")) {
      if (other == null) {
        return "another owner could not take it";
      }
      lock.release();
    }
    return "released";
  }

  static Object unconfirmed(RedisLockClient client) throws Exception {
    try (RedisLockClient cut = RedisLockClient.open(System.getenv("BEHAVIOUR_CUTTER"))) {
      LockHandle lock = cut.acquire("behaviour:unconfirmed", LockOptions.DEFAULT.token("behaviour-unconfirmed"));
      ask("arm behaviour-unconfirmed");
      try {
        lock.release();
      } catch (LockNotOwnedException e) {
        return chain(e);
      } catch (LockException e) {
        return "not caught as not-owned: " + chain(e);
      }
      return "released";
    }
  }

  static Object fenceFirst(RedisLockClient client) throws Exception {
    long fence;
    try (LockHandle lock = client.acquire("behaviour:fence-first")) {
      fence = lock.fence();
    }
    Instant t = Instant.now();
    double micros = t.getEpochSecond() * 1e6 + t.getNano() / 1e3;
    return Math.abs(fence - micros) < 60e6 ? "server \u00b5s" : fence;
  }

  static Object fenceAfterRelease(RedisLockClient client) throws Exception {
    LockHandle lock = client.acquire("behaviour:fence-after-release");
    lock.release();
    return lock.fence();
  }

  static Object fenceReadAfterRelease(RedisLockClient client) throws Exception {
    LockHandle lock = client.acquire("behaviour:fence-read-after-release");
    long fence = lock.fence();
    lock.release();
    return lock.fence() == fence ? "same" : lock.fence();
  }

  static Object tokenAfterRelease(RedisLockClient client) throws Exception {
    LockHandle lock = client.acquire("behaviour:token-after-release");
    byte[] token = lock.token();
    lock.release();
    return Arrays.equals(lock.token(), token) ? "same" : Arrays.toString(lock.token());
  }

  static Object name(RedisLockClient client) throws Exception {
    try (LockHandle lock = client.acquire("behaviour:name")) {
      return lock.name().getClass().getSimpleName();
    }
  }

  static Object scopedRenews(RedisLockClient client) throws Exception {
    long left = client.executeLocked("behaviour:scoped-renews", LockOptions.ttl(Duration.ofMillis(300)), lock -> {
      Thread.sleep(900);
      return pttl("behaviour:scoped-renews");
    });
    return left > 0 ? "renewed" : "PTTL " + left + " at the end of the work";
  }

  static Object silent(String url, ClientOptions options) {
    double started = now();
    try (RedisLockClient c = RedisLockClient.open(url, options)) {
      LockHandle lock = c.tryAcquire("behaviour:timeout");
      return lock != null ? "acquired" : "null";
    } catch (Exception e) {
      double took = now() - started;
      return took < 1.9 ? chain(e) : String.format("after %.1f s: %s", took, chain(e));
    }
  }

  static Object timeoutOption(RedisLockClient client) throws Exception {
    return silent(System.getenv("BEHAVIOUR_SILENT"),
        ClientOptions.DEFAULT.connectTimeout(Duration.ofMillis(300)).commandTimeout(Duration.ofMillis(300)));
  }

  static Object timeoutUrl(RedisLockClient client) throws Exception {
    return silent(System.getenv("BEHAVIOUR_SILENT") + "?connect_timeout=300ms&command_timeout=300ms",
        ClientOptions.DEFAULT);
  }

  static Object timeoutBoth(RedisLockClient client) throws Exception {
    return silent(System.getenv("BEHAVIOUR_SILENT") + "?connect_timeout=5s&command_timeout=5s",
        ClientOptions.DEFAULT.connectTimeout(Duration.ofMillis(300)).commandTimeout(Duration.ofMillis(300)));
  }

  static Object badTtl(RedisLockClient client) throws Exception {
    try {
      client.acquire("behaviour:bad-ttl", LockOptions.ttl(Duration.ZERO));
      return "acquired";
    } catch (Exception e) {
      return e.getClass().getSimpleName();
    }
  }

  static Object wrongType(RedisLockClient client) throws Exception {
    client.tryAcquire("behaviour:wrong-type");
    return "acquired";
  }

  static Object noServer(RedisLockClient client) throws Exception {
    try (RedisLockClient dead = RedisLockClient.open(System.getenv("BEHAVIOUR_DEAD"))) {
      dead.tryAcquire("behaviour:no-server");
      return "acquired";
    }
  }

  public static void main(String[] args) {
    scenario("ttl-default", Driver::ttlDefault);
    scenario("ttl-unit", Driver::ttlUnit);
    scenario("wait-default", Driver::waitDefault);
    scenario("try-held", Driver::tryHeld);
    scenario("wait-timeout", Driver::waitTimeout);
    scenario("release-expired", Driver::releaseExpired);
    scenario("unconfirmed", Driver::unconfirmed);
    scenario("fence-first", Driver::fenceFirst);
    scenario("fence-after-release", Driver::fenceAfterRelease);
    scenario("fence-read-after-release", Driver::fenceReadAfterRelease);
    scenario("token-after-release", Driver::tokenAfterRelease);
    scenario("name", Driver::name);
    scenario("scoped-renews", Driver::scopedRenews);
    scenario("timeout-option", Driver::timeoutOption);
    scenario("timeout-url", Driver::timeoutUrl);
    scenario("timeout-both", Driver::timeoutBoth);
    scenario("bad-ttl", Driver::badTtl);
    scenario("wrong-type", Driver::wrongType);
    scenario("no-server", Driver::noServer);
    OUT.flush();
    System.exit(0);
  }
}
