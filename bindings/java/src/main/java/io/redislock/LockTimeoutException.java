package io.redislock;

/** The wait ran out while another owner held the lock ({@code tryAcquire} returns null and {@code tryLock} false instead). */
public class LockTimeoutException extends LockException {
  private static final long serialVersionUID = 1L;

  public LockTimeoutException(String message, int status) {
    super(message, status);
  }
}
