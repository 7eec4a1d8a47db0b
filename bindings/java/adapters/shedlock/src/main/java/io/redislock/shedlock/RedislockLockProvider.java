package io.redislock.shedlock;

import io.redislock.LockHandle;
import io.redislock.LockNotOwnedException;
import io.redislock.LockOptions;
import io.redislock.RedisLockClient;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.jspecify.annotations.Nullable;

/**
 * ShedLock's {@code LockProvider} over redislock: a scheduled task runs on
 * one node at a time. {@link #lock} tries once to take the lock
 * {@code prefix + name} for {@code lockAtMostFor}; the lock's
 * {@code unlock()} keeps it until {@code lockAtLeastUntil} when that is
 * still ahead (it is then left to expire) and releases it otherwise;
 * {@code extend} sets a new {@code lockAtMostFor} from now.
 *
 * <pre>{@code
 * @Bean
 * LockProvider lockProvider(RedisLockClient client) {
 *   return new RedislockLockProvider(client);   // locks named "shedlock:<task>"
 * }
 * }</pre>
 *
 * <p>A lock found lost when it is unlocked (it outlived
 * {@code lockAtMostFor}, or was taken) is not an error, as with ShedLock's
 * other providers: there is no one to tell. Thread-safe; a lock may be
 * unlocked from any thread.
 */
public final class RedislockLockProvider implements ExtensibleLockProvider {
  /** The prefix of {@link #RedislockLockProvider(RedisLockClient)}. */
  public static final String DEFAULT_PREFIX = "shedlock:";

  private final RedisLockClient client;
  private final String prefix;

  /** Locks of {@code client} named {@code "shedlock:" + name}. */
  public RedislockLockProvider(RedisLockClient client) {
    this(client, DEFAULT_PREFIX);
  }

  /** Locks of {@code client} named {@code prefix + name}. */
  public RedislockLockProvider(RedisLockClient client, String prefix) {
    this.client = Objects.requireNonNull(client, "client");
    this.prefix = Objects.requireNonNull(prefix, "prefix");
  }

  /** The lock, or empty while another node holds it (one attempt, no wait). */
  @Override
  public Optional<SimpleLock> lock(LockConfiguration config) {
    LockHandle handle = tryOnce(prefix + config.getName(), ttl(config.getLockAtMostFor()));
    if (handle == null) {
      return Optional.empty();
    }
    return Optional.of(new Held(handle, config.getLockAtLeastUntil()));
  }

  private @Nullable LockHandle tryOnce(String name, Duration ttl) {
    try {
      return client.tryAcquire(name, LockOptions.ttl(ttl).waitFor(Duration.ZERO));
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) {
      // InterruptedException, where tryAcquire declares it: one attempt does not wait.
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** ShedLock allows a lockAtMostFor of zero; a lock lives at least 1 ms. */
  private static Duration ttl(Duration d) {
    return d.compareTo(Duration.ofMillis(1)) < 0 ? Duration.ofMillis(1) : d;
  }

  @Override
  public String toString() {
    return "RedislockLockProvider{" + client.addr() + ", prefix=" + prefix + "}";
  }

  /** One holding: valid until unlocked or extended (then the new one is). */
  private static final class Held implements SimpleLock {
    private final LockHandle handle;
    private final Instant lockAtLeastUntil;
    private boolean valid = true;

    Held(LockHandle handle, Instant lockAtLeastUntil) {
      this.handle = handle;
      this.lockAtLeastUntil = lockAtLeastUntil;
    }

    private synchronized void use(String what) {
      if (!valid) {
        throw new IllegalStateException("the lock \"" + handle.name() + "\" was unlocked or extended already: cannot "
            + what + " it");
      }
      valid = false;
    }

    @Override
    public void unlock() {
      use("unlock");
      Duration left = Duration.between(Instant.now(), lockAtLeastUntil);
      if (left.compareTo(Duration.ofMillis(1)) >= 0) {
        try {
          handle.extend(left); // held until lockAtLeastUntil, then it expires
        } catch (LockNotOwnedException lost) {
          // Gone already: nothing to keep.
        } finally {
          handle.forget(); // never released by the collector before lockAtLeastUntil
        }
      } else {
        try {
          handle.release();
        } catch (LockNotOwnedException lost) {
          // Gone already (the handle is freed either way).
        }
      }
    }

    @Override
    public Optional<SimpleLock> extend(Duration lockAtMostFor, Duration lockAtLeastFor) {
      use("extend");
      Instant now = Instant.now();
      try {
        handle.extend(ttl(lockAtMostFor));
      } catch (LockNotOwnedException lost) {
        handle.forget();
        return Optional.empty();
      }
      return Optional.of(new Held(handle, now.plus(lockAtLeastFor)));
    }
  }
}
