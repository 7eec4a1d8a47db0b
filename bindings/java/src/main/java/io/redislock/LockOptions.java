package io.redislock;

import java.time.Duration;
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
 *
 * <p>Options start from {@link #ttl(Duration)} or {@link #DEFAULT}. The
 * factory {@code ttl(Duration)} is static, and Java does not let a static
 * interface method be called through an instance: {@code
 * opts.autoRenew(true).ttl(d)}, which would silently drop what came before
 * it, does not compile. To change the TTL of existing options, use
 * {@link #withTtl(Duration)}. The one implementation is this package's own
 * (the interface is sealed); two options are equal when every setting is.
 */
public sealed interface LockOptions permits LockOptionsImpl {
  /** 30 s TTL, wait unset (forever for {@code acquire}, once for {@code tryAcquire}). */
  LockOptions DEFAULT = LockOptionsImpl.DEFAULT;

  /** The default options with this TTL (1 ms to 30 days): where options start. */
  static LockOptions ttl(Duration ttl) {
    return DEFAULT.withTtl(ttl);
  }

  /** These options with another TTL (1 ms to 30 days). */
  LockOptions withTtl(Duration ttl);

  /** Wait at most {@code wait} for the lock ({@link Duration#ZERO}: try once). */
  LockOptions waitFor(Duration wait);

  /** Wait until the lock is free (a dead server still fails the call). */
  LockOptions waitForever();

  /** Renew in the background at a third of the TTL until released. */
  LockOptions autoRenew(boolean on);

  /** Draw the fencing number in the acquisition itself. */
  LockOptions fenced(boolean on);

  /** The caller's own token (UTF-8), unique per acquisition; null: random. */
  LockOptions token(@Nullable String token);

  /** The caller's own token (bytes, copied), unique per acquisition; null: random. */
  LockOptions token(byte @Nullable [] token);

  /**
   * For {@link RedisLockClient#executeLocked}: interrupt the body's thread
   * when the lock is found lost (off by default).
   */
  LockOptions interruptOnLoss(boolean on);

  /** The TTL. */
  Duration ttl();

  /** The wait, or null when unset (the call's default). Negative means forever. */
  @Nullable Duration waitTime();

  boolean isAutoRenew();

  boolean isFenced();

  boolean isInterruptOnLoss();

  /** A copy of the caller's token, or null. */
  byte @Nullable [] token();
}
