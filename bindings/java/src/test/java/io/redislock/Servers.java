package io.redislock;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;

/**
 * The Java tests' harness: throwaway redis-servers on free loopback ports
 * (never 6379; {@code $REDIS_SERVER} chooses the binary, as for every suite
 * of the project: Valkey in {@code make test-valkey}), a plain RESP
 * connection to look at what the library wrote, and waiting for events with
 * generous deadlines (these machines pause while compilers run).
 */
final class Servers {
  /** The repository's root (the tests run from bindings/java). */
  static final Path ROOT = Paths.get(System.getProperty("redislock.root", "../..")).toAbsolutePath().normalize();

  private Servers() {}

  /** One redis-server process; {@link #close()} kills it and removes its directory. */
  static final class Server implements AutoCloseable {
    final int port;
    private final Path dir;
    private Process process;

    Server() throws IOException {
      dir = Files.createTempDirectory("redislock-java-");
      for (int attempt = 0; attempt < 20; attempt++) {
        int p = freePort();
        if (launch(p)) {
          port = p;
          return;
        }
      }
      throw new IOException("could not start " + bin() + " on a free port (see " + dir + "/redis.log)");
    }

    private static String bin() {
      String name = System.getenv().getOrDefault("REDIS_SERVER", "");
      if (name.isEmpty()) {
        return "redis-server";
      }
      return name.contains("/") ? ROOT.resolve(name).toString() : name;
    }

    private boolean launch(int p) throws IOException {
      process = new ProcessBuilder(bin(), "--port", Integer.toString(p), "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no", "--dir", dir.toString(), "--logfile", "redis.log")
          .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (System.nanoTime() < deadline) {
        if (!process.isAlive()) {
          return false;
        }
        try (Resp r = new Resp(p)) {
          if ("PONG".equals(r.call("PING"))) {
            return true;
          }
        } catch (IOException e) {
          sleep(20);
        }
      }
      process.destroyForcibly();
      return false;
    }

    String url() {
      return "redis://127.0.0.1:" + port + "/0";
    }

    Resp raw() throws IOException {
      return new Resp(port);
    }

    /** One command on a new connection. */
    Object call(Object... args) throws IOException {
      try (Resp r = raw()) {
        return r.call(args);
      }
    }

    /** SIGKILL it. */
    void kill() {
      if (process != null) {
        process.destroyForcibly();
        try {
          process.waitFor();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    }

    @Override
    public void close() throws IOException {
      kill();
      try (var files = Files.walk(dir)) {
        files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
      }
    }
  }

  static int freePort() throws IOException {
    while (true) {
      try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
        if (s.getLocalPort() != 6379) {
          return s.getLocalPort();
        }
      }
    }
  }

  /**
   * A plain RESP2 connection: to look at keys, TTLs and server stats (the
   * library under test never goes through it). Replies: String (simple and
   * bulk), Long, null, List, or a RespError thrown.
   */
  static final class Resp implements AutoCloseable {
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    Resp(int port) throws IOException {
      socket = new Socket(InetAddress.getLoopbackAddress(), port);
      socket.setSoTimeout(10_000);
      in = new BufferedInputStream(socket.getInputStream());
      out = socket.getOutputStream();
    }

    Object call(Object... args) throws IOException {
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      b.writeBytes(("*" + args.length + "\r\n").getBytes(StandardCharsets.UTF_8));
      for (Object a : args) {
        byte[] x = a instanceof byte[] ? (byte[]) a : a.toString().getBytes(StandardCharsets.UTF_8);
        b.writeBytes(("$" + x.length + "\r\n").getBytes(StandardCharsets.UTF_8));
        b.writeBytes(x);
        b.writeBytes("\r\n".getBytes(StandardCharsets.UTF_8));
      }
      out.write(b.toByteArray());
      out.flush();
      return read();
    }

    private Object read() throws IOException {
      int type = in.read();
      String line = line();
      switch (type) {
        case '+':
          return line;
        case '-':
          throw new IOException("server error: " + line);
        case ':':
          return Long.parseLong(line);
        case '$': {
          int n = Integer.parseInt(line);
          if (n < 0) {
            return null;
          }
          byte[] data = in.readNBytes(n);
          line();
          return new String(data, StandardCharsets.UTF_8);
        }
        case '*': {
          int n = Integer.parseInt(line);
          if (n < 0) {
            return null;
          }
          List<Object> items = new ArrayList<>();
          for (int i = 0; i < n; i++) {
            items.add(read());
          }
          return items;
        }
        default:
          throw new IOException("unexpected reply type " + type);
      }
    }

