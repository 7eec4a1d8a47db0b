package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A web application's redeploy: the jar loaded in a class loader of its own
 * (UnloadProbe, in a JVM of its own), used (a client, a handle whose lost
 * listener runs on the callbacks thread, the Lock view and its sweeper, a
 * handle left to the cleaner and the release pool), closed and dropped: the
 * loader is collected and no redislock thread is left. A thread that never
 * ends, or JNA left holding a class of the jar, keeps the loader.
 */
class UnloadTest {
  private static String where(Class<?> c) throws Exception {
    return Paths.get(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
  }

  @Test
  void theJarsClassLoaderIsCollectedAfterUseAndNoThreadIsLeft() throws Exception {
    Path jar = Paths.get(where(RedisLockClient.class));
    assertTrue(Files.isRegularFile(jar) && jar.toString().endsWith(".jar"), "the binding comes from a jar: " + jar);
    List<String> cmd = List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
        "-cp", String.join(File.pathSeparator, where(UnloadProbe.class), where(com.sun.jna.Native.class)),
        "io.redislock.UnloadProbe", jar.toString(), Servers.main().url());
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    assertTrue(p.waitFor(300, TimeUnit.SECONDS), "the probe JVM ended");
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    System.out.println("unload probe: " + out);
    assertEquals("collected threads=[]", out.substring(out.lastIndexOf('\n') + 1), out);
    assertEquals(0, p.exitValue(), out);
  }
}
