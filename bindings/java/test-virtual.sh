#!/usr/bin/env bash
# test-virtual.sh JAR OUT [JUNIT ARGS...]: the Java binding's tests that need
# Java 21 or newer (src/test21: blocking acquires on virtual threads), with a
# JDK of that age: $JAVA21_HOME, by default the Temurin 25 these machines
# carry. The jar is the one `make test-java-run` built (Java 17 bytecode);
# the tests and the suite's harness (src/test/java/.../Servers.java) are
# compiled here with --release 21 into OUT/test21-classes, and run with
# Debian's JUnit console launcher, reports in OUT/test21-reports. The native
# library comes from REDISLOCK_LIB, as for the other Java tests. A missing
# JDK is an error, never a skip.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: test-virtual.sh JAR OUT [JUNIT ARGS...]" >&2; exit 2; }
jar=$(realpath "$1") out=$(realpath -m "$2")
shift 2
here=$(cd "$(dirname "$0")" && pwd)
jdk=${JAVA21_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
jna=/usr/share/java/jna.jar
junit=/usr/share/java/junit-platform-console-standalone.jar
junit_api=/usr/share/java/junit-jupiter-api.jar:/usr/share/java/opentest4j.jar:/usr/share/java/apiguardian-api.jar:/usr/share/java/junit-platform-commons.jar
fail() { echo "test-virtual.sh: $*" >&2; exit 1; }
[ -x "$jdk/bin/java" ] && [ -x "$jdk/bin/javac" ] ||
  fail "no JDK at $jdk (virtual threads need Java 21 or newer): install one and set JAVA21_HOME to it"
feature=$("$jdk/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p')
[ "${feature:-0}" -ge 21 ] 2>/dev/null || fail "$jdk is Java ${feature:-unknown}; virtual threads need 21 or newer"
[ -f "$jar" ] || fail "no jar at $jar (make java builds it)"
for f in "$jna" "$junit"; do [ -f "$f" ] || fail "no $f (apt-get install libjna-java junit5)"; done
[ -n "${REDISLOCK_LIB:-}" ] || fail "REDISLOCK_LIB is not set: point it at libredislock.so (target/debug after cargo build)"
rm -rf "$out/test21-classes" "$out/test21-reports"
mkdir -p "$out/test21-classes"
"$jdk/bin/javac" --release 21 -Xlint:all -Werror -encoding UTF-8 -cp "$jar:$jna:$junit_api" \
  -d "$out/test21-classes" "$here/src/test/java/io/redislock/Servers.java" \
  $(find "$here/src/test21/java" -name '*.java')
cd "$here"
"$jdk/bin/java" --enable-native-access=ALL-UNNAMED -Dredislock.root="$(cd ../.. && pwd)" -jar "$junit" \
  --class-path "$out/test21-classes:$jar:$jna" \
  --scan-class-path --fail-if-no-tests --disable-banner --disable-ansi-colors --details=tree \
  --reports-dir "$out/test21-reports" "$@"
