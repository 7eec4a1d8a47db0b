package net.javacrumbs.shedlock.core;

import java.time.Duration;
import java.time.Instant;

/**
 * Stand-in for ShedLock's {@code LockConfiguration} (7.x) with the
 * constructor the tests use and the getters the adapter reads: a task's
 * lock {@code name}, held at most {@code lockAtMostFor} and at least
 * {@code lockAtLeastFor} from {@code createdAt}. Never shipped.
 */
public class LockConfiguration {
  private final Instant createdAt;
  private final String name;
  private final Duration lockAtMostFor;
  private final Duration lockAtLeastFor;

  public LockConfiguration(Instant createdAt, String name, Duration lockAtMostFor, Duration lockAtLeastFor) {
    this.createdAt = createdAt;
    this.name = name;
    this.lockAtMostFor = lockAtMostFor;
    this.lockAtLeastFor = lockAtLeastFor;
  }

  public String getName() {
    return name;
  }

  public Duration getLockAtMostFor() {
    return lockAtMostFor;
  }

  public Duration getLockAtLeastFor() {
    return lockAtLeastFor;
  }

  public Instant getLockAtLeastUntil() {
    return createdAt.plus(lockAtLeastFor);
  }
}
