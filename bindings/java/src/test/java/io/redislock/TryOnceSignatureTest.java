package io.redislock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Which calls declare InterruptedException: those that may wait, never
 * those that make one attempt (or wait uninterruptibly), so that a caller
 * of a one-attempt call has no interrupt to handle. The forms that take
 * LockOptions may wait (the options carry the wait), so they declare it.
 * The calls that may give null say so with JSpecify's {@code @Nullable}.
 */
class TryOnceSignatureTest extends ServerTest {
  private static void declares(Class<?> c, String name, Class<?>[] params, Class<?>... thrown) throws Exception {
    Method m = c.getMethod(name, params);
    assertArrayEquals(thrown, m.getExceptionTypes(), m.toString());
  }

  private static Class<?>[] p(Class<?>... types) {
    return types;
  }

  @Test
  void oneAttemptCallsDeclareNoInterruptedExceptionAndWaitingOnesDo() throws Exception {
    Class<?> ie = InterruptedException.class;
    Class<?> c = RedisLockClient.class;
    declares(c, "tryAcquire", p(String.class));
    declares(c, "tryAcquireRead", p(String.class));
    declares(c, "tryAcquireWrite", p(String.class));
    declares(c, "acquireUninterruptibly", p(String.class, LockOptions.class));
    declares(c, "tryAcquire", p(String.class, LockOptions.class), ie);
    declares(c, "tryAcquire", p(byte[].class, LockOptions.class), ie);
    declares(c, "tryAcquireRead", p(String.class, LockOptions.class), ie);
    declares(c, "tryAcquireWrite", p(String.class, LockOptions.class), ie);
    declares(c, "acquire", p(String.class), ie);
    declares(c, "acquire", p(String.class, LockOptions.class), ie);
    declares(c, "acquireRead", p(String.class), ie);
    declares(c, "acquireWrite", p(String.class), ie);
    Class<?> s = RedisSemaphore.class;
    declares(s, "tryAcquire", p());
    declares(s, "tryAcquire", p(int.class));
    declares(s, "acquireUninterruptibly", p(int.class, LockOptions.class));
    declares(s, "tryAcquire", p(int.class, Duration.class), ie);
    declares(s, "tryAcquire", p(int.class, LockOptions.class), ie);
    declares(s, "acquire", p(), ie);
    Class<?> l = RedisLock.class;
    declares(l, "tryLock", p());
    declares(l, "lock", p());
    declares(l, "lock", p(long.class, TimeUnit.class));
    declares(l, "tryLock", p(long.class, TimeUnit.class), ie);
    declares(l, "lockInterruptibly", p(), ie);
  }

  @Test
  void theCallsThatMayGiveNullSayItWithJSpecify() throws Exception {
    Class<?> c = RedisLockClient.class;
    for (Method m : c.getMethods()) {
      if (m.getName().startsWith("tryAcquire")) {
        NullableTest.assertNullableReturn(m);
      }
      if (m.getName().startsWith("acquire") && m.getReturnType() == LockHandle.class) {
        assertFalse(m.getAnnotatedReturnType().isAnnotationPresent(Nullable.class), m + " never gives null");
      }
    }
    for (Method m : RedisSemaphore.class.getMethods()) {
      if (m.getName().equals("tryAcquire")) {
        NullableTest.assertNullableReturn(m);
      }
    }
  }

  @Test
  void oneAttemptCallsWorkOnAnInterruptedThreadAndKeepTheFlag(TestInfo t) throws Exception {
    String k = key(t);
    try {
      Thread.currentThread().interrupt();
      LockHandle a = client.tryAcquire(k);
      assertNotNull(a);
      a.release();
      LockHandle r = client.tryAcquireRead(k + ":rw");
      assertNotNull(r);
      r.release();
      LockHandle w = client.tryAcquireWrite(k + ":rw");
      assertNotNull(w);
      w.release();
      LockHandle permit = client.semaphore(k + ":sem", 2).tryAcquire();
      assertNotNull(permit);
      permit.release();
      RedisLock lock = client.getLock(k + ":lock");
      assertTrue(lock.tryLock());
      lock.unlock();
      assertTrue(Thread.currentThread().isInterrupted(), "the flag is kept");
    } finally {
      Thread.interrupted();
    }
  }
}
