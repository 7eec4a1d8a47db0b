// make bench-java: the Java binding (bindings/java, JNA's direct mapping over
// the C API) against a hand-written helper over a raw socket, and against
// the C API itself, on a throwaway redis-server of its own ($REDIS_SERVER,
// default redis-server) on a free loopback port:
//
//   java -cp redislock-<v>.jar:jna.jar:CLASSES Bench --c-cycles PATH
//        [--quick] [--rounds N] [--batch N] [--out PATH]
//
// One process, one key per kind, an uncontended cycle (one attempt on a free
// lock + release) in rounds (--rounds, 40) of one batch (--batch, 200
// cycles) per kind, the order rotated every round (and reversed every other):
//
//   redislock  client.tryAcquire(key) + lock.release(): the binding with its
//              default options (30 s TTL, one attempt), what a new user
//              writes first
//   jna        redislock_acquire (wait_ms 0) + redislock_release called from
//              here through a direct JNA mapping of their own: the C calls
//              alone, without the binding's Java around them
//   c          the same two calls from a C program (bench/c/cycles.c, its
//              own process, its own client), driven batch by batch from here
//   helper     what users write by hand and replace with redislock, over a
//              plain blocking java.net.Socket speaking RESP (written below):
//              SET key token NX PX 30000, then EVALSHA of the
//              compare-and-delete script (EVAL on NOSCRIPT); a fresh 128-bit
//              token per cycle (32 hex characters, as long as the library's)
//   ping       PING on the helper's socket: the loopback round trip (RTT)
//
// Per batch: the mean and p50 time per cycle (System.nanoTime() around each
// cycle; the c batches time themselves with CLOCK_MONOTONIC) and this
// process's CPU per cycle (every thread: the JIT, the GC and the library's
// own included). Every figure is a ratio taken inside its round, quoted as
// the median (min-max) over rounds: the speed redislock / helper (the
// helper's mean time per cycle over ours; goal >= 0.95), the cycle p50 in
// round trips of the same round, and what the binding costs over the C
// calls: redislock - jna (the Java around the calls) and jna - c (JNA, the
// JVM and the process). Then JNA's own cost per call, timed in a loop of
// two native functions that do next to nothing (redislock_stats_bucket_bound_us,
// and redislock_last_error with a 16-byte array, which JNA copies in and
// out), times the native calls one binding cycle makes.
//
// Prints Markdown tables and writes them, the summary and every batch's
// record as one JSON document to --out (default
// bench/results/DATE/java.json from the working directory, DATE-quick with
// --quick). --quick: a smoke run of a few seconds.

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import io.redislock.LockHandle;
import io.redislock.RedisLockClient;
import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.ToDoubleFunction;

public final class Bench {
  static final String RELEASE_LUA =
      "if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"del\",KEYS[1]) else return 0 end";
  static final List<String> KINDS = List.of("redislock", "jna", "c", "helper", "ping");
  /**
   * The native calls of one binding cycle: redislock_acquire (tryAcquire,
   * which installs no interrupt check), redislock_lock_fence_if_drawn and
   * redislock_release (LockHandle.release). Counted from the binding's
   * source (RedisLockClient.take, LockHandle.release), not measured.
   */
  static final int CALLS_PER_CYCLE = 3;

  // ------------------------------------------------------------ arguments

  int rounds = 40;
  int batch = 200;
  int warmup = 3000;
  boolean quick;
  String cCycles;
  String out;

  void parse(String[] argv) {
    for (int i = 0; i < argv.length; i++) {
      String a = argv[i];
      switch (a) {
        case "--quick":
          quick = true;
          rounds = 10;
          batch = 100;
          warmup = 1000;
          break;
        case "--rounds":
          rounds = Integer.parseInt(argv[++i]);
          break;
        case "--batch":
          batch = Integer.parseInt(argv[++i]);
          break;
        case "--c-cycles":
          cCycles = argv[++i];
          break;
        case "--out":
          out = argv[++i];
          break;
        default:
          throw new IllegalArgumentException("unknown argument " + a);
      }
    }
    if (cCycles == null) {
      throw new IllegalArgumentException("--c-cycles PATH (bench/c/cycles.c, built by make bench-java) is required");
    }
    if (rounds < 1 || batch < 1) {
      throw new IllegalArgumentException("--rounds and --batch must be positive");
    }
  }

