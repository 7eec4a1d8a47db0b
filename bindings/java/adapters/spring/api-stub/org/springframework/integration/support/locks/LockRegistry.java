package org.springframework.integration.support.locks;

import java.util.concurrent.locks.Lock;

/**
 * Stand-in for Spring Integration's {@code LockRegistry} (7.0), declaring
 * only what the adapter implements: its one abstract method. The real
 * interface also has {@code executeLocked} default methods built on it.
 * Used to compile and test the adapter where Maven Central is out of reach;
 * never shipped.
 */
@FunctionalInterface
public interface LockRegistry<L extends Lock> {
  L obtain(Object lockKey);
}