    private String line() throws IOException {
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      int c;
      while ((c = in.read()) != '\r') {
        if (c < 0) {
          throw new IOException("connection closed");
        }
        b.write(c);
      }
      in.read(); // \n
      return b.toString(StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws IOException {
      socket.close();
    }
  }

  /** A field of INFO (as text), or null. */
  static String info(Server s, String section, String field) throws IOException {
    String text = (String) s.call("INFO", section);
    for (String l : text.split("\r\n")) {
      if (l.startsWith(field + ":")) {
        return l.substring(field.length() + 1);
      }
    }
    return null;
  }

  /** How many times the server ran {@code command} (INFO commandstats). */
  static long calls(Server s, String command) throws IOException {
    String v = info(s, "commandstats", "cmdstat_" + command);
    if (v == null) {
      return 0;
    }
    for (String kv : v.split(",")) {
      if (kv.startsWith("calls=")) {
        return Long.parseLong(kv.substring(6));
      }
    }
    return 0;
  }

  /** Wait until {@code cond} holds, for at most {@code seconds}; fail naming {@code what}. */
  static void waitUntil(String what, double seconds, BooleanSupplier cond) {
    long deadline = System.nanoTime() + (long) (seconds * 1e9);
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + seconds + " s waiting for " + what);
      }
      sleep(10);
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** One server for a whole test class (JUnit's per-class lifecycle). */
  private static Server shared;

  static synchronized Server main() throws IOException {
    if (shared == null) {
      shared = new Server();
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        try {
          shared.close();
        } catch (IOException ignored) {
          // the temporary directory stays
        }
      }));
    }
    return shared;
  }

  // ---- helpers of the test classes beside LockHandleTest -------------------

  /** One command on a new connection, for lambdas (an IOException becomes unchecked). */
  static Object q(Server s, Object... args) {
    try {
      return s.call(args);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** The keys matching {@code pattern}, sorted (KEYS: fine on a throwaway server). */
  static List<String> keys(Server s, String pattern) throws IOException {
    List<String> out = new ArrayList<>();
    for (Object k : (List<?>) s.call("KEYS", pattern)) {
      out.add((String) k);
    }
    out.sort(null);
    return out;
  }

  /** Every command the server ran but INFO (which the harness sends), summed from INFO commandstats. */
  static long commandsButInfo(Server s) throws IOException {
    long sum = 0;
    for (String l : ((String) s.call("INFO", "commandstats")).split("\r\n")) {
      if (!l.startsWith("cmdstat_") || l.startsWith("cmdstat_info:")) {
        continue;
      }
      for (String kv : l.substring(l.indexOf(':') + 1).split(",")) {
        if (kv.startsWith("calls=")) {
          sum += Long.parseLong(kv.substring(6));
        }
      }
    }
    return sum;
  }

  /** A body running on a platform thread of its own (a daemon). */
  static final class Task<T> {
    final Thread thread;
    final FutureTask<T> future;

    Task(String name, Callable<T> body) {
      future = new FutureTask<>(body);
      thread = new Thread(future, name);
      thread.setDaemon(true);
      thread.start();
    }

    /** Its value, waiting at most {@code seconds}; its exception rethrown as it is. */
    T get(double seconds) throws Exception {
      try {
        return future.get((long) (seconds * 1000), TimeUnit.MILLISECONDS);
      } catch (ExecutionException e) {
        if (e.getCause() instanceof Exception) {
          throw (Exception) e.getCause();
        }
        throw (Error) e.getCause();
      } catch (TimeoutException e) {
        throw new AssertionError("\"" + thread.getName() + "\" did not finish within " + seconds + " s", e);
      }
    }

    boolean isDone() {
      return future.isDone();
    }
  }

  static <T> Task<T> spawn(String name, Callable<T> body) {
    return new Task<>(name, body);
  }
}
