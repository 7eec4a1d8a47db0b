#!/usr/bin/env bash
# make dist-check: the Java jar, used as a user would: a copy of
# dist/redislock-<v>.jar beside a plain Java program (written here, compiled
# with javac against the jar and Debian's JNA, /usr/share/java/jna.jar), run
# with `java -cp redislock-<v>.jar:jna.jar:.` and no REDISLOCK_LIB, no
# -Dredislock.library, no cargo on the PATH. The program takes a lock on a
# throwaway redis-server, checks that its token is the key's value there,
# that the jar's Implementation-Version and the loaded library's
# redislock_version() are both $version, and that the library it loaded
# (RedisLockClient.nativeLibraryPath()) is the one the jar carries,
# extracted under java.io.tmpdir (a fresh scratch directory) and the only
# libredislock mapped into the JVM. Then the same program with the classes
# alone (the jar without its library) and an empty LD_LIBRARY_PATH must
# fail with an UnsatisfiedLinkError that lists where it looked (skipped
# when this machine has a libredislock in ldconfig's cache).
#
#   scripts/dist/check-java.sh DIST [INSTALL_DIR]
#
# With INSTALL_DIR the jar is left at INSTALL_DIR/project/redislock-<v>.jar
# (for the demo); without, a scratch directory, removed at exit.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: scripts/dist/check-java.sh DIST [INSTALL_DIR]"; fi
dist=$(cd "$1" && pwd) || die "java: no directory $1"
jarfile=$dist/redislock-$version.jar
[ -f "$jarfile" ] || die "java: no $jarfile (make dist)"
if command -v cargo >/dev/null; then die "java: cargo is on the PATH ($(command -v cargo)): run with PATH=\$(without_cargo)"; fi
[ -z "${REDISLOCK_LIB:-}" ] || die "java: REDISLOCK_LIB is set ($REDISLOCK_LIB): the check must find the jar's own library"
for tool in java javac jar; do
  command -v $tool >/dev/null || die "java: no $tool command (apt-get install openjdk-17-jdk-headless)"
done
jna=/usr/share/java/jna.jar
if [ ! -f "$jna" ]; then
  command -v apt-get >/dev/null || die "java: no $jna (install Debian's libjna-java, or put JNA 5.13+ there)"
  echo "java: installing Debian's libjna-java"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q libjna-java >/dev/null || die "java: apt-get install libjna-java failed"
fi

project=$(kept project "$@")
tmp=$(scratch java)
# The user's copy of the artifact, beside their program.
cp "$jarfile" "$project/"
jar=redislock-$version.jar

cat >"$project/Check.java" <<'EOF'
import io.redislock.LockHandle;
import io.redislock.LockOptions;
import io.redislock.RedisLockClient;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;

/** dist-check: the installed jar (Check ok VERSION PORT), or the classes alone (Check missing). */
public final class Check {
  static void fail(String msg) {
    System.err.println("java: " + msg);
    System.exit(1);
  }

