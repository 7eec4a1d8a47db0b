#!/usr/bin/env bash
# build.sh JAR VERSION [LIBRARY]: compile the Java binding (javac, Debian's
# JNA) into JAR; with LIBRARY, bundle that libredislock.so in the jar (as
# io/redislock/native/linux-x86-64/libredislock.so) and write the sources jar
# beside it. No Maven needed: pom.xml describes the same sources for users
# who build with Maven or Gradle.
set -euo pipefail
jar_out=$1 version=$2 lib=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
jna=/usr/share/java/jna.jar
[ -f "$jna" ] || { echo "build.sh: no $jna (apt-get install libjna-java)" >&2; exit 1; }
command -v javac >/dev/null || { echo "build.sh: no javac (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes" "$(dirname "$jar_out")"
javac --release 17 -Xlint:all -Werror -encoding UTF-8 -cp "$jna" -d "$work/classes" \
  $(find "$here/src/main/java" -name '*.java')
cat > "$work/manifest" <<MF
Automatic-Module-Name: io.redislock
Implementation-Title: redislock
Implementation-Version: $version
Enable-Native-Access: ALL-UNNAMED
MF
if [ -n "$lib" ]; then
  mkdir -p "$work/classes/io/redislock/native/linux-x86-64"
  cp "$lib" "$work/classes/io/redislock/native/linux-x86-64/libredislock.so"
  jar --create --file "${jar_out%.jar}-sources.jar" -C "$here/src/main/java" .
fi
jar --create --file "$jar_out" --manifest "$work/manifest" -C "$work/classes" .
echo "build.sh: $jar_out"
