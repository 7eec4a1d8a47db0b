// make demo: a Java worker (the jar of bindings/java, `make java`, over JNA;
// the library from REDISLOCK_LIB). Once, then until the deadline: take the
// lock, increment the counter non-atomically (GET, then SET, on a
// connection of its own), release. Prints "fence value acquired_ns
// release_ns" per acquisition: the counter as read, CLOCK_MONOTONIC
// (System.nanoTime(), which reads it on Linux) after the acquisition and
// before the release. With LIMIT, a permit of the semaphore `demo:pool` of
// LIMIT instead, counted with INCR `demo:pool:done`, held 1 ms, the value
// reported as 0.
//
//   javac -cp redislock-<v>.jar:/usr/share/java/jna.jar -d DIR worker.java
//   java -cp redislock-<v>.jar:/usr/share/java/jna.jar:DIR Worker REDIS_PORT SECONDS [LIMIT]
//
// make dist-check: the jar of dist/ (its own library, no REDISLOCK_LIB) instead.

import io.redislock.LockHandle;
import io.redislock.LockOptions;
import io.redislock.RedisLockClient;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

final class Worker {
  /**
   * The counter's connection: one command at a time, in RESP, with no client
   * library (the demo installs nothing from Maven). Answers are integers,
   * bulk strings (null when absent) or simple strings.
   */
  static final class Raw implements AutoCloseable {
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    Raw(int port) throws IOException {
      socket = new Socket("127.0.0.1", port);
      socket.setTcpNoDelay(true);
      in = new BufferedInputStream(socket.getInputStream());
      out = new BufferedOutputStream(socket.getOutputStream());
    }

    String call(String... args) throws IOException {
      ByteArrayOutputStream req = new ByteArrayOutputStream();
      req.writeBytes(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
      for (String a : args) {
        byte[] b = a.getBytes(StandardCharsets.UTF_8);
        req.writeBytes(("$" + b.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
        req.writeBytes(b);
        req.writeBytes("\r\n".getBytes(StandardCharsets.US_ASCII));
      }
      req.writeTo(out);
      out.flush();
      String head = line();
      switch (head.charAt(0)) {
        case '$':
          int n = Integer.parseInt(head.substring(1));
          if (n < 0) {
            return null;
          }
          byte[] v = in.readNBytes(n + 2);
          return new String(v, 0, n, StandardCharsets.UTF_8);
        case '-':
          throw new IOException(head.substring(1));
        default:
          return head.substring(1);
      }
    }

    private String line() throws IOException {
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      int c;
      while ((c = in.read()) != '\n') {
        if (c < 0) {
          throw new IOException("the server closed the connection");
        }
        if (c != '\r') {
          b.write(c);
        }
      }
      return b.toString(StandardCharsets.US_ASCII);
    }

    @Override
    public void close() throws IOException {
      socket.close();
    }
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    double seconds = Double.parseDouble(args[1]);
    int limit = args.length > 2 ? Integer.parseInt(args[2]) : 0;
    long finish = System.nanoTime() + (long) (seconds * 1e9);
    // A TTL and a wait no pause of a busy machine comes near.
    LockOptions opts = LockOptions.ttl(Duration.ofSeconds(30)).waitFor(Duration.ofSeconds(30));
    List<String> out = new ArrayList<>();
    try (RedisLockClient client = RedisLockClient.open("redis://127.0.0.1:" + port);
        Raw raw = new Raw(port)) {
      while (true) {
        LockHandle lock = limit > 0
            ? client.semaphore("demo:pool", limit).acquire(1, opts)
            : client.acquire("demo:lock", opts);
        String line;
        try {
          long acquired = System.nanoTime();
          long value = 0;
          if (limit > 0) {
            raw.call("INCR", "demo:pool:done");
            Thread.sleep(1);
          } else {
            String v = raw.call("GET", "demo:counter");
            value = v == null ? 0 : Long.parseLong(v);
            raw.call("SET", "demo:counter", Long.toString(value + 1));
          }
          line = lock.fence() + " " + value + " " + acquired + " " + System.nanoTime();
        } finally {
          lock.release();
        }
        out.add(line);
        if (System.nanoTime() >= finish) {
          break;
        }
      }
    }
    System.out.println(String.join("\n", out));
  }
}
