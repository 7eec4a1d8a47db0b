#!/usr/bin/env bash
# make dist: the Java binding, redislock-<v>.jar and redislock-<v>-sources.jar:
# the classes of bindings/java (compiled by bindings/java/build.sh: javac
# --release 17 against Debian's JNA) and the stage's stripped libredislock.so
# at io/redislock/native/linux-x86-64/libredislock.so, which the binding's
# loader extracts into java.io.tmpdir and loads when neither
# -Dredislock.library nor REDISLOCK_LIB names a library. Users put the jar and
# JNA (net.java.dev.jna:jna 5.13 or newer) on the class path.
#
#   scripts/dist/jar.sh STAGE DIST
#
# Every entry's time is SOURCE_DATE_EPOCH (default: the last commit's).
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

packaging jar "$@" lib/libredislock.so
so=$stage/lib/libredislock.so
jar=$dist/redislock-$version.jar
sources=$dist/redislock-$version-sources.jar
for tool in javac jar; do
  command -v $tool >/dev/null || die "jar: no $tool command (apt-get install openjdk-17-jdk-headless)"
done

# What goes in must be what its place says: x86_64, the ABI's soname, stripped.
shipped_elf jar "$so"
sonames=$(readelf -d "$so")
grep -q "(SONAME).*\[libredislock\.so\.$abi\]" <<<"$sonames" || die "jar: $so has no soname libredislock.so.$abi"

work=$(scratch jar)
"$root/bindings/java/build.sh" "$work/redislock-$version.jar" "$version" "$so" >/dev/null ||
  die "jar: bindings/java/build.sh failed"

# Read back from the jars: the manifest's version, the classes, the library
# (the stage's bytes) and the sources.
python3 - "$work/redislock-$version.jar" "$work/redislock-$version-sources.jar" "$so" "$version" <<'EOF' ||
import sys, zipfile
jar, sources, so, version = sys.argv[1:]
problems = []
with zipfile.ZipFile(jar) as z:
    names = set(z.namelist())
    manifest = z.read("META-INF/MANIFEST.MF").decode()
    if f"Implementation-Version: {version}" not in manifest.splitlines():
        problems.append(f"the manifest has no Implementation-Version: {version}")
    for c in ("RedisLockClient", "LockHandle", "NativeLib", "Loader"):
        if f"io/redislock/{c}.class" not in names:
            problems.append(f"no io/redislock/{c}.class")
    native = "io/redislock/native/linux-x86-64/libredislock.so"
    if native not in names:
        problems.append(f"no {native}")
    elif z.read(native) != open(so, "rb").read():
        problems.append(f"{native} is not the stage's library")
    stray = [n for n in names if n.endswith(".java")]
    if stray:
        problems.append(f"sources in the jar: {stray[:3]}")
with zipfile.ZipFile(sources) as z:
    if "io/redislock/RedisLockClient.java" not in z.namelist():
        problems.append("the sources jar has no io/redislock/RedisLockClient.java")
if problems:
    sys.exit("dist: jar: " + "; ".join(problems))
EOF
  die "jar: the jars are not what was expected (above)"

mv "$work/redislock-$version.jar" "$jar"
mv "$work/redislock-$version-sources.jar" "$sources"
echo "dist: $jar ($(($(stat -c %s "$jar") / 1024)) KiB), $sources ($(($(stat -c %s "$sources") / 1024)) KiB)"
