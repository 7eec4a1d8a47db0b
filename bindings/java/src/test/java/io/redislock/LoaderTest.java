package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where the library is found, each case in a JVM of its own (LoaderProbe):
 * -Dredislock.library before REDISLOCK_LIB, a path a user named is used or
 * refused but never replaced by another library, and a library of another
 * version (a stale copy) is refused, naming both versions.
 */
class LoaderTest {
  /** The library under test (make test-java sets REDISLOCK_LIB). */
  static Path lib;

  @TempDir static Path dir;

  @BeforeAll
  static void find() {
    lib = Paths.get(RedisLockClient.nativeLibraryPath());
    assertTrue(Files.isRegularFile(lib), "the library under test: " + lib);
  }

  /** The probe's one line of output and its exit status. */
  record Run(int status, String line) {}

  private static String where(Class<?> c) throws Exception {
    return Paths.get(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
  }

  private static Run probe(String property, String env) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    if (property != null) {
      cmd.add("-Dredislock.library=" + property);
    }
    cmd.add("-cp");
    cmd.add(String.join(File.pathSeparator, where(LoaderProbe.class), where(RedisLockClient.class),
        where(com.sun.jna.Native.class)));
    cmd.add("io.redislock.LoaderProbe");
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Map<String, String> e = pb.environment();
    e.remove("REDISLOCK_LIB");
    if (env != null) {
      e.put("REDISLOCK_LIB", env);
    }
    Process p = pb.start();
    assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the probe JVM ended");
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    return new Run(p.exitValue(), out);
  }

  /** A copy of the library at another path, so that which one was loaded shows. */
  private static Path copy(String name) throws Exception {
    Path d = Files.createDirectories(dir.resolve(name));
    return Files.copy(lib, d.resolve("libredislock.so"));
  }

  @Test
  void thePropertyComesBeforeTheEnvironment() throws Exception {
    Path viaProperty = copy("property");
    Path viaEnv = copy("env");
    Run r = probe(viaProperty.toString(), viaEnv.toString());
    assertEquals(new Run(0, "loaded " + viaProperty + " " + NativeLib.VERSION), r);

    r = probe(null, viaEnv.toString());
    assertEquals(new Run(0, "loaded " + viaEnv + " " + NativeLib.VERSION), r);
  }

  @Test
  void aNamedPathThatIsMissingIsAnErrorNeverAnotherLibrary() throws Exception {
    Path good = copy("good");
    String missing = dir.resolve("nowhere/libredislock.so").toString();
    Run r = probe(missing, good.toString());
    assertEquals(3, r.status(), r.line());
    assertTrue(r.line().contains("cannot load libredislock from -Dredislock.library=" + missing + ": no such file"),
        r.line());

    r = probe(null, missing);
    assertEquals(3, r.status(), r.line());
    assertTrue(r.line().contains("cannot load libredislock from REDISLOCK_LIB=" + missing), r.line());
  }

  @Test
  void aLibraryThatIsNotRedislockIsNamed() throws Exception {
    Path notOurs = Files.write(dir.resolve("libnot.so"), new byte[] {0x7f, 'E', 'L', 'F', 0, 0, 0});
    Run r = probe(notOurs.toString(), null);
    assertEquals(3, r.status(), r.line());
    assertTrue(r.line().contains("cannot load libredislock from -Dredislock.library=" + notOurs), r.line());
  }

  @Test
  void aLibraryOfAnotherVersionIsRefusedNamingBoth() throws Exception {
    // The library under test with its version string changed: the version
    // is one NUL-terminated string in the library (redislock_version).
    byte[] bytes = Files.readAllBytes(lib);
    byte[] want = (NativeLib.VERSION + "\0").getBytes(StandardCharsets.US_ASCII);
    List<Integer> at = new ArrayList<>();
    for (int i = 0; i + want.length <= bytes.length; i++) {
      if (bytes[i] == want[0] && Arrays.equals(bytes, i, i + want.length, want, 0, want.length)) {
        at.add(i);
      }
    }
    assertEquals(1, at.size(), "\"" + NativeLib.VERSION + "\" appears once in " + lib + " (at " + at + ")");
    String stale = NativeLib.VERSION.substring(0, NativeLib.VERSION.length() - 1)
        + (NativeLib.VERSION.endsWith("9") ? "8" : "9");
    System.arraycopy(stale.getBytes(StandardCharsets.US_ASCII), 0, bytes, at.get(0), stale.length());
    Path old = Files.write(Files.createDirectories(dir.resolve("stale")).resolve("libredislock.so"), bytes);

    Run r = probe(null, old.toString());
    assertEquals(3, r.status(), r.line());
    assertTrue(r.line().contains(old + " is libredislock " + stale + ", but this jar is " + NativeLib.VERSION),
        r.line());
    assertFalse(r.line().startsWith("loaded"), r.line());
  }
}
