package io.redislock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * LockOptions: {@code ttl(Duration)} starts options and cannot be chained
 * after others (which would drop them: it is a static interface method),
 * the sealed interface has no implementation but ours, and the values
 * behave as values. The compile checks run javac (javax.tools) against the
 * jar under test.
 */
class LockOptionsTest {
  @TempDir Path dir;

  /** The compiler's errors for {@code body} placed in a method of a class outside the package. */
  private List<String> compile(String name, String source) throws Exception {
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    assertNotNull(javac, "a JDK's compiler (javax.tools) to run the compile checks");
    Path jar = Path.of(LockOptions.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path src = Files.writeString(dir.resolve(name + ".java"), source, StandardCharsets.UTF_8);
    Path out = Files.createDirectories(dir.resolve("out-" + name));
    DiagnosticCollector<JavaFileObject> diags = new DiagnosticCollector<>();
    try (StandardJavaFileManager files = javac.getStandardFileManager(diags, Locale.ROOT, StandardCharsets.UTF_8)) {
      Boolean ok = javac.getTask(null, files, diags,
          List.of("--release", "17", "-Xlint:all", "-Werror", "-cp", jar.toString(), "-d", out.toString()),
          null, files.getJavaFileObjects(src)).call();
      List<String> errors = diags.getDiagnostics().stream()
          .filter(d -> d.getKind() == Diagnostic.Kind.ERROR)
          .map(d -> "line " + d.getLineNumber() + ": " + d.getMessage(Locale.ROOT))
          .collect(Collectors.toList());
      assertEquals(ok, errors.isEmpty(), "javac's result and its errors agree: " + errors);
      return errors;
    }
  }

  private static String program(String name, String body) {
    return "import io.redislock.LockOptions;\nimport java.time.Duration;\n"
        + "class " + name + " {\n  static Object run(LockOptions opts, Duration d) {\n    " + body + "\n  }\n}\n";
  }

  @Test
  void chainingTheFactoryAfterOtherSettingsDoesNotCompile() throws Exception {
    List<String> errors = compile("Misuse", program("Misuse", "return opts.autoRenew(true).ttl(d);"));
    assertEquals(1, errors.size(), errors.toString());
    assertTrue(errors.get(0).startsWith("line 5: illegal static interface method call"), errors.toString());

    errors = compile("Misuse2", program("Misuse2",
        "return LockOptions.ttl(d).waitFor(Duration.ZERO).token(\"t\").ttl(d);"));
    assertEquals(1, errors.size(), errors.toString());
  }

  @Test
  void theDocumentedFormsCompile() throws Exception {
    assertEquals(List.of(), compile("Good", program("Good", String.join("\n    ",
        "LockOptions a = LockOptions.ttl(Duration.ofSeconds(30)).waitFor(Duration.ofSeconds(10));",
        "LockOptions b = LockOptions.DEFAULT.autoRenew(true).fenced(true).token(\"job\").waitForever();",
        "LockOptions c = opts.autoRenew(true).withTtl(d).interruptOnLoss(true).token(new byte[] {1});",
        "Duration ttl = c.ttl();",
        "return List.of(a, b, c, ttl, String.valueOf(c.waitTime()), c.isAutoRenew(), c.token().length);"))
        .replace("import java.time.Duration;", "import java.time.Duration;\nimport java.util.List;")));
  }

  @Test
  void noOneElseImplementsIt() throws Exception {
    List<String> errors = compile("Mine", "import io.redislock.LockOptions;\n"
        + "abstract class Mine implements LockOptions {}\n");
    assertFalse(errors.isEmpty(), "a class outside the package implemented the sealed LockOptions");
  }

  @Test
  void theValuesBehaveAsValues() {
    LockOptions d = LockOptions.DEFAULT;
    assertEquals(Duration.ofSeconds(30), d.ttl());
    assertNull(d.waitTime());
    assertFalse(d.isAutoRenew() || d.isFenced() || d.isInterruptOnLoss());
    assertNull(d.token());
    assertEquals("LockOptions{ttl=PT30S, wait=default, autoRenew=false, fenced=false, token=random}", d.toString());

    LockOptions a = LockOptions.ttl(Duration.ofSeconds(5)).waitFor(Duration.ofSeconds(1)).autoRenew(true)
        .fenced(true).token("job").interruptOnLoss(true);
    LockOptions b = LockOptions.DEFAULT.token("job").interruptOnLoss(true).fenced(true).autoRenew(true)
        .waitFor(Duration.ofSeconds(1)).withTtl(Duration.ofSeconds(5));
    assertEquals(a, b);
    assertEquals(a.hashCode(), b.hashCode());
    assertNotEquals(a, b.interruptOnLoss(false));
    assertNotEquals(a, b.token("other"));
    assertNotEquals(a, b.waitForever());
    assertEquals("LockOptions{ttl=PT5S, wait=PT1S, autoRenew=true, fenced=true, token=given}", a.toString());
    assertEquals("forever", LockOptions.DEFAULT.waitForever().toString().replaceAll(".*wait=([a-z]+).*", "$1"));

    // withTtl keeps every other setting; each call leaves its receiver as it was.
    LockOptions longer = a.withTtl(Duration.ofMinutes(1));
    assertEquals(Duration.ofMinutes(1), longer.ttl());
    assertEquals(a, longer.withTtl(Duration.ofSeconds(5)));
    assertEquals(Duration.ofSeconds(5), a.ttl());

    // The token is copied in and out.
    byte[] raw = {1, 2, 3};
    LockOptions t = LockOptions.DEFAULT.token(raw);
    raw[0] = 9;
    assertArrayEquals(new byte[] {1, 2, 3}, t.token());
    t.token()[1] = 9;
    assertArrayEquals(new byte[] {1, 2, 3}, t.token());
    assertNull(t.token((byte[]) null).token());

    assertThrows(IllegalArgumentException.class, () -> LockOptions.DEFAULT.token(new byte[0]));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.ttl(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.DEFAULT.waitFor(Duration.ofSeconds(-1)));
    assertThrows(NullPointerException.class, () -> LockOptions.ttl(null));
  }
}