  static void log(String msg) {
    System.err.println(msg);
  }

  // ------------------------------------------------------------ the server

  /** A throwaway redis-server on a free loopback port (never 6379), killed at exit. */
  static final class Server {
    final Process proc;
    final int port;
    final Path dir;
    final String version;

    Server() throws Exception {
      String bin = System.getenv().getOrDefault("REDIS_SERVER", "redis-server");
      if (bin.isEmpty()) {
        bin = "redis-server";
      }
      dir = Files.createTempDirectory("redislock-bench-java-");
      Process p = null;
      int port = 0;
      for (int attempt = 0; attempt < 20 && p == null; attempt++) {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
          port = s.getLocalPort();
        }
        if (port == 6379) {
          continue;
        }
        Process started = new ProcessBuilder(bin, "--port", Integer.toString(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", dir.toString(), "--logfile", "server.log",
            "--daemonize", "no")
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() < deadline && started.isAlive()) {
          if (ping(port)) {
            p = started;
            break;
          }
          Thread.sleep(20);
        }
        if (p == null) {
          started.destroyForcibly();
        }
      }
      if (p == null) {
        throw new IOException("could not start " + bin + " on a free port (apt-get install redis-server, or set REDIS_SERVER)");
      }
      proc = p;
      this.port = port;
      Runtime.getRuntime().addShutdownHook(new Thread(this::stop));
      try (Raw r = new Raw(port)) {
        String info = r.info();
        String family = info.contains("server_name:valkey") ? "valkey" : "redis";
        version = family + " " + field(info, family.equals("valkey") ? "valkey_version" : "redis_version");
      }
    }

    static boolean ping(int port) {
      try (Raw r = new Raw(port)) {
        r.ping();
        return true;
      } catch (IOException e) {
        return false;
      }
    }

    static String field(String info, String name) {
      for (String l : info.split("\r\n")) {
        if (l.startsWith(name + ":")) {
          return l.substring(name.length() + 1);
        }
      }
      return "?";
    }

