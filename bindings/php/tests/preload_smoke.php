<?php
// Run as php-fpm would load the package:
//   php -d ffi.enable=preload -d opcache.enable_cli=1 \
//       -d opcache.preload=bindings/php/preload.php tests/preload_smoke.php REDIS_URL
// Checks that the declarations came from the preload (FFI::scope) and that a
// lock cycle works through them. Prints "N passed, N failed".
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

$passed = 0;
$failed = 0;
$check = function (bool $ok, string $what) use (&$passed, &$failed): void {
    if ($ok) {
        $passed++;
    } else {
        $failed++;
        echo "FAIL: $what\n";
    }
};

$scoped = true;
try {
    FFI::scope('redislock');
} catch (FFI\Exception $e) {
    $scoped = false;
}
$check($scoped, 'FFI::scope("redislock") is available (preloaded)');
$check(ini_get('ffi.enable') === 'preload', 'ffi.enable=preload');

$client = new RedisLock\Client($argv[1]);
$lock = $client->acquire('preload', ttlMs: 5000, waitMs: 1000);
$check($lock->fence() >= 1, 'a fence');
$check(strlen($lock->token()) === 32, 'a token');
$lock->release();
$stats = $client->stats();
$check($stats['acquired_at_once'] === 1 && count($stats['held']['buckets']) === 23, 'stats through the preloaded declarations');
$tool = new RedisLock\Compat\RedisTool($client);
$check($tool->tryGetLock('preload', '59', 30000), 'tryGetLock'); // still held at the release, however busy the machine
$check($tool->releaseLock('preload', '59'), 'releaseLock');
echo "$passed passed, $failed failed\n";
exit($failed === 0 ? 0 : 1);
