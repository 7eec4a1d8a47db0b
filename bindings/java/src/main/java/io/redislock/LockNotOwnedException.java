package io.redislock;

import org.jspecify.annotations.Nullable;

/**
 * Release, extend or fence: the lock expired or another owner took it (the new owner's key is left alone), or this handle was released already.
 * Its {@link #kind()} is {@link LockException.Kind#NOT_OWNED}.
 */
public class LockNotOwnedException extends LockException {
  private static final long serialVersionUID = 2L;

  public LockNotOwnedException(String message) {
    this(message, (Throwable) null);
  }

  public LockNotOwnedException(String message, @Nullable Throwable cause) {
    super(message, Kind.NOT_OWNED, Kind.NOT_OWNED.status, cause);
  }

  /**
   * With the C API's status code, which {@link #status()} returns.
   *
   * @deprecated the status code is the C API's; use {@link #LockNotOwnedException(String)}.
   */
  @Deprecated
  public LockNotOwnedException(String message, int status) {
    super(message, Kind.NOT_OWNED, status, null);
  }

  /** For {@link LockUnconfirmedException}. */
  LockNotOwnedException(String message, Kind kind, int status, @Nullable Throwable cause) {
    super(message, kind, status, cause);
  }
}
