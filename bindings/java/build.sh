#!/usr/bin/env bash
# build.sh JAR VERSION [LIBRARY]: compile the Java binding (javac, Debian's
# JNA) into JAR; with LIBRARY, bundle that libredislock.so in the jar (as
# io/redislock/native/linux-x86-64/libredislock.so) and write the sources jar
# beside it. No Maven needed: pom.xml describes the same sources for users
# who build with Maven or Gradle. Both jars carry the licences in META-INF/.
# With SOURCE_DATE_EPOCH set (make dist), every entry carries that time.
# build-only/ (JSpecify's @Nullable, which pom.xml takes from Maven Central)
# is compiled onto the class path and never packaged.
set -euo pipefail
jar_out=$1 version=$2 lib=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
jna=/usr/share/java/jna.jar
[ -f "$jna" ] || { echo "build.sh: no $jna (apt-get install libjna-java)" >&2; exit 1; }
command -v javac >/dev/null || { echo "build.sh: no javac (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes/META-INF" "$work/meta/META-INF" "$(dirname "$jar_out")"
for f in LICENSE-MIT LICENSE-APACHE; do
  cp "$here/../../$f" "$work/classes/META-INF/"
  cp "$here/../../$f" "$work/meta/META-INF/"
done
javac --release 17 -Xlint:all -Werror -encoding UTF-8 -d "$work/build-only" \
  $(find "$here/build-only" -name '*.java')
javac --release 17 -Xlint:all -Werror -encoding UTF-8 -cp "$jna:$work/build-only" -d "$work/classes" \
  $(find "$here/src/main/java" -name '*.java')
cat > "$work/manifest" <<MF
Automatic-Module-Name: io.redislock
Implementation-Title: redislock
Implementation-Version: $version
Enable-Native-Access: ALL-UNNAMED
MF
dated=()
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  dated=(--date "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)")
fi
if [ -n "$lib" ]; then
  mkdir -p "$work/classes/io/redislock/native/linux-x86-64"
  cp "$lib" "$work/classes/io/redislock/native/linux-x86-64/libredislock.so"
  jar --create --file "${jar_out%.jar}-sources.jar" "${dated[@]}" -C "$here/src/main/java" . -C "$work/meta" .
fi
jar --create --file "$jar_out" --manifest "$work/manifest" "${dated[@]}" -C "$work/classes" .
echo "build.sh: $jar_out"
