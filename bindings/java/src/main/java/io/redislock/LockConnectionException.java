package io.redislock;

/** The server cannot be reached, an I/O error, or a timeout. */
public class LockConnectionException extends LockException {
  private static final long serialVersionUID = 1L;

  public LockConnectionException(String message, int status) {
    super(message, status);
  }
}
