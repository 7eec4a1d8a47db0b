package io.redislock;

import java.lang.ref.WeakReference;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Run in a JVM of its own by UnloadTest: loads the binding's jar in a class
 * loader of its own (JNA comes from this JVM's class path, shared as a
 * servlet container's lib directory would share it), uses it as an
 * application would (its context class loader set, as a container sets
 * it), closes it, drops it, and prints whether the loader was collected and
 * which redislock threads are left. Only reflection crosses into the jar.
 *
 * <p>Arguments: the jar, a redis:// URL. Exit 0 when collected with no
 * thread left, 1 otherwise.
 */
public final class UnloadProbe {
  private UnloadProbe() {}

  public static void main(String[] args) throws Exception {
    URL jar = Paths.get(args[0]).toUri().toURL();
    WeakReference<ClassLoader> loader = use(jar, args[1]);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    List<String> threads = threads();
    while ((loader.get() != null || !threads.isEmpty()) && System.nanoTime() < deadline) {
      System.gc();
      Thread.sleep(100);
      threads = threads();
    }
    boolean collected = loader.get() == null;
    System.out.println((collected ? "collected" : "kept") + " threads=" + threads);
    System.exit(collected && threads.isEmpty() ? 0 : 1);
  }

  /** The names of the live threads that are the library's. */
  private static List<String> threads() {
    List<String> out = new ArrayList<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.isAlive() && t.getName().startsWith("redislock-")) {
        out.add(t.getName());
      }
    }
    return out;
  }

  private static Object call(Object target, String name, Object... args) throws Exception {
    Class<?> c = target instanceof Class ? (Class<?>) target : target.getClass();
    for (Method m : c.getMethods()) {
      if (m.getName().equals(name) && m.getParameterCount() == args.length && fits(m.getParameterTypes(), args)) {
        try {
          return m.invoke(target instanceof Class ? null : target, args);
        } catch (InvocationTargetException e) {
          if (e.getCause() instanceof Exception) {
            throw (Exception) e.getCause();
          }
          throw e;
        }
      }
    }
    throw new NoSuchMethodException(c.getName() + "." + name);
  }

  private static boolean fits(Class<?>[] types, Object[] args) {
    for (int i = 0; i < types.length; i++) {
      if (args[i] != null && !types[i].isInstance(args[i])) {
        return false;
      }
    }
    return true;
  }

  private static WeakReference<ClassLoader> use(URL jar, String url) throws Exception {
    URLClassLoader l = new URLClassLoader("redislock-app", new URL[] {jar}, UnloadProbe.class.getClassLoader());
    Thread me = Thread.currentThread();
    ClassLoader before = me.getContextClassLoader();
    me.setContextClassLoader(l); // as a container does while the application runs
    try {
      Class<?> clients = l.loadClass("io.redislock.RedisLockClient");
      if (clients.getClassLoader() != l) {
        throw new AssertionError("the binding came from " + clients.getClassLoader() + ", not the jar's own loader");
      }
      Class<?> options = l.loadClass("io.redislock.LockOptions");
      Object client = call(clients, "open", url);
      // A handle, and a lost listener run by the callbacks thread.
      Object shortTtl = call(options, "ttl", Duration.ofMillis(300));
      Object h = call(client, "acquire", "unload:lost", shortTtl);
      CountDownLatch lost = new CountDownLatch(1);
      call(h, "onLost", (Runnable) lost::countDown);
      while ((Boolean) call(h, "owned")) {
        Thread.sleep(50);
      }
      try {
        call(h, "extend", Duration.ofSeconds(5));
        throw new AssertionError("extended an expired lock");
      } catch (RuntimeException expected) {
        // LockNotOwnedException: found lost, the listener runs
      }
      if (!lost.await(60, TimeUnit.SECONDS)) {
        throw new AssertionError("the lost listener did not run");
      }
      // The Lock view: the sweeper runs while it is held.
      Object lock = call(client, "getLock", "unload:lock");
      call(lock, "lock");
      call(lock, "unlock");
      // A handle nobody released: the cleaner and the release pool free it.
      Object dropped = call(client, "acquire", "unload:dropped");
      dropped = null;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      Object again = null;
      while (again == null && System.nanoTime() < deadline) {
        System.gc();
        Thread.sleep(50);
        again = call(client, "tryAcquire", "unload:dropped");
      }
      if (again == null) {
        throw new AssertionError("the dropped handle was not released");
      }
      call(again, "release");
      // acquireAsync: one completed (the core's runtime thread calls back into
      // this loader's code), one still waiting when cancelled.
      Object viaFuture = ((java.util.concurrent.Future<?>) call(client, "acquireAsync", "unload:async"))
          .get(60, TimeUnit.SECONDS);
      java.util.concurrent.Future<?> waiting = (java.util.concurrent.Future<?>) call(client, "acquireAsync",
          "unload:async", call(options, "ttl", Duration.ofSeconds(30)));
      Thread.sleep(200);
      if (waiting.isDone()) {
        throw new AssertionError("a second acquireAsync of a held lock completed");
      }
      waiting.cancel(true);
      call(viaFuture, "release");
      call(client, "close");
    } finally {
      me.setContextClassLoader(before);
    }
    l.close();
    return new WeakReference<>(l);
  }
}
