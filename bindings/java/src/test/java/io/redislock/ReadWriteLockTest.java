package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.redislock.Servers.Task;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** Readers share, a writer excludes, a queued writer stops new readers. */
class ReadWriteLockTest extends ServerTest {
  /** The holders of the read-write lock {@code k} on the server. */
  private static long holders(String k) {
    return (Long) Servers.q(server, "ZCARD", "{" + k + "}:rw");
  }

  @Test
  void twoThreadsHoldTheReadSideAtOnce(TestInfo t) throws Exception {
    String k = key(t);
    RedisReadWriteLock rw = client.getReadWriteLock(k);
    assertSame(rw, client.getReadWriteLock(k));
    CountDownLatch bothIn = new CountDownLatch(2);
    CountDownLatch leave = new CountDownLatch(1);
    List<Task<Boolean>> readers = List.of(0, 1).stream().map(i -> Servers.spawn("reader-" + i, () -> {
      if (!rw.readLock().tryLock(30, TimeUnit.SECONDS)) {
        return false;
      }
      try {
        bothIn.countDown();
        return leave.await(60, TimeUnit.SECONDS);
      } finally {
        rw.readLock().unlock();
      }
    })).toList();
    assertTrue(bothIn.await(60, TimeUnit.SECONDS), "both readers in");
    assertEquals(2, holders(k), "two holders on the server");
    assertFalse(rw.writeLock().tryLock(), "no writer while they read");
    leave.countDown();
    for (Task<Boolean> r : readers) {
      assertTrue(r.get(60));
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"), "nothing left");
  }

  @Test
  void aWriterWaitsUntilTheReadersRelease(TestInfo t) throws Exception {
    String k = key(t);
    RedisReadWriteLock rw = client.getReadWriteLock(k);
    rw.readLock().lock();
    LockHandle otherReader = client.tryAcquireRead(k);
    assertNotNull(otherReader, "a second reader");
    try (RedisLockClient other = RedisLockClient.open(server.url())) {
      Task<Long> writer = Servers.spawn("writer", () -> {
        RedisLock w = other.getReadWriteLock(k).writeLock();
        if (!w.tryLock(60, TimeUnit.SECONDS)) {
          return -1L;
        }
        try {
          return holders(k);
        } finally {
          w.unlock();
        }
      });
      Servers.waitUntil("the writer to queue", 30, () -> other.stats().waitersNow() == 1);
      rw.readLock().unlock();
      assertEquals(1, other.stats().waitersNow(), "still waiting for the other reader");
      assertFalse(writer.isDone());
      otherReader.release();
      assertEquals(1L, writer.get(60), "the writer alone");
      assertEquals(1, other.stats().acquiredWrites());
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }

  @Test
  void askingForTheOtherSideWhileHoldingOneIsIllegalAtOnce(TestInfo t) throws Exception {
    String k = key(t);
    RedisReadWriteLock rw = client.getReadWriteLock(k);
    rw.readLock().lock();
    try {
      // A wait that would run out if it queued behind itself instead of throwing.
      assertThrows(IllegalMonitorStateException.class, () -> rw.writeLock().tryLock(5, TimeUnit.SECONDS));
      assertThrows(IllegalMonitorStateException.class, () -> rw.writeLock().tryLock());
      assertFalse(rw.writeLock().isHeldByCurrentThread());
      assertTrue(rw.readLock().tryLock(), "reentrant within the read side");
      rw.readLock().unlock();
      assertEquals(1, rw.readLock().getHoldCount());
    } finally {
      rw.readLock().unlock();
    }
    rw.writeLock().lock();
    try {
      assertThrows(IllegalMonitorStateException.class, () -> rw.readLock().tryLock(5, TimeUnit.SECONDS));
      assertThrows(IllegalMonitorStateException.class, () -> rw.readLock().lock());
      assertFalse(rw.readLock().isHeldByCurrentThread());
      assertEquals(1, holders(k), "the writer alone");
    } finally {
      rw.writeLock().unlock();
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }

  @Test
  void aQueuedWriterStopsNewReaders(TestInfo t) throws Exception {
    String k = key(t);
    LockOptions opts = LockOptions.ttl(Duration.ofSeconds(30));
    LockHandle reader = client.tryAcquireRead(k, opts);
    assertNotNull(reader);
    try (RedisLockClient writerClient = RedisLockClient.open(server.url());
        RedisLockClient readerClient = RedisLockClient.open(server.url())) {
      LockHandle reader2 = readerClient.tryAcquireRead(k);
      assertNotNull(reader2, "readers share while no writer waits");
      Task<LockHandle> writer = Servers.spawn("writer",
          () -> writerClient.acquireWrite(k, opts.waitFor(Duration.ofSeconds(60))));
      Servers.waitUntil("the writer to queue", 30, () -> writerClient.stats().waitersNow() == 1);
      assertEquals(1L, Servers.q(server, "LLEN", "{" + k + "}:rw:queue"), "queued on the server");
      assertNull(readerClient.tryAcquireRead(k), "a new reader does not pass the queued writer");
      assertNull(readerClient.tryAcquireRead(k, opts.waitFor(Duration.ofMillis(200))));
      assertEquals(2, holders(k), "the two first readers only");
      reader.release();
      assertFalse(writer.isDone(), "one reader still holds it");
      reader2.release();
      LockHandle w = writer.get(60);
      assertEquals(1, holders(k), "the writer holds it");
      assertNull(readerClient.tryAcquireRead(k), "no reader while it writes");
      w.release();
      LockHandle after = readerClient.tryAcquireRead(k);
      assertNotNull(after, "readers again after the writer");
      after.release();
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }

  @Test
  void aReadWriteLockNeverCollidesWithThePlainLockOfTheSameName(TestInfo t) throws Exception {
    String k = key(t);
    try (LockHandle plain = client.acquire(k);
        LockHandle write = client.tryAcquireWrite(k)) {
      assertNotNull(plain);
      assertNotNull(write, "the write side of K beside the plain lock K");
      assertEquals(plain.tokenString(), server.call("GET", k));
    }
    assertEquals(List.of(), Servers.keys(server, "*" + k + "*"));
  }
}