    void stop() {
      proc.destroyForcibly();
      try {
        proc.waitFor();
        try (var files = Files.list(dir)) {
          for (Path f : (Iterable<Path>) files::iterator) {
            Files.deleteIfExists(f);
          }
        }
        Files.deleteIfExists(dir);
      } catch (IOException | InterruptedException ignored) {
        // Best effort: a temporary directory.
      }
    }
  }

  // ------------------------------------------------------------ the helper

  /**
   * A plain blocking socket speaking RESP: each command written with one
   * write() from a reused buffer, each reply read from a buffered stream.
   * The helper's lock cycle, PING and INFO; nothing else.
   */
  static final class Raw implements AutoCloseable {
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;
    private final byte[] buf = new byte[1024];
    private int len;
    private final byte[] token = new byte[32];
    private final byte[] sha;
    private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

    Raw(int port) throws IOException {
      socket = new Socket(InetAddress.getLoopbackAddress(), port);
      socket.setTcpNoDelay(true);
      in = new BufferedInputStream(socket.getInputStream(), 8192);
      out = socket.getOutputStream();
      try {
        sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1")
            .digest(RELEASE_LUA.getBytes(StandardCharsets.UTF_8))).getBytes(StandardCharsets.US_ASCII);
      } catch (java.security.NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
    }

    private void put(byte[] b) {
      System.arraycopy(b, 0, buf, len, b.length);
      len += b.length;
    }

    private void put(String s) {
      for (int i = 0; i < s.length(); i++) {
        buf[len++] = (byte) s.charAt(i);
      }
    }

    private void bulk(byte[] b) {
      put("$" + b.length + "\r\n");
      put(b);
      put("\r\n");
    }

    private void send() throws IOException {
      out.write(buf, 0, len);
      out.flush();
      len = 0;
    }

    /** A reply's first line: its type byte, then the rest up to CRLF (a bulk string's body read too). */
    private String reply() throws IOException {
      StringBuilder sb = new StringBuilder();
      int c;
      while ((c = in.read()) != '\r') {
        if (c < 0) {
          throw new IOException("the server closed the connection");
        }
        sb.append((char) c);
      }
      in.read(); // '\n'
      if (sb.charAt(0) == '$') {
        int n = Integer.parseInt(sb.substring(1));
        if (n >= 0) {
          byte[] body = in.readNBytes(n + 2);
          return "$" + new String(body, 0, n, StandardCharsets.UTF_8);
        }
      }
      return sb.toString();
    }

    private static final byte[] SET_HEAD = "*6\r\n$3\r\nSET\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] SET_TAIL = "$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] EVALSHA_HEAD = "*5\r\n$7\r\nEVALSHA\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] ONE_KEY = "$1\r\n1\r\n".getBytes(StandardCharsets.US_ASCII);

    /** SET key token NX PX 30000; EVALSHA compare-and-delete (EVAL on NOSCRIPT). */
    void cycle(byte[] key) throws IOException {
      ThreadLocalRandom r = ThreadLocalRandom.current();
      long a = r.nextLong();
      long b = r.nextLong();
      for (int i = 0; i < 16; i++) {
        token[i] = HEX[(int) (a >>> (60 - 4 * i)) & 15];
        token[16 + i] = HEX[(int) (b >>> (60 - 4 * i)) & 15];
      }
      put(SET_HEAD);
      bulk(key);
      bulk(token);
      put(SET_TAIL);
      send();
      String set = reply();
      if (!set.equals("+OK")) {
        throw new IOException("helper: SET NX gave " + set + " on a free key");
      }
      put(EVALSHA_HEAD);
      bulk(sha);
      put(ONE_KEY);
      bulk(key);
      bulk(token);
      send();
      String del = reply();
      if (del.startsWith("-NOSCRIPT")) {
        put("*5\r\n$4\r\nEVAL\r\n");
        bulk(RELEASE_LUA.getBytes(StandardCharsets.UTF_8));
        put(ONE_KEY);
        bulk(key);
        bulk(token);
        send();
        del = reply();
      }
      if (!del.equals(":1")) {
        throw new IOException("helper: the release gave " + del);
      }
    }

    void ping() throws IOException {
      put("*1\r\n$4\r\nPING\r\n");
      send();
      String r = reply();
      if (!r.equals("+PONG")) {
        throw new IOException("PING gave " + r);
      }
    }

    String info() throws IOException {
      put("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n");
      send();
      return reply().substring(1);
    }

    @Override
    public void close() throws IOException {
      socket.close();
    }
  }

  // ------------------------------------------------------------ the C calls through JNA

  /** Direct mapping of the few C calls timed here, bound to the library the binding loaded. */
  public static final class C {
    public static native int redislock_client_open(String url, long[] out);

    public static native void redislock_client_free(long client);

    public static native int redislock_acquire(
        long client, byte[] key, long keyLen, long ttlMs, long waitMs, byte[] token, long tokenLen, long[] out);

    public static native int redislock_release(long lock);

    public static native long redislock_stats_bucket_bound_us(long i);

    public static native long redislock_last_error(byte[] buf, long cap);

    static void register(String path) {
      Native.register(C.class, NativeLibrary.getInstance(path));
    }
  }

  /** The C program of bench/c/cycles.c: a batch of N cycles per line asked, "MEAN_NS P50_NS CPU_NS" back. */
  static final class CProgram implements AutoCloseable {
    final Process proc;
    final PrintWriter to;
    final BufferedReader from;

    CProgram(String path, int port, String key) throws IOException {
      proc = new ProcessBuilder(path, Integer.toString(port), key)
          .redirectError(ProcessBuilder.Redirect.INHERIT).start();
      Runtime.getRuntime().addShutdownHook(new Thread(proc::destroyForcibly));
      to = new PrintWriter(proc.getOutputStream(), true, StandardCharsets.US_ASCII);
      from = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.US_ASCII));
      String ready = from.readLine();
      if (!"ready".equals(ready)) {
        throw new IOException(path + " did not get ready: " + ready);
      }
    }

    long[] batch(int n) throws IOException {
      to.println(n);
      String line = from.readLine();
      if (line == null || line.startsWith("error")) {
        throw new IOException("the C program: " + line);
      }
      String[] f = line.trim().split(" ");
      return new long[] {Long.parseLong(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2])};
    }

    @Override
    public void close() {
      to.println("quit");
      try {
        proc.waitFor();
      } catch (InterruptedException e) {
        proc.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
  }

  // ------------------------------------------------------------ figures

  static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    int n = s.length;
    return n == 0 ? Double.NaN : n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  }

  /** Median, min and max. */
  static double[] spread(double[] v) {
    double min = Double.POSITIVE_INFINITY;
    double max = Double.NEGATIVE_INFINITY;
    for (double x : v) {
      min = Math.min(min, x);
      max = Math.max(max, x);
    }
    return new double[] {median(v), min, max};
  }

  static String f(double v, int digits) {
    return String.format(Locale.ROOT, "%,." + digits + "f", v);
  }

  static String fs(double[] s, int digits) {
    return f(s[0], digits) + " (" + f(s[1], digits) + "-" + f(s[2], digits) + ")";
  }

  static String fsSigned(double[] s, int digits) {
    return f(s[0], digits) + " (" + f(s[1], digits) + " to " + f(s[2], digits) + ")";
  }

  /** One batch: kind, round, mean and p50 µs per cycle, process CPU µs per cycle. */
  record Rec(String kind, int round, int cycles, double meanUs, double p50Us, double cpuUs) {}

  /**
   * This process's CPU time, ns: the sum of every thread's time on a CPU
   * from /proc/self/task/TID/schedstat (precise to the nanosecond, where
   * the JDK's getProcessCpuTime() counts clock ticks of 10 ms, longer than
   * a batch). Read outside the timed cycles.
   */
  static long cpuNs() throws IOException {
    long sum = 0;
    try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
      for (Path t : tasks) {
        try {
          String s = Files.readString(t.resolve("schedstat"));
          sum += Long.parseLong(s.substring(0, s.indexOf(' ')));
        } catch (IOException e) {
          // A thread that ended meanwhile.
        }
      }
    }
    return sum;
  }

  /** The round's order: the kinds rotated by the round, reversed every other round. */
  static List<String> order(int round) {
    int k = round % KINDS.size();
    List<String> o = new ArrayList<>(KINDS.subList(k, KINDS.size()));
    o.addAll(KINDS.subList(0, k));
    if (round % 2 == 1) {
      java.util.Collections.reverse(o);
    }
    return o;
  }

  interface Cycle {
    void run() throws Exception;
  }

  static double[] timed(Cycle c, int n) throws Exception {
    long[] lat = new long[n];
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      long t = System.nanoTime();
      c.run();
      lat[i] = System.nanoTime() - t;
    }
    long wall = System.nanoTime() - t0;
    Arrays.sort(lat);
    return new double[] {wall / 1e3 / n, lat[n / 2] / 1e3};
  }

  /** JNA's cost per call of `call`, ns: the median of 7 loops of `n` calls. */
  static double perCallNs(Runnable call, int n) {
    double[] v = new double[7];
    for (int r = 0; r < v.length; r++) {
      long t = System.nanoTime();
      for (int i = 0; i < n; i++) {
        call.run();
      }
      v[r] = (double) (System.nanoTime() - t) / n;
    }
    return median(v);
  }

  static long sink;

  // ------------------------------------------------------------ the run

  public static void main(String[] argv) throws Exception {
    Bench b = new Bench();
    b.parse(argv);
    b.run();
  }

  void run() throws Exception {
    long started = System.nanoTime();
    Server server = new Server();
    int port = server.port;
    String url = "redis://127.0.0.1:" + port;
    log("bench-java: " + server.version + " on 127.0.0.1:" + port + ", Java " + Runtime.version()
        + ", redislock " + RedisLockClient.nativeVersion() + " from " + RedisLockClient.nativeLibraryPath());
    C.register(RedisLockClient.nativeLibraryPath());

    List<Rec> recs = new ArrayList<>();
    Map<String, Object> summary = new LinkedHashMap<>();
    double jnaEmptyNs;
    double jnaArrayNs;
    try (RedisLockClient client = RedisLockClient.open(url);
        Raw helper = new Raw(port);
        CProgram cprog = new CProgram(cCycles, port, "bench:java:c")) {
      long[] out = new long[1];
      check(C.redislock_client_open(url, out), "redislock_client_open");
      long raw = out[0];
      byte[] jnaKey = "bench:java:jna".getBytes(StandardCharsets.UTF_8);
      byte[] helperKey = "bench:java:helper".getBytes(StandardCharsets.UTF_8);
      Map<String, Cycle> cycles = new LinkedHashMap<>();
      cycles.put("redislock", () -> {
        LockHandle h = client.tryAcquire("bench:java:redislock");
        if (h == null) {
          throw new IllegalStateException("redislock: the free key was found held");
        }
        h.release();
      });
      cycles.put("jna", () -> {
        check(C.redislock_acquire(raw, jnaKey, jnaKey.length, 30_000, 0, null, 0, out), "redislock_acquire");
        check(C.redislock_release(out[0]), "redislock_release");
      });
      cycles.put("helper", () -> helper.cycle(helperKey));
      cycles.put("ping", helper::ping);

      log("bench-java: warm-up, " + warmup + " cycles of each Java kind (the JIT)");
      for (Cycle c : cycles.values()) {
        for (int i = 0; i < warmup; i++) {
          c.run();
        }
      }
      jnaEmptyNs = perCallNs(() -> sink += C.redislock_stats_bucket_bound_us(3), quick ? 200_000 : 2_000_000);
      byte[] small = new byte[16];
      jnaArrayNs = perCallNs(() -> sink += C.redislock_last_error(small, small.length), quick ? 200_000 : 2_000_000);

      for (int round = 0; round < rounds; round++) {
        for (String kind : order(round)) {
          long c0 = cpuNs();
          double[] m;
          double cpu;
          if (kind.equals("c")) {
            long[] r = cprog.batch(batch);
            m = new double[] {r[0] / 1e3, r[1] / 1e3};
            cpu = r[2] / 1e3;
          } else {
            m = timed(cycles.get(kind), batch);
            cpu = (cpuNs() - c0) / 1e3 / batch;
          }
          recs.add(new Rec(kind, round, batch, m[0], m[1], cpu));
        }
        if ((round + 1) % 10 == 0 || round + 1 == rounds) {
          int r = round;
          StringBuilder sb = new StringBuilder("bench-java: round " + (round + 1) + " of " + rounds + ":");
          for (String kind : KINDS) {
            sb.append(' ').append(kind).append(' ').append(f(of(recs, kind, r).p50Us, 1)).append(" µs");
          }
          log(sb.toString());
        }
      }
      C.redislock_client_free(raw);
    } finally {
      server.stop();
    }

    // Per round, then the median (min-max) over rounds.
    double[] speed = new double[rounds];
    double[] p50Rtt = new double[rounds];
    double[] helperRtt = new double[rounds];
    double[] bindingUs = new double[rounds];
    double[] jnaUs = new double[rounds];
    double[] overC = new double[rounds];
    double[] cpuHelper = new double[rounds];
    double[] cpuC = new double[rounds];
    for (int r = 0; r < rounds; r++) {
      Rec ours = of(recs, "redislock", r);
      Rec jna = of(recs, "jna", r);
      Rec c = of(recs, "c", r);
      Rec helper = of(recs, "helper", r);
      Rec ping = of(recs, "ping", r);
      speed[r] = helper.meanUs / ours.meanUs;
      p50Rtt[r] = ours.p50Us / ping.p50Us;
      helperRtt[r] = helper.p50Us / ping.p50Us;
      bindingUs[r] = ours.meanUs - jna.meanUs;
      jnaUs[r] = jna.meanUs - c.meanUs;
      overC[r] = ours.meanUs / c.meanUs;
      cpuHelper[r] = ours.cpuUs / helper.cpuUs;
      cpuC[r] = ours.cpuUs / c.cpuUs;
    }
    StringBuilder md = new StringBuilder();
    md.append("## Java: the binding (JNA) against a raw-socket helper and the C API (")
        .append(server.version).append(", Java ").append(Runtime.version()).append(")\n\n");
    md.append("### Uncontended cycle (one attempt on a free lock + release)\n\n");
    md.append(rounds).append(" rounds of ").append(batch)
        .append(" cycles per kind, order rotated; medians over rounds (µs per cycle). Process CPU: the client")
        .append(" process's, every thread, over each batch (this JVM's; the c batches' own process's).\n\n");
    md.append("| kind | cycle p50 | cycle mean | p50 in RTT | process CPU |\n|---|---|---|---|---|\n");
    Map<String, Object> kinds = new LinkedHashMap<>();
    double pingP50 = median(col(recs, "ping", Rec::p50Us));
    for (String kind : KINDS) {
      double p50 = median(col(recs, kind, Rec::p50Us));
      double mean = median(col(recs, kind, Rec::meanUs));
      double cpu = median(col(recs, kind, Rec::cpuUs));
      double[] inRtt = new double[rounds];
      for (int r = 0; r < rounds; r++) {
        inRtt[r] = of(recs, kind, r).p50Us / of(recs, "ping", r).p50Us;
      }
      md.append("| ").append(kind).append(" | ").append(f(p50, 1)).append(" µs | ").append(f(mean, 1))
          .append(" µs | ").append(f(median(inRtt), 2)).append(" | ")
          .append(Double.isNaN(cpu) ? "-" : f(cpu, 1) + " µs").append(" |\n");
      Map<String, Object> k = new LinkedHashMap<>();
      k.put("p50_us", p50);
      k.put("mean_us", mean);
      k.put("p50_rtt", median(inRtt));
      k.put("cpu_us", Double.isNaN(cpu) ? null : cpu);
      kinds.put(kind, k);
    }
    double[] sSpeed = spread(speed);
    double[] sRtt = spread(p50Rtt);
    double[] sHelperRtt = spread(helperRtt);
    double[] sBinding = spread(bindingUs);
    double[] sJna = spread(jnaUs);
    double[] sOverC = spread(overC);
    double ourP50 = median(col(recs, "redislock", Rec::p50Us));
    md.append("\nInside each round, median (min-max) over rounds:\n\n| figure | value |\n|---|---|\n");
    md.append("| speed, redislock / helper (the helper's mean time per cycle over ours) | ")
        .append(fs(sSpeed, 3)).append(" |\n");
    md.append("| redislock cycle p50 in loopback round trips (PING p50 of the round: ")
        .append(f(pingP50, 1)).append(" µs) | ").append(fs(sRtt, 2)).append(" |\n");
    md.append("| helper cycle p50 in round trips | ").append(fs(sHelperRtt, 2)).append(" |\n");
    md.append("| the binding's Java around the C calls: redislock - jna, µs per cycle | ")
        .append(fsSigned(sBinding, 2)).append(" |\n");
    md.append("| JNA, the JVM and the process: jna - c, µs per cycle | ").append(fsSigned(sJna, 2)).append(" |\n");
    md.append("| redislock / c, mean time per cycle | ").append(fs(sOverC, 3)).append(" |\n");
    md.append("| process CPU per cycle, redislock / helper | ").append(fs(spread(cpuHelper), 3)).append(" |\n");
    md.append("| process CPU per cycle, redislock / c | ").append(fs(spread(cpuC), 3)).append(" |\n");
    double perCycleNs = CALLS_PER_CYCLE * Math.max(jnaEmptyNs, jnaArrayNs);
    md.append("\nJNA's own cost per call (direct mapping; median of 7 loops): ").append(f(jnaEmptyNs, 0))
        .append(" ns for `redislock_stats_bucket_bound_us(3)` (a long in, a long out), ")
        .append(f(jnaArrayNs, 0)).append(" ns for `redislock_last_error` with a 16-byte array (copied in and out).")
        .append(" A binding cycle makes ").append(CALLS_PER_CYCLE)
        .append(" native calls (acquire, fence_if_drawn, release): at most ").append(f(perCycleNs / 1e3, 2))
        .append(" µs, ").append(f(100 * perCycleNs / 1e3 / ourP50, 2)).append(" % of its p50.\n\n");
    boolean met = sSpeed[0] >= 0.95;
    md.append("Goal: speed redislock / helper >= 0.95: ").append(fs(sSpeed, 3)).append(": **")
        .append(met ? "met" : "NOT met").append("**\n");

    summary.put("quick", quick);
    summary.put("java", Runtime.version().toString());
    summary.put("server", server.version);
    summary.put("rounds", rounds);
    summary.put("batch", batch);
    summary.put("kinds", kinds);
    summary.put("speed_redislock_over_helper", List.of(sSpeed[0], sSpeed[1], sSpeed[2]));
    summary.put("redislock_p50_rtt", List.of(sRtt[0], sRtt[1], sRtt[2]));
    summary.put("helper_p50_rtt", List.of(sHelperRtt[0], sHelperRtt[1], sHelperRtt[2]));
    summary.put("binding_minus_jna_us", List.of(sBinding[0], sBinding[1], sBinding[2]));
    summary.put("jna_minus_c_us", List.of(sJna[0], sJna[1], sJna[2]));
    summary.put("redislock_over_c", List.of(sOverC[0], sOverC[1], sOverC[2]));
    double[] sCpuHelper = spread(cpuHelper);
    double[] sCpuC = spread(cpuC);
    summary.put("cpu_redislock_over_helper", List.of(sCpuHelper[0], sCpuHelper[1], sCpuHelper[2]));
    summary.put("cpu_redislock_over_c", List.of(sCpuC[0], sCpuC[1], sCpuC[2]));
    summary.put("jna_call_ns", jnaEmptyNs);
    summary.put("jna_array_call_ns", jnaArrayNs);
    summary.put("calls_per_cycle", CALLS_PER_CYCLE);
    Map<String, Object> goal = new LinkedHashMap<>();
    goal.put("figure", "speed redislock / helper");
    goal.put("target", ">= 0.95");
    goal.put("value", sSpeed[0]);
    goal.put("met", met);
    summary.put("goals", List.of(goal));
    summary.put("seconds", Math.round((System.nanoTime() - started) / 1e9));

    String report = md.toString();
    Path path = Paths.get(out != null ? out
        : "bench/results/" + LocalDate.now() + (quick ? "-quick" : "") + "/java.json");
    Files.createDirectories(path.toAbsolutePath().getParent());
    StringBuilder json = new StringBuilder("{\"summary\": ").append(json(summary)).append(",\n\"report\": ")
        .append(json(report)).append(",\n\"records\": [\n");
    for (int i = 0; i < recs.size(); i++) {
      Rec r = recs.get(i);
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("bench", "java-uncontended");
      m.put("kind", r.kind());
      m.put("round", r.round());
      m.put("cycles", r.cycles());
      m.put("mean_us", r.meanUs());
      m.put("p50_us", r.p50Us());
      m.put("cpu_us", Double.isNaN(r.cpuUs()) ? null : r.cpuUs());
      json.append(json(m)).append(i + 1 < recs.size() ? ",\n" : "\n");
    }
    json.append("]}\n");
    Files.writeString(path, json);
    System.out.println("\n" + report + "\nbench-java took " + summary.get("seconds") + " s; written to " + path);
  }

  static void check(int status, String what) {
    if (status != 0) {
      byte[] msg = new byte[256];
      long n = C.redislock_last_error(msg, msg.length);
      throw new IllegalStateException(what + ": status " + status + ": "
          + new String(msg, 0, (int) Math.min(n, msg.length - 1), StandardCharsets.UTF_8));
    }
  }

  static Rec of(List<Rec> recs, String kind, int round) {
    for (Rec r : recs) {
      if (r.kind().equals(kind) && r.round() == round) {
        return r;
      }
    }
    throw new IllegalStateException("no " + kind + " batch in round " + round);
  }

  static double[] col(List<Rec> recs, String kind, ToDoubleFunction<Rec> f) {
    return recs.stream().filter(r -> r.kind().equals(kind)).mapToDouble(f).toArray();
  }

  /** Maps, lists, strings, numbers, booleans and null as JSON. */
  static String json(Object o) {
    if (o == null) {
      return "null";
    }
    if (o instanceof String) {
      StringBuilder sb = new StringBuilder("\"");
      for (char c : ((String) o).toCharArray()) {
        switch (c) {
          case '"':
            sb.append("\\\"");
            break;
          case '\\':
            sb.append("\\\\");
            break;
          case '\n':
            sb.append("\\n");
            break;
          default:
            if (c < 0x20) {
              sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            } else {
              sb.append(c);
            }
        }
      }
      return sb.append('"').toString();
    }
    if (o instanceof Double) {
      double d = (Double) o;
      return Double.isFinite(d) ? Double.toString(d) : "null";
    }
    if (o instanceof Number || o instanceof Boolean) {
      return o.toString();
    }
    if (o instanceof Map) {
      StringBuilder sb = new StringBuilder("{");
      for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
        if (sb.length() > 1) {
          sb.append(", ");
        }
        sb.append(json(e.getKey().toString())).append(": ").append(json(e.getValue()));
      }
      return sb.append('}').toString();
    }
    if (o instanceof List) {
      StringBuilder sb = new StringBuilder("[");
      for (Object x : (List<?>) o) {
        if (sb.length() > 1) {
          sb.append(", ");
        }
        sb.append(json(x));
      }
      return sb.append(']').toString();
    }
    throw new IllegalArgumentException("json: " + o.getClass());
  }
}
