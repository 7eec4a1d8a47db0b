package io.redislock;

import org.jspecify.annotations.Nullable;

/**
 * The key exists and is not a lock; it was left untouched.
 * Its {@link #kind()} is {@link LockException.Kind#WRONG_TYPE}.
 */
public class LockWrongTypeException extends LockException {
  private static final long serialVersionUID = 2L;

  public LockWrongTypeException(String message) {
    this(message, (Throwable) null);
  }

  public LockWrongTypeException(String message, @Nullable Throwable cause) {
    super(message, Kind.WRONG_TYPE, Kind.WRONG_TYPE.status, cause);
  }

  /**
   * With the C API's status code, which {@link #status()} returns.
   *
   * @deprecated the status code is the C API's; use {@link #LockWrongTypeException(String)}.
   */
  @Deprecated
  public LockWrongTypeException(String message, int status) {
    super(message, Kind.WRONG_TYPE, status, null);
  }
}
