package io.redislock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.AnnotatedType;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/**
 * JSpecify's {@code @Nullable} marks what may be null, and the jar does not
 * carry the annotation (users get it from org.jspecify:jspecify; the build
 * compiles against bindings/java/build-only, on this test's class path).
 */
class NullableTest {
  @Test
  void theJarDoesNotShipTheBuildOnlyAnnotation() throws Exception {
    Path jar = Path.of(LockOptions.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    assertTrue(Files.isRegularFile(jar) && jar.toString().endsWith(".jar"),
        "the binding's classes come from a jar in this run, not " + jar);
    List<String> jspecify = new ArrayList<>();
    try (ZipFile z = new ZipFile(jar.toFile())) {
      assertTrue(z.getEntry("io/redislock/LockOptions.class") != null, jar + " holds the binding");
      for (ZipEntry e : java.util.Collections.list(z.entries())) {
        if (e.getName().startsWith("org/jspecify")) {
          jspecify.add(e.getName());
        }
      }
    }
    assertEquals(List.of(), jspecify, "org/jspecify entries in " + jar);
    // The annotation this test sees comes from the test class path, not from the jar.
    assertFalse(Nullable.class.getProtectionDomain().getCodeSource().getLocation().toString().endsWith(".jar"));
  }

  @Test
  void nullableReturnsCarryTheAnnotation() throws Exception {
    assertNullableReturn(LockOptions.class.getMethod("waitTime"));
    assertNullableReturn(LockOptions.class.getMethod("token"));
    assertNullableReturn(RedisLockClient.class.getMethod("tryAcquire", String.class, LockOptions.class));
    assertNullableReturn(RedisLockClient.class.getMethod("tryAcquire", String.class));
    assertFalse(LockOptions.class.getMethod("ttl").getAnnotatedReturnType().isAnnotationPresent(Nullable.class),
        "ttl() is never null");
  }

  static void assertNullableReturn(Method m) {
    AnnotatedType t = m.getAnnotatedReturnType();
    assertTrue(t.isAnnotationPresent(Nullable.class), m + " returns @Nullable " + t);
  }
}
