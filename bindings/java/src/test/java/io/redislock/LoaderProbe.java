package io.redislock;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Map;

/**
 * Run in a JVM of its own by LoaderTest (the library is found once per
 * JVM): prints "loaded PATH VERSION", or the loader's error and exits 3.
 * With the argument {@code where}, the line goes on with the owner and mode
 * of the loaded file and of its directory, as they are while it is loaded:
 * "loaded PATH VERSION file=UID:MODE dir=UID:MODE".
 */
public final class LoaderProbe {
  private LoaderProbe() {}

  public static void main(String[] args) throws Exception {
    String line;
    try {
      line = "loaded " + RedisLockClient.nativeLibraryPath() + " " + NativeLib.redislock_version();
    } catch (LinkageError e) {
      System.out.println("error " + e.getMessage().replace('\n', '|'));
      System.exit(3);
      return;
    }
    if (args.length > 0 && args[0].equals("where")) {
      Path file = Path.of(RedisLockClient.nativeLibraryPath());
      line += " file=" + owner(file) + " dir=" + owner(file.getParent());
    }
    System.out.println(line);
  }

  private static String owner(Path p) throws Exception {
    Map<String, Object> a = Files.readAttributes(p, "unix:uid,mode", LinkOption.NOFOLLOW_LINKS);
    return a.get("uid") + ":" + Integer.toOctalString((Integer) a.get("mode") & 07777);
  }
}
