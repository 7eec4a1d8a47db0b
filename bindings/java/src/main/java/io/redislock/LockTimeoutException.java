package io.redislock;

import org.jspecify.annotations.Nullable;

/**
 * The wait ran out while another owner held the lock ({@code tryAcquire} returns null and {@code tryLock} false instead).
 * Its {@link #kind()} is {@link LockException.Kind#TIMEOUT}.
 */
public class LockTimeoutException extends LockException {
  private static final long serialVersionUID = 2L;

  public LockTimeoutException(String message) {
    this(message, (Throwable) null);
  }

  public LockTimeoutException(String message, @Nullable Throwable cause) {
    super(message, Kind.TIMEOUT, Kind.TIMEOUT.status, cause);
  }

  /**
   * With the C API's status code, which {@link #status()} returns.
   *
   * @deprecated the status code is the C API's; use {@link #LockTimeoutException(String)}.
   */
  @Deprecated
  public LockTimeoutException(String message, int status) {
    super(message, Kind.TIMEOUT, status, null);
  }
}
