<?php
// Requests per second through a real php-fpm (Debian's), one lock per
// request, 8 concurrent FastCGI clients, for redislock with a persistent
// client, the predis helper (new connection per request, and persistent)
// and the phpredis helper over pconnect, interleaved in small batches in
// one run; also the connections each opened per 1,000 requests.
//
//   php bench/fpm.php SECONDS ROUND OUTFILE      (BENCH_HOST, BENCH_PORT: the redis-server)
//
// Prints and appends one JSON line per implementation and batch.
declare(strict_types=1);

require dirname(__DIR__) . '/bindings/php/tests/bootstrap.php';
require dirname(__DIR__) . '/bindings/php/tests/fpm/PhpFpm.php';

$seconds = (float)($argv[1] ?? 4);
$round = (int)($argv[2] ?? 0);
$outfile = $argv[3] ?? null;
$host = getenv('BENCH_HOST') ?: '127.0.0.1';
$port = (int)(getenv('BENCH_PORT') ?: 0);
$impls = ['redislock', 'phpredis-pconnect', 'predis-persistent', 'predis'];
$workers = 4;
$concurrency = 8;
$batch = 500;

$raw = new Redis();
$raw->connect($host, $port);
$fpm = new PhpFpm(posix_geteuid() === 0 ? 'root' : 'user', $workers);
$script = __DIR__ . '/fpm_request.php';
$requests = fn(string $impl, int $n) => $fpm->get(
    $script,
    array_fill(0, $n, http_build_query(['impl' => $impl, 'host' => $host, 'port' => $port])),
    $concurrency,
);
try {
    // Warm up: opcache compiles, persistent connections open.
    foreach ($impls as $impl) {
        $requests($impl, 4 * $workers * $concurrency);
    }
    $deadline = microtime(true) + $seconds * count($impls);
    $b = 0;
    do {
        $b++;
        $order = $impls;
        shuffle($order);
        foreach ($order as $impl) {
            $conns = (int)$raw->info('stats')['total_connections_received'];
            $t0 = hrtime(true);
            $responses = $requests($impl, $batch);
            $secs = (hrtime(true) - $t0) / 1e9;
            $opened = (int)$raw->info('stats')['total_connections_received'] - $conns;
            foreach ($responses as $r) {
                if ($r['status'] !== 200 || $r['body'] !== 'ok') {
                    throw new RuntimeException("$impl: " . $r['body'] . $r['stderr'] . "\n" . $fpm->logs());
                }
            }
            $lat = array_column($responses, 'ms');
            sort($lat);
            $line = json_encode([
                'bench' => 'fpm', 'impl' => $impl, 'round' => $round, 'batch' => $b,
                'requests' => $batch, 'workers' => $workers, 'concurrency' => $concurrency,
                'requests_per_s' => round($batch / $secs, 1),
                'connections_per_1000' => round($opened * 1000 / $batch, 1),
                'p50_ms' => round($lat[intdiv(count($lat), 2)], 3),
                'p99_ms' => round($lat[(int)(count($lat) * 0.99)], 3),
            ]);
            echo $line, "\n";
            if ($outfile !== null) {
                file_put_contents($outfile, $line . "\n", FILE_APPEND);
            }
        }
    } while (microtime(true) < $deadline);
} finally {
    $fpm->stop();
}
