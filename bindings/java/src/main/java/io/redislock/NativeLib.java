package io.redislock;

import com.sun.jna.Callback;
import com.sun.jna.CallbackThreadInitializer;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import java.nio.charset.StandardCharsets;

/**
 * The C API of {@code include/redislock.h}, bound with JNA's direct mapping
 * (static native methods: tens of nanoseconds a call). Opaque handles are
 * addresses ({@code long}: the library is only loaded where pointers are 64
 * bits); {@code size_t} is {@code long}; a C {@code bool} result is a
 * {@code byte} (only its low byte is defined); out-parameters are arrays of
 * one element. Nothing here checks arguments: the callers do.
 */
final class NativeLib {
  static final int OK = 0;
  static final int NOT_ACQUIRED = 1;
  static final int NOT_OWNER = 2;
  static final int CONNECTION = 3;
  static final int INVALID_ARGUMENT = 4;
  static final int WRONG_TYPE = 5;
  static final int NO_QUORUM = 6;
  static final int SERVER = 7;
  static final int INTERNAL = 8;
  static final int UNCONFIRMED = 9;
  /** Only an asynchronous acquisition's callback receives it. */
  static final int CANCELLED = 10;

  /** {@code REDISLOCK_STATS_BUCKETS}. */
  static final int STATS_BUCKETS = 23;

  /** {@code redislock_interrupt_fn}. */
  interface InterruptFn extends Callback {
    int invoke(Pointer userdata);
  }

  /** {@code redislock_lost_fn}. */
  interface LostFn extends Callback {
    void invoke(Pointer userdata);
  }

  /**
   * {@code redislock_acquired_fn}: {@code lock} is the new handle's address
   * (0 unless OK). The start calls take its function pointer
   * ({@code CallbackReference.getFunctionPointer}, made once), not the
   * object: JNA would otherwise convert it on every call, taking a monitor
   * from inside the native call (a virtual thread parked there pins its
   * carrier).
   */
  interface AcquiredFn extends Callback {
    void invoke(Pointer userdata, int status, long lock);
  }

  /** Where the library was loaded from (for errors and {@link RedisLockClient#nativeVersion()}). */
  static final String PATH;

  /** This binding's version: the library loaded must be the same (a stale one is refused, not used). */
  static final String VERSION = "0.1.0";

  /** The library, kept to register its methods again after {@link #unregisterIfIdle()}. */
  private static final NativeLibrary LIB;

  /** Native objects alive and calls in progress that no such object covers (written under NativeLib.class). */
  private static volatile long inUse;

  /** Whether the methods are registered with JNA; guarded by NativeLib.class. */
  private static boolean registered;

  static {
    Reaper.startJnaCleaner();
    NativeLibrary lib = Loader.load();
    LIB = lib;
    PATH = lib.getFile() == null ? lib.getName() : lib.getFile().getPath();
    try {
      lib.getFunction("redislock_version");
    } catch (UnsatisfiedLinkError e) {
      throw new UnsatisfiedLinkError("redislock: " + PATH + " is not libredislock (it has no redislock_version)");
    }
    Native.register(NativeLib.class, lib);
    Reaper.forgetJnaState(false);
    registered = true;
    String found = redislock_version();
    if (!VERSION.equals(found)) {
      throw new UnsatisfiedLinkError("redislock: " + PATH + " is libredislock " + found + ", but this jar is "
          + VERSION + ": a stale library shadows the right one. Update or remove it, or point"
          + " -Dredislock.library (or REDISLOCK_LIB) at libredislock " + VERSION + ".");
    }
  }

  private NativeLib() {}

  /**
   * A native object of this library (a client, a lock handle) or a call
   * that none covers begins: the methods are registered with JNA from now
   * until the matching {@link #release()}.
   */
  static synchronized void retain() {
    if (inUse++ == 0 && !registered) {
      Native.register(NativeLib.class, LIB);
      Reaper.forgetJnaState(false);
      registered = true;
    }
  }

  static void release() {
    boolean idle;
    synchronized (NativeLib.class) {
      idle = --inUse == 0;
    }
    if (idle) {
      Reaper.wake(); // which unregisters the methods a second later, unless they are in use again
    }
  }

  /** Whether no native object is alive and no call in progress (a hint: see {@link #unregisterIfIdle()}). */
  static boolean idle() {
    return inUse == 0;
  }

  /**
   * With no native object alive and no call in progress, unregister the
   * methods from JNA (the next {@link #retain()} registers them again):
   * JNA holds a global reference to each registered method until then,
   * which would keep this class loader for as long as the JVM runs. Called
   * by the cleaner's thread before it ends, a second or so after the last
   * client or lock handle was freed.
   */
  static synchronized void unregisterIfIdle() {
    if (inUse == 0 && registered) {
      Native.unregister(NativeLib.class);
      Reaper.forgetJnaState(true);
      registered = false;
    }
  }

  static native int redislock_client_open(String url, long[] out);

  static native int redislock_client_open_redlock(Pointer urls, long n, long[] out);

  static native int redislock_client_open_shared(String url, long[] out);

  static native int redislock_client_open_redlock_shared(Pointer urls, long n, long[] out);

  static native void redislock_client_free(long client);

  static native int redislock_acquire(
      long client, byte[] key, long keyLen, long ttlMs, long waitMs, byte[] token, long tokenLen,
      long[] out);

