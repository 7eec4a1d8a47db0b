package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.nio.file.Files;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Every failure status of the C API becomes one kind and one class, the
 * kind and the class agree whichever way the exception is made, and a
 * cause given to a constructor is the exception's cause.
 */
class LockExceptionTest {
  /** Each failure status of include/redislock.h, and what it becomes. */
  private static final Map<Integer, LockException.Kind> KINDS = new LinkedHashMap<>();
  private static final Map<LockException.Kind, Class<? extends LockException>> CLASSES = new LinkedHashMap<>();

  static {
    KINDS.put(NativeLib.NOT_ACQUIRED, LockException.Kind.TIMEOUT);
    KINDS.put(NativeLib.NOT_OWNER, LockException.Kind.NOT_OWNED);
    KINDS.put(NativeLib.CONNECTION, LockException.Kind.CONNECTION);
    KINDS.put(NativeLib.WRONG_TYPE, LockException.Kind.WRONG_TYPE);
    KINDS.put(NativeLib.NO_QUORUM, LockException.Kind.QUORUM);
    KINDS.put(NativeLib.SERVER, LockException.Kind.SERVER);
    KINDS.put(NativeLib.INTERNAL, LockException.Kind.INTERNAL);
    KINDS.put(NativeLib.UNCONFIRMED, LockException.Kind.UNCONFIRMED);
    CLASSES.put(LockException.Kind.TIMEOUT, LockTimeoutException.class);
    CLASSES.put(LockException.Kind.NOT_OWNED, LockNotOwnedException.class);
    CLASSES.put(LockException.Kind.CONNECTION, LockConnectionException.class);
    CLASSES.put(LockException.Kind.WRONG_TYPE, LockWrongTypeException.class);
    CLASSES.put(LockException.Kind.QUORUM, LockQuorumException.class);
    CLASSES.put(LockException.Kind.SERVER, LockServerException.class);
    CLASSES.put(LockException.Kind.INTERNAL, LockException.class);
    CLASSES.put(LockException.Kind.UNCONFIRMED, LockUnconfirmedException.class);
  }

  /** Each subclass's (message, cause) constructor. */
  private static final Map<LockException.Kind, BiFunction<String, Throwable, LockException>> MAKE = Map.of(
      LockException.Kind.TIMEOUT, LockTimeoutException::new,
      LockException.Kind.NOT_OWNED, LockNotOwnedException::new,
      LockException.Kind.UNCONFIRMED, LockUnconfirmedException::new,
      LockException.Kind.CONNECTION, LockConnectionException::new,
      LockException.Kind.WRONG_TYPE, LockWrongTypeException::new,
      LockException.Kind.QUORUM, LockQuorumException::new,
      LockException.Kind.SERVER, LockServerException::new,
      LockException.Kind.INTERNAL, (m, c) -> new LockException(m, LockException.Kind.INTERNAL, c));

  @Test
  @SuppressWarnings("deprecation")
  void everyFailureStatusHasAKindAndAClass() {
    // Every status of the header but OK and INVALID_ARGUMENT (an IllegalArgumentException).
    Set<Integer> statuses = Set.of(1, 2, 3, 5, 6, 7, 8, 9);
    assertEquals(statuses, KINDS.keySet());
    assertEquals(EnumSet.allOf(LockException.Kind.class), EnumSet.copyOf(KINDS.values()), "every kind is reached");
    for (Map.Entry<Integer, LockException.Kind> e : KINDS.entrySet()) {
      LockException x = LockException.of(e.getKey(), "status " + e.getKey());
      assertSame(CLASSES.get(e.getValue()), x.getClass(), "status " + e.getKey());
      assertEquals(e.getValue(), x.kind(), "status " + e.getKey());
      assertEquals(e.getKey(), x.status(), "the deprecated status() still gives the code");
      assertEquals("status " + e.getKey(), x.getMessage());
      assertNull(x.getCause());
      assertEquals(e.getValue(), LockException.Kind.of(e.getKey()));
    }
    assertTrue(LockException.of(NativeLib.UNCONFIRMED, "m") instanceof LockNotOwnedException,
        "an unconfirmed release is caught with the not-owned ones");
    // A status this binding does not know: INTERNAL, with its code kept.
    LockException unknown = LockException.of(42, "new");
    assertEquals(LockException.Kind.INTERNAL, unknown.kind());
    assertEquals(42, unknown.status());
  }

