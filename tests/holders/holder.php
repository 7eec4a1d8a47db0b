<?php
// Holds a lock for the Ruby and Node.js tests: php holder.php URL KEY (as holder.py).
declare(strict_types=1);

require __DIR__ . '/../../bindings/php/autoload.php';

[, $url, $key] = $argv;
$client = new RedisLock\Client($url);
if (str_starts_with($key, 'try:')) {
    $lock = $client->tryAcquire(substr($key, 4), ttlMs: 5000);
    echo $lock === null ? "held\n" : "free\n";
    $lock?->release();
    exit(0);
}
$lock = $client->acquire($key, ttlMs: 30000, waitMs: 0);
echo bin2hex($lock->token()), "\n";
fgets(STDIN);
echo hrtime(true) / 1e9, "\n";
$lock->release();
echo "released\n";
