package io.redislock;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * The one implementation of {@link LockOptions} (immutable; every method
 * returns a new instance), with what the client reads from it.
 */
final class LockOptionsImpl implements LockOptions {
  static final LockOptionsImpl DEFAULT =
      new LockOptionsImpl(Duration.ofSeconds(30), null, false, false, null, false);

  private final Duration ttl;
  private final @Nullable Duration wait; // null: the call's default; negative: forever
  private final boolean autoRenew;
  private final boolean fenced;
  private final byte @Nullable [] token;
  private final boolean interruptOnLoss;

  private LockOptionsImpl(
      Duration ttl, @Nullable Duration wait, boolean autoRenew, boolean fenced, byte @Nullable [] token,
      boolean interruptOnLoss) {
    this.ttl = ttl;
    this.wait = wait;
    this.autoRenew = autoRenew;
    this.fenced = fenced;
    this.token = token;
    this.interruptOnLoss = interruptOnLoss;
  }

  @Override
  public LockOptions withTtl(Duration ttl) {
    Units.ttlMs(ttl);
    return new LockOptionsImpl(ttl, wait, autoRenew, fenced, token, interruptOnLoss);
  }

  @Override
  public LockOptions waitFor(Duration wait) {
    Units.waitMs(wait);
    return new LockOptionsImpl(ttl, wait, autoRenew, fenced, token, interruptOnLoss);
  }

  @Override
  public LockOptions waitForever() {
    return new LockOptionsImpl(ttl, Duration.ofMillis(-1), autoRenew, fenced, token, interruptOnLoss);
  }

  @Override
  public LockOptions autoRenew(boolean on) {
    return new LockOptionsImpl(ttl, wait, on, fenced, token, interruptOnLoss);
  }

  @Override
  public LockOptions fenced(boolean on) {
    return new LockOptionsImpl(ttl, wait, autoRenew, on, token, interruptOnLoss);
  }

  @Override
  public LockOptions token(@Nullable String token) {
    return token(token == null ? null : token.getBytes(StandardCharsets.UTF_8));
  }

  @Override
  public LockOptions token(byte @Nullable [] token) {
    if (token != null && token.length == 0) {
      throw new IllegalArgumentException("token must not be empty (null draws a random one)");
    }
    byte[] copy = token == null ? null : token.clone();
    return new LockOptionsImpl(ttl, wait, autoRenew, fenced, copy, interruptOnLoss);
  }

  @Override
  public LockOptions interruptOnLoss(boolean on) {
    return new LockOptionsImpl(ttl, wait, autoRenew, fenced, token, on);
  }

  @Override
  public Duration ttl() {
    return ttl;
  }

  @Override
  public @Nullable Duration waitTime() {
    return wait;
  }

  @Override
  public boolean isAutoRenew() {
    return autoRenew;
  }

  @Override
  public boolean isFenced() {
    return fenced;
  }

  @Override
  public boolean isInterruptOnLoss() {
    return interruptOnLoss;
  }

  @Override
  public byte @Nullable [] token() {
    return token == null ? null : token.clone();
  }

  /** The caller's token itself (not a copy), or null. */
  static byte @Nullable [] tokenBytes(LockOptions o) {
    return ((LockOptionsImpl) o).token;
  }

  /** The TTL in milliseconds for the C API. */
  static long ttlMs(LockOptions o) {
    return Units.ttlMs(o.ttl());
  }

  /** The wait in milliseconds for the C API, {@code unset} when none was given. */
  static long waitMs(LockOptions o, long unset) {
    Duration wait = ((LockOptionsImpl) o).wait;
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
    if (!(o instanceof LockOptionsImpl)) {
      return false;
    }
    LockOptionsImpl x = (LockOptionsImpl) o;
    return ttl.equals(x.ttl) && Objects.equals(wait, x.wait) && autoRenew == x.autoRenew
        && fenced == x.fenced && Arrays.equals(token, x.token) && interruptOnLoss == x.interruptOnLoss;
  }

  @Override
  public int hashCode() {
    return Objects.hash(ttl, wait, autoRenew, fenced, Arrays.hashCode(token), interruptOnLoss);
  }
}
