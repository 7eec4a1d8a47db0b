package io.redislock;

import org.jspecify.annotations.Nullable;

/**
 * The server answered with an error (authentication, permissions, ...).
 * Its {@link #kind()} is {@link LockException.Kind#SERVER}.
 */
public class LockServerException extends LockException {
  private static final long serialVersionUID = 2L;

  public LockServerException(String message) {
    this(message, (Throwable) null);
  }

  public LockServerException(String message, @Nullable Throwable cause) {
    super(message, Kind.SERVER, Kind.SERVER.status, cause);
  }

  /**
   * With the C API's status code, which {@link #status()} returns.
   *
   * @deprecated the status code is the C API's; use {@link #LockServerException(String)}.
   */
  @Deprecated
  public LockServerException(String message, int status) {
    super(message, Kind.SERVER, status, null);
  }
}
