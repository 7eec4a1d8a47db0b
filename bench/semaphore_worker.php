<?php
// One PHP semaphore worker (started by semaphore.py, not by hand).
//
//   php semaphore_worker.php IMPL LIMIT TTL_S POLL_MS
//
// IMPL: redislock  $client->acquireSemaphore($key, $limit, $ttlMs, null):
//                  the project's blocking acquire (waits as long as needed)
//       laravel    Redis::funnel($key)->limit($limit)->releaseAfter($ttl)
//                  ->block($wait)->then($callback): Laravel's ConcurrencyLimiter
//                  on a phpredis connection made by Laravel's PhpRedisConnector
//                  (a PhpRedisConnection, as the framework wraps it); its
//                  block() polls every 250 ms (fixed in the library)
//       symfony    symfony/semaphore with its RedisStore on a phpredis \Redis;
//                  acquire() never waits, so a failed acquire() is retried
//                  every POLL_MS; one semaphore per acquisition (its docs'
//                  createSemaphore() + acquire() + release())
//
// Same protocol as contended_worker.php: prints "ready", reads "START_NS
// END_NS" (hrtime = CLOCK_MONOTONIC), loops acquire -> critical section ->
// release, prints {"call","acq","rel": [...], "noslot": n}. The critical
// section is the one of semaphore_worker.py, over its own phpredis connection.
require __DIR__ . '/redis_tool.php';

$impl = $argv[1];
$limit = (int)$argv[2];
$ttlS = (float)$argv[3];
$pollUs = (int)round((float)$argv[4] * 1000);
$semKey = 'bench:sem';
$slotsKey = 'bench:sem:slots';
$counterKey = 'bench:sem:counter:';

$data = connect_client('phpredis');

if ($impl === 'redislock') {
    $client = connect_client('redislock');
    $ttlMs = (int)round($ttlS * 1000);
    $run = function (callable $section) use ($client, $semKey, $limit, $ttlMs): void {
        $held = $client->acquireSemaphore($semKey, $limit, $ttlMs, null);
        try {
            $section();
        } finally {
            $held->release();
        }
    };
} elseif ($impl === 'laravel') {
    require_once 'Illuminate/Redis/autoload.php';
    $conn = (new Illuminate\Redis\Connectors\PhpRedisConnector())->connect(
        ['host' => bench_host(), 'port' => bench_port(), 'database' => 0], []);
    $conn->ping();
    $releaseAfter = max(1, (int)ceil($ttlS));              // whole seconds (SET EX)
    $run = function (callable $section) use ($conn, $semKey, $limit, $releaseAfter): void {
        $conn->funnel($semKey)->limit($limit)->releaseAfter($releaseAfter)
            ->block(3600)->then($section);
    };
} elseif ($impl === 'symfony') {
    require_once 'Symfony/Component/Semaphore/autoload.php';
    $redis = connect_client('phpredis');
    $factory = new Symfony\Component\Semaphore\SemaphoreFactory(
        new Symfony\Component\Semaphore\Store\RedisStore($redis));
    $run = function (callable $section) use ($factory, $semKey, $limit, $ttlS, $pollUs): void {
        $sem = $factory->createSemaphore($semKey, $limit, 1, $ttlS);
        while (!$sem->acquire()) {
            usleep($pollUs);
        }
        try {
            $section();
        } finally {
            $sem->release();
        }
    };
} else {
    fwrite(STDERR, "unknown impl $impl\n");
    exit(2);
}

echo "ready\n";
fflush(STDOUT);
[$start, $end] = array_map('intval', explode(' ', trim(fgets(STDIN))));
while (hrtime(true) < $start) usleep(500);

$call = [];
$acq = [];
$rel = [];
$noslot = 0;
$done = false;
// Stamps taken inside the section: entry as it starts, release as it ends
// (the release itself follows when $run's acquire/release wrapper returns).
$section = function () use (&$call, &$acq, &$rel, &$noslot, &$done, &$tCall, $end, $data,
                            $slotsKey, $counterKey): void {
    $tAcq = hrtime(true);
    if ($tAcq >= $end) {
        $done = true;
        return;
    }
    $slot = $data->lPop($slotsKey);
    if ($slot === false) {                              // more holders than the limit
        $noslot++;
    } else {
        $v = (int)$data->get($counterKey . $slot);      // deliberately non-atomic
        $data->set($counterKey . $slot, $v + 1);
        $data->rPush($slotsKey, $slot);
    }
    $rel[] = hrtime(true);
    $call[] = $tCall;
    $acq[] = $tAcq;
};
while (!$done) {
    $tCall = hrtime(true);
    $run($section);
}
echo json_encode(['call' => $call, 'acq' => $acq, 'rel' => $rel, 'noslot' => $noslot]), "\n";
