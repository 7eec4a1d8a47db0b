package io.redislock;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * How a {@link RedisLockClient} behaves (immutable):
 *
 * <ul>
 *   <li>{@code watchdogTtl}: the TTL of {@link RedisLock}'s watchdog locks
 *       ({@code lock()}, {@code tryLock(wait, unit)}), renewed every third
 *       of it while held: 30 s by default (Redisson's
 *       {@code lockWatchdogTimeout});
 *   <li>{@code callbackExecutor}: where lost-lock listeners run (by default
 *       one daemon thread shared by the clients that do not name one, which
 *       ends after a second without listeners to run); never the core's
 *       renewal thread;
 *   <li>{@code shared}: use the process's one client for this URL (or list of
 *       URLs), whose connections outlive this object.
 * </ul>
 */
public final class ClientOptions {
  /** The defaults: a 30 s watchdog, the shared callback thread, a client of its own. */
  public static final ClientOptions DEFAULT = new ClientOptions(Duration.ofSeconds(30), null, false);

  /**
   * One thread, {@code redislock-callbacks}, that runs the listeners in
   * order and ends after a second with nothing to run (started again by
   * the next listener), so that it never outlives its use.
   */
  private static final class DefaultExecutor {
    static final ExecutorService INSTANCE = new ThreadPoolExecutor(0, 1, 1, TimeUnit.SECONDS,
        new LinkedBlockingQueue<>(), r -> Reaper.daemon("redislock-callbacks", r));
  }

  private final Duration watchdogTtl;
  private final Executor callbackExecutor;
  private final boolean shared;

  private ClientOptions(Duration watchdogTtl, Executor callbackExecutor, boolean shared) {
    this.watchdogTtl = watchdogTtl;
    this.callbackExecutor = callbackExecutor;
    this.shared = shared;
  }

  public ClientOptions watchdogTtl(Duration ttl) {
    Units.ttlMs(ttl);
    return new ClientOptions(ttl, callbackExecutor, shared);
  }

  public ClientOptions callbackExecutor(Executor executor) {
    return new ClientOptions(watchdogTtl, Objects.requireNonNull(executor, "executor"), shared);
  }

  public ClientOptions shared(boolean on) {
    return new ClientOptions(watchdogTtl, callbackExecutor, on);
  }

  public Duration watchdogTtl() {
    return watchdogTtl;
  }

  /** The executor lost-lock listeners run on. */
  public Executor callbackExecutor() {
    return callbackExecutor != null ? callbackExecutor : DefaultExecutor.INSTANCE;
  }

  public boolean isShared() {
    return shared;
  }
}