  /**
   * include/redislock.h's statuses, by name and value: each failure has its
   * kind here, or is not a LockException (a bad argument is an
   * IllegalArgumentException; a cancelled asynchronous acquisition ends its
   * future as cancelled). A status added to the header fails this test until
   * it is given a place.
   */
  @Test
  void theStatusesAreTheHeadersOnes() throws IOException {
    Map<String, LockException.Kind> byName = Map.of(
        "REDISLOCK_NOT_ACQUIRED", LockException.Kind.TIMEOUT,
        "REDISLOCK_NOT_OWNER", LockException.Kind.NOT_OWNED,
        "REDISLOCK_CONNECTION", LockException.Kind.CONNECTION,
        "REDISLOCK_WRONG_TYPE", LockException.Kind.WRONG_TYPE,
        "REDISLOCK_NO_QUORUM", LockException.Kind.QUORUM,
        "REDISLOCK_SERVER", LockException.Kind.SERVER,
        "REDISLOCK_INTERNAL", LockException.Kind.INTERNAL,
        "REDISLOCK_UNCONFIRMED", LockException.Kind.UNCONFIRMED);
    Set<String> notLockExceptions = Set.of("REDISLOCK_OK", "REDISLOCK_INVALID_ARGUMENT", "REDISLOCK_CANCELLED");
    String h = Files.readString(Servers.ROOT.resolve("include/redislock.h"));
    String body = h.substring(h.indexOf("typedef enum redislock_status {"), h.indexOf("} redislock_status;"));
    Matcher m = Pattern.compile("\\n  (REDISLOCK_[A-Z_]+)( = 0)?,").matcher(body);
    Set<String> seen = new HashSet<>();
    for (int value = 0; m.find(); value++) {
      String name = m.group(1);
      seen.add(name);
      if (notLockExceptions.contains(name)) {
        assertNull(KINDS.get(value), name);
        continue;
      }
      assertTrue(byName.containsKey(name), name + " (" + value + ") has no kind: give it one in LockException.Kind");
      assertEquals(byName.get(name), KINDS.get(value), name + " is " + value);
    }
    assertTrue(seen.containsAll(byName.keySet()), "the header's statuses " + seen);
    assertTrue(seen.contains("REDISLOCK_OK") && seen.contains("REDISLOCK_INVALID_ARGUMENT"), seen.toString());
  }

  @Test
  @SuppressWarnings("deprecation")
  void constructorsChainTheCauseAndFixTheKind() {
    IOException io = new IOException("broken pipe");
    for (LockException.Kind k : LockException.Kind.values()) {
      LockException x = MAKE.get(k).apply("m " + k, io);
      assertSame(CLASSES.get(k), x.getClass(), k.toString());
      assertEquals(k, x.kind());
      assertSame(io, x.getCause(), k + ": the cause is chained");
      assertEquals("m " + k, x.getMessage());
      assertEquals(k.status, x.status());
      assertNull(MAKE.get(k).apply("no cause", null).getCause());
    }
    assertEquals(LockException.Kind.TIMEOUT, new LockTimeoutException("t").kind());
    assertEquals(LockException.Kind.UNCONFIRMED, new LockUnconfirmedException("u").kind());
    // The deprecated constructors: the class fixes the kind, the code is kept as given.
    LockNotOwnedException old = new LockNotOwnedException("old", NativeLib.NOT_OWNER);
    assertEquals(LockException.Kind.NOT_OWNED, old.kind());
    assertEquals(NativeLib.NOT_OWNER, old.status());
    assertEquals(LockException.Kind.TIMEOUT, new LockException("old", NativeLib.NOT_ACQUIRED).kind());
  }

  @Test
  void aKindWithItsOwnClassIsThrownAsThatClass() {
    for (LockException.Kind k : LockException.Kind.values()) {
      if (k == LockException.Kind.INTERNAL) {
        assertEquals(k, new LockException("bug", k).kind());
      } else {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new LockException("x", k));
        assertTrue(e.getMessage().contains(CLASSES.get(k).getSimpleName()), e.getMessage());
      }
    }
  }

  @Test
  void theKindAndCauseSurviveSerialization() throws Exception {
    LockException x = new LockQuorumException("2 of 5", new IOException("refused"));
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(x);
    }
    try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
      LockException y = (LockException) in.readObject();
      assertSame(LockQuorumException.class, y.getClass());
      assertEquals(LockException.Kind.QUORUM, y.kind());
      assertEquals("refused", y.getCause().getMessage());
    }
  }

  /** A real failure, end to end: a refused connection is a CONNECTION, as a class and as a kind. */
  @Test
  void aRealFailureCarriesItsKind() throws Exception {
    int port;
    try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    LockException e = assertThrows(LockException.class, () -> {
      try (RedisLockClient c = RedisLockClient.open("redis://127.0.0.1:" + port + "/0")) {
        c.tryAcquire("k", LockOptions.DEFAULT);
      }
    });
    assertSame(LockConnectionException.class, e.getClass(), e.toString());
    assertEquals(LockException.Kind.CONNECTION, e.kind());
  }
}
