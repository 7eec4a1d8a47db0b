// One chaos worker in Java (started by chaos.py, not by hand).
//
//   java -cp redislock.jar:jna.jar:DIR Worker URL DIR ID TTL_MS WAIT_MS
//
// The protocol of worker.c: DIR/ready-ID once the client exists, wait for
// DIR/go, loop until DIR/stop exists: a fenced acquisition of the lock
// "chaos" through the project's Java binding (bindings/java), the critical
// section on the file store DIR/store (flock(2) on DIR/store.lock, as the
// other workers take it: Java's FileChannel.lock is a POSIX record lock,
// which does not exclude flock; read, 1 ms, write: two sections, so that two
// owners lose an update), release; one JSON line per attempt in
// DIR/events-ID.jsonl with CLOCK_MONOTONIC nanoseconds (t0 acquire called,
// t1 returned, t2 release called, t3 returned). The library is
// $REDISLOCK_LIB (chaos.py sets it).

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import io.redislock.LockConnectionException;
import io.redislock.LockException;
import io.redislock.LockHandle;
import io.redislock.LockNotOwnedException;
import io.redislock.LockOptions;
import io.redislock.LockQuorumException;
import io.redislock.LockServerException;
import io.redislock.LockTimeoutException;
import io.redislock.LockUnconfirmedException;
import io.redislock.LockWrongTypeException;
import io.redislock.RedisLockClient;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;

public final class Worker {
  static final String NAME = "chaos";
  static final int LOCK_EX = 2;
  static final int LOCK_UN = 8;

  /** libc's flock(2), open(2) and clock_gettime(2). */
  static final class C {
    static {
      Native.register(C.class, NativeLibrary.getInstance("c"));
    }

    static native int open(String path, int flags, int mode);

    static native int flock(int fd, int op);

    static native int clock_gettime(int clock, long[] ts);
  }

  static long clock() {
    long[] ts = new long[2];
    C.clock_gettime(1, ts); // CLOCK_MONOTONIC, shared by every process of the machine
    return ts[0] * 1_000_000_000L + ts[1];
  }

  static String errClass(Throwable e) {
    if (e instanceof LockTimeoutException) {
      return "timeout";
    } else if (e instanceof LockUnconfirmedException) {
      return "unconfirmed";
    } else if (e instanceof LockNotOwnedException) {
      return "not_owner";
    } else if (e instanceof LockQuorumException) {
      return "no_quorum";
    } else if (e instanceof LockConnectionException) {
      return "connection";
    } else if (e instanceof LockServerException) {
      return "server";
    } else if (e instanceof LockWrongTypeException) {
      return "wrong_type";
    } else if (e instanceof IllegalArgumentException) {
      return "invalid_argument";
    }
    return "other";
  }

  static String json(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  /** counter and fence, or null */
  static long[] storeRead(Path store) {
    try {
      String[] p = Files.readString(store).trim().split(" ");
      return new long[] {Long.parseLong(p[0]), Long.parseLong(p[1])};
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** outcome, stored fence, interleaved */
  static Object[] criticalSection(int lockFd, Path store, long fence) throws InterruptedException {
    C.flock(lockFd, LOCK_EX);
    long[] first = storeRead(store);
    C.flock(lockFd, LOCK_UN);
    if (first == null) {
      return new Object[] {"store_error", 0L, false};
    }
    if (fence <= first[1]) {
      return new Object[] {"refused", first[1], false};
    }
    Thread.sleep(1); // the increment is not atomic: a second owner loses an update
    C.flock(lockFd, LOCK_EX);
    try {
      long[] now = storeRead(store);
      if (now == null) {
        return new Object[] {"store_error", 0L, false};
      }
      if (fence <= now[1]) {
        return new Object[] {"refused", now[1], false};
      }
      try {
        Files.writeString(store, (first[0] + 1) + " " + fence + "\n");
      } catch (IOException e) {
        return new Object[] {"store_error", 0L, false};
      }
      return new Object[] {"ok", now[1], now[0] != first[0]};
    } finally {
      C.flock(lockFd, LOCK_UN);
    }
  }

  public static void main(String[] args) throws Exception {
    String url = args[0];
    Path dir = Paths.get(args[1]);
    String id = args[2];
    LockOptions opts = LockOptions.ttl(Duration.ofMillis(Long.parseLong(args[3])))
        .waitFor(Duration.ofMillis(Long.parseLong(args[4]))).fenced(true);
    Path store = dir.resolve("store");
    int lockFd = C.open(dir.resolve("store.lock").toString(), 02 | 0100, 0644); // O_RDWR | O_CREAT
    if (lockFd < 0) {
      throw new IOException("cannot open " + dir.resolve("store.lock"));
    }
    try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(dir.resolve("events-" + id + ".jsonl"),
        StandardCharsets.UTF_8), true);
        RedisLockClient client = RedisLockClient.open(url)) {
      Files.createFile(dir.resolve("ready-" + id));
      long deadline = System.nanoTime() + 120_000_000_000L;
      while (!Files.exists(dir.resolve("go"))) {
        if (System.nanoTime() > deadline) {
          System.exit(1);
        }
        Thread.sleep(1);
      }
      Path stop = dir.resolve("stop");
      while (!Files.exists(stop)) {
        StringBuilder ev = new StringBuilder("{\"w\": " + json(id) + ", \"lang\": \"java\", \"t0\": " + clock());
        LockHandle lock = null;
        Throwable err = null;
        try {
          lock = client.acquire(NAME, opts);
        } catch (LockException | IllegalArgumentException e) {
          err = e;
        }
        ev.append(", \"t1\": ").append(clock());
        if (lock == null) {
          String cls = errClass(err);
          ev.append(", \"ok\": false, \"err\": ").append(json(cls)).append(", \"msg\": ")
              .append(json(err.getClass().getSimpleName() + ": " + err.getMessage())).append('}');
          out.println(ev);
          if (!cls.equals("timeout")) {
            Thread.sleep(10); // an error that comes at once must not spin
          }
          continue;
        }
        long fence = lock.fence();
        Object[] cs = criticalSection(lockFd, store, fence);
        ev.append(", \"ok\": true, \"fence\": ").append(fence).append(", \"cs\": ").append(json((String) cs[0]))
            .append(", \"stored\": ").append(cs[1]).append(", \"interleaved\": ").append(cs[2])
            .append(", \"t2\": ").append(clock());
        try {
          lock.release();
          ev.append(", \"rel\": \"ok\"");
        } catch (LockException e) {
          ev.append(", \"rel\": ").append(json(errClass(e))).append(", \"rel_msg\": ")
              .append(json(e.getClass().getSimpleName() + ": " + e.getMessage()));
        }
        ev.append(", \"t3\": ").append(clock()).append('}');
        out.println(ev);
      }
    }
  }
}
