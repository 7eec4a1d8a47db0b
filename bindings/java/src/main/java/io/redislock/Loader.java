package io.redislock;

import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Platform;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Finds {@code libredislock.so}: the system property {@code redislock.library}
 * (a path), the environment variable {@code REDISLOCK_LIB}, the copy bundled
 * in the jar (extracted once per version and content into a directory of
 * the temporary directory that only this user can write, and checked
 * against the bundled bytes before it is used), then
 * the system's library path (and {@code jna.library.path}). The error lists
 * every place it looked and why each failed.
 */
final class Loader {
  /** Where the jar carries the library, by JNA's platform prefix (linux-x86-64). */
  static final String RESOURCE_DIR = "io/redislock/native/";

  /** Strings cross as UTF-8, whatever the JVM's default charset (JDK 17: the locale's). */
  private static final Map<String, Object> OPTIONS = Map.of(Library.OPTION_STRING_ENCODING, "UTF-8");

  private Loader() {}

  static NativeLibrary load() {
    if (Native.POINTER_SIZE != 8) {
      throw new UnsatisfiedLinkError("redislock needs a 64-bit JVM (pointers here are "
          + Native.POINTER_SIZE + " bytes)");
    }
    List<String> tried = new ArrayList<>();
    String prop = System.getProperty("redislock.library");
    if (prop != null && !prop.isEmpty()) {
      return explicit(prop, "-Dredislock.library", tried);
    }
    String env = System.getenv("REDISLOCK_LIB");
    if (env != null && !env.isEmpty()) {
      return explicit(env, "REDISLOCK_LIB", tried);
    }
    String resource = RESOURCE_DIR + Platform.RESOURCE_PREFIX + "/" + System.mapLibraryName("redislock");
    try {
      Path bundled = extract(resource);
      if (bundled == null) {
        tried.add("the jar: no " + resource + " in it (a jar without the library, or another platform)");
      } else {
        return NativeLibrary.getInstance(bundled.toString(), OPTIONS);
      }
    } catch (IOException | UnsupportedOperationException | UnsatisfiedLinkError e) {
      tried.add("the jar's " + resource + ": " + oneLine(e.getMessage()));
    }
    for (String name : new String[] {"redislock", "libredislock.so.0"}) {
      try {
        return NativeLibrary.getInstance(name, OPTIONS);
      } catch (UnsatisfiedLinkError e) {
        tried.add("the system library path for " + name + " (jna.library.path="
            + System.getProperty("jna.library.path", "unset") + "): " + oneLine(e.getMessage()));
      }
    }
    throw new UnsatisfiedLinkError("redislock: cannot load libredislock. Looked in:\n  - "
        + String.join("\n  - ", tried)
        + "\nSet -Dredislock.library=/path/to/libredislock.so or REDISLOCK_LIB, use the jar that"
        + " bundles it, or install the libredislock0 package.");
  }

  /** The path a user named: used as given, or an error naming it (no fallback). */
  private static NativeLibrary explicit(String path, String from, List<String> tried) {
    try {
      if (!Files.isRegularFile(Paths.get(path))) {
        throw new UnsatisfiedLinkError("no such file");
      }
      return NativeLibrary.getInstance(Paths.get(path).toAbsolutePath().toString(), OPTIONS);
    } catch (UnsatisfiedLinkError e) {
      throw new UnsatisfiedLinkError("redislock: cannot load libredislock from " + from + "=" + path
          + ": " + oneLine(e.getMessage()));
    }
  }

