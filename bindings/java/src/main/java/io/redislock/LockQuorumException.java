package io.redislock;

/** Redlock: no majority of the servers could be reached (or, with {@code wait_replicas}, too few replicas acknowledged). */
public class LockQuorumException extends LockException {
  private static final long serialVersionUID = 1L;

  public LockQuorumException(String message, int status) {
    super(message, status);
  }
}
