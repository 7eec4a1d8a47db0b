package io.redislock;

import com.sun.jna.Pointer;
import java.lang.ref.Cleaner;
import java.lang.ref.WeakReference;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One acquisition: the plain lock, permits of a semaphore, or one side of a
 * read-write lock. Any thread may use it (its calls are serialised), so it
 * may be released by another thread than the one that took it: what async
 * code, executors and virtual threads need.
 *
 * <p>{@link #close()} releases it unless released already, so
 * try-with-resources holds it for a block; a lock found lost (expired, or
 * taken by another owner) makes {@code close()} throw
 * {@link LockNotOwnedException}, since the block's work ran unprotected. A
 * handle that becomes unreachable while held is released by the binding's
 * cleaner (best effort), as in Python and Ruby; do not rely on it.
 */
public final class LockHandle implements AutoCloseable {
  /** States with lost listeners, by id: the core's lost callback finds them here. */
  private static final Map<Long, State> LISTENING = new ConcurrentHashMap<>();
  private static final AtomicLong IDS = new AtomicLong();

  /**
   * The lost callback while some handle may be called back: held strongly
   * by each listening handle (and by a release still queued for one), only
   * weakly here. JNA's table of callbacks, which may outlive this class
   * loader, keeps a callback's class (so this loader) for as long as the
   * callback object lives; this way it lives only while needed.
   */
  private static WeakReference<NativeLib.LostFn> onLostFn = new WeakReference<>(null);

  /** A new object each time (a lambda here would be one object kept by this class for ever). */
  private static final class OnLost implements NativeLib.LostFn, Reaper.IdleCallback {
    @Override
    public void invoke(Pointer userdata) {
      try {
        State s = LISTENING.remove(Pointer.nativeValue(userdata));
        if (s != null) {
          s.fire();
        }
      } catch (Throwable ignored) {
        // Never throw into the core's renewal thread.
      }
    }
  }

  private static synchronized NativeLib.LostFn onLostFn() {
    NativeLib.LostFn f = onLostFn.get();
    if (f == null) {
      f = new OnLost();
      NativeLib.attachAsDaemon(f, "redislock-renewal");
      onLostFn = new WeakReference<>(f);
    }
    return f;
  }

  /**
   * What the cleaner needs, without the handle: the native address (0 once
   * given back). Every native call on it holds this object's monitor, so a
   * release, a free by the cleaner and a call of another thread never meet.
   */
  private static final class State implements Runnable {
    long ptr;
    long listenId;
    long fence; // drawn before the release, kept for later reads
    byte[] token;
    volatile boolean lost;
    final List<Runnable> listeners = new CopyOnWriteArrayList<>();
    final Executor executor;
    final String address; // the client's, for the Releaser
    NativeLib.LostFn callback; // while the core may call back

    State(long ptr, Executor executor, String address) {
      this.ptr = ptr;
      this.executor = executor;
      this.address = address;
    }

    /** On the thread that found the loss: never blocks, never takes the monitor. */
    void fire() {
      lost = true;
      for (Runnable r : listeners) {
        try {
          executor.execute(r);
        } catch (RuntimeException ignored) {
          // A rejecting executor (shut down): nothing to run it on.
        }
      }
    }

    /**
     * The cleaner, for a handle that became unreachable while held: the
     * release (best effort) and free go to the {@link Releaser}'s threads, so
     * the cleaner's thread never waits on the network.
     */
    @Override
    public synchronized void run() {
      if (ptr != 0) {
        long p = ptr;
        ptr = 0;
        unlisten();
        Releaser.release(address, p, callback);
      }
    }

    void unlisten() {
      if (listenId != 0) {
        LISTENING.remove(listenId);
        listenId = 0;
      }
    }
  }

  private final State state;
  private final Cleaner.Cleanable cleanable;
  private final byte[] name;

  LockHandle(long ptr, byte[] name, Executor executor) {
    this(ptr, name, executor, "");
  }

  /** {@code address}: the client's ({@link RedisLockClient#addr()}), which groups the cleaner's releases. */
  LockHandle(long ptr, byte[] name, Executor executor, String address) {
    NativeLib.retain(); // given back once the address is freed (here, or by the Releaser)
    this.state = new State(ptr, executor, address);
    this.name = name;
    this.cleanable = Reaper.register(this, state);
  }

  /** The name it was taken under (UTF-8; malformed bytes replaced). */
  public String name() {
    return new String(name, StandardCharsets.UTF_8);
  }

  /** The name's bytes (a copy). */
  public byte[] nameBytes() {
    return name.clone();
  }

  /**
   * The token stored under the key (a copy): 32 hex ASCII characters unless the caller gave one.
   * Still readable after the release (or {@link #forget()}), as the fence once drawn is.
   */
  public byte[] token() {
    synchronized (state) {
      if (state.token == null) {
        keepToken(live());
      }
      return state.token.clone();
    }
  }

  /** Copies the token out of the native handle, which is about to go. */
  private void keepToken(long p) {
    int n = (int) NativeLib.redislock_lock_token(p, null, 0);
    byte[] buf = new byte[n];
    NativeLib.redislock_lock_token(p, buf, n);
    state.token = buf;
  }

  /** The token as text (UTF-8), for {@link RedisLockClient#releaseToken(String, String)}. */
  public String tokenString() {
    return new String(token(), StandardCharsets.UTF_8);
  }

  /**
   * The fencing number: greater than any handed out before for this name to
   * an earlier holder, also across a server restart that lost the counter
   * (at least the server's clock in microseconds, below 2^53). Drawn on the
   * first call with a check that the lock is still held (one round trip;
   * {@code fenced(true)} draws it in the acquisition); later calls answer
   * from memory, also after the release.
   *
   * @throws LockNotOwnedException when the lock was lost, or released, before it was drawn
   */
  public long fence() {
    synchronized (state) {
      if (state.ptr == 0) {
        if (state.fence != 0) {
          return state.fence;
        }
        throw released("its fence was not drawn before");
      }
      long[] out = new long[1];
      NativeLib.check(NativeLib.redislock_lock_draw_fence(state.ptr, out));
      state.fence = out[0];
      return out[0];
    }
  }

  /**
   * Set the remaining time to {@code ttl} (not added to it).
   *
   * @throws LockNotOwnedException when it expired or another owner took it (it is then lost;
   *     an expired lock is never re-created)
   */
  public LockHandle extend(Duration ttl) {
    long ms = Units.ttlMs(ttl);
    synchronized (state) {
      NativeLib.check(NativeLib.redislock_extend(live(), ms));
    }
    return this;
  }

  /** Renew in the background at about a third of the TTL until released. */
  public LockHandle autoRenew() {
    synchronized (state) {
      NativeLib.check(NativeLib.redislock_lock_auto_renew(live()));
    }
    return this;
  }

  /**
   * True once background renewal, an extend or the release found the lock
   * gone (expired, or taken by another owner): work done under it from then
   * on is unprotected. Reads a flag: no round trip.
   */
  public boolean isLost() {
    if (state.lost) {
      return true;
    }
    synchronized (state) {
      return state.ptr != 0 ? NativeLib.redislock_lock_is_lost(state.ptr) != 0 : state.lost;
    }
  }

  /**
   * Whether this handle still holds its lock, asked of the server now (one
   * round trip; over Redlock, of a majority). False does not mark it lost.
   */
  public boolean owned() {
    synchronized (state) {
      if (state.ptr == 0) {
        return false;
      }
      byte[] out = new byte[1];
      NativeLib.check(NativeLib.redislock_lock_owned(state.ptr, out));
      return out[0] != 0;
    }
  }

  /**
   * Run {@code listener} once when the lock is found lost (by renewal, an
   * extend or the release), on the client's callback executor, never on
   * the renewal thread; at once (on the executor) when it is known lost
   * already.
   */
  public LockHandle onLost(Runnable listener) {
    java.util.Objects.requireNonNull(listener, "listener");
    synchronized (state) {
      long p = live();
      state.listeners.add(listener);
      if (state.listenId == 0) {
        long id = IDS.incrementAndGet();
        state.listenId = id;
        LISTENING.put(id, state);
        if (state.callback == null) {
          state.callback = onLostFn();
        }
        int st = NativeLib.redislock_lock_on_lost(p, state.callback, new Pointer(id));
        if (st != NativeLib.OK) {
          state.unlisten();
          state.listeners.remove(listener);
          NativeLib.check(st);
        }
      } else if (state.lost) {
        state.executor.execute(listener);
      }
    }
    return this;
  }

  /**
   * Release it.
   *
   * @throws LockNotOwnedException when it expired or another owner took it (the new owner's key
   *     is left alone), or when it was released already through this handle
   * @throws LockUnconfirmedException when the outcome is unknown (the handle is gone either way)
   */
  public void release() {
    synchronized (state) {
      int st = NativeLib.redislock_release(take());
      try {
        done(st);
        NativeLib.check(st);
      } finally {
        NativeLib.release();
      }
    }
  }

  /** Release it if still held, ignoring every error; nothing when released already. */
  public void releaseQuietly() {
    synchronized (state) {
      if (state.ptr != 0) {
        NativeLib.redislock_lock_free(take());
        done(NativeLib.OK);
        NativeLib.release();
      }
    }
  }

  /**
   * Drop this handle and keep the lock on the server until its TTL runs out
   * or {@link RedisLockClient#releaseToken} releases it (read {@link #token()}
   * first). Background renewal stops.
   */
  public void forget() {
    synchronized (state) {
      NativeLib.redislock_lock_forget(take());
      done(NativeLib.OK);
      NativeLib.release();
    }
  }

  /** True once released (or forgotten) through this handle. */
  public boolean isReleased() {
    synchronized (state) {
      return state.ptr == 0;
    }
  }

  /**
   * {@link #release()} unless released already (idempotent).
   *
   * @throws LockNotOwnedException when the lock was lost while held
   */
  @Override
  public void close() {
    synchronized (state) {
      if (state.ptr == 0) {
        return;
      }
      release();
    }
  }

  @Override
  public String toString() {
    String s;
    synchronized (state) {
      s = state.ptr == 0 ? "released" : isLost() ? "lost" : "held";
    }
    return "LockHandle{" + name() + ", " + s + "}";
  }

  /**
   * The address, given up by this handle (the callee frees it). The lost
   * listeners stay registered until {@link #done()}: a release that finds the
   * lock lost still calls them.
   */
  private long take() {
    long p = live();
    long fence = NativeLib.redislock_lock_fence_if_drawn(p);
    if (fence != 0) {
      state.fence = fence;
    }
    // The token stays readable after the release, as the fence drawn does.
    if (state.token == null) {
      keepToken(p);
    }
    state.ptr = 0;
    return p;
  }

  /** After the call that took the address: no callback can come any more. */
  private void done(int status) {
    if (status == NativeLib.NOT_OWNER) {
      state.lost = true;
    }
    state.unlisten();
    state.callback = null; // the handle is freed: no callback can come
    cleanable.clean(); // nothing left to clean: the address is 0
  }

  private long live() {
    if (state.ptr == 0) {
      throw released("this handle released it already");
    }
    return state.ptr;
  }

  private LockNotOwnedException released(String why) {
    return new LockNotOwnedException(
        "the lock \"" + name() + "\" is no longer held through this handle: " + why);
  }
}