  /**
   * The bundled library as a file only this user can change, checked to hold
   * the bundled bytes: {@code <tmpdir>/redislock-<uid>/libredislock-<sha256>.so}.
   * The directory is made 0700 (or reused only when it is a directory, not a
   * link, owned by this user and writable by no one else); the file is reused
   * only when it is a regular file (not a link) of this user's, writable by
   * no one else, with the bundled bytes; otherwise it is written afresh (to a
   * temporary name, checked, then moved into place) and checked again. The
   * temporary directory and each directory above it must belong to this user
   * or root and be writable by no one else unless sticky (as /tmp is), so
   * that no one else can move the path to other bytes between the check and
   * the load. When the per-user directory is not safe to use, a new private
   * directory is made for this JVM (deleted on exit). Null when the jar has
   * no library.
   */
  static @Nullable Path extract(String resource) throws IOException {
    byte[] bytes;
    try (InputStream in = Loader.class.getClassLoader().getResourceAsStream(resource)) {
      if (in == null) {
        return null;
      }
      bytes = in.readAllBytes();
    }
    String digest = sha256(bytes);
    String tmpdir = System.getProperty("java.io.tmpdir");
    Path base;
    try {
      base = Paths.get(tmpdir).toRealPath();
    } catch (IOException e) {
      throw new IOException("java.io.tmpdir=" + tmpdir + " cannot be used: " + e, e);
    }
    int uid = currentUid(base);
    for (Path p = base; p != null; p = p.getParent()) {
      String why = unsafeAncestor(p, uid);
      if (why != null) {
        throw new IOException("not extracted under java.io.tmpdir=" + tmpdir + ": " + why
            + " (another user could replace the library before it is loaded); set -Djava.io.tmpdir"
            + " to a directory only you can write");
      }
    }
    String name = "libredislock-" + digest.substring(0, 32) + ".so";
    Path dir = base.resolve("redislock-" + uid);
    try {
      Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    } catch (FileAlreadyExistsException e) {
      // Someone made it before: used only if it passes the check below.
    }
    if (unsafeDirectory(dir, uid) == null) {
      Path file = dir.resolve(name);
      if (holds(file, uid, digest) == null) {
        return file;
      }
      return write(dir, file, bytes, uid, digest);
    }
    // Not ours, or writable by others: a new private directory (mkdir of a
    // fresh name, so no one else made it), removed when the JVM exits.
    Path own = Files.createTempDirectory(base, "redislock-" + uid + "-",
        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    own.toFile().deleteOnExit();
    String why = unsafeDirectory(own, uid);
    if (why != null) {
      throw new IOException(why);
    }
    Path file = own.resolve(name);
    file.toFile().deleteOnExit();
    return write(own, file, bytes, uid, digest);
  }

  /** Writes {@code bytes} to a new file in {@code dir}, moves it to {@code file} and checks it. */
  private static Path write(Path dir, Path file, byte[] bytes, int uid, String digest) throws IOException {
    Path tmp = Files.createTempFile(dir, "libredislock", ".tmp",
        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    try {
      Files.write(tmp, bytes);
      try {
        Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
      }
    } finally {
      Files.deleteIfExists(tmp);
    }
    String why = holds(file, uid, digest);
    if (why != null) {
      throw new IOException(why + " after extraction");
    }
    return file;
  }

  /** Why {@code file} may not be loaded as the bundled library, or null when it may. */
  private static @Nullable String holds(Path file, int uid, String digest) throws IOException {
    Map<String, Object> a;
    try {
      a = Files.readAttributes(file, "unix:uid,mode,isRegularFile", LinkOption.NOFOLLOW_LINKS);
    } catch (NoSuchFileException e) {
      return file + " does not exist";
    }
    if (!Boolean.TRUE.equals(a.get("isRegularFile"))) {
      return file + " is not a regular file";
    }
    if ((Integer) a.get("uid") != uid) {
      return file + " belongs to uid " + a.get("uid") + ", not " + uid;
    }
    if (((Integer) a.get("mode") & 0022) != 0) {
      return file + " is writable by others (mode " + Integer.toOctalString((Integer) a.get("mode") & 07777) + ")";
    }
    if (!sha256(Files.readAllBytes(file)).equals(digest)) {
      return file + " does not hold the bundled bytes";
    }
    return null;
  }

  /** Why {@code dir} is not a directory only {@code uid} can write, or null when it is. */
  static @Nullable String unsafeDirectory(Path dir, int uid) throws IOException {
    Map<String, Object> a = Files.readAttributes(dir, "unix:uid,mode,isDirectory", LinkOption.NOFOLLOW_LINKS);
    int mode = (Integer) a.get("mode") & 07777;
    if (!Boolean.TRUE.equals(a.get("isDirectory"))) {
      return dir + " is not a directory";
    }
    if ((Integer) a.get("uid") != uid) {
      return dir + " belongs to uid " + a.get("uid") + ", not " + uid;
    }
    if ((mode & 0022) != 0) {
      return dir + " is writable by others (mode " + Integer.toOctalString(mode) + ")";
    }
    return null;
  }

  /** Why no one else may be kept from renaming entries of {@code dir}, or null when it is safe. */
  private static @Nullable String unsafeAncestor(Path dir, int uid) throws IOException {
    Map<String, Object> a = Files.readAttributes(dir, "unix:uid,mode", LinkOption.NOFOLLOW_LINKS);
    int owner = (Integer) a.get("uid");
    int mode = (Integer) a.get("mode") & 07777;
    if (owner != uid && owner != 0) {
      return dir + " belongs to uid " + owner + " (neither " + uid + " nor root)";
    }
    if ((mode & 0022) != 0 && (mode & 01000) == 0) {
      return dir + " is writable by others and not sticky (mode " + Integer.toOctalString(mode) + ")";
    }
    return null;
  }

  /** This process's user id: the owner of /proc/self, or of a file it makes in {@code base}. */
  private static int currentUid(Path base) throws IOException {
    try {
      return (Integer) Files.getAttribute(Paths.get("/proc/self"), "unix:uid");
    } catch (IOException | UnsupportedOperationException e) {
      Path probe = Files.createTempFile(base, "redislock-uid", ".tmp");
      try {
        return (Integer) Files.getAttribute(probe, "unix:uid", LinkOption.NOFOLLOW_LINKS);
      } finally {
        Files.deleteIfExists(probe);
      }
    }
  }

  private static String sha256(byte[] bytes) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** JNA's multi-line message on one line. */
  private static String oneLine(@Nullable String s) {
    if (s == null) {
      return "";
    }
    return String.join("; ", s.strip().split("\\s*\n\\s*"));
  }
}
