package io.redislock;

/** The key exists and is not a lock; it was left untouched. */
public class LockWrongTypeException extends LockException {
  private static final long serialVersionUID = 1L;

  public LockWrongTypeException(String message, int status) {
    super(message, status);
  }
}
