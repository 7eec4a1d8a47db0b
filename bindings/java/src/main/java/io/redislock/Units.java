package io.redislock;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;

/** Arguments checked before any I/O: names, durations, counts. */
final class Units {
  /** 30 days, the core's longest TTL. */
  static final long MAX_TTL_MS = 30L * 24 * 3600 * 1000;

  private Units() {}

  /** Milliseconds, rounded up, saturating at Long.MAX_VALUE. */
  static long ceilMs(Duration d) {
    long secs = d.getSeconds();
    int nanos = d.getNano();
    if (secs > Long.MAX_VALUE / 1000 - 1) {
      return Long.MAX_VALUE;
    }
    return secs * 1000 + (nanos + 999_999) / 1_000_000;
  }

  static long ttlMs(Duration ttl) {
    Objects.requireNonNull(ttl, "ttl");
    if (ttl.isNegative() || ttl.isZero()) {
      throw new IllegalArgumentException("ttl must be positive (1 ms to 30 days), got " + ttl);
    }
    long ms = ceilMs(ttl);
    if (ms > MAX_TTL_MS) {
      throw new IllegalArgumentException("ttl must be at most 30 days, got " + ttl);
    }
    return ms;
  }

  static long waitMs(Duration wait) {
    Objects.requireNonNull(wait, "wait");
    if (wait.isNegative()) {
      throw new IllegalArgumentException(
          "wait must not be negative (Duration.ZERO tries once; waitForever() waits), got " + wait);
    }
    return ceilMs(wait);
  }

  /** The name's bytes: UTF-8, not empty. */
  static byte[] name(String name) {
    Objects.requireNonNull(name, "name");
    if (name.isEmpty()) {
      throw new IllegalArgumentException("name must not be empty");
    }
    return name.getBytes(StandardCharsets.UTF_8);
  }

  /** A copy of the name's bytes, not empty. */
  static byte[] name(byte[] name) {
    Objects.requireNonNull(name, "name");
    if (name.length == 0) {
      throw new IllegalArgumentException("name must not be empty");
    }
    return name.clone();
  }

  static byte[] token(byte[] token) {
    Objects.requireNonNull(token, "token");
    if (token.length == 0) {
      throw new IllegalArgumentException("token must not be empty");
    }
    return token;
  }

  static byte[] token(String token) {
    Objects.requireNonNull(token, "token");
    return token(token.getBytes(StandardCharsets.UTF_8));
  }

  static int count(int n, String what, int max) {
    if (n < 1 || n > max) {
      throw new IllegalArgumentException(what + " must be 1 to " + max + ", got " + n);
    }
    return n;
  }
}
