#!/usr/bin/env bash
# Check the Composer package as a user installs it:
#   scripts/dist/check-php.sh DIST [INSTALL_DIR]
#
# 1. unpacks DIST/redislock-php-<v>.tar.gz into a scratch directory;
# 2. an empty Composer project (INSTALL_DIR/project when given, else
#    scratch) requires redislock/redislock <v> from a path repository on
#    the unpacked directory (symlink false: Composer copies it), Packagist
#    disabled; Debian's composer installs it with the network disabled and
#    its home in scratch; the unpacked directory is then deleted;
# 3. the command line: a script requiring vendor/autoload.php takes a lock
#    on a throwaway redis-server and checks RedisLock\FFI::VERSION ==
#    redislock_version() == <v>, and that the library mapped into the
#    process (/proc/self/maps) is vendor/redislock/redislock/lib's;
# 4. php-fpm (Debian's), its own configuration in scratch, its master as
#    root (-R), listening on a unix socket in scratch: ffi.preload = the
#    header vendor/bin/redislock-preload-header wrote, opcache.preload =
#    the package's preload.php (with opcache.preload_user, under which
#    FFI::load is refused: the declarations can only come from that
#    header). A request over FastCGI takes a lock through RedisLock\Client
#    and reports the versions and the library its worker mapped.
# With INSTALL_DIR the project stays at INSTALL_DIR/project (its
# vendor/autoload.php works without the unpacked package); everything else
# is removed.
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

dist=${1:?usage: scripts/dist/check-php.sh DIST [INSTALL_DIR]}
install_dir=${2:-}
started=$(date +%s%N)
tarball=$dist/redislock-php-$version.tar.gz
[ -f "$tarball" ] || die "check-php: $tarball is missing (make dist)"
tarball=$(realpath "$tarball")
if command -v cargo >/dev/null; then die "check-php: cargo is on the PATH ($(command -v cargo)): run with PATH=\$(without_cargo)"; fi
[ -z "${REDISLOCK_LIB:-}" ] || die "check-php: REDISLOCK_LIB is set ($REDISLOCK_LIB): the check must find the bundled library"

command -v php >/dev/null || die "check-php: no php (apt-get install php-cli)"
php -r 'exit(extension_loaded("ffi") ? 0 : 1);' || die "check-php: php has no FFI extension (Debian's php8.2-cli has it)"
if ! command -v composer >/dev/null; then
  echo "check-php: installing Debian's composer"
  apt-get install -y -q composer >/dev/null || die "check-php: apt-get install composer failed"
