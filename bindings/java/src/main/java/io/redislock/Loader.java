package io.redislock;

import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Platform;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * Finds {@code libredislock.so}: the system property {@code redislock.library}
 * (a path), the environment variable {@code REDISLOCK_LIB}, the copy bundled
 * in the jar (extracted once per version and content into the temporary
 * directory, and checked against the bundled bytes before it is used), then
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
    } catch (IOException | UnsatisfiedLinkError e) {
      tried.add("the jar's " + resource + ": " + e.getMessage());
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
   * The bundled library as a file: {@code <tmpdir>/redislock-<sha256>/libredislock.so},
   * written once (to a temporary name, then moved into place) and reused
   * only when its bytes are the bundled ones. Null when the jar has none.
   */
  private static Path extract(String resource) throws IOException {
    byte[] bytes;
    try (InputStream in = Loader.class.getClassLoader().getResourceAsStream(resource)) {
      if (in == null) {
        return null;
      }
      bytes = in.readAllBytes();
    }
    String digest = sha256(bytes);
    Path dir = Paths.get(System.getProperty("java.io.tmpdir"), "redislock-" + digest.substring(0, 32));
    Path file = dir.resolve(System.mapLibraryName("redislock"));
    if (Files.isRegularFile(file) && sha256(Files.readAllBytes(file)).equals(digest)) {
      return file;
    }
    Files.createDirectories(dir);
    Path tmp = Files.createTempFile(dir, "libredislock", ".tmp");
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
    if (!sha256(Files.readAllBytes(file)).equals(digest)) {
      throw new IOException(file + " does not hold the bundled bytes after extraction");
    }
    return file;
  }

  private static String sha256(byte[] bytes) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** JNA's multi-line message on one line. */
  private static String oneLine(String s) {
    if (s == null) {
      return "";
    }
    return String.join("; ", s.strip().split("\\s*\n\\s*"));
  }
}
