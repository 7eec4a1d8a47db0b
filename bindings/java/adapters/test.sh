#!/usr/bin/env bash
# adapters/test.sh JAR [OUT]: compile the Spring Integration and ShedLock
# adapters (adapters/*/src/main/java) against JAR and the stand-in
# interfaces of adapters/*/api-stub (the real APIs' methods that the
# adapters use: Maven Central, which has the real jars, is out of reach
# here), then run their JUnit tests (adapters/*/src/test/java, with the
# binding's test harness Servers.java) against throwaway redis-servers.
# Everything goes to OUT (default: an "adapters" directory beside JAR).
# The library under test is $REDISLOCK_LIB (default: target/debug's).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 JAR [OUT]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
java_dir=$(dirname "$here")
root=$(cd "$java_dir/../.." && pwd)
jar=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=${2:-$(dirname "$jar")/adapters}
mkdir -p "$out" && out=$(cd "$out" && pwd)
[ -f "$jar" ] || { echo "$0: no $jar (make java, or bindings/java/build.sh)" >&2; exit 1; }
jna=/usr/share/java/jna.jar
junit=/usr/share/java/junit-jupiter-api.jar:/usr/share/java/opentest4j.jar:/usr/share/java/apiguardian-api.jar:/usr/share/java/junit-platform-commons.jar
launcher=/usr/share/java/junit-platform-console-standalone.jar
for f in "$jna" "$launcher"; do
  [ -f "$f" ] || { echo "$0: no $f (apt-get install libjna-java junit5)" >&2; exit 1; }
done
export REDISLOCK_LIB=${REDISLOCK_LIB:-$root/target/debug/libredislock.so}
[ -f "$REDISLOCK_LIB" ] || { echo "$0: no library at REDISLOCK_LIB=$REDISLOCK_LIB (cargo build)" >&2; exit 1; }

javac() { command javac --release 17 -Xlint:all -Werror -encoding UTF-8 "$@"; }
rm -rf "${out:?}"/{build-only,stubs,classes,test-classes,reports}
javac -d "$out/build-only" $(find "$java_dir/build-only" -name '*.java')
cp=$jar:$jna:$out/build-only
for a in spring shedlock; do
  javac -d "$out/stubs/$a" $(find "$here/$a/api-stub" -name '*.java')
  javac -cp "$cp:$out/stubs/$a" -d "$out/classes/$a" $(find "$here/$a/src/main/java" -name '*.java')
  cp=$cp:$out/stubs/$a:$out/classes/$a
done
# The tests sit in package io.redislock to use the binding's harness.
javac -cp "$cp:$junit" -d "$out/test-classes" \
  "$java_dir/src/test/java/io/redislock/Servers.java" "$java_dir/src/test/java/io/redislock/ServerTest.java" \
  $(find "$here"/*/src/test/java -name '*.java')
cd "$java_dir"
java -Dredislock.root="$root" -jar "$launcher" \
  --class-path "$out/test-classes:$cp" --scan-class-path="$out/test-classes" \
  --fail-if-no-tests --disable-banner --disable-ansi-colors --details=tree --reports-dir "$out/reports"
