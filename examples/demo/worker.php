<?php
// make demo: a PHP worker (the package over FFI). Once, then until the
// deadline: take the lock, increment the counter non-atomically (GET, then
// SET, with phpredis), release. Prints "fence value acquired_ns release_ns"
// per acquisition: the counter as read, hrtime (CLOCK_MONOTONIC) after the
// acquisition and before the release. With LIMIT, a permit of the semaphore
// `demo:pool` of LIMIT instead, counted with INCR `demo:pool:done`, held
// 1 ms, the value reported as 0.
//
//   php worker.php REDIS_PORT SECONDS [LIMIT]
declare(strict_types=1);

// make dist-check: a Composer project's vendor/autoload.php (the installed package).
require getenv('REDISLOCK_DEMO_AUTOLOAD') ?: __DIR__ . '/../../bindings/php/autoload.php';

[$port, $seconds, $limit] = [(int)$argv[1], (float)$argv[2], (int)($argv[3] ?? 0)];
$client = new RedisLock\Client("redis://127.0.0.1:$port");
$raw = new Redis();
$raw->connect('127.0.0.1', $port);
$end = hrtime(true) + (int)($seconds * 1e9);
$out = [];
do {
    // A TTL and a wait no pause of a busy machine comes near.
    $lock = $limit > 0
        ? $client->acquireSemaphore('demo:pool', limit: $limit, ttlMs: 30000, waitMs: 30000)
        : $client->acquire('demo:lock', ttlMs: 30000, waitMs: 30000);
    $acquired = hrtime(true);
    if ($limit > 0) {
        $raw->incr('demo:pool:done');
        usleep(1000);
        $value = 0;
    } else {
        $value = (int)$raw->get('demo:counter');
        $raw->set('demo:counter', (string)($value + 1));
    }
    $fence = $lock->fence();
    $release = hrtime(true);
    $lock->release();
    $out[] = "$fence $value $acquired $release";
} while (hrtime(true) < $end);
echo implode("\n", $out), "\n";
