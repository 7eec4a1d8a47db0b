package io.redislock;

import java.lang.ref.Cleaner;
import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Runs an action once an object became unreachable, or at once through
 * {@link Cleaner.Cleanable#clean()}, exactly once: {@link Cleaner}'s
 * contract, but its thread ({@code redislock-cleaner}) runs only while some
 * object is registered (an open client, a held handle) or the native
 * library is in use, and before it ends it unregisters the native methods
 * from JNA ({@link NativeLib#unregisterIfIdle()}), so that a web
 * application that closed its clients leaves nothing behind to keep its
 * class loader. The actions never wait on the network: a handle's release
 * goes to {@link Releaser}.
 */
final class Reaper {
  private static final ReferenceQueue<Object> QUEUE = new ReferenceQueue<>();
  private static final Set<Ref> REGISTERED = ConcurrentHashMap.newKeySet();
  private static final System.Logger LOG = System.getLogger("io.redislock");

  /** The thread, while one runs; guarded by Reaper.class. */
  private static Thread thread;

  private Reaper() {}

  private static final class Ref extends PhantomReference<Object> implements Cleaner.Cleanable {
    private final Runnable action;

    Ref(Object referent, Runnable action) {
      super(referent, QUEUE);
      this.action = action;
    }

    @Override
    public void clean() {
      if (REGISTERED.remove(this)) {
        action.run();
      }
    }
  }

  /** Run {@code action} once {@code o} is unreachable, or at the first {@code clean()}. */
  static Cleaner.Cleanable register(Object o, Runnable action) {
    Ref r = new Ref(o, action);
    REGISTERED.add(r);
    wake();
    return r;
  }

  /** Whether the cleaner thread runs (tests). */
  static synchronized boolean running() {
    return thread != null;
  }

  private static void run() {
    while (true) {
      try {
        Reference<?> r = QUEUE.remove(1_000);
        if (r != null) {
          ((Ref) r).clean();
        }
      } catch (InterruptedException e) {
        // Not ours to end: it ends when nothing is registered.
      } catch (Throwable e) {
        LOG.log(System.Logger.Level.WARNING, "redislock: a cleaning action failed", e);
      }
      if (REGISTERED.isEmpty() && NativeLib.idle()) {
        NativeLib.unregisterIfIdle();
        synchronized (Reaper.class) {
          if (REGISTERED.isEmpty()) {
            thread = null;
            return;
          }
        }
      }
    }
  }

  /**
   * Make sure the thread runs: the last native object was freed, and the
   * thread unregisters the native methods when it finds nothing in use.
   */
  static void wake() {
    synchronized (Reaper.class) {
      if (thread == null) {
        thread = daemon("redislock-cleaner", Reaper::run);
        thread.start();
      }
    }
  }

  /**
   * Start JNA's own cleaner thread, if this JNA has one, and initialize
   * JNA's {@code NativeLibrary}, from a thread that carries nothing of this
   * class loader. JNA (5.12 and later) starts a thread, {@code JNA Cleaner},
   * when it loads its first library, and that thread never ends; and
   * {@code NativeLibrary}'s initialization runs {@code ldconfig -p} on
   * Linux, which starts the JDK's {@code process reaper} thread, which lives
   * on for 60 s after its last process ended. A thread keeps the context
   * class loader of the code that started it and, on Java 17 to 23, the
   * protection domains of the classes on its stack (its inherited access
   * control context): started from this library's first call, the first
   * would keep this jar's class loader for as long as the JVM runs wherever
   * JNA is shared between class loaders (a servlet container's lib
   * directory, a parent loader), the second for a minute after the last
   * client was closed. So both are started here by a thread of a pool of the
   * JDK, which carries neither, running a call made of JDK classes only.
   * Best effort: nothing happens when JNA is in this jar's own class
   * loader, and a class this JNA lacks is passed over.
   */
  static void startJnaCleaner() {
    ClassLoader jna = com.sun.jna.Native.class.getClassLoader();
    if (jna == Reaper.class.getClassLoader()) {
      return; // one loader: JNA's thread is of this loader anyway
    }
    Thread me = Thread.currentThread();
    ClassLoader ccl = me.getContextClassLoader();
    java.util.concurrent.ForkJoinPool pool = null;
    try {
      me.setContextClassLoader(ClassLoader.getSystemClassLoader());
      pool = new java.util.concurrent.ForkJoinPool(1);
      for (String name : new String[] {"com.sun.jna.internal.Cleaner", "com.sun.jna.NativeLibrary"}) {
        try {
          Class<?> c = Class.forName(name, false, jna);
          java.lang.invoke.MethodHandles.Lookup lookup = java.lang.invoke.MethodHandles.lookup();
          java.lang.invoke.MethodHandle init = lookup.findVirtual(java.lang.invoke.MethodHandles.Lookup.class,
              "ensureInitialized", java.lang.invoke.MethodType.methodType(Class.class, Class.class))
              .bindTo(java.lang.invoke.MethodHandles.privateLookupIn(c, lookup)).bindTo(c);
          java.util.concurrent.Callable<?> task =
              java.lang.invoke.MethodHandleProxies.asInterfaceInstance(java.util.concurrent.Callable.class, init);
          pool.submit(task).get(60, java.util.concurrent.TimeUnit.SECONDS);
        } catch (Exception | LinkageError e) {
          // Another JNA, or a JDK that refuses: JNA does it itself on first use, as before.
        }
      }
    } catch (RuntimeException e) {
      // No pool: JNA does it itself on first use, as before.
    } finally {
      me.setContextClassLoader(ccl);
      if (pool != null) {
        pool.shutdown();
      }
    }
  }

  /**
   * A JNA callback of this library that no native code can call while
   * nothing native is in use ({@link NativeLib#idle()}): the wait check
   * (no client, so no wait) and the lost callback (no lock handle).
   */
  interface IdleCallback {}

  /**
   * Drop what JNA keeps of this class loader's classes, where JNA is shared
   * between class loaders: its cached options of every class of ours (a
   * table of weak keys whose values name the class itself, so that the
   * entry never goes), and its callback records of the {@link IdleCallback}s
   * (each names its callback's class, so keeps this loader until JNA next
   * looks at that table). JNA makes them again when it needs them. Called
   * when the registration of the native methods is made or ended, with
   * nothing native in use. Best effort, and nothing to do when JNA is in
   * this jar's own class loader.
   */
  static void forgetJnaState(boolean callbacks) {
    ClassLoader ours = Reaper.class.getClassLoader();
    if (com.sun.jna.Native.class.getClassLoader() == ours) {
      return;
    }
    try {
      java.lang.reflect.Field options = com.sun.jna.Native.class.getDeclaredField("typeOptions");
      java.lang.reflect.Field libraries = com.sun.jna.Native.class.getDeclaredField("libraries");
      options.setAccessible(true);
      libraries.setAccessible(true);
      java.util.Map<?, ?> byClass = (java.util.Map<?, ?>) options.get(null);
      synchronized (libraries.get(null)) {
        synchronized (byClass) {
          byClass.keySet().removeIf(c -> c instanceof Class && ((Class<?>) c).getClassLoader() == ours);
        }
      }
      if (callbacks) {
        Class<?> refs = com.sun.jna.CallbackReference.class;
        java.lang.reflect.Field direct = refs.getDeclaredField("directCallbackMap");
        java.lang.reflect.Field plain = refs.getDeclaredField("callbackMap"); // getFunctionPointer's
        java.lang.reflect.Field lock = refs.getDeclaredField("pointerCallbackMap");
        direct.setAccessible(true);
        plain.setAccessible(true);
        lock.setAccessible(true);
        synchronized (lock.get(null)) {
          ((java.util.Map<?, ?>) direct.get(null)).keySet().removeIf(cb -> cb instanceof IdleCallback);
          ((java.util.Map<?, ?>) plain.get(null)).keySet().removeIf(cb -> cb instanceof IdleCallback);
        }
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      // Another JNA, or its fields closed to reflection: its entries stay.
    }
  }

  /**
   * A daemon thread of this library, with the system class loader as its
   * context class loader: a thread started while one application's thread
   * called in does not keep that application's loader.
   */
  static Thread daemon(String name, Runnable body) {
    Thread t = new Thread(body, name);
    t.setDaemon(true);
    t.setContextClassLoader(ClassLoader.getSystemClassLoader());
    return t;
  }
}
