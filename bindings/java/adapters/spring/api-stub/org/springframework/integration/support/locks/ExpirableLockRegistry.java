package org.springframework.integration.support.locks;

import java.util.concurrent.locks.Lock;

/** Stand-in for Spring Integration's {@code ExpirableLockRegistry} (7.0); never shipped. */
public interface ExpirableLockRegistry<L extends Lock> extends LockRegistry<L> {
  void expireUnusedOlderThan(long age);
}
