package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Server;
import io.redislock.Servers.Task;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Waiting costs no connection per waiter: 1,000 threads of one client share a few. */
class ManyThreadsTest {
  private static final int THREADS = 1000;
  private static final int BATCH = 5;

  private int counter; // guarded by the lock only

  @Test
  void aThousandThreadsWaitOnOneLockOverAFewConnectionsAndEachGetsItOnce() throws Exception {
    String k = "java:many-threads";
    // A server of its own: its connected_clients are this test's.
    try (Server s = new Server();
        RedisLockClient client = RedisLockClient.open(s.url())) {
      LockHandle gate = client.acquire(k); // every thread queues behind it
      AtomicInteger inside = new AtomicInteger();
      ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
      LockOptions opts = LockOptions.ttl(Duration.ofSeconds(30)).waitForever();
      List<Thread> threads = new ArrayList<>();
      for (int i = 0; i < THREADS; i++) {
        // One in ten waits interruptibly (acquire): each such wait wakes
        // every 100 ms to poll the interrupt, at a cost that grows with the
        // number of waiters of the client; 1,000 of them take 10-20 s to
        // serve with the debug library (0.3 s with the release one).
        boolean interruptible = i % 10 == 0;
        Thread th = new Thread(null, () -> {
          try {
            LockHandle h = interruptible ? client.acquire(k, opts) : client.acquireUninterruptibly(k, opts);
            try {
              if (inside.incrementAndGet() != 1) {
                errors.add(new AssertionError("two holders at once"));
              }
              counter++;
              inside.decrementAndGet();
            } finally {
              h.release();
            }
          } catch (Throwable e) {
            errors.add(e);
          }
        }, "waiter-" + i, 256 * 1024);
        th.setDaemon(true);
        threads.add(th);
      }
      AtomicBoolean done = new AtomicBoolean();
      // What is measured is the wait: samples taken wholly before the gate
      // opens. While the chain is served, each release holds a pooled
      // connection until its thread reads the reply, and a thread descheduled
      // there (a busy machine) lets the next holders take more; that count
      // follows the machine's scheduling, not the waiting, and is only shown.
      AtomicBoolean serving = new AtomicBoolean();
      AtomicLong maxServing = new AtomicLong();
      Task<Long> sampler = Servers.spawn("connection-sampler", () -> {
        long max = 0;
        try (Servers.Resp r = s.raw()) {
          while (!done.get()) {
            boolean before = serving.get();
            String info = (String) r.call("INFO", "clients");
            boolean waitingOnly = !before && !serving.get();
            for (String l : info.split("\r\n")) {
              if (l.startsWith("connected_clients:")) {
                long n = Long.parseLong(l.substring(18));
                if (waitingOnly) {
                  max = Math.max(max, n);
                } else {
                  maxServing.accumulateAndGet(n, Math::max);
                }
              }
            }
            Thread.sleep(10);
          }
        }
        return max;
      });
      long start = System.nanoTime();
      // A few at a time: a burst of simultaneous acquires takes a pooled
      // connection each for its first command, which is not what is measured
      // here; the wait is.
      for (int i = 0; i < THREADS; i += BATCH) {
        for (Thread th : threads.subList(i, i + BATCH)) {
          th.start();
        }
        int started = i + BATCH;
        Servers.waitUntil(started + " threads to wait", 60,
            () -> client.stats().waitersNow() == started || !errors.isEmpty());
      }
      long queued = System.nanoTime();
      serving.set(true);
      gate.release();
      for (Thread th : threads) {
        th.join(60_000);
        assertFalse(th.isAlive(), th.getName() + " still running");
      }
      long end = System.nanoTime();
      done.set(true);
      long maxClients = sampler.get(30);
      System.out.println(THREADS + " threads: queued in " + (queued - start) / 1_000_000 + " ms, served in "
          + (end - queued) / 1_000_000 + " ms; connected_clients at most " + maxClients
          + " while they waited, " + maxServing.get() + " while served (the sampler's own included)");
      assertEquals(List.of(), new ArrayList<>(errors));
      assertEquals(THREADS, counter, "each thread held it once, alone");
      assertTrue(maxClients >= 2, "sampled while they waited (the subscriber and the sampler): " + maxClients);
      assertTrue(maxClients <= 10, "connections stay few while 1,000 threads wait: " + maxClients);
      assertEquals(THREADS + 1, client.stats().releasesOk());
      assertEquals(0, client.stats().heldNow());
      assertNull(s.call("GET", k));
      assertEquals(List.of(), Servers.keys(s, "*" + k + "*"));
    }
  }
}
