package io.redislock;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * How to take a lock (immutable; every method returns a new instance):
 *
 * <pre>{@code
 * LockOptions opts = LockOptions.ttl(Duration.ofSeconds(30)).waitFor(Duration.ofSeconds(10));
 * }</pre>
 *
 * <ul>
 *   <li>{@code ttl}: how long the lock lives unless extended or renewed: 30 s
 *       by default, 1 ms to 30 days, rounded up to a millisecond;
 *   <li>{@code waitFor}: how long {@code acquire} waits for another owner to
 *       let go ({@link Duration#ZERO} tries once, rounded up to a
 *       millisecond); {@link #waitForever()} is {@code acquire}'s default,
 *       and {@code tryAcquire} tries once unless a wait is given;
 *   <li>{@code autoRenew}: renew in the background at a third of the TTL
 *       until released (off by default);
 *   <li>{@code fenced}: draw the fencing number in the acquisition itself
 *       (off by default: drawn by the first {@link LockHandle#fence()}, one
 *       round trip);
 *   <li>{@code token}: the caller's own token, unique per acquisition (by
 *       default 128 random bits, 32 hex characters).
 * </ul>
 */
public final class LockOptions {
  /** 30 s TTL, wait unset (forever for {@code acquire}, once for {@code tryAcquire}). */
  public static final LockOptions DEFAULT =
      new LockOptions(Duration.ofSeconds(30), null, false, false, null, false);

  private final Duration ttl;
  private final @Nullable Duration wait; // null: the call's default; negative: forever
  private final boolean autoRenew;
  private final boolean fenced;
  private final byte @Nullable [] token;
  private final boolean interruptOnLoss;

  private LockOptions(
      Duration ttl, @Nullable Duration wait, boolean autoRenew, boolean fenced, byte @Nullable [] token,
      boolean interruptOnLoss) {
    this.ttl = ttl;
    this.wait = wait;
    this.autoRenew = autoRenew;
    this.fenced = fenced;
    this.token = token;
    this.interruptOnLoss = interruptOnLoss;
  }

  /** The default options with this TTL. */
  public static LockOptions ttl(Duration ttl) {
    return DEFAULT.withTtl(ttl);
  }

  /** These options with another TTL (1 ms to 30 days). */
  public LockOptions withTtl(Duration ttl) {
    Units.ttlMs(ttl);
    return new LockOptions(ttl, wait, autoRenew, fenced, token, interruptOnLoss);
  }

  /** Wait at most {@code wait} for the lock ({@link Duration#ZERO}: try once). */
  public LockOptions waitFor(Duration wait) {
    Units.waitMs(wait);
    return new LockOptions(ttl, wait, autoRenew, fenced, token, interruptOnLoss);
  }

  /** Wait until the lock is free (a dead server still fails the call). */
  public LockOptions waitForever() {
    return new LockOptions(ttl, Duration.ofMillis(-1), autoRenew, fenced, token, interruptOnLoss);
  }

  /** Renew in the background at a third of the TTL until released. */
  public LockOptions autoRenew(boolean on) {
    return new LockOptions(ttl, wait, on, fenced, token, interruptOnLoss);
  }

  /** Draw the fencing number in the acquisition itself. */
  public LockOptions fenced(boolean on) {
    return new LockOptions(ttl, wait, autoRenew, on, token, interruptOnLoss);
  }

  /** The caller's own token (UTF-8), unique per acquisition; null: random. */
  public LockOptions token(@Nullable String token) {
    return token(token == null ? null : token.getBytes(StandardCharsets.UTF_8));
  }

  /** The caller's own token (bytes, copied), unique per acquisition; null: random. */
  public LockOptions token(byte @Nullable [] token) {
    if (token != null && token.length == 0) {
      throw new IllegalArgumentException("token must not be empty (null draws a random one)");
    }
    byte[] copy = token == null ? null : token.clone();
    return new LockOptions(ttl, wait, autoRenew, fenced, copy, interruptOnLoss);
  }

  /**
   * For {@link RedisLockClient#executeLocked}: interrupt the body's thread
   * when the lock is found lost (off by default).
   */
  public LockOptions interruptOnLoss(boolean on) {
    return new LockOptions(ttl, wait, autoRenew, fenced, token, on);
  }

  public Duration ttl() {
    return ttl;
  }

  /** The wait, or null when unset (the call's default). Negative means forever. */
  public @Nullable Duration waitTime() {
    return wait;
  }

  public boolean isAutoRenew() {
    return autoRenew;
  }

  public boolean isFenced() {
    return fenced;
  }

  public boolean isInterruptOnLoss() {
    return interruptOnLoss;
  }

  /** A copy of the caller's token, or null. */
  public byte @Nullable [] token() {
    return token == null ? null : token.clone();
  }

  byte @Nullable [] tokenBytes() {
    return token;
  }

  long ttlMs() {
    return Units.ttlMs(ttl);
  }

  /** The wait in milliseconds for the C API, {@code unset} when none was given. */
  long waitMs(long unset) {
    if (wait == null) {
      return unset;
    }
    return wait.isNegative() ? -1 : Units.waitMs(wait);
  }

  @Override
  public String toString() {
    return "LockOptions{ttl=" + ttl + ", wait=" + (wait == null ? "default" : wait.isNegative() ? "forever" : wait)
        + ", autoRenew=" + autoRenew + ", fenced=" + fenced + ", token=" + (token == null ? "random" : "given")
        + "}";
  }

  @Override
  public boolean equals(@Nullable Object o) {
    if (!(o instanceof LockOptions)) {
      return false;
    }
    LockOptions x = (LockOptions) o;
    return ttl.equals(x.ttl) && Objects.equals(wait, x.wait) && autoRenew == x.autoRenew
        && fenced == x.fenced && Arrays.equals(token, x.token) && interruptOnLoss == x.interruptOnLoss;
  }

  @Override
  public int hashCode() {
    return Objects.hash(ttl, wait, autoRenew, fenced, Arrays.hashCode(token), interruptOnLoss);
  }
}
