package io.redislock;

import com.sun.jna.CallbackReference;
import com.sun.jna.Pointer;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.ref.WeakReference;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongFunction;
import org.jspecify.annotations.Nullable;

/**
 * One acquisition on the core's async runtime ({@code redislock_acquire_start}
 * and its siblings): the future of {@link RedisLockClient#acquireAsync}, and
 * what a blocking acquire on a virtual thread parks on instead of pinning its
 * carrier in a native call. The core calls back once, on its runtime's
 * thread, which must never block: a public future is completed on the
 * client's callback executor, and a lock that arrives for a future settled
 * meanwhile (cancelled, completed by its caller, the client closed) is
 * released there. Ending the future ends the native wait: the waiter leaves
 * the server's queue, and a lock handed over in that moment is released.
 */
final class AsyncAcquire {
  /** The acquisitions the core may still call back, by id (the callback's userdata). */
  private static final Map<Long, AsyncAcquire> RUNNING = new ConcurrentHashMap<>();
  private static final AtomicLong IDS = new AtomicLong();

  /**
   * The callback while some acquisition runs: held strongly by each running
   * one (which {@link #RUNNING} holds until it was called back), only weakly
   * here, so that JNA's table of callbacks lets it (and this class loader)
   * go once nothing runs.
   */
  private static WeakReference<Done> doneFn = new WeakReference<>(null);

  /** A new object each time one is needed (a lambda would be one object kept by this class for ever). */
  private static final class Done implements NativeLib.AcquiredFn, Reaper.IdleCallback {
    /** The C function pointer JNA made for this object, valid while the object lives. */
    long address;

    @Override
    public void invoke(Pointer userdata, int status, long lock) {
      try {
        AsyncAcquire a = RUNNING.remove(Pointer.nativeValue(userdata));
        if (a != null) {
          a.finished(status, lock);
        } else if (lock != 0) {
          NativeLib.redislock_lock_free(lock); // not expected: nobody could release it otherwise
        }
      } catch (Throwable ignored) {
        // Never throw into the core's runtime thread.
      }
      if (RUNNING.isEmpty()) {
        // Nothing else will call back for now: the runtime's thread leaves the
        // JVM when this returns (attached again by the next callback), so that
        // its Thread object, and the class loader it names, can go.
        com.sun.jna.Native.detach(true);
      }
    }
  }

  private static synchronized Done doneFn() {
    Done d = doneFn.get();
    if (d == null) {
      d = new Done();
      NativeLib.attachAsDaemon(d, "redislock-async");
      d.address = Pointer.nativeValue(CallbackReference.getFunctionPointer(d));
      doneFn = new WeakReference<>(d);
    }
    return d;
  }

  /** {@code Thread.isVirtual()} where the JDK has it (21 and later); null on 17. */
  private static final @Nullable MethodHandle IS_VIRTUAL = isVirtualHandle();

