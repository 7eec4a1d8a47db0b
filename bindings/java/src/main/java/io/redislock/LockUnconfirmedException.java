package io.redislock;

import org.jspecify.annotations.Nullable;

/**
 * Release: the connection broke after the release was sent and, sent again, the lock was no longer this owner's: most likely the first attempt released it. The handle is gone either way.
 * Its {@link #kind()} is {@link LockException.Kind#UNCONFIRMED}.
 */
public class LockUnconfirmedException extends LockNotOwnedException {
  private static final long serialVersionUID = 2L;

  public LockUnconfirmedException(String message) {
    this(message, (Throwable) null);
  }

  public LockUnconfirmedException(String message, @Nullable Throwable cause) {
    super(message, Kind.UNCONFIRMED, Kind.UNCONFIRMED.status, cause);
  }

  /**
   * With the C API's status code, which {@link #status()} returns.
   *
   * @deprecated the status code is the C API's; use {@link #LockUnconfirmedException(String)}.
   */
  @Deprecated
  public LockUnconfirmedException(String message, int status) {
    super(message, Kind.UNCONFIRMED, status, null);
  }
}
