package io.redislock;

/** The server answered with an error (authentication, permissions, ...). */
public class LockServerException extends LockException {
  private static final long serialVersionUID = 1L;

  public LockServerException(String message, int status) {
    super(message, status);
  }
}
