package io.redislock;

/**
 * Run in a JVM of its own by LoaderTest (the library is found once per
 * JVM): prints "loaded PATH VERSION", or the loader's error and exits 3.
 */
public final class LoaderProbe {
  private LoaderProbe() {}

  public static void main(String[] args) {
    try {
      System.out.println("loaded " + RedisLockClient.nativeLibraryPath() + " " + NativeLib.redislock_version());
    } catch (LinkageError e) {
      System.out.println("error " + e.getMessage().replace('\n', '|'));
      System.exit(3);
    }
  }
}
