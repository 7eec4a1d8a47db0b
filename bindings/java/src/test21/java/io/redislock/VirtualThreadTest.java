package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Server;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import jdk.jfr.consumer.RecordingStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Blocking acquires on virtual threads (Java 21 and newer; run by
 * bindings/java/test-virtual.sh): a waiting acquire parks on the core's
 * async acquisition instead of pinning its carrier in a native call, so
 * 10,000 virtual threads can wait for one lock on a handful of platform
 * threads while other virtual threads keep running; interrupts and
 * close() end such waits as they end native ones.
 */
class VirtualThreadTest {
  private static Server server;

  @BeforeAll
  static void start() throws IOException {
    server = new Server();
  }

  @AfterAll
  static void stop() throws IOException {
    server.close();
  }

  private static long queued(String k) {
    try {
      return (Long) server.call("LLEN", "{" + k + "}:queue");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static long exists(String k) {
    try {
      return (Long) server.call("EXISTS", k);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** A counter with no synchronisation of its own: only the lock keeps its updates from being lost. */
  private static final class Counter {
    int n;
  }

  @Test
  void tenThousandVirtualThreadsWaitForOneLockWithoutPinningTheirCarriers() throws Exception {
    final int n = 10_000;
    final String k = "vt:ten-thousand";
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    AtomicInteger pinnedEvents = new AtomicInteger();
    try (RecordingStream jfr = new RecordingStream();
        RedisLockClient client = RedisLockClient.open(server.url())) {
      jfr.enable("jdk.VirtualThreadPinned").withThreshold(Duration.ZERO);
      Queue<String> pinnedAt = new ConcurrentLinkedQueue<>();
      jfr.onEvent("jdk.VirtualThreadPinned", e -> {
        pinnedEvents.incrementAndGet();
        pinnedAt.add(String.valueOf(e.getStackTrace()));
      });
      jfr.startAsync();

      // Platform threads, sampled while the virtual threads run.
      AtomicInteger peakPlatform = new AtomicInteger(mx.getThreadCount());
      AtomicBoolean sampling = new AtomicBoolean(true);
      Thread sampler = Thread.ofPlatform().daemon().name("sampler").start(() -> {
        while (sampling.get()) {
          peakPlatform.accumulateAndGet(mx.getThreadCount(), Math::max);
          Servers.sleep(20);
        }
      });

      LockHandle gate = client.acquire(k); // held until every virtual thread waits
      Counter counter = new Counter();
      Queue<Throwable> errors = new ConcurrentLinkedQueue<>();
      LockOptions opts = LockOptions.ttl(Duration.ofSeconds(60)).waitFor(Duration.ofMinutes(10));
      long started = System.nanoTime();
      List<Thread> threads = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        threads.add(Thread.ofVirtual().name("waiter-" + i).start(() -> {
          try {
            LockHandle lock = client.acquire(k, opts);
            int v = counter.n;
            Thread.yield(); // gives the carrier away mid-update: a second holder would lose one
            counter.n = v + 1;
            lock.release();
          } catch (Throwable e) {
            errors.add(e);
          }
        }));
      }
      // Every one of them waits in the server's queue at once: none holds a carrier.
      Servers.waitUntil("all " + n + " virtual threads to queue", 120, () -> queued(k) == n);
      long queuedAt = System.nanoTime();
      // The client counts a waiter once its queue entry was written: a moment after the server has it.
      Servers.waitUntil("the client to count all " + n + " waiters", 60, () -> client.stats().waitersNow() == n);
      Thread probe = Thread.ofVirtual().name("probe").start(() -> Math.sqrt(2));
      assertTrue(probe.join(Duration.ofSeconds(30)), "a virtual thread ran while 10,000 others waited");
      assertEquals(0, counter.n, "nobody held the lock but the gate");

      gate.release();
      for (Thread t : threads) {
        assertTrue(t.join(Duration.ofMinutes(10)), t.getName() + " ended");
      }
      long ended = System.nanoTime();
      sampling.set(false);
      sampler.join();

      assertTrue(errors.isEmpty(), () -> errors.size() + " failed, the first: " + errors.peek());
      assertEquals(n, counter.n, "every holder's update counted: never two holders at once");
      assertEquals(0L, exists(k));
      assertEquals(0L, queued(k));
      Servers.waitUntil("no handle left", 30, () -> client.stats().heldNow() == 0);
      jfr.stop(); // waits until every recorded event was consumed
      System.out.printf("10,000 virtual threads: all queued in %d ms, served one by one in %d ms; "
              + "peak platform threads %d; jdk.VirtualThreadPinned events %d%n",
          (queuedAt - started) / 1_000_000, (ended - queuedAt) / 1_000_000, peakPlatform.get(),
          pinnedEvents.get());
      assertTrue(peakPlatform.get() < 100, "a few platform threads, not one per waiter: " + peakPlatform.get());
      assertEquals(0, pinnedEvents.get(), () -> "no virtual thread parked while pinned; pinned at " + pinnedAt);
    }
  }

  @Test
  void redisLockOnVirtualThreadsCountsExactly() throws Exception {
    final int n = 2_000;
    try (RedisLockClient client = RedisLockClient.open(server.url())) {
      RedisLock lock = client.getLock("vt:redis-lock");
      Counter counter = new Counter();
      Queue<Throwable> errors = new ConcurrentLinkedQueue<>();
      List<Thread> threads = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        threads.add(Thread.ofVirtual().start(() -> {
          try {
            lock.lock();
            try {
              int v = counter.n;
              Thread.yield();
              counter.n = v + 1;
            } finally {
              lock.unlock();
            }
          } catch (Throwable e) {
            errors.add(e);
          }
        }));
      }
      for (Thread t : threads) {
        assertTrue(t.join(Duration.ofMinutes(5)));
      }
      assertTrue(errors.isEmpty(), () -> "the first failure: " + errors.peek());
      assertEquals(n, counter.n);
      assertEquals(0L, exists("vt:redis-lock"));
    }
  }

  @Test
  void anInterruptEndsAVirtualThreadsWaitAndLeavesNothingQueued() throws Exception {
    String k = "vt:interrupt";
    try (RedisLockClient client = RedisLockClient.open(server.url())) {
      LockHandle held = client.acquire(k);
      AtomicReference<Throwable> outcome = new AtomicReference<>();
      AtomicBoolean flagAfter = new AtomicBoolean(true);
      Thread waiter = Thread.ofVirtual().start(() -> {
        try {
          client.acquire(k).release();
        } catch (Throwable e) {
          outcome.set(e);
          flagAfter.set(Thread.currentThread().isInterrupted());
        }
      });
      Servers.waitUntil("the waiter to queue", 30, () -> queued(k) == 1);
      waiter.interrupt();
      assertTrue(waiter.join(Duration.ofSeconds(30)));
      assertInstanceOf(InterruptedException.class, outcome.get());
      assertFalse(flagAfter.get(), "the flag is cleared with the exception");
      Servers.waitUntil("the waiter to leave the queue", 30, () -> queued(k) == 0);
      held.release();
      assertEquals(0L, exists(k), "not handed to the interrupted waiter");

      // An uninterruptible wait goes on and keeps the flag.
      held = client.acquire(k);
      AtomicBoolean flagKept = new AtomicBoolean();
      AtomicReference<LockHandle> got = new AtomicReference<>();
      Thread patient = Thread.ofVirtual().start(() -> {
        got.set(client.acquireUninterruptibly(k, LockOptions.DEFAULT));
        flagKept.set(Thread.currentThread().isInterrupted());
      });
      Servers.waitUntil("the patient waiter to queue", 30, () -> queued(k) == 1);
      patient.interrupt();
      Servers.sleep(300);
      assertTrue(patient.isAlive(), "still waiting after the interrupt");
      held.release();
      assertTrue(patient.join(Duration.ofSeconds(30)));
      assertNotNull(got.get());
      assertTrue(flagKept.get(), "the interrupt flag is set again");
      got.get().release();
    }
  }

  @Test
  void closingTheClientEndsAVirtualThreadsWait() throws Exception {
    String k = "vt:close";
    try (RedisLockClient holder = RedisLockClient.open(server.url())) {
      LockHandle held = holder.acquire(k);
      RedisLockClient c = RedisLockClient.open(server.url());
      AtomicReference<Throwable> outcome = new AtomicReference<>();
      Thread waiter = Thread.ofVirtual().start(() -> {
        try {
          c.acquire(k).release();
        } catch (Throwable e) {
          outcome.set(e);
        }
      });
      Servers.waitUntil("the waiter to queue", 30, () -> queued(k) == 1);
      c.close();
      assertTrue(waiter.join(Duration.ofSeconds(30)));
      assertInstanceOf(IllegalStateException.class, outcome.get());
      Servers.waitUntil("the waiter to leave the queue", 30, () -> queued(k) == 0);
      held.release();
      assertEquals(0L, exists(k));
    }
  }
}
