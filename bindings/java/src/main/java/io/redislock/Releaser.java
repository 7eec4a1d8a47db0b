package io.redislock;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Releases the locks of handles that became unreachable while held, off
 * the cleaner's thread, so that the cleaner never waits on the network.
 *
 * <ul>
 *   <li>At most {@link #MAX_THREADS} threads ({@code redislock-release}),
 *       started when a release is queued and ended when none is left.
 *   <li>One release at a time per server address, the addresses served in
 *       turn: a dead or frozen server (each release waits out the command
 *       timeout) holds one thread, and the other servers' releases go on.
 *   <li>A release that waited longer than the deadline (10 s), or that finds
 *       {@link #MAX_QUEUED} queued, frees its handle without a round trip
 *       (as {@code forget()}): that lock ends with its TTL.
 * </ul>
 */
final class Releaser {
  static final int MAX_THREADS = 4;
  static final int MAX_QUEUED = 10_000;

  /** How long a release may wait for its turn before it is dropped (tests change it). */
  static volatile long deadlineNanos = TimeUnit.SECONDS.toNanos(10);

  private static final class Job {
    final long ptr;
    final long queuedAt;
    final Object callback; // the handle's lost callback: the core may call it until the handle is freed

    Job(long ptr, long queuedAt, Object callback) {
      this.ptr = ptr;
      this.queuedAt = queuedAt;
      this.callback = callback;
    }
  }

  // Guarded by LOCK.
  private static final Object LOCK = new Object();
  private static final Map<String, ArrayDeque<Job>> QUEUES = new HashMap<>();
  private static final ArrayDeque<String> READY = new ArrayDeque<>(); // addresses with jobs and none in flight
  private static final Set<String> IN_FLIGHT = new HashSet<>();
  private static int queued;
  private static int threads;
  private static int idle;

  /** Counters for tests and diagnostics. */
  static final AtomicLong RELEASED = new AtomicLong();
  static final AtomicLong DROPPED = new AtomicLong();

  private Releaser() {}

  /**
   * Release (best effort) and free the lock at {@code ptr}, soon, on a
   * thread of this pool; {@code callback} (the handle's lost callback, or
   * null) is kept reachable until then. Takes over the handle's
   * {@link NativeLib#retain()}.
   */
  static void release(String address, long ptr, Object callback) {
    boolean start = false;
    synchronized (LOCK) {
      if (queued < MAX_QUEUED) {
        ArrayDeque<Job> q = QUEUES.computeIfAbsent(address, a -> new ArrayDeque<>());
        if (q.isEmpty() && !IN_FLIGHT.contains(address)) {
          READY.add(address);
        }
        q.add(new Job(ptr, System.nanoTime(), callback));
        queued++;
        if (threads < MAX_THREADS && idle < READY.size()) {
          threads++;
          idle++;
          start = true;
        }
        ptr = 0;
      }
    }
    if (ptr != 0) {
      drop(ptr);
      java.lang.ref.Reference.reachabilityFence(callback);
      NativeLib.release();
      return;
    }
    if (start) {
      try {
        Reaper.daemon("redislock-release", Releaser::run).start();
      } catch (Throwable e) {
        synchronized (LOCK) {
          threads--;
          idle--;
        }
        throw e;
      }
    }
  }

  /** Releases and jobs still queued or in flight (tests). */
  static int pending() {
    synchronized (LOCK) {
      return queued + IN_FLIGHT.size();
    }
  }

  /** Threads of the pool now (tests). */
  static int threads() {
    synchronized (LOCK) {
      return threads;
    }
  }

  private static void run() {
    while (true) {
      String address;
      Job job;
      synchronized (LOCK) {
        address = READY.poll();
        if (address == null) {
          threads--;
          idle--;
          return;
        }
        idle--;
        job = QUEUES.get(address).poll();
        queued--;
        IN_FLIGHT.add(address);
      }
      try {
        if (System.nanoTime() - job.queuedAt > deadlineNanos) {
          drop(job.ptr);
        } else {
          NativeLib.redislock_lock_free(job.ptr);
          RELEASED.incrementAndGet();
        }
        java.lang.ref.Reference.reachabilityFence(job);
      } catch (Throwable e) {
        // The native call does not throw; a JVM error here must not end the pool's bookkeeping.
      } finally {
        NativeLib.release();
        synchronized (LOCK) {
          idle++;
          IN_FLIGHT.remove(address);
          ArrayDeque<Job> q = QUEUES.get(address);
          if (q.isEmpty()) {
            QUEUES.remove(address);
          } else {
            READY.add(address);
          }
        }
      }
    }
  }

  /** Free without a round trip: the lock stays until its TTL. */
  private static void drop(long ptr) {
    NativeLib.redislock_lock_forget(ptr);
    DROPPED.incrementAndGet();
  }
}
