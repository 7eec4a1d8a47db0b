package io.redislock;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

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
 *       URLs), whose connections outlive this object;
 *   <li>{@code connectTimeout}, {@code commandTimeout}, {@code nodeTimeout}:
 *       how long connecting, each command, and each Redlock node may take
 *       (by default what the URL says, else 2 s, 2 s, and a tenth of the TTL
 *       between 10 ms and the command timeout). They are handed to the core
 *       as the URL parameters {@code connect_timeout}, {@code command_timeout}
 *       and {@code node_timeout}, in whole milliseconds (rounded up), and must
 *       be 1 ms to 1 hour. The option wins over the URL's parameter: the
 *       URL's own parameter of that name (every occurrence, on every URL of
 *       a Redlock list) is removed and the option's added.
 * </ul>
 */
public final class ClientOptions {
  /** The defaults: a 30 s watchdog, the shared callback thread, a client of its own. */
  public static final ClientOptions DEFAULT =
      new ClientOptions(Duration.ofSeconds(30), null, false, null, null, null);

  /** The core's longest connect, command and node timeout. */
  static final Duration MAX_TIMEOUT = Duration.ofHours(1);

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
  private final @Nullable Executor callbackExecutor;
  private final boolean shared;
  private final @Nullable Duration connectTimeout;
  private final @Nullable Duration commandTimeout;
  private final @Nullable Duration nodeTimeout;

  private ClientOptions(Duration watchdogTtl, @Nullable Executor callbackExecutor, boolean shared,
      @Nullable Duration connectTimeout, @Nullable Duration commandTimeout, @Nullable Duration nodeTimeout) {
    this.watchdogTtl = watchdogTtl;
    this.callbackExecutor = callbackExecutor;
    this.shared = shared;
    this.connectTimeout = connectTimeout;
    this.commandTimeout = commandTimeout;
    this.nodeTimeout = nodeTimeout;
  }

  public ClientOptions watchdogTtl(Duration ttl) {
    Units.ttlMs(ttl);
    return new ClientOptions(ttl, callbackExecutor, shared, connectTimeout, commandTimeout, nodeTimeout);
  }

  public ClientOptions callbackExecutor(Executor executor) {
    return new ClientOptions(watchdogTtl, Objects.requireNonNull(executor, "executor"), shared,
        connectTimeout, commandTimeout, nodeTimeout);
  }

  public ClientOptions shared(boolean on) {
    return new ClientOptions(watchdogTtl, callbackExecutor, on, connectTimeout, commandTimeout, nodeTimeout);
  }

  /**
   * How long opening a connection may take (TCP, TLS and the handshake with
   * the server): 1 ms to 1 hour, rounded up to whole milliseconds. Default:
   * the URL's {@code connect_timeout}, else 2 s; given, it wins over the URL's.
   *
   * @throws IllegalArgumentException for zero, a negative duration or more than an hour
   */
  public ClientOptions connectTimeout(Duration timeout) {
    timeout("connectTimeout", timeout);
    return new ClientOptions(watchdogTtl, callbackExecutor, shared, timeout, commandTimeout, nodeTimeout);
  }

  /**
   * How long a command may wait for its reply before the call fails with
   * {@link LockConnectionException}: 1 ms to 1 hour, rounded up to whole
   * milliseconds. Default: the URL's {@code command_timeout}, else 2 s;
   * given, it wins over the URL's.
   *
   * @throws IllegalArgumentException for zero, a negative duration or more than an hour
   */
  public ClientOptions commandTimeout(Duration timeout) {
    timeout("commandTimeout", timeout);
    return new ClientOptions(watchdogTtl, callbackExecutor, shared, connectTimeout, timeout, nodeTimeout);
  }

  /**
   * Redlock: how long an acquire waits for each node (and release and the
   * reads, at most the command timeout): 1 ms to 1 hour, rounded up to whole
   * milliseconds. Default: the URLs' {@code node_timeout}, else a tenth of
   * the TTL, at least 10 ms and at most the command timeout (release and
   * reads: 1 s); given, it wins over the URLs'. A client of one URL takes it
   * and does not use it.
   *
   * @throws IllegalArgumentException for zero, a negative duration or more than an hour
   */
  public ClientOptions nodeTimeout(Duration timeout) {
    timeout("nodeTimeout", timeout);
    return new ClientOptions(watchdogTtl, callbackExecutor, shared, connectTimeout, commandTimeout, timeout);
  }

  private static void timeout(String what, Duration d) {
    Objects.requireNonNull(d, what);
    if (d.isNegative() || d.isZero() || d.compareTo(MAX_TIMEOUT) > 0) {
      throw new IllegalArgumentException(what + " must be 1 ms to 1 hour, got " + d);
    }
  }

  /** The connect timeout given here; null: the URL's, else the core's default (2 s). */
  public @Nullable Duration connectTimeout() {
    return connectTimeout;
  }

  /** The command timeout given here; null: the URL's, else the core's default (2 s). */
  public @Nullable Duration commandTimeout() {
    return commandTimeout;
  }

  /** The Redlock per-node timeout given here; null: the URLs', else the core's default. */
  public @Nullable Duration nodeTimeout() {
    return nodeTimeout;
  }

  /**
   * {@code url} with the timeouts given here as its query parameters, for
   * the core to parse (added before any {@code #fragment}, where a URL's
   * query ends). The option wins over the URL: every parameter of the URL
   * that names a timeout given here (its name read percent-decoded, as the
   * core reads it) is removed first, whatever it says; the rest of the URL
   * (its other parameters, user info and fragment) stays as it is.
   */
  String url(String url) {
    String[][] params = {
      {"connect_timeout", ms(connectTimeout)},
      {"command_timeout", ms(commandTimeout)},
      {"node_timeout", ms(nodeTimeout)},
    };
    Set<String> given = new HashSet<>();
    for (String[] p : params) {
      if (p[1] != null) {
        given.add(p[0]);
      }
    }
    if (given.isEmpty()) {
      return url;
    }
    int hash = url.indexOf('#');
    String head = hash < 0 ? url : url.substring(0, hash);
    String fragment = hash < 0 ? "" : url.substring(hash);
    int q = head.indexOf('?');
    String query = q < 0 ? "" : head.substring(q + 1);
    StringBuilder out = new StringBuilder(q < 0 ? head : head.substring(0, q)).append('?');
    boolean first = true;
    if (!query.isEmpty()) {
      for (String pair : query.split("&", -1)) {
        String key = pair.contains("=") ? pair.substring(0, pair.indexOf('=')) : pair;
        if (given.contains(decoded(key))) {
          continue;
        }
        if (!first) {
          out.append('&');
        }
        out.append(pair);
        first = false;
      }
    }
    for (String[] p : params) {
      if (p[1] == null) {
        continue;
      }
      if (!first && out.charAt(out.length() - 1) != '&') {
        out.append('&');
      }
      out.append(p[0]).append('=').append(p[1]);
      first = false;
    }
    return out.append(fragment).toString();
  }

  private static @Nullable String ms(@Nullable Duration d) {
    return d == null ? null : Units.ceilMs(d) + "ms";
  }

  private static String decoded(String key) {
    try {
      return URLDecoder.decode(key, StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      return key; // a stray '%': the core reads it as it stands
    }
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
