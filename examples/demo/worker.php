<?php
// make demo: a PHP worker (the package over FFI). Until the deadline: take
// the lock, increment the counter non-atomically (GET, then SET, with
// phpredis), release. Prints "fence acquired_ns release_ns" per acquisition
// (hrtime: CLOCK_MONOTONIC).
//
//   php worker.php REDIS_PORT SECONDS
declare(strict_types=1);

require __DIR__ . '/../../bindings/php/autoload.php';

[$port, $seconds] = [(int)$argv[1], (float)$argv[2]];
$client = new RedisLock\Client("redis://127.0.0.1:$port");
$raw = new Redis();
$raw->connect('127.0.0.1', $port);
$end = hrtime(true) + (int)($seconds * 1e9);
$out = [];
while (hrtime(true) < $end) {
    $lock = $client->acquire('demo:lock', ttlMs: 5000, waitMs: 10000);
    $acquired = hrtime(true);
    $value = (int)$raw->get('demo:counter');
    $raw->set('demo:counter', (string)($value + 1));
    $fence = $lock->fence();
    $release = hrtime(true);
    $lock->release();
    $out[] = "$fence $acquired $release";
}
echo implode("\n", $out), "\n";
