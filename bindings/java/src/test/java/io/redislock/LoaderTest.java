package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where the library is found, each case in a JVM of its own (LoaderProbe):
 * -Dredislock.library before REDISLOCK_LIB, a path a user named is used or
 * refused but never replaced by another library, a library of another
 * version (a stale copy) is refused, naming both versions, and the library
 * bundled in a jar is extracted and loaded only where no other user can
 * replace it (running as root, other users are simulated with chown 65534).
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
    return probe(property, env, null, null);
  }

  /**
   * The probe, with {@code bundle} (a class path entry carrying the library
   * as a jar does) and {@code tmpdir} as java.io.tmpdir when given: it then
   * also prints the owner and mode of what it loaded.
   */
  private static Run probe(String property, String env, Path bundle, Path tmpdir) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    if (property != null) {
      cmd.add("-Dredislock.library=" + property);
    }
    if (tmpdir != null) {
      cmd.add("-Djava.io.tmpdir=" + tmpdir);
    }
    cmd.add("-cp");
    List<String> cp = new ArrayList<>(List.of(where(LoaderProbe.class), where(RedisLockClient.class),
        where(com.sun.jna.Native.class)));
    if (bundle != null) {
      cp.add(bundle.toString());
    }
    cmd.add(String.join(File.pathSeparator, cp));
    cmd.add("io.redislock.LoaderProbe");
    if (bundle != null) {
      cmd.add("where");
    }
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

  // The library bundled in the jar: extracted where only this user can write.

  /** A class path entry holding the library where the jar carries it. */
  private static Path bundle() throws Exception {
    Path b = dir.resolve("bundle");
    Path in = b.resolve(Loader.RESOURCE_DIR + com.sun.jna.Platform.RESOURCE_PREFIX + "/libredislock.so");
    if (!Files.exists(in)) {
      Files.createDirectories(in.getParent());
      Files.copy(lib, in);
    }
    return b;
  }

  /** Where the loader extracts the bundled library under {@code tmpdir} (this user's directory). */
  private static Path extracted(Path tmpdir) throws Exception {
    String digest = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(lib)));
    return tmpdir.resolve("redislock-" + uid()).resolve("libredislock-" + digest.substring(0, 32) + ".so");
  }

  private static int uid() throws Exception {
    return (Integer) Files.getAttribute(Paths.get("/proc/self"), "unix:uid");
  }

  private static Object attr(Path p, String name) throws Exception {
    return Files.getAttribute(p, "unix:" + name, LinkOption.NOFOLLOW_LINKS);
  }

  /** A new temporary directory for one case (0700, ours, under the JUnit one). */
  private static Path tmpdir(String name) throws Exception {
    return Files.createDirectory(dir.resolve(name),
        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
  }

  private static void chmod(Path p, String perms) throws Exception {
    Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(perms));
  }

  private static void chown(Path p, int uid) throws Exception {
    Files.setAttribute(p, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS);
  }

  /** The loaded path of a successful probe run with "where". */
  private static Path loaded(Run r) {
    assertEquals(0, r.status(), r.line());
    String[] w = r.line().split(" ");
    assertEquals("loaded", w[0], r.line());
    assertEquals(NativeLib.VERSION, w[2], r.line());
    return Paths.get(w[1]);
  }

  /** The loaded file is ours, 0600, in a directory of ours, 0700, as the probe saw them while loaded. */
  private static void assertPrivate(Run r) throws Exception {
    String[] w = r.line().split(" ");
    assertEquals("file=" + uid() + ":600", w[3], r.line());
    assertEquals("dir=" + uid() + ":700", w[4], r.line());
  }

  @Test
  void theBundledLibraryIsExtractedIntoADirectoryOnlyWeCanWriteAndReused() throws Exception {
    Path tmp = tmpdir("fresh");
    Path want = extracted(tmp);
    Run r = probe(null, null, bundle(), tmp);
    assertEquals(want, loaded(r));
    assertPrivate(r);
    assertEquals(uid(), attr(want.getParent(), "uid"));
    assertEquals(0700, (Integer) attr(want.getParent(), "mode") & 07777);
    assertTrue(Arrays.equals(Files.readAllBytes(lib), Files.readAllBytes(want)));

    // Again: the same file, not written anew.
    Object inode = attr(want, "ino");
    r = probe(null, null, bundle(), tmp);
    assertEquals(want, loaded(r));
    assertEquals(inode, attr(want, "ino"), "the extracted file is reused");
    try (var left = Files.list(want.getParent())) {
      assertEquals(List.of(want), left.toList(), "nothing but the library in " + want.getParent());
    }
  }

  /** Pre-made directories another user could write to: not used, and the library still loads. */
  @Test
  void aDirectoryOthersCanWriteOrOwnIsNotUsed() throws Exception {
    for (String how : List.of("0777", "0770", "uid 65534", "a link")) {
      Path tmp = tmpdir("premade-" + how.replace(' ', '-'));
      Path want = extracted(tmp);
      Path premade = want.getParent();
      if (how.equals("a link")) {
        Path elsewhere = Files.createDirectory(tmp.resolve("elsewhere"));
        chmod(elsewhere, "rwx------");
        Files.createSymbolicLink(premade, elsewhere);
        Files.copy(lib, elsewhere.resolve(want.getFileName()));
        chmod(elsewhere.resolve(want.getFileName()), "rw-------");
      } else {
        Files.createDirectory(premade);
        // The bundled bytes, planted: a check of the content alone would accept them.
        Files.copy(lib, want);
        chmod(want, "rw-------");
        if (how.equals("uid 65534")) {
          chmod(premade, "rwx------");
          chown(premade, 65534);
          chown(want, 65534);
        } else {
          chmod(premade, how.equals("0777") ? "rwxrwxrwx" : "rwxrwx---");
        }
      }
      Object planted = attr(want, "ino");
      Run r = probe(null, null, bundle(), tmp);
      Path got = loaded(r);
      assertFalse(got.startsWith(premade), how + ": loaded from the pre-made " + got);
      assertEquals(tmp, got.getParent().getParent(), how + ": " + got);
      assertTrue(got.getParent().getFileName().toString().startsWith("redislock-" + uid() + "-"), got.toString());
      assertPrivate(r);
      assertEquals(planted, attr(want, "ino"), how + ": the planted file is left alone");
      assertFalse(Files.exists(got.getParent()), how + ": the JVM's own directory is gone after it exits: " + got);
    }
  }

  /** In our own directory, a file that is not exactly ours and the bundled bytes is replaced, not loaded. */
  @Test
  void aPlantedFileIsReplacedBeforeItIsLoaded() throws Exception {
    for (String how : List.of("other bytes", "uid 65534", "mode 0666", "a link")) {
      Path tmp = tmpdir("planted-" + how.replace(' ', '-'));
      Path want = extracted(tmp);
      Files.createDirectory(want.getParent());
      chmod(want.getParent(), "rwx------");
      switch (how) {
        case "other bytes":
          Files.write(want, new byte[] {0x7f, 'E', 'L', 'F', 0, 0, 0});
          chmod(want, "rw-------");
          break;
        case "uid 65534":
          Files.copy(lib, want);
          chmod(want, "rw-------");
          chown(want, 65534);
          break;
        case "mode 0666":
          Files.copy(lib, want);
          chmod(want, "rw-rw-rw-");
          break;
        default:
          Path target = Files.copy(lib, tmp.resolve("target.so"));
          Files.createSymbolicLink(want, target);
          break;
      }
      Object planted = attr(want, "ino");
      Run r = probe(null, null, bundle(), tmp);
      assertEquals(want, loaded(r), how);
      assertPrivate(r);
      assertFalse(planted.equals(attr(want, "ino")), how + ": written afresh");
      assertTrue(Arrays.equals(Files.readAllBytes(lib), Files.readAllBytes(want)), how);
    }
  }

  /**
   * A temporary directory that others could rename entries of: nothing is
   * extracted there, and the error names it among the places looked.
   */
  @Test
  void anUnsafeTemporaryDirectoryIsRefusedAndNamed() throws Exception {
    Path open = tmpdir("open");
    chmod(open, "rwxrwxrwx");
    Run r = probe(null, null, bundle(), open);
    assertEquals(3, r.status(), r.line());
    assertTrue(r.line().contains("the jar's " + Loader.RESOURCE_DIR), r.line());
    assertTrue(r.line().contains(open + " is writable by others and not sticky (mode 777)"), r.line());
    assertTrue(r.line().contains("the system library path for redislock"), r.line());
    assertFalse(Files.exists(extracted(open).getParent()), "nothing extracted under " + open);

    Path theirs = tmpdir("theirs");
    chmod(theirs, "rwxr-xr-x");
    chown(theirs, 65534);
    r = probe(null, null, bundle(), theirs.resolve("."));
    assertEquals(3, r.status(), r.line());
    assertTrue(r.line().contains(theirs + " belongs to uid 65534 (neither " + uid() + " nor root)"), r.line());

    // Writable by all but sticky, as /tmp is: fine.
    Path sticky = tmpdir("sticky");
    Files.setAttribute(sticky, "unix:mode", 01777);
    r = probe(null, null, bundle(), sticky);
    assertEquals(extracted(sticky), loaded(r));
    assertPrivate(r);
  }
}
