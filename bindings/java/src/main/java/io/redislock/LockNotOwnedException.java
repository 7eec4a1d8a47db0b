package io.redislock;

/** Release, extend or fence: the lock expired or another owner took it (the new owner's key is left alone), or this handle was released already. */
public class LockNotOwnedException extends LockException {
  private static final long serialVersionUID = 1L;

  public LockNotOwnedException(String message, int status) {
    super(message, status);
  }
}