fi
phpv=$(php -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;')
fpm_bin=/usr/sbin/php-fpm$phpv
if [ ! -x "$fpm_bin" ]; then
  echo "check-php: installing Debian's php-fpm"
  apt-get install -y -q "php$phpv-fpm" >/dev/null || die "check-php: apt-get install php$phpv-fpm failed"
fi
ensure_redis
umask 022

tmp=$(scratch php-check)
mkdir "$tmp/unpacked"
tar -xzf "$tarball" -C "$tmp/unpacked"
pkg=$tmp/unpacked/redislock-php-$version
[ -f "$pkg/composer.json" ] || die "check-php: the tarball has no redislock-php-$version/composer.json"
if [ -n "$install_dir" ]; then
  mkdir -p "$install_dir"
  proj=$(realpath "$install_dir")/project
  rm -rf "$proj"
else
  proj=$tmp/project
fi
mkdir -p "$proj/public"

cat >"$proj/composer.json" <<EOF
{
    "description": "An empty project that installs redislock/redislock $version from its release tarball",
    "repositories": [
        {"type": "path", "url": "$pkg", "options": {"symlink": false}},
        {"packagist.org": false}
    ],
    "require": {
        "redislock/redislock": "$version"
    }
}
EOF
t0=$(date +%s%N)
(cd "$proj" && COMPOSER_HOME=$tmp/composer-home COMPOSER_CACHE_DIR=$tmp/composer-cache COMPOSER_DISABLE_NETWORK=1 \
  COMPOSER_NO_INTERACTION=1 COMPOSER_ALLOW_SUPERUSER=1 composer install --no-progress >"$tmp/composer.log" 2>&1) ||
  die "check-php: composer install failed:
$(cat "$tmp/composer.log")"
composer_ms=$((($(date +%s%N) - t0) / 1000000))
grep -q "Installing redislock/redislock ($version)" "$tmp/composer.log" ||
  die "check-php: composer did not install redislock/redislock $version:
$(cat "$tmp/composer.log")"
rm -rf "$pkg" # the copy in vendor/ must stand alone
installed=$proj/vendor/redislock/redislock
lib=$installed/lib/libredislock.so
[ -f "$lib" ] || die "check-php: composer installed no $lib"
[ -x "$proj/vendor/bin/redislock-preload-header" ] || die "check-php: composer linked no vendor/bin/redislock-preload-header"
if grep -rlF "$root" "$proj" >/dev/null; then
  die "check-php: the installed project names the repository $root: $(grep -rlF "$root" "$proj" | head -3)"
fi

# The command line, from a directory that holds no library.
cat >"$proj/check.php" <<'EOF'
<?php
// php check.php REDIS_URL VERSION LIBRARY: a lock through the installed
// package; the versions and the library it loaded must be VERSION and LIBRARY.
declare(strict_types=1);
require __DIR__ . '/vendor/autoload.php';

[, $url, $version, $expected] = $argv;
try {
    $client = new RedisLock\Client($url);
    $lock = $client->acquire('dist-check-php', ttlMs: 10000, waitMs: 5000);
    $fence = $lock->fence();
    $lock->release();
} catch (RedisLock\LockException $e) {
    fwrite(STDERR, get_class($e) . ': ' . $e->getMessage() . "\n");
    exit(1);
}
preg_match_all('~\S*libredislock\S*~', file_get_contents('/proc/self/maps'), $m);
$mapped = array_values(array_unique($m[0]));
$failures = [];
if (RedisLock\FFI::VERSION !== $version) {
    $failures[] = 'RedisLock\FFI::VERSION is ' . RedisLock\FFI::VERSION . ", not $version";
}
if (RedisLock\FFI::libraryVersion() !== $version) {
    $failures[] = 'redislock_version() is ' . RedisLock\FFI::libraryVersion() . ", not $version";
}
if ($mapped !== [$expected]) {
    $failures[] = "the process mapped " . json_encode($mapped) . ", not [$expected]";
}
if (RedisLock\FFI::libraryFile() !== $expected || RedisLock\FFI::loadedFrom() !== $expected) {
    $failures[] = 'RedisLock\FFI says it loaded ' . RedisLock\FFI::loadedFrom() . ' (' . RedisLock\FFI::libraryFile() . ')';
}
if ($fence < 1) {
    $failures[] = "fence $fence";
}
if ($failures !== []) {
    fwrite(STDERR, implode("\n", $failures) . "\n");
    exit(1);
}
echo "cli: version $version (package and library), fence $fence, $expected\n";
EOF
expected=$(realpath "$lib")
cli=$(cd "$tmp" && php "$proj/check.php" "$REDIS_URL" "$version" "$expected" 2>&1) ||
  die "check-php: the command line check failed:
$cli"

# The ffi.preload header, by the vendor/bin command (stdout and FILE).
mkdir "$tmp/fpm"
header=$tmp/fpm/redislock.h
(cd "$tmp" && "$proj/vendor/bin/redislock-preload-header") >"$tmp/header.out" 2>"$tmp/header.err" ||
  die "check-php: vendor/bin/redislock-preload-header failed: $(cat "$tmp/header.err")"
(cd "$tmp" && "$proj/vendor/bin/redislock-preload-header" "$header") 2>"$tmp/header.err" ||
  die "check-php: vendor/bin/redislock-preload-header $header failed: $(cat "$tmp/header.err")"
cmp -s "$tmp/header.out" "$header" || die "check-php: the header printed and the header written differ"
grep -qxF "#define FFI_LIB \"$expected\"" "$header" ||
  die "check-php: the header's FFI_LIB is not $expected: $(grep FFI_LIB "$header")"
grep -qxF '#define FFI_SCOPE "redislock"' "$header" || die "check-php: the header has no FFI_SCOPE \"redislock\""

# php-fpm: the request script of the project, and a FastCGI client.
cat >"$proj/public/lock.php" <<'EOF'
<?php
// One request: a lock through RedisLock\Client; the versions and the library seen.
declare(strict_types=1);
require __DIR__ . '/../vendor/autoload.php';

$client = RedisLock\Client::persistent($_GET['url']);
$lock = $client->acquire('dist-check-php-fpm', ttlMs: 10000, waitMs: 5000);
$fence = $lock->fence();
$lock->release();
preg_match_all('~\S*libredislock\S*~', file_get_contents('/proc/self/maps'), $m);
header('Content-Type: application/json');
echo json_encode([
    'sapi' => PHP_SAPI,
    'ffi.enable' => ini_get('ffi.enable'),
    'package' => RedisLock\FFI::VERSION,
    'library' => RedisLock\FFI::libraryVersion(),
    'file' => RedisLock\FFI::libraryFile(),
    'preloaded' => RedisLock\FFI::loadedFrom() === null,
    'mapped' => array_values(array_unique($m[0])),
    'fence' => $fence,
    'pid' => getmypid(),
]);
EOF
cat >"$tmp/fcgi.php" <<'EOF'
<?php
// php fcgi.php SOCKET SCRIPT QUERY: one FastCGI request (responder role);
// prints the response body, exits 1 unless the status is 200.
[, $socket, $script, $query] = $argv;
$s = stream_socket_client("unix://$socket", $errno, $errstr, 10) or exit("cannot connect to $socket: $errstr\n");
$rec = fn(int $type, string $c): string => pack('CCnnCx', 1, $type, 1, strlen($c), 0) . $c;
$len = fn(int $n): string => $n < 128 ? chr($n) : pack('N', $n | 0x80000000);
$params = '';
foreach (['GATEWAY_INTERFACE' => 'FastCGI/1.0', 'REQUEST_METHOD' => 'GET', 'SCRIPT_FILENAME' => $script,
    'SCRIPT_NAME' => '/' . basename($script), 'QUERY_STRING' => $query, 'SERVER_PROTOCOL' => 'HTTP/1.1',
    'REQUEST_URI' => '/' . basename($script) . "?$query", 'SERVER_NAME' => 'localhost'] as $k => $v) {
    $params .= $len(strlen($k)) . $len(strlen($v)) . $k . $v;
}
fwrite($s, $rec(1, pack('nCx5', 1, 0)) . $rec(4, $params) . $rec(4, '') . $rec(5, ''));
stream_set_timeout($s, 30);
$in = stream_get_contents($s);
$out = $err = '';
for ($at = 0; strlen($in) - $at >= 8;) {
    $h = unpack('Cv/Ctype/nid/nlen/Cpad', substr($in, $at, 8));
    $c = substr($in, $at + 8, $h['len']);
    $at += 8 + $h['len'] + $h['pad'];
    if ($h['type'] === 6) { $out .= $c; } elseif ($h['type'] === 7) { $err .= $c; }
}
[$headers, $body] = array_pad(explode("\r\n\r\n", $out, 2), 2, '');
$status = preg_match('/^Status: (\d+)/mi', $headers, $m) ? (int)$m[1] : 200;
echo $body;
if ($status !== 200 || $err !== '') {
    fwrite(STDERR, "status $status; stderr: $err\n$headers\n");
    exit(1);
}
EOF

fpm=$tmp/fpm
touch "$fpm/php.log"
{
  echo "opcache.enable = 1"
  echo "opcache.enable_cli = 0"
  echo "opcache.preload = $installed/preload.php"
  echo "ffi.enable = preload"
  echo "ffi.preload = $header"
  echo "log_errors = 1"
  echo "display_errors = 0"
  echo "error_log = $fpm/php.log"
} >"$fpm/php.ini"
{
  printf '[global]\npid = %s\nerror_log = %s\ndaemonize = no\n\n' "$fpm/fpm.pid" "$fpm/fpm.log"
  printf '[check]\nlisten = %s\npm = static\npm.max_children = 2\n' "$fpm/fpm.sock"
  printf 'catch_workers_output = yes\nclear_env = yes\n'
} >"$fpm/fpm.conf"
fpm_args=(--nodaemonize --fpm-config "$fpm/fpm.conf" -c "$fpm/php.ini")
if [ "$(id -u)" = 0 ]; then
  # A root master (Debian's way): opcache.preload runs in a child as
  # opcache.preload_user, where FFI::load is refused, so the declarations
  # must come from the ffi.preload header. The workers stay root (-R):
  # the project may sit in a directory only root can read.
  echo "opcache.preload_user = root" >>"$fpm/php.ini"
  fpm_args=(-R "${fpm_args[@]}")
fi
(cd "$fpm" && exec "$fpm_bin" "${fpm_args[@]}" >"$fpm/stdout.log" 2>&1) &
fpm_pid=$!
on_exit "kill $fpm_pid 2>/dev/null; wait $fpm_pid 2>/dev/null"
for _ in $(seq 1 300); do
  [ -S "$fpm/fpm.sock" ] && break
  kill -0 "$fpm_pid" 2>/dev/null || die "check-php: php-fpm exited at start:
$(cat "$fpm/fpm.log" "$fpm/stdout.log" "$fpm/php.log" 2>/dev/null)"
  sleep 0.05
done
[ -S "$fpm/fpm.sock" ] || die "check-php: php-fpm did not listen on $fpm/fpm.sock"

# shellcheck disable=SC2016 # PHP code, in single quotes
query="url=$(php -r 'echo rawurlencode($argv[1]);' "$REDIS_URL")"
responses=()
for i in 1 2 3; do
  r=$(php "$tmp/fcgi.php" "$fpm/fpm.sock" "$proj/public/lock.php" "$query" 2>&1) ||
    die "check-php: php-fpm request $i failed: $r
$(cat "$fpm/fpm.log" "$fpm/php.log" 2>/dev/null)"
  responses+=("$r")
done
# shellcheck disable=SC2016 # PHP code, in single quotes
fpm_summary=$(php -r '
[, $version, $expected] = $argv;
$fences = [];
$pids = [];
foreach (array_slice($argv, 3) as $i => $body) {
    $r = json_decode($body, true);
    $want = ["sapi" => "fpm-fcgi", "ffi.enable" => "preload", "package" => $version, "library" => $version,
        "file" => $expected, "preloaded" => true, "mapped" => [$expected]];
    foreach ($want as $k => $v) {
        if (!is_array($r) || ($r[$k] ?? null) !== $v) {
            fwrite(STDERR, "request " . ($i + 1) . ": $k is " . json_encode($r[$k] ?? null) . ", not " . json_encode($v) . "\n$body\n");
            exit(1);
        }
    }
    if (count($fences) > 0 && $r["fence"] <= end($fences)) {
        fwrite(STDERR, "fences out of order: " . json_encode([...$fences, $r["fence"]]) . "\n");
        exit(1);
    }
    $fences[] = $r["fence"];
    $pids[$r["pid"]] = true;
}
echo count($fences), " requests over ", count($pids), " worker(s), fences ", implode(",", $fences);
' "$version" "$expected" "${responses[@]}") || die "check-php: php-fpm answered wrongly"
if grep -qi 'redislock' "$fpm/php.log"; then
  die "check-php: the PHP error log under php-fpm mentions redislock:
$(cat "$fpm/php.log")"
fi
kill "$fpm_pid" 2>/dev/null || true
wait "$fpm_pid" 2>/dev/null || true

size=$(stat -c %s "$tarball")
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
where=${install_dir:+$proj}
echo "check-php: $cli"
echo "check-php: php-fpm $phpv (ffi.preload = vendor/bin/redislock-preload-header's header): $fpm_summary"
echo "check-php: redislock/redislock $version ($(basename "$tarball"), $((size / 1024)) KB) installed by" \
  "composer $(composer --version 2>/dev/null | awk '{print $3}') in $((composer_ms / 1000)).$((composer_ms % 1000 / 100)) s" \
  "into ${where:-a scratch project}; version $version seen by CLI and php-fpm;" \
  "$((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100)) s in all"
