package io.redislock;

import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A {@link Lock} over the lock {@code name} (or one side of a read-write
 * lock), shaped like Redisson's {@code RLock}: owned by the thread that took
 * it, reentrant by a hold count over one acquisition, which only that thread
 * may {@link #unlock()}. {@code lock()}, {@code lockInterruptibly()} and
 * {@code tryLock(wait, unit)} take it with the client's watchdog TTL (30 s by
 * default) renewed every third of it while held; the forms with a
 * {@code lease} take it for that long, without renewal.
 *
 * <p>The threads of one JVM queue for the exclusive kinds on a local fair
 * semaphore before the server's queue, which also gives the memory
 * semantics {@link Lock} promises. For code whose owner is not a thread
 * (async code, a task that moves between threads) take a
 * {@link LockHandle} with {@link RedisLockClient#acquire} instead.
 *
 * <p>A lock whose owner thread ended without unlocking it is released
 * within about a second by a sweeper thread (logged as a warning on the
 * {@code io.redislock} {@link System.Logger}), rather than renewed for ever.
 * That thread runs only while some {@code RedisLock} is held.
 *
 * <p>The lock of {@link RedisLockClient#getFencedLock} draws its fencing
 * number in each acquisition (no round trip more), as Redisson's
 * {@code lockAndGetToken}; {@link #fence()} then answers from memory.
 *
 * <p>{@link RedisLockClient#close()} ends the waits of its locks: they
 * throw {@link IllegalStateException}.
 *
 * <p>{@link #newCondition()} is not supported.
 */
public class RedisLock implements Lock {
  private static final class Hold {
    final LockHandle handle;
    int count = 1;

    Hold(LockHandle handle) {
      this.handle = handle;
    }
  }

  private final RedisLockClient client;
  private final byte[] key;
  private final RedisLockClient.Kind kind;
  private final Semaphore local; // one permit; null for the read side: readers do not exclude each other
  private final Map<Thread, Hold> holds;
  private final Object pinAs;
  private final boolean fenced;
  private final RedisLock unfenced; // the fenced view's lock, whose holds it shares; else null
  private volatile RedisLock fencedView;
  RedisLock sibling; // the other side of a read-write lock

  RedisLock(RedisLockClient client, byte[] key, RedisLockClient.Kind kind, Object pinAs) {
    this.client = client;
    this.key = key;
    this.kind = kind;
    this.local = kind == RedisLockClient.Kind.READ ? null : new Semaphore(1, true);
    this.holds = new ConcurrentHashMap<>();
    this.pinAs = pinAs == null ? this : pinAs;
    this.fenced = false;
    this.unfenced = null;
  }

  /** The fenced view of {@code lock}: the same holds and local queue, fenced acquisitions. */
  private RedisLock(RedisLock lock) {
    this.client = lock.client;
    this.key = lock.key;
    this.kind = lock.kind;
    this.local = lock.local;
    this.holds = lock.holds;
    this.pinAs = lock.pinAs; // pins the unfenced lock, which keeps this view
    this.fenced = true;
    this.unfenced = lock;
  }

  /** This plain lock's fenced view (made once): {@link RedisLockClient#getFencedLock}. */
  RedisLock fencedView() {
    if (fenced) {
      return this;
    }
    RedisLock v = fencedView;
    if (v == null) {
      synchronized (this) {
        v = fencedView;
        if (v == null) {
          v = new RedisLock(this);
          fencedView = v;
        }
      }
    }
    return v;
  }

  /**
   * Whether its acquisitions draw their fencing number (a lock of
   * {@link RedisLockClient#getFencedLock}). Both views of a name share
   * their holds: a thread that took it through the plain view and enters
   * again through the fenced one draws its fence at {@link #fence()}.
   */
  public boolean isFenced() {
    return fenced;
  }

  /** The client was closed: wake the threads waiting on the local queue, which then fail. */
  void clientClosed() {
    if (local != null) {
      local.release(); // passed on by each waiter, which finds the client closed
    }
  }

  /** The lock's name. */
  public String name() {
    return RedisLockClient.text(key);
  }

  /** Take it, waiting for ever; not interruptible (an interrupt leaves the flag set). Watchdog-renewed. */
  @Override
  public void lock() {
    try {
      take(-1, -1, false);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  /** Take it for {@code leaseTime} (no renewal; -1: the watchdog), waiting for ever; not interruptible. */
  public void lock(long leaseTime, TimeUnit unit) {
    try {
      take(-1, leaseMs(leaseTime, unit), false);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    take(-1, -1, true);
  }

  public void lockInterruptibly(long leaseTime, TimeUnit unit) throws InterruptedException {
    take(-1, leaseMs(leaseTime, unit), true);
  }

  /** One attempt (not interruptible). */
  @Override
  public boolean tryLock() {
    try {
      return take(0, -1, false);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  /** Wait at most {@code time} ({@code <= 0}: one attempt). Watchdog-renewed. */
  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    return take(waitMs(time, unit), -1, true);
  }

  /** Wait at most {@code waitTime}; hold for {@code leaseTime} without renewal (-1: the watchdog). */
  public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
    return take(waitMs(waitTime, unit), leaseMs(leaseTime, unit), true);
  }

  /**
   * Give up one hold of this thread; the last one releases the lock.
   *
   * @throws IllegalMonitorStateException when this thread does not hold it
   * @throws LockNotOwnedException when the lock was lost meanwhile (this thread no longer holds it
   *     afterwards either)
   */
  @Override
  public void unlock() {
    Thread me = Thread.currentThread();
    Hold h = holds.get(me);
    if (h == null) {
      throw new IllegalMonitorStateException("attempt to unlock \"" + name() + "\", not locked by the current thread ("
          + me.getName() + ")" + (holds.isEmpty() ? "" : ": another thread holds it"));
    }
    if (--h.count > 0) {
      return;
    }
    holds.remove(me);
    try {
      h.handle.release();
    } finally {
      freed();
    }
  }

  /** After a hold was removed: the local permit back, the pins off when nobody holds it. */
  private void freed() {
    if (local != null) {
      local.release();
    }
    unpinIfFree();
  }

  /** Not supported: a distributed await/signal needs support from the core. */
  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("RedisLock has no conditions");
  }

  public boolean isHeldByCurrentThread() {
    return holds.containsKey(Thread.currentThread());
  }

  /** This thread's holds (0 when it does not hold it). */
  public int getHoldCount() {
    Hold h = holds.get(Thread.currentThread());
    return h == null ? 0 : h.count;
  }

  /**
   * This thread's acquisition's fencing number: drawn in the acquisition by
   * a {@linkplain #isFenced() fenced} lock, else on the first call (one
   * round trip).
   */
  public long fence() {
    return mine().handle.fence();
  }

  /** Whether this thread's acquisition was found lost (expired, or another owner took it). */
  public boolean isLost() {
    return mine().handle.isLost();
  }

  /** Run {@code listener} on the client's executor when this thread's acquisition is found lost. */
  public void onLost(Runnable listener) {
    mine().handle.onLost(listener);
  }

  @Override
  public String toString() {
    return "RedisLock{" + name() + (kind == RedisLockClient.Kind.LOCK ? "" : ", " + kind.name().toLowerCase())
        + (fenced ? ", fenced" : "") + ", held by " + holds.size() + " thread(s)}";
  }

  private Hold mine() {
    Hold h = holds.get(Thread.currentThread());
    if (h == null) {
      throw new IllegalMonitorStateException("\"" + name() + "\" is not held by the current thread");
    }
    return h;
  }

  private static long waitMs(long time, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    if (time <= 0) {
      return 0;
    }
    long ns = unit.toNanos(time);
    return ns / 1_000_000 + (ns % 1_000_000 == 0 ? 0 : 1);
  }

  private static long leaseMs(long lease, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    if (lease == -1) {
      return -1;
    }
    if (lease <= 0) {
      throw new IllegalArgumentException("leaseTime must be positive, or -1 for the watchdog, got " + lease);
    }
    return waitMs(lease, unit);
  }

  /** waitMs: -1 forever, 0 once, else at most that; leaseMs: -1 the watchdog. */
  private boolean take(long waitMs, long leaseMs, boolean interruptible) throws InterruptedException {
    Thread me = Thread.currentThread();
    Hold held = holds.get(me);
    if (held != null) {
      held.count++;
      return true;
    }
    if (sibling != null && sibling.holds.containsKey(me)) {
      throw new IllegalMonitorStateException("this thread holds the " + sibling.kind.name().toLowerCase()
          + " side of \"" + name() + "\": taking the " + kind.name().toLowerCase()
          + " side too would wait for itself (release it first)");
    }
    if (interruptible && Thread.interrupted()) {
      throw new InterruptedException("interrupted before locking \"" + name() + "\"");
    }
    long deadline = System.nanoTime() + waitMs * 1_000_000;
    if (local != null) {
      if (waitMs < 0) {
        if (interruptible) {
          local.acquire();
        } else {
          local.acquireUninterruptibly();
        }
      } else if (waitMs == 0) {
        if (!local.tryAcquire()) {
          return false;
        }
      } else if (!local.tryAcquire(waitMs, TimeUnit.MILLISECONDS)) {
        return false;
      }
    }
    boolean ok = false;
    try {
      long remaining = waitMs;
      if (waitMs > 0) {
        long ns = deadline - System.nanoTime();
        remaining = ns <= 0 ? 0 : ns / 1_000_000 + 1;
      }
      boolean watchdog = leaseMs < 0;
      LockOptions opts = LockOptions.ttl(watchdog ? client.options().watchdogTtl() : java.time.Duration.ofMillis(leaseMs))
          .autoRenew(watchdog).fenced(fenced);
      opts = remaining < 0 ? opts.waitForever() : opts.waitFor(java.time.Duration.ofMillis(remaining));
      LockHandle handle = client.take(kind, key, opts, 0, 0, 0, interruptible, false);
      if (handle == null) {
        return false;
      }
      client.pin(pinAs);
      holds.put(me, new Hold(handle));
      Sweeper.watch(this);
      ok = true;
      return true;
    } finally {
      if (!ok && local != null) {
        local.release();
      }
    }
  }

  /** Release the holds of threads that ended without unlocking; true while some are held. */
  boolean sweep() {
    for (Map.Entry<Thread, Hold> e : holds.entrySet()) {
      Thread t = e.getKey();
      if (!t.isAlive() && holds.remove(t, e.getValue())) {
        Sweeper.LOG.log(System.Logger.Level.WARNING, "redislock: released \"{0}\": its owner thread {1} ended"
            + " without unlocking it", name(), t.getName());
        try {
          e.getValue().handle.releaseQuietly();
        } finally {
          freed();
        }
      }
    }
    return !holds.isEmpty();
  }

  /**
   * The thread that releases the locks of ended threads: it looks every
   * second while some RedisLock is held, and ends when none is (started
   * again by the next acquisition).
   */
  static final class Sweeper {
    static final System.Logger LOG = System.getLogger("io.redislock");
    private static final Set<RedisLock> HELD = ConcurrentHashMap.newKeySet();
    private static Thread thread; // guarded by Sweeper.class

    static void watch(RedisLock lock) {
      HELD.add(lock);
      synchronized (Sweeper.class) {
        if (thread == null) {
          thread = Reaper.daemon("redislock-sweeper", Sweeper::loop);
          thread.start();
        }
      }
    }

    /** Whether the sweeper thread runs (tests). */
    static synchronized boolean running() {
      return thread != null;
    }

    private static void loop() {
      while (true) {
        try {
          Thread.sleep(1_000);
        } catch (InterruptedException e) {
          // Not ours to end: it ends when nothing is held.
        }
        run();
        synchronized (Sweeper.class) {
          if (HELD.isEmpty()) {
            thread = null;
            return;
          }
        }
      }
    }

    private static void run() {
      for (RedisLock lock : HELD) {
        try {
          if (!lock.sweep()) {
            HELD.remove(lock);
            if (!lock.holds.isEmpty()) {
              HELD.add(lock); // taken again meanwhile
            }
          }
        } catch (RuntimeException e) {
          LOG.log(System.Logger.Level.WARNING, "redislock: sweeping \"" + lock.name() + "\" failed", e);
        }
      }
    }
  }

  private void unpinIfFree() {
    if (holds.isEmpty() && (sibling == null || sibling.holds.isEmpty())) {
      client.unpin(pinAs);
    }
  }
}
