package net.javacrumbs.shedlock.core;

import java.time.Duration;
import java.util.Optional;

/**
 * Stand-in for ShedLock's {@code SimpleLock} (7.x): {@code unlock}, and
 * {@code extend}, which providers that cannot extend leave to this default;
 * never shipped.
 */
public interface SimpleLock {
  void unlock();

  default Optional<SimpleLock> extend(Duration lockAtMostFor, Duration lockAtLeastFor) {
    throw new UnsupportedOperationException();
  }
}
