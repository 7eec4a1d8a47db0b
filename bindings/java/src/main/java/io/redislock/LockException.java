package io.redislock;

/**
 * Every failure of a lock operation (unchecked). {@link #status()} is the C
 * API's status code ({@code redislock_status}); the message is the core's,
 * the same text every language shows for that failure. Thrown as itself for
 * a bug in redislock (a caught panic: please report it).
 */
public class LockException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;

  public LockException(String message, int status) {
    super(message);
    this.status = status;
  }

  /** The C API's status code of this failure. */
  public int status() {
    return status;
  }

  /** The exception for {@code status}, with the message of the last failure on this thread. */
  static LockException of(int status, String message) {
    switch (status) {
      case NativeLib.NOT_ACQUIRED:
        return new LockTimeoutException(message, status);
      case NativeLib.NOT_OWNER:
        return new LockNotOwnedException(message, status);
      case NativeLib.UNCONFIRMED:
        return new LockUnconfirmedException(message, status);
      case NativeLib.CONNECTION:
        return new LockConnectionException(message, status);
      case NativeLib.WRONG_TYPE:
        return new LockWrongTypeException(message, status);
      case NativeLib.NO_QUORUM:
        return new LockQuorumException(message, status);
      case NativeLib.SERVER:
        return new LockServerException(message, status);
      default:
        return new LockException(message, status);
    }
  }
}