  static native int redislock_acquire_fenced(
      long client, byte[] key, long keyLen, long ttlMs, long waitMs, byte[] token, long tokenLen,
      long[] out);

  static native int redislock_acquire_semaphore(
      long client, byte[] key, long keyLen, int limit, int permits, long ttlMs, long waitMs,
      long[] out);

  static native int redislock_acquire_read(
      long client, byte[] key, long keyLen, long ttlMs, long waitMs, long[] out);

  static native int redislock_acquire_write(
      long client, byte[] key, long keyLen, long ttlMs, long waitMs, long[] out);

  static native void redislock_set_interrupt(InterruptFn check, Pointer userdata);

  static native int redislock_release(long lock);

  static native int redislock_extend(long lock, long ttlMs);

  static native int redislock_lock_auto_renew(long lock);

  static native byte redislock_lock_is_lost(long lock);

  static native int redislock_lock_on_lost(long lock, LostFn callback, Pointer userdata);

  static native void redislock_lock_free(long lock);

  static native void redislock_lock_forget(long lock);

  static native long redislock_lock_token(long lock, byte[] buf, long cap);

  static native long redislock_lock_fence_if_drawn(long lock);

  static native int redislock_lock_draw_fence(long lock, long[] out);

  static native int redislock_lock_owned(long lock, byte[] out);

  static native int redislock_fence_token(
      long client, byte[] key, long keyLen, byte[] token, long tokenLen, long[] out);

  static native int redislock_release_token(
      long client, byte[] key, long keyLen, byte[] token, long tokenLen);

  static native int redislock_force_release(long client, byte[] key, long keyLen, byte[] removed);

  static native int redislock_extend_token(
      long client, byte[] key, long keyLen, byte[] token, long tokenLen, long ttlMs);

  static native int redislock_is_owned_by(
      long client, byte[] key, long keyLen, byte[] token, long tokenLen, byte[] out);

  static native long redislock_redact_url(String url, byte[] buf, long cap);

  static native long redislock_client_addr(long client, byte[] buf, long cap);

  static native int redislock_client_stats(long client, long[] out);

  static native long redislock_stats_bucket_bound_us(long i);

  static native long redislock_last_error(byte[] buf, long cap);

  static native String redislock_status_str(int status);

  static native int redislock_doctor(long client, long[] out);

  static native long redislock_report_count(long report);

  static native Pointer redislock_report_finding(long report, long i);

  static native byte redislock_report_is_safe(long report);

  static native String redislock_report_text(long report);

  static native void redislock_report_free(long report);

  static native String redislock_version();

  static native int redislock_acquire_start(
      long client, byte[] key, long keyLen, long ttlMs, long waitMs, byte[] token, long tokenLen,
      long callback, Pointer userdata, long[] out);

  static native int redislock_acquire_fenced_start(
      long client, byte[] key, long keyLen, long ttlMs, long waitMs, byte[] token, long tokenLen,
      long callback, Pointer userdata, long[] out);

  static native int redislock_acquire_semaphore_start(
      long client, byte[] key, long keyLen, int limit, int permits, long ttlMs, long waitMs,
      long callback, Pointer userdata, long[] out);

  static native int redislock_acquire_read_start(
      long client, byte[] key, long keyLen, long ttlMs, long waitMs, long callback,
      Pointer userdata, long[] out);

  static native int redislock_acquire_write_start(
      long client, byte[] key, long keyLen, long ttlMs, long waitMs, long callback,
      Pointer userdata, long[] out);

  static native byte redislock_pending_cancel(long pending);

  static native void redislock_pending_free(long pending);

  /** The message of this thread's last failure ("" when none). */
  static String lastError() {
    byte[] buf = new byte[256];
    long n = redislock_last_error(buf, buf.length);
    if (n >= buf.length) {
      buf = new byte[(int) Math.min(n + 1, 1 << 20)];
      n = redislock_last_error(buf, buf.length);
    }
    return new String(buf, 0, (int) Math.min(n, buf.length - 1), StandardCharsets.UTF_8);
  }

  /** Throw the exception of {@code status}, with the core's message; nothing for OK. */
  static void check(int status) {
    if (status == OK) {
      return;
    }
    throw error(status);
  }

  /** The exception of {@code status} (not OK), with the core's message. */
  static RuntimeException error(int status) {
    String message = lastError();
    if (message.isEmpty()) {
      message = redislock_status_str(status);
    }
    if (status == INVALID_ARGUMENT) {
      return new IllegalArgumentException(message);
    }
    return LockException.of(status, message);
  }

  /** A size_t text the library writes into a buffer (the two-call pattern). */
  interface Sized {
    long write(byte[] buf, long cap);
  }

  static String text(Sized f) {
    byte[] buf = new byte[128];
    long n = f.write(buf, buf.length);
    if (n > buf.length) {
      buf = new byte[(int) n];
      n = f.write(buf, buf.length);
    }
    return new String(buf, 0, (int) Math.min(n, buf.length), StandardCharsets.UTF_8);
  }

  /** Keep the callback's native thread (the core's renewal thread) attached, as a daemon. */
  static void attachAsDaemon(Callback cb, String name) {
    Native.setCallbackThreadInitializer(cb, new CallbackThreadInitializer(true, false, name));
  }
}
