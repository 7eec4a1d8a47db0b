package net.javacrumbs.shedlock.core;

import java.util.Optional;

/**
 * Stand-in for ShedLock's {@code LockProvider} (7.x), used to compile and
 * test the adapter where Maven Central is out of reach; never shipped.
 */
public interface LockProvider {
  Optional<SimpleLock> lock(LockConfiguration lockConfiguration);
}
