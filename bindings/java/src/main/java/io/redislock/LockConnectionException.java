package io.redislock;

import org.jspecify.annotations.Nullable;

/**
 * The server cannot be reached, an I/O error, or a timeout.
 * Its {@link #kind()} is {@link LockException.Kind#CONNECTION}.
 */
public class LockConnectionException extends LockException {
  private static final long serialVersionUID = 2L;

  public LockConnectionException(String message) {
    this(message, (Throwable) null);
  }

  public LockConnectionException(String message, @Nullable Throwable cause) {
    super(message, Kind.CONNECTION, Kind.CONNECTION.status, cause);
  }

  /**
   * With the C API's status code, which {@link #status()} returns.
   *
   * @deprecated the status code is the C API's; use {@link #LockConnectionException(String)}.
   */
  @Deprecated
  public LockConnectionException(String message, int status) {
    super(message, Kind.CONNECTION, status, null);
  }
}