  /** One command in RESP on its own connection: a bulk string's text, or null. */
  static String get(int port, String key) throws IOException {
    try (Socket s = new Socket("127.0.0.1", port)) {
      byte[] k = key.getBytes(StandardCharsets.UTF_8);
      OutputStream out = s.getOutputStream();
      out.write(("*2\r\n$3\r\nGET\r\n$" + k.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
      out.write(k);
      out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = s.getInputStream();
      String head = line(in);
      if (!head.startsWith("$")) {
        throw new IOException("GET " + key + ": " + head);
      }
      int n = Integer.parseInt(head.substring(1));
      if (n < 0) {
        return null;
      }
      byte[] v = in.readNBytes(n + 2);
      return new String(v, 0, n, StandardCharsets.UTF_8);
    }
  }

  static String line(InputStream in) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    int c;
    while ((c = in.read()) != '\n') {
      if (c < 0) {
        throw new IOException("connection closed");
      }
      if (c != '\r') {
        b.write(c);
      }
    }
    return b.toString(StandardCharsets.US_ASCII);
  }

  /** The files named libredislock* mapped into this process. */
  static List<String> mapped() throws IOException {
    return Files.readAllLines(Paths.get("/proc/self/maps")).stream()
        .map(l -> l.trim().split("\\s+", 6))
        .filter(f -> f.length == 6 && Paths.get(f[5]).getFileName().toString().startsWith("libredislock"))
        .map(f -> f[5]).distinct().collect(Collectors.toList());
  }

  public static void main(String[] args) throws Exception {
    if (args[0].equals("missing")) {
      try {
        String path = RedisLockClient.nativeLibraryPath();
        fail("the classes alone loaded a library: " + path);
      } catch (UnsatisfiedLinkError e) {
        System.out.println(e.getMessage());
      }
      return;
    }
    String version = args[1];
    int port = Integer.parseInt(args[2]);
    Path tmpdir = Paths.get(System.getProperty("java.io.tmpdir")).toRealPath();
    String implVersion = RedisLockClient.class.getPackage().getImplementationVersion();
    if (!version.equals(implVersion)) {
      fail("the jar's Implementation-Version is " + implVersion + ", expected " + version);
    }
    Path from = Paths.get(RedisLockClient.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path here = Paths.get("redislock-" + version + ".jar").toRealPath();
    if (!from.toRealPath().equals(here)) {
      fail("io.redislock came from " + from + ", not " + here);
    }
    String nativeVersion = RedisLockClient.nativeVersion();
    if (!version.equals(nativeVersion)) {
      fail("the library is version " + nativeVersion + ", expected " + version);
    }
    Path lib = Paths.get(RedisLockClient.nativeLibraryPath()).toRealPath();
    if (!lib.startsWith(tmpdir)) {
      fail("the library was loaded from " + lib + ", not extracted under java.io.tmpdir " + tmpdir);
    }
    List<String> maps = mapped();
    if (maps.size() != 1 || !Paths.get(maps.get(0)).toRealPath().equals(lib)) {
      fail("libredislock mapped: " + maps + ", expected only " + lib);
    }
    Files.write(Paths.get("maps.txt"), Files.readAllLines(Paths.get("/proc/self/maps")));

    String name = "dist-check:java:" + ProcessHandle.current().pid();
    long fence;
    String token;
    try (RedisLockClient client = RedisLockClient.open("redis://127.0.0.1:" + port)) {
      LockHandle lock = client.acquire(name, LockOptions.ttl(Duration.ofSeconds(10)).waitFor(Duration.ofSeconds(5)));
      token = lock.tokenString();
      String stored = get(port, name);
      if (!token.equals(stored)) {
        fail("the server holds " + stored + " under " + name + ", the lock's token is " + token);
      }
      if (client.tryAcquire(name) != null) {
        fail("a second acquisition while the lock is held");
      }
      fence = lock.fence();
      if (fence <= 0) {
        fail("fence " + fence);
      }
      lock.release();
      if (get(port, name) != null) {
        fail(name + " is still on the server after the release");
      }
    }
    System.out.println("redislock " + implVersion + ", library " + nativeVersion + " extracted to " + lib
        + "; a lock taken (token " + token + " on the server, fence " + fence + ") and released");
  }
}
EOF

started=$(date +%s.%N)
if ! out=$(cd "$project" && javac --release 17 -Xlint:all -Werror -encoding UTF-8 -cp "$jar:$jna" Check.java 2>&1); then
  echo "$out" >&2
  die "java: the program did not compile against $jar and $jna"
fi
compiled=$(date +%s.%N)

ensure_redis

# Only what a user's shell has: no library named, no class path or options
# from the environment. java.io.tmpdir: a fresh directory, so the library
# is extracted there by this run.
mkdir "$tmp/jtmp" "$tmp/jtmp-missing"
run() { # class-path tmpdir args...
  local cp=$1 dir=$2
  shift 2
  (cd "$project" && env -u REDISLOCK_LIB -u CLASSPATH -u JAVA_TOOL_OPTIONS -u _JAVA_OPTIONS -u JDK_JAVA_OPTIONS \
    java -Djava.io.tmpdir="$dir" -cp "$cp" Check "$@")
}
if ! seen=$(run "$jar:$jna:." "$tmp/jtmp" ok "$version" "$REDIS_PORT" 2>&1); then
  echo "$seen" >&2
  die "java: the program failed with the installed jar"
fi
if grep -qv '^redislock ' <<<"$seen"; then die "java: unexpected output: $seen"; fi
if grep -F "$root/" "$project/maps.txt"; then die "java: files from the repository were mapped (above)"; fi
ran=$(date +%s.%N)

# The classes alone: the loader must say where it looked.
if grep -q libredislock <<<"$(ldconfig -p 2>/dev/null)"; then
  missing="the jar without its library not tried: this machine has a libredislock in ldconfig's cache"
else
  mkdir "$tmp/classes"
  (cd "$tmp/classes" && jar --extract --file "$project/$jar") || die "java: could not extract $jar"
  [ -d "$tmp/classes/io/redislock/native" ] || die "java: $jar has no io/redislock/native/"
  rm -rf "$tmp/classes/io/redislock/native"
  jar --create --file "$tmp/classes-only.jar" -C "$tmp/classes" . || die "java: could not write a jar of the classes alone"
  if ! msg=$(LD_LIBRARY_PATH='' run "$tmp/classes-only.jar:$jna:." "$tmp/jtmp-missing" missing 2>&1); then
    echo "$msg" >&2
    die "java: the classes alone did not fail as expected"
  fi
  for want in "cannot load libredislock. Looked in:" \
    "the jar: no io/redislock/native/linux-x86-64/libredislock.so in it" \
    "the system library path for redislock" "the system library path for libredislock.so.0" \
    "-Dredislock.library" "REDISLOCK_LIB"; do
    grep -qF -- "$want" <<<"$msg" || die "java: the error of the classes alone does not say \"$want\": $msg"
  done
  [ -z "$(ls -A "$tmp/jtmp-missing")" ] || die "java: the classes alone extracted something into java.io.tmpdir"
  missing="the classes alone fail with: $(head -1 <<<"$msg") ($(grep -c '^  - ' <<<"$msg") places listed)"
fi

printf 'java: javac of a program against %s (%s KiB) and %s in %.1f s, run in %.1f s: %s\njava: %s\n' \
  "$jar" "$(($(stat -c %s "$jarfile") / 1024))" "$jna" "$(awk "BEGIN { print $compiled - $started }")" \
  "$(awk "BEGIN { print $ran - $compiled }")" "$seen" "$missing"
if [ $# -eq 2 ]; then echo "java: installed in $project"; fi
