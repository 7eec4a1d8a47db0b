package io.redislock;

/** Release: the connection broke after the release was sent and, sent again, the lock was no longer this owner's: most likely the first attempt released it. The handle is gone either way. */
public class LockUnconfirmedException extends LockNotOwnedException {
  private static final long serialVersionUID = 1L;

  public LockUnconfirmedException(String message, int status) {
    super(message, status);
  }
}
