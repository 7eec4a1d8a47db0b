package io.redislock;

import org.jspecify.annotations.Nullable;

/**
 * Redlock: no majority of the servers could be reached (or, with {@code wait_replicas}, too few replicas acknowledged).
 * Its {@link #kind()} is {@link LockException.Kind#QUORUM}.
 */
public class LockQuorumException extends LockException {
  private static final long serialVersionUID = 2L;

  public LockQuorumException(String message) {
    this(message, (Throwable) null);
  }

  public LockQuorumException(String message, @Nullable Throwable cause) {
    super(message, Kind.QUORUM, Kind.QUORUM.status, cause);
  }

  /**
   * With the C API's status code, which {@link #status()} returns.
   *
   * @deprecated the status code is the C API's; use {@link #LockQuorumException(String)}.
   */
  @Deprecated
  public LockQuorumException(String message, int status) {
    super(message, Kind.QUORUM, status, null);
  }
}
