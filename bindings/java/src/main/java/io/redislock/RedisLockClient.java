package io.redislock;

import com.sun.jna.Pointer;
import com.sun.jna.StringArray;
import java.lang.ref.Cleaner;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * A connection pool and renewal thread for one Redis deployment (one URL:
 * {@code redis://}, {@code rediss://}, {@code unix://}, {@code redis+sentinel://},
 * {@code redis+cluster://}), or for several independent servers (a list of
 * URLs: Redlock). Thread-safe: one per JVM is the rule. {@link #close()}
 * frees it; locks taken through it stay valid and may still be released.
 *
 * <p>Names are Strings (UTF-8) or byte arrays; times are {@link Duration}s.
 * Bad arguments throw {@link IllegalArgumentException} or
 * {@link NullPointerException} before any I/O.
 */
public final class RedisLockClient implements AutoCloseable {
  private static final long CLOSED = Long.MIN_VALUE;

  /** The open native clients by id, for the wait check (the userdata: id << 1 | interruptible). */
  private static final Map<Long, Native> OPEN = new ConcurrentHashMap<>();
  private static final AtomicLong NATIVE_IDS = new AtomicLong();

  /**
   * Installed around each acquire that may wait: ends the wait when the
   * client is closed, or when this thread is interrupted and the call is
   * interruptible. A new object each time one is needed (a lambda would be
   * one object kept by this class for ever): held strongly only by the
   * waits in progress, so that JNA's table of callbacks, which may outlive
   * this class loader, lets it go when no wait needs it.
   */
  private static final class WaitCheck implements NativeLib.InterruptFn, Reaper.IdleCallback {
    @Override
    public int invoke(Pointer userdata) {
      long v = Pointer.nativeValue(userdata);
      Native n = OPEN.get(v >>> 1);
      if (n == null || (n.users.get() & CLOSED) != 0) {
        return 1;
      }
      return (v & 1) != 0 && Thread.currentThread().isInterrupted() ? 1 : 0;
    }
  }

  private static WeakReference<WaitCheck> waitCheck = new WeakReference<>(null);

  private static synchronized WaitCheck waitCheck() {
    WaitCheck w = waitCheck.get();
    if (w == null) {
      w = new WaitCheck();
      waitCheck = new WeakReference<>(w);
    }
    return w;
  }

  /**
   * The native client and who is using it: calls count themselves in and
   * out, and the last one out after {@link #close()} frees it, so a close
   * never frees a client under a call of another thread.
   */
  private static final class Native implements Runnable {
    final long ptr;
    final long id = NATIVE_IDS.incrementAndGet();
    final AtomicLong users = new AtomicLong(); // CLOSED bit | calls in progress
    final AtomicBoolean freed = new AtomicBoolean();

    Native(long ptr) {
      this.ptr = ptr;
      OPEN.put(id, this);
    }

    long enter() {
      while (true) {
        long u = users.get();
        if ((u & CLOSED) != 0) {
          throw new IllegalStateException("this RedisLockClient was closed");
        }
        if (users.compareAndSet(u, u + 1)) {
          return ptr;
        }
      }
    }

    void exit() {
      if (users.decrementAndGet() == CLOSED) {
        free();
      }
    }

    /**
     * close(), or the cleaner of a client nobody closed: no call may start
     * any more, the waits in progress end (their check sees the flag within
     * about 100 ms), and the last call out frees the client.
     */
    @Override
    public void run() {
      while (true) {
        long u = users.get();
        if ((u & CLOSED) != 0) {
          return;
        }
        if (users.compareAndSet(u, u | CLOSED)) {
          if (u == 0) {
            free();
          }
          return;
        }
      }
    }

    boolean closed() {
      return (users.get() & CLOSED) != 0;
    }

    void free() {
      if (freed.compareAndSet(false, true)) {
        OPEN.remove(id);
        NativeLib.redislock_client_free(ptr);
        NativeLib.release(); // open()'s
      }
    }
  }

  enum Kind { LOCK, READ, WRITE, SEMAPHORE }

  private final Native nat;
  private final Cleaner.Cleanable cleanable;
  private final String addr;
  private final ClientOptions options;
  private final Executor executor;
  private final WeakCache<RedisLock> locks = new WeakCache<>();
  private final WeakCache<RedisReadWriteLock> rwLocks = new WeakCache<>();
  /** Acquisitions running on the core's async runtime, which close() ends. */
  private final java.util.Set<AsyncAcquire> inFlight = ConcurrentHashMap.newKeySet();

  private RedisLockClient(long ptr, ClientOptions options) {
    this.nat = new Native(ptr);
    this.options = options;
    this.executor = options.callbackExecutor();
    this.cleanable = Reaper.register(this, nat);
    this.addr = NativeLib.text((buf, cap) -> NativeLib.redislock_client_addr(ptr, buf, cap));
  }

  /** A client for one deployment. Validates the URL; does not connect. */
  public static RedisLockClient open(String url) {
    return open(url, ClientOptions.DEFAULT);
  }

  /** A client for one deployment, with options. */
  public static RedisLockClient open(String url, ClientOptions options) {
    return open(List.of(checkUrl(url)), options);
  }

  /** A Redlock client over independent servers (one URL: a single-server client). */
  public static RedisLockClient open(List<String> urls) {
    return open(urls, ClientOptions.DEFAULT);
  }

  /** A Redlock client over independent servers, with options. */
  public static RedisLockClient open(List<String> urls, ClientOptions options) {
    Objects.requireNonNull(urls, "urls");
    Objects.requireNonNull(options, "options");
    if (urls.isEmpty()) {
      throw new IllegalArgumentException("urls must not be empty");
    }
    String[] given = new String[urls.size()];
    for (int i = 0; i < given.length; i++) {
      given[i] = options.url(checkUrl(urls.get(i)));
    }
    long[] out = new long[1];
    int st;
    NativeLib.retain(); // the client's, given back when it is freed
    boolean opened = false;
    try {
      if (given.length == 1) {
        st = options.isShared()
            ? NativeLib.redislock_client_open_shared(given[0], out)
            : NativeLib.redislock_client_open(given[0], out);
      } else {
        StringArray array = new StringArray(given, "UTF-8");
        st = options.isShared()
            ? NativeLib.redislock_client_open_redlock_shared(array, given.length, out)
            : NativeLib.redislock_client_open_redlock(array, given.length, out);
      }
      NativeLib.check(st);
      RedisLockClient client = new RedisLockClient(out[0], options);
      opened = true;
      return client;
    } finally {
      if (!opened) {
        NativeLib.release();
      }
    }
  }

  private static String checkUrl(String url) {
    Objects.requireNonNull(url, "url");
    if (url.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("url must not contain a NUL character");
    }
    return url;
  }

  /** This binding's version, which is also the native library's. */
  public static final String VERSION = NativeLib.VERSION;

  /** The native library's version ("0.1.0"). */
  public static String nativeVersion() {
    NativeLib.retain();
    try {
      return NativeLib.redislock_version();
    } finally {
      NativeLib.release();
    }
  }

  /** Where the native library was loaded from. */
  public static String nativeLibraryPath() {
    return NativeLib.PATH;
  }

  /** {@code url} with its passwords replaced by {@code ***}, as every language shows a URL. */
  public static String redact(String url) {
    checkUrl(url);
    NativeLib.retain();
    try {
      return NativeLib.text((buf, cap) -> NativeLib.redislock_redact_url(url, buf, cap));
    } finally {
      NativeLib.release();
    }
  }

  /** Where the client connects (hosts and ports; never credentials). */
  public String addr() {
    return addr;
  }

  public ClientOptions options() {
    return options;
  }

  /**
   * Free the client (idempotent). Locks taken through it stay valid. Calls
   * waiting for a lock through it end with {@link IllegalStateException}
   * (within about 100 ms, leaving the server's queue), and the native client
   * is freed once they have returned.
   */
  @Override
  public void close() {
    cleanable.clean();
    // Acquisitions on the core's runtime (acquireAsync, virtual threads): each leaves the queue and fails.
    for (AsyncAcquire a : inFlight) {
      a.clientClosed();
    }
    // Threads queued in the JVM for a RedisLock of this client: each wakes, finds it closed and fails.
    locks.forEach(RedisLock::clientClosed);
    rwLocks.forEach(rw -> rw.writeLock().clientClosed());
  }

  @Override
  public String toString() {
    return "RedisLockClient{" + addr + ((nat.users.get() & CLOSED) != 0 ? ", closed" : "") + "}";
  }

  // ---- handles ----------------------------------------------------------

  /**
   * Take the lock {@code name}, waiting as long as {@code opts} says (by default for ever).
   *
   * @throws InterruptedException when this thread is interrupted before or while it waits (the
   *     waiter leaves the queue; a lock handed over in that moment is released)
   * @throws LockTimeoutException when a finite wait ran out
   */
  public LockHandle acquire(String name, LockOptions opts) throws InterruptedException {
    return take(Kind.LOCK, Units.name(name), opts, -1, 0, 0, true, true);
  }

  /** {@link #acquire(String, LockOptions)} with the default options: 30 s TTL, waits for ever. */
  public LockHandle acquire(String name) throws InterruptedException {
    return acquire(name, LockOptions.DEFAULT);
  }

  public LockHandle acquire(byte[] name, LockOptions opts) throws InterruptedException {
    return take(Kind.LOCK, Units.name(name), opts, -1, 0, 0, true, true);
  }

  /**
   * Take the lock {@code name} without holding a thread while it waits (as
   * long as {@code opts} says, by default for ever). The future completes
   * with the handle, or exceptionally with what
   * {@link #acquire(String, LockOptions)} throws ({@link LockTimeoutException}
   * when a finite wait ran out, {@link LockConnectionException}...). The wait
   * runs on the native library's async runtime, and the future is completed
   * on the client's callback executor ({@link ClientOptions#callbackExecutor}),
   * where stages added without an executor of their own run. Ending the
   * future before it completed ({@code cancel(true)}, {@code complete},
   * {@code orTimeout}) ends the wait and leaves nothing queued on the server;
   * a lock handed over in that moment is released. Closing the client fails
   * the futures still waiting with {@link IllegalStateException}.
   *
   * @throws IllegalArgumentException for a bad name or options, before any I/O
   * @throws IllegalStateException when the client is closed
   */
  public CompletableFuture<LockHandle> acquireAsync(String name, LockOptions opts) {
    return startAsync(Units.name(name), opts);
  }

  /** {@link #acquireAsync(String, LockOptions)} with the default options: 30 s TTL, waits for ever. */
  public CompletableFuture<LockHandle> acquireAsync(String name) {
    return acquireAsync(name, LockOptions.DEFAULT);
  }

  public CompletableFuture<LockHandle> acquireAsync(byte[] name, LockOptions opts) {
    return startAsync(Units.name(name), opts);
  }

  /** {@link #acquire(String, LockOptions)}, not interruptible: an interrupt leaves the flag set. */
  public LockHandle acquireUninterruptibly(String name, LockOptions opts) {
    return uninterruptibly(() -> take(Kind.LOCK, Units.name(name), opts, -1, 0, 0, false, true));
  }

  /** One attempt: the handle, or null while another owner holds it. */
  public @Nullable LockHandle tryAcquire(String name) {
    return uninterruptibly(() -> take(Kind.LOCK, Units.name(name), LockOptions.DEFAULT, 0, 0, 0, false, false));
  }

  /**
   * The handle, or null when another owner held it through the wait of
   * {@code opts} (by default one attempt).
   *
   * @throws InterruptedException only when it waits and this thread is interrupted
   */
  public @Nullable LockHandle tryAcquire(String name, LockOptions opts) throws InterruptedException {
    return take(Kind.LOCK, Units.name(name), opts, 0, 0, 0, true, false);
  }

  public @Nullable LockHandle tryAcquire(byte[] name, LockOptions opts) throws InterruptedException {
    return take(Kind.LOCK, Units.name(name), opts, 0, 0, 0, true, false);
  }

  /** Take the read-write lock {@code name} shared (any number of readers, while no writer holds or waits). */
  public LockHandle acquireRead(String name, LockOptions opts) throws InterruptedException {
    return take(Kind.READ, Units.name(name), opts, -1, 0, 0, true, true);
  }

  public LockHandle acquireRead(String name) throws InterruptedException {
    return acquireRead(name, LockOptions.DEFAULT);
  }

  /** Take the read-write lock {@code name} exclusively. */
  public LockHandle acquireWrite(String name, LockOptions opts) throws InterruptedException {
    return take(Kind.WRITE, Units.name(name), opts, -1, 0, 0, true, true);
  }

  public LockHandle acquireWrite(String name) throws InterruptedException {
    return acquireWrite(name, LockOptions.DEFAULT);
  }

  public @Nullable LockHandle tryAcquireRead(String name, LockOptions opts) throws InterruptedException {
    return take(Kind.READ, Units.name(name), opts, 0, 0, 0, true, false);
  }

  public @Nullable LockHandle tryAcquireRead(String name) {
    return uninterruptibly(() -> take(Kind.READ, Units.name(name), LockOptions.DEFAULT, 0, 0, 0, false, false));
  }

  public @Nullable LockHandle tryAcquireWrite(String name, LockOptions opts) throws InterruptedException {
    return take(Kind.WRITE, Units.name(name), opts, 0, 0, 0, true, false);
  }

  public @Nullable LockHandle tryAcquireWrite(String name) {
    return uninterruptibly(() -> take(Kind.WRITE, Units.name(name), LockOptions.DEFAULT, 0, 0, 0, false, false));
  }

  /** The counting semaphore {@code name} admitting {@code limit} permits (1 to 1,000,000). */
  public RedisSemaphore semaphore(String name, int limit) {
    return new RedisSemaphore(this, Units.name(name), Units.count(limit, "limit", 1_000_000));
  }

  /**
   * The {@link java.util.concurrent.locks.Lock} of {@code name}: owned by a
   * thread, reentrant, renewed by a watchdog while held. The same object for
   * the same name as long as it is in use.
   */
  public RedisLock getLock(String name) {
    byte[] key = Units.name(name);
    return locks.get(name, n -> new RedisLock(this, key, Kind.LOCK, null));
  }

  /**
   * The fenced {@link java.util.concurrent.locks.Lock} of {@code name}
   * (Redisson's {@code getFencedLock}): {@link #getLock}'s lock, whose
   * acquisitions draw their fencing number in the same round trip, so that
   * {@link RedisLock#fence()} answers from memory. It shares its holds and
   * local queue with {@code getLock(name)}.
   */
  public RedisLock getFencedLock(String name) {
    return getLock(name).fencedView();
  }

  /** The {@link java.util.concurrent.locks.ReadWriteLock} of {@code name} (the same object per name while in use). */
  public RedisReadWriteLock getReadWriteLock(String name) {
    byte[] key = Units.name(name);
    return rwLocks.get(name, n -> new RedisReadWriteLock(this, key));
  }

  /**
   * Run {@code body} with the lock {@code name} held (renewed in the
   * background meanwhile) and release it afterwards, also when the body
   * throws; returns the body's value. When the body returned but the lock
   * was lost meanwhile (expired, or taken by another owner), its work ran
   * unprotected: this throws {@link LockNotOwnedException} instead.
   * {@code opts.interruptOnLoss(true)} interrupts the body's thread at the loss.
   */
  public <T, E extends Exception> T executeLocked(String name, LockOptions opts, LockedFunction<T, E> body)
      throws E, InterruptedException {
    Objects.requireNonNull(body, "body");
    LockHandle lock = acquire(name, opts.autoRenew(true));
    // The listener interrupts the body's thread only while the body runs:
    // the check and the interrupt, and the body's end, hold this monitor.
    AtomicBoolean running = new AtomicBoolean(true);
    if (opts.isInterruptOnLoss()) {
      Thread me = Thread.currentThread();
      try {
        lock.onLost(() -> {
          synchronized (running) {
            if (running.get()) {
              me.interrupt();
            }
          }
        });
      } catch (RuntimeException e) {
        lock.releaseQuietly();
        throw e;
      }
    }
    T result;
    try {
      result = body.apply(lock);
    } catch (Throwable e) {
      ended(running);
      lock.releaseQuietly();
      throw e;
    }
    ended(running);
    if (lock.isReleased()) {
      return result; // the body released it itself
    }
    boolean lost = lock.isLost();
    String cause = "";
    try {
      lock.release();
    } catch (LockNotOwnedException e) {
      lost = true;
      cause = ": " + e.getMessage();
    } catch (LockException e) {
      if (!lost) {
        throw e;
      }
      cause = ": " + e.getMessage();
    }
    if (lost) {
      throw new LockNotOwnedException("the body returned, but the lock \"" + name
          + "\" was lost while it ran (expired, or another owner took it), so its work ran unprotected" + cause);
    }
    return result;
  }

  private static void ended(AtomicBoolean running) {
    synchronized (running) {
      running.set(false);
    }
  }

  // ---- by token -----------------------------------------------------------

  /** Release the lock {@code name} if {@code token} holds it: true, or false when it does not (nothing changed). */
  public boolean releaseToken(String name, byte[] token) {
    byte[] key = Units.name(name);
    byte[] tok = Units.token(token);
    return byToken(c -> NativeLib.redislock_release_token(c, key, key.length, tok, tok.length));
  }

  public boolean releaseToken(String name, String token) {
    return releaseToken(name, Units.token(token));
  }

  /** Set the remaining time of the lock {@code name} to {@code ttl} if {@code token} holds it (never re-created). */
  public boolean extendToken(String name, byte[] token, Duration ttl) {
    byte[] key = Units.name(name);
    byte[] tok = Units.token(token);
    long ms = Units.ttlMs(ttl);
    return byToken(c -> NativeLib.redislock_extend_token(c, key, key.length, tok, tok.length, ms));
  }

  public boolean extendToken(String name, String token, Duration ttl) {
    return extendToken(name, Units.token(token), ttl);
  }

  /** Whether {@code token} holds the lock {@code name} right now (one round trip). */
  public boolean isOwnedBy(String name, byte[] token) {
    byte[] key = Units.name(name);
    byte[] tok = Units.token(token);
    byte[] out = new byte[1];
    call(c -> NativeLib.redislock_is_owned_by(c, key, key.length, tok, tok.length, out));
    return out[0] != 0;
  }

  public boolean isOwnedBy(String name, String token) {
    return isOwnedBy(name, Units.token(token));
  }

  /** The fencing number of the lock {@code name} held with {@code token}, or empty when it does not hold it. */
  public OptionalLong fenceToken(String name, byte[] token) {
    byte[] key = Units.name(name);
    byte[] tok = Units.token(token);
    long[] out = new long[1];
    boolean held = byToken(c -> NativeLib.redislock_fence_token(c, key, key.length, tok, tok.length, out));
    return held ? OptionalLong.of(out[0]) : OptionalLong.empty();
  }

  public OptionalLong fenceToken(String name, String token) {
    return fenceToken(name, Units.token(token));
  }

  /**
   * Take the lock {@code name} from whoever holds it and hand it to the
   * oldest waiter, as a release would: the operator's unlock, for a lock
   * whose owner is known to be gone (it breaks mutual exclusion if that
   * owner is still working). True when a holder was removed. Fences stay
   * monotonic; only the plain lock, never a semaphore or read-write lock.
   */
  public boolean forceRelease(String name) {
    byte[] key = Units.name(name);
    byte[] out = new byte[1];
    call(c -> NativeLib.redislock_force_release(c, key, key.length, out));
    return out[0] != 0;
  }

  // ---- what it did, what it sees ----------------------------------------

  /** What this client did so far: counters, gauges and two histograms. No I/O. */
  public ClientStats stats() {
    long[] out = new long[ClientStats.LONGS];
    out[0] = ClientStats.LONGS * 8L; // size (low 32 bits), reserved 0
    call(c -> NativeLib.redislock_client_stats(c, out));
    return ClientStats.of(out);
  }

  /**
   * Check every server this client's locks may reach for what makes a lock
   * unsafe or slow, and run one lock cycle: the checks of {@code redislock doctor}.
   *
   * @throws LockConnectionException when the server (or every sentinel or cluster node) cannot be reached
   */
  public DoctorReport doctor() {
    long[] out = new long[1];
    call(c -> NativeLib.redislock_doctor(c, out));
    try {
      return DoctorReport.of(out[0]);
    } finally {
      NativeLib.redislock_report_free(out[0]);
    }
  }

  // ---- internals ----------------------------------------------------------

  interface Call {
    int run(long client);
  }

  /** Run a call on the native client; throws its error. */
  private void call(Call f) {
    long c = nat.enter();
    int st;
    RuntimeException err = null;
    try {
      st = f.run(c);
      if (st != NativeLib.OK) {
        err = NativeLib.error(st);
      }
    } finally {
      nat.exit();
    }
    if (err != null) {
      throw err;
    }
  }

  /** A by-token call: false for NOT_OWNER, its error for the others. */
  private boolean byToken(Call f) {
    long c = nat.enter();
    RuntimeException err = null;
    int st;
    try {
      st = f.run(c);
      if (st != NativeLib.OK && st != NativeLib.NOT_OWNER) {
        err = NativeLib.error(st);
      }
    } finally {
      nat.exit();
    }
    if (err != null) {
      throw err;
    }
    return st == NativeLib.OK;
  }

  interface Taking {
    @Nullable LockHandle run() throws InterruptedException;
  }

  private static @Nullable LockHandle uninterruptibly(Taking f) {
    try {
      return f.run();
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible acquire was interrupted", e);
    }
  }

  /**
   * Every acquisition. {@code waitDefault}: the wait when {@code opts} names
   * none (-1 forever, 0 once). {@code interruptible}: an interrupt ends a wait
   * with InterruptedException. {@code timeoutThrows}: a wait that ran out
   * throws LockTimeoutException (acquire) or gives null (tryAcquire).
   */
  @Nullable LockHandle take(Kind kind, byte[] key, LockOptions opts, long waitDefault, int limit, int permits,
      boolean interruptible, boolean timeoutThrows) throws InterruptedException {
    Objects.requireNonNull(opts, "opts");
    long ttl = LockOptionsImpl.ttlMs(opts);
    long wait = LockOptionsImpl.waitMs(opts, waitDefault);
    boolean watch = interruptible && wait != 0;
    if ((watch || (interruptible && timeoutThrows)) && Thread.interrupted()) {
      throw new InterruptedException("interrupted before acquiring \"" + text(key) + "\"");
    }
    byte[] tok = LockOptionsImpl.tokenBytes(opts);
    if (tok != null && kind != Kind.LOCK) {
      throw new IllegalArgumentException("a caller's token is for the plain lock only");
    }
    if (wait != 0 && AsyncAcquire.onVirtualThread()) {
      // A virtual thread parks on the core's async wait instead of pinning its carrier in a native call.
      LockHandle lock;
      try {
        lock = startAsync(kind, key, ttl, wait, tok, opts.isFenced(), limit, permits, null, false)
            .await(interruptible);
      } catch (LockTimeoutException e) {
        if (timeoutThrows) {
          throw e;
        }
        return null;
      }
      return renewing(lock, opts);
    }
    long[] out = new long[1];
    int st;
    RuntimeException err = null;
    long c = nat.enter();
    // Every wait ends when the client is closed; an interruptible one also at an interrupt.
    WaitCheck check = wait != 0 ? waitCheck() : null;
    try {
      if (check != null) {
        NativeLib.redislock_set_interrupt(check, new Pointer(nat.id << 1 | (watch ? 1 : 0)));
      }
      try {
        switch (kind) {
          case LOCK:
            st = opts.isFenced()
                ? NativeLib.redislock_acquire_fenced(c, key, key.length, ttl, wait, tok, tok == null ? 0 : tok.length, out)
                : NativeLib.redislock_acquire(c, key, key.length, ttl, wait, tok, tok == null ? 0 : tok.length, out);
            break;
          case READ:
            st = NativeLib.redislock_acquire_read(c, key, key.length, ttl, wait, out);
            break;
          case WRITE:
            st = NativeLib.redislock_acquire_write(c, key, key.length, ttl, wait, out);
            break;
          default:
            st = NativeLib.redislock_acquire_semaphore(c, key, key.length, limit, permits, ttl, wait, out);
            break;
        }
        if (st != NativeLib.OK) {
          err = NativeLib.error(st);
        }
      } finally {
        if (check != null) {
          NativeLib.redislock_set_interrupt(null, null);
        }
      }
    } finally {
      java.lang.ref.Reference.reachabilityFence(check);
      nat.exit();
    }
    if (st == NativeLib.OK) {
      LockHandle lock = new LockHandle(out[0], key, executor, addr);
      if (watch && Thread.interrupted()) {
        // Handed over in the moment the interrupt came: give it to the next waiter.
        lock.releaseQuietly();
        throw new InterruptedException("interrupted while acquiring \"" + text(key)
            + "\" (the lock handed over in that moment was released)");
      }
      return renewing(lock, opts);
    }
    if (st == NativeLib.NOT_ACQUIRED) {
      if (watch && Thread.interrupted()) {
        throw new InterruptedException("interrupted while waiting for \"" + text(key) + "\"");
      }
      if (check != null && nat.closed()) {
        throw new IllegalStateException("this RedisLockClient was closed while the call waited for \""
            + text(key) + "\"");
      }
      if (!timeoutThrows) {
        return null;
      }
    }
    throw err;
  }

  /** acquireAsync: the future of an acquisition on the core's runtime. */
  private CompletableFuture<LockHandle> startAsync(byte[] key, LockOptions opts) {
    Objects.requireNonNull(opts, "opts");
    long ttl = LockOptionsImpl.ttlMs(opts);
    long wait = LockOptionsImpl.waitMs(opts, -1);
    byte[] tok = LockOptionsImpl.tokenBytes(opts);
    return startAsync(Kind.LOCK, key, ttl, wait, tok, opts.isFenced(), 0, 0, executor, opts.isAutoRenew()).future();
  }

  /**
   * Start an acquisition on the core's async runtime. {@code completeOn}:
   * the executor that completes its future, or null for a blocking acquire
   * parked on it (completed on the core's thread: only the parked thread
   * waits on it). {@code autoRenew}: start renewal before completing it.
   */
  private AsyncAcquire startAsync(Kind kind, byte[] key, long ttl, long wait, byte @Nullable [] tok,
      boolean fenced, int limit, int permits, @Nullable Executor completeOn, boolean autoRenew) {
    Executor ex = executor;
    String address = addr;
    AsyncAcquire a = new AsyncAcquire(key, completeOn, autoRenew, p -> new LockHandle(p, key, ex, address), inFlight);
    long c;
    try {
      c = nat.enter();
    } catch (RuntimeException e) {
      a.forgotten();
      throw e;
    }
    try {
      long tokLen = tok == null ? 0 : tok.length;
      a.start((cb, ud, out) -> {
        switch (kind) {
          case LOCK:
            return fenced
                ? NativeLib.redislock_acquire_fenced_start(c, key, key.length, ttl, wait, tok, tokLen, cb, ud, out)
                : NativeLib.redislock_acquire_start(c, key, key.length, ttl, wait, tok, tokLen, cb, ud, out);
          case READ:
            return NativeLib.redislock_acquire_read_start(c, key, key.length, ttl, wait, cb, ud, out);
          case WRITE:
            return NativeLib.redislock_acquire_write_start(c, key, key.length, ttl, wait, cb, ud, out);
          default:
            return NativeLib.redislock_acquire_semaphore_start(c, key, key.length, limit, permits, ttl, wait, cb,
                ud, out);
        }
      });
    } finally {
      nat.exit();
    }
    return a;
  }

  Executor executor() {
    return executor;
  }

  /** {@code lock}, renewed from now on when {@code opts} asks for it; released if renewal cannot start. */
  private static LockHandle renewing(LockHandle lock, LockOptions opts) {
    if (opts.isAutoRenew()) {
      try {
        lock.autoRenew();
      } catch (RuntimeException e) {
        lock.releaseQuietly();
        throw e;
      }
    }
    return lock;
  }

  static String text(byte[] key) {
    return new String(key, StandardCharsets.UTF_8);
  }

  /** Values by name, weakly held (the same object while anybody uses it), purged as they go. */
  static final class WeakCache<V> {
    private final Map<String, Ref<V>> map = new ConcurrentHashMap<>();
    private final ReferenceQueue<V> queue = new ReferenceQueue<>();

    private static final class Ref<V> extends WeakReference<V> {
      final String key;

      Ref(String key, V v, ReferenceQueue<V> q) {
        super(v, q);
        this.key = key;
      }
    }

    V get(String key, Function<String, V> make) {
      purge();
      while (true) {
        Ref<V> r = map.get(key);
        V v = r == null ? null : r.get();
        if (v != null) {
          return v;
        }
        V made = make.apply(key);
        Ref<V> mine = new Ref<>(key, made, queue);
        if (r == null ? map.putIfAbsent(key, mine) == null : map.replace(key, r, mine)) {
          return made;
        }
      }
    }

    /** Run {@code f} on every value still alive. */
    void forEach(java.util.function.Consumer<V> f) {
      for (Ref<V> r : map.values()) {
        V v = r.get();
        if (v != null) {
          f.accept(v);
        }
      }
    }

    @SuppressWarnings("unchecked")
    private void purge() {
      Ref<V> r;
      while ((r = (Ref<V>) queue.poll()) != null) {
        map.remove(r.key, r);
      }
    }
  }


  /** Locks held by some thread, kept strongly so that getLock gives the same object until unlocked. */
  private final java.util.Set<Object> pinned = ConcurrentHashMap.newKeySet();

  void pin(Object lock) {
    pinned.add(lock);
  }

  void unpin(Object lock) {
    pinned.remove(lock);
  }
}