  private static @Nullable MethodHandle isVirtualHandle() {
    try {
      return MethodHandles.publicLookup()
          .findVirtual(Thread.class, "isVirtual", MethodType.methodType(boolean.class));
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }

  /** Whether this thread is a virtual thread (never on Java 17, which has none). */
  static boolean onVirtualThread() {
    MethodHandle h = IS_VIRTUAL;
    if (h == null) {
      return false;
    }
    try {
      return (boolean) h.invokeExact(Thread.currentThread());
    } catch (Throwable e) {
      return false;
    }
  }

  /** The C call that starts the acquisition, given the callback's address, its userdata and the out-parameter. */
  interface Start {
    int run(long callback, Pointer userdata, long[] out);
  }

  /** The future handed out: ending it in any way ends the native wait. */
  static final class Result extends CompletableFuture<LockHandle> {
    private final AsyncAcquire owner;

    private Result(AsyncAcquire owner) {
      this.owner = owner;
    }

    /** Settle it from the acquisition's side (the caller's methods below end the wait instead). */
    boolean settle(@Nullable LockHandle lock, @Nullable Throwable error) {
      return error == null ? super.complete(lock) : super.completeExceptionally(error);
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      boolean done = super.cancel(mayInterruptIfRunning);
      if (done) {
        owner.cancel();
      }
      return done;
    }

    @Override
    public boolean complete(LockHandle value) {
      boolean done = super.complete(value);
      if (done) {
        owner.cancel();
      }
      return done;
    }

    @Override
    public boolean completeExceptionally(Throwable ex) {
      boolean done = super.completeExceptionally(ex);
      if (done) {
        owner.cancel();
      }
      return done;
    }
  }

  private final long id = IDS.incrementAndGet();
  private final Done callback = doneFn(); // strongly held until called back
  private final String name;
  private final Result future = new Result(this);
  /** Null for a virtual thread's wait: settled on the core's thread, the waiting thread does the rest. */
  private final @Nullable Executor executor;
  private final boolean autoRenew;
  private final LongFunction<LockHandle> wrap;
  private final Set<AsyncAcquire> inFlight;

  // Guarded by this.
  private long pending; // the native pending handle, 0 before the start returned and after the callback
  private boolean finished; // the callback came
  private boolean cancelWanted; // a cancel came before the start returned
  /** What a cancelled acquisition reports (the client was closed); null: cancelled by its caller. */
  private volatile @Nullable RuntimeException cancelledBy;

  /**
   * {@code executor}: where a public future is completed (null: a virtual
   * thread's wait). {@code autoRenew}: start renewal before completing it.
   * {@code wrap}: the handle of a native lock. {@code inFlight}: the
   * client's running acquisitions, which {@link #clientClosed} ends; this one
   * is added now and removes itself when called back.
   */
  AsyncAcquire(byte[] key, @Nullable Executor executor, boolean autoRenew, LongFunction<LockHandle> wrap,
      Set<AsyncAcquire> inFlight) {
    this.name = RedisLockClient.text(key);
    this.executor = executor;
    this.autoRenew = autoRenew;
    this.wrap = wrap;
    this.inFlight = inFlight;
    inFlight.add(this);
  }

  Result future() {
    return future;
  }

  /**
   * What this acquisition keeps of the native methods' registration
   * ({@link NativeLib#retain()}): one for the core's callback, one for the
   * pending object; the last of the two to end gives it back, so the
   * methods stay registered until {@code redislock_pending_free} was called.
   */
  private final AtomicInteger nativeUses = new AtomicInteger(2);

  private void nativeUseEnded() {
    if (nativeUses.decrementAndGet() == 0) {
      NativeLib.release();
    }
  }

  /** Run the C start call; throws its error (nothing started then). */
  void start(Start call) {
    NativeLib.retain();
    RUNNING.put(id, this);
    long[] out = new long[1];
    int st;
    try {
      st = call.run(callback.address, new Pointer(id), out);
    } catch (RuntimeException | Error e) {
      forgotten();
      throw e;
    }
    if (st != NativeLib.OK) {
      forgotten();
      throw NativeLib.error(st);
    }
    boolean cancelNow;
    synchronized (this) {
      if (finished) {
        NativeLib.redislock_pending_free(out[0]); // called back already
        nativeUseEnded();
        return;
      }
      pending = out[0];
      cancelNow = cancelWanted;
    }
    if (cancelNow) {
      cancel();
    }
  }

  /** Nothing started: nobody will call back. */
  void forgotten() {
    RUNNING.remove(id);
    inFlight.remove(this);
    NativeLib.release();
  }

  /** End the native wait (nothing if it ended already): the core reports the outcome it decided. */
  void cancel() {
    synchronized (this) {
      if (finished) {
        return;
      }
      if (pending == 0) {
        cancelWanted = true;
        return;
      }
      NativeLib.redislock_pending_cancel(pending);
    }
  }

  /** The client was closed: the acquisition fails with IllegalStateException unless it had its outcome. */
  void clientClosed() {
    IllegalStateException e = new IllegalStateException("this RedisLockClient was closed while the call waited for \""
        + name + "\"");
    cancelledBy = e;
    if (executor != null) {
      future.settle(null, e);
    }
    cancel();
  }

  /** The core's callback, on its runtime's thread: settle the future; never block. */
  private void finished(int status, long lock) {
    long p;
    synchronized (this) {
      finished = true;
      p = pending;
      pending = 0;
    }
    if (p != 0) {
      NativeLib.redislock_pending_free(p);
      nativeUseEnded();
    }
    inFlight.remove(this);
    try {
      settleFinished(status, lock);
    } finally {
      nativeUseEnded(); // the callback's
    }
  }

  private void settleFinished(int status, long lock) {
    if (status == NativeLib.OK) {
      LockHandle handle = wrap.apply(lock);
      settleLater(handle, null);
    } else if (status == NativeLib.CANCELLED) {
      RuntimeException by = cancelledBy;
      settleLater(null, by != null ? by : new CancellationException("the acquisition of \"" + name
          + "\" was cancelled"));
    } else {
      settleLater(null, NativeLib.error(status)); // the message is this thread's
    }
  }

  private void settleLater(@Nullable LockHandle lock, @Nullable Throwable error) {
    Executor ex = executor;
    if (ex == null) {
      future.settle(lock, error); // a waiting virtual thread: it is only unparked here
      return;
    }
    try {
      ex.execute(() -> settleNow(lock, error));
    } catch (RejectedExecutionException e) {
      settleNow(lock, error);
    }
  }

  private void settleNow(@Nullable LockHandle lock, @Nullable Throwable error) {
    if (lock == null) {
      future.settle(null, error);
      return;
    }
    if (autoRenew) {
      try {
        lock.autoRenew();
      } catch (RuntimeException e) {
        lock.releaseQuietly();
        future.settle(null, e);
        return;
      }
    }
    if (!future.settle(lock, null)) {
      lock.releaseQuietly(); // settled meanwhile: nobody wants it
    }
  }

  /**
   * The outcome for a blocking acquire parked on it: the lock, or the
   * exception the blocking call throws. An interrupt of an interruptible
   * wait ends the native wait and throws {@link InterruptedException} with
   * nothing held (a lock handed over in that moment is released); an
   * uninterruptible one waits on and sets the flag again.
   */
  LockHandle await(boolean interruptible) throws InterruptedException {
    if (!interruptible) {
      return uninterruptibly();
    }
    LockHandle lock;
    boolean interrupted = false;
    try {
      lock = outcome();
    } catch (InterruptedException e) {
      interrupted = true;
      cancel();
      try {
        lock = uninterruptibly();
      } catch (RuntimeException ended) {
        // Cancelled, or failed: nothing held either way.
        Thread.interrupted(); // the flag is cleared with the exception
        throw new InterruptedException("interrupted while waiting for \"" + name + "\"");
      }
    }
    if (Thread.interrupted() || interrupted) {
      // Handed over in the moment the interrupt came: give it to the next waiter.
      lock.releaseQuietly();
      throw new InterruptedException("interrupted while acquiring \"" + name
          + "\" (the lock handed over in that moment was released)");
    }
    return lock;
  }

  /** The outcome, however long the core takes to report it (soon after a cancel). */
  private LockHandle uninterruptibly() {
    boolean interrupted = false;
    try {
      while (true) {
        try {
          return outcome();
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** The lock, or what the blocking call throws: the failure as the core reported it. */
  private LockHandle outcome() throws InterruptedException {
    try {
      return future.get();
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      if (cause instanceof Error) {
        throw (Error) cause;
      }
      throw new LockException(String.valueOf(cause), LockException.Kind.INTERNAL, cause);
    }
  }
}
