package io.redislock;

import org.jspecify.annotations.Nullable;

/**
 * Every failure of a lock operation (unchecked). {@link #kind()} says which
 * failure it is, and each kind but {@link Kind#INTERNAL} has its own
 * subclass, so either can be used: {@code catch (LockTimeoutException e)}
 * or {@code switch (e.kind())}. The message is the core's, the same text
 * every language shows for that failure. Thrown as itself for a bug in
 * redislock (a caught panic: please report it). Bad arguments are
 * {@link IllegalArgumentException}s, not lock exceptions.
 */
public class LockException extends RuntimeException {
  private static final long serialVersionUID = 2L;

  /** Which failure a {@link LockException} is: one per failure status of the C API. */
  public enum Kind {
    /** The wait ran out while another owner held the lock: {@link LockTimeoutException}. */
    TIMEOUT(NativeLib.NOT_ACQUIRED),
    /** The lock expired, another owner took it, or it was released: {@link LockNotOwnedException}. */
    NOT_OWNED(NativeLib.NOT_OWNER),
    /** A release whose outcome is unknown (most likely done): {@link LockUnconfirmedException}. */
    UNCONFIRMED(NativeLib.UNCONFIRMED),
    /** The server cannot be reached, an I/O error, or a timeout: {@link LockConnectionException}. */
    CONNECTION(NativeLib.CONNECTION),
    /** The key exists and is not a lock: {@link LockWrongTypeException}. */
    WRONG_TYPE(NativeLib.WRONG_TYPE),
    /** Redlock: no majority of the servers could be reached: {@link LockQuorumException}. */
    QUORUM(NativeLib.NO_QUORUM),
    /** The server answered with an error (authentication, permissions, ...): {@link LockServerException}. */
    SERVER(NativeLib.SERVER),
    /** A bug in redislock (please report it): a plain {@link LockException}. */
    INTERNAL(NativeLib.INTERNAL);

    final int status;

    Kind(int status) {
      this.status = status;
    }

    /** The kind of a C API status ({@link #INTERNAL} for one this binding does not know). */
    static Kind of(int status) {
      for (Kind k : values()) {
        if (k.status == status) {
          return k;
        }
      }
      return INTERNAL;
    }
  }

  private final Kind kind;
  private final int status;

  /**
   * A lock exception of this kind; a kind that has its own subclass must be
   * thrown as that subclass (else {@link IllegalArgumentException}), so that
   * the kind and the class always agree.
   */
  public LockException(String message, Kind kind) {
    this(message, kind, null);
  }

  /** As {@link #LockException(String, Kind)}, caused by {@code cause}. */
  public LockException(String message, Kind kind, @Nullable Throwable cause) {
    super(message, cause);
    if (!typeOf(kind).isInstance(this)) {
      throw new IllegalArgumentException("a LockException of kind " + kind + " is a " + typeOf(kind).getSimpleName());
    }
    this.kind = kind;
    this.status = kind.status;
  }

  /**
   * An exception of the kind of a C API status code.
   *
   * @deprecated the status code is the C API's; use {@link #LockException(String, Kind)}.
   */
  @Deprecated
  public LockException(String message, int status) {
    super(message);
    this.kind = Kind.of(status);
    this.status = status;
  }

  /** For the subclasses, whose kind is fixed (a status code from the deprecated constructors). */
  LockException(String message, Kind kind, int status, @Nullable Throwable cause) {
    super(message, cause);
    this.kind = kind;
    this.status = status;
  }

  /** Which failure this is. */
  public Kind kind() {
    return kind;
  }

  /**
   * The C API's status code of this failure ({@code redislock_status}).
   *
   * @deprecated the raw code of the C API; use {@link #kind()}.
   */
  @Deprecated
  public int status() {
    return status;
  }

  /** The class that exceptions of {@code kind} are. */
  static Class<? extends LockException> typeOf(Kind kind) {
    switch (kind) {
      case TIMEOUT:
        return LockTimeoutException.class;
      case NOT_OWNED:
        return LockNotOwnedException.class;
      case UNCONFIRMED:
        return LockUnconfirmedException.class;
      case CONNECTION:
        return LockConnectionException.class;
      case WRONG_TYPE:
        return LockWrongTypeException.class;
      case QUORUM:
        return LockQuorumException.class;
      case SERVER:
        return LockServerException.class;
      default:
        return LockException.class;
    }
  }

  /** The exception for {@code status}, with the message of the last failure on this thread. */
  static LockException of(int status, String message) {
    Kind kind = Kind.of(status);
    switch (kind) {
      case TIMEOUT:
        return new LockTimeoutException(message);
      case NOT_OWNED:
        return new LockNotOwnedException(message);
      case UNCONFIRMED:
        return new LockUnconfirmedException(message);
      case CONNECTION:
        return new LockConnectionException(message);
      case WRONG_TYPE:
        return new LockWrongTypeException(message);
      case QUORUM:
        return new LockQuorumException(message);
      case SERVER:
        return new LockServerException(message);
      default:
        return new LockException(message, Kind.INTERNAL, status, null);
    }
  }
}
