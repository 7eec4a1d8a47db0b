<?php
// Uncontended cycle rate of the classic PHP lock pattern (see redis_tool.php).
//
//   php uncontended.php predis   [seconds] [round] [outfile]
//   php uncontended.php phpredis [seconds] [round] [outfile]
//   php uncontended.php redis-tool-ffi ...   the project's drop-in RedisTool over FFI
//   php uncontended.php redislock ...        the project's Client: acquire() + release()
//        (REDISLOCK_PROJECT = the project's root; default: the current folder)
//   php uncontended.php predis-reconnect ...   new predis Client per cycle:
//        connect, lock, unlock, disconnect (php-fpm request minus PHP start-up)
//   php uncontended.php paired ...     Compat\RedisTool against the phpredis helper in
//        one process, batches of 300 cycles in alternating order: per pair the
//        helper's time over ours (ours' speed relative to the helper)
//
// Prints one JSON line: cycles/s and p50/p99 latency of one cycle in us.
require __DIR__ . '/redis_tool.php';

$mode    = $argv[1] ?? 'predis';
$seconds = (float)($argv[2] ?? 5);
$round   = (int)($argv[3] ?? 0);
$outfile = $argv[4] ?? null;
$key = 'bench:uncontended';
$ms  = 10000;

if ($mode === 'paired') {
    paired($seconds, $round, $outfile, $key, $ms);
    exit(0);
}

function paired(float $seconds, int $round, ?string $outfile, string $key, int $ms): void
{
    $batch = 300;
    $sides = ['ours' => connect_client('redis-tool-ffi'), 'helper' => connect_client('phpredis')];
    $sides['helper']->del($key);
    $cycle = function ($c) use ($key, $ms) {
        $tok = new_token();
        if (!try_get_lock($c, $key, $tok, $ms)) throw new RuntimeException('lock not acquired');
        if (!release_lock($c, $key, $tok)) throw new RuntimeException('lock not released');
    };
    for ($i = 0; $i < 300; $i++) {          // warm-up
        $cycle($sides['ours']);
        $cycle($sides['helper']);
    }
    $ratios = $ours = $helper = [];
    $end = hrtime(true) + (int)($seconds * 1e9);
    while (hrtime(true) < $end || count($ratios) < 3) {
        $t = [];
        foreach (count($ratios) % 2 === 0 ? ['ours', 'helper'] : ['helper', 'ours'] as $side) {
            $c = $sides[$side];
            $t0 = hrtime(true);
            for ($i = 0; $i < $batch; $i++) $cycle($c);
            $t[$side] = (hrtime(true) - $t0) / 1e3 / $batch;
        }
        $ours[] = $t['ours'];
        $helper[] = $t['helper'];
        $ratios[] = round($t['helper'] / $t['ours'], 3);
    }
    $summary = function (array $v): array {
        sort($v);
        $n = count($v);
        $median = $n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2;
        return ['median' => round($median, 2), 'min' => round($v[0], 2), 'max' => round($v[$n - 1], 2)];
    };
    $line = json_encode([
        'bench' => 'paired', 'impl' => 'php-redis-tool-ffi', 'base' => 'php-phpredis', 'lang' => 'php',
        'round' => $round, 'batch' => $batch, 'ours_us' => $summary($ours), 'helper_us' => $summary($helper),
        'speed_ratio' => $ratios,
    ]);
    echo $line, "\n";
    if ($outfile) file_put_contents($outfile, $line . "\n", FILE_APPEND);
}

$reconnect = ($mode === 'predis-reconnect');
$client = $reconnect ? 'predis' : $mode;
$c = connect_client($client);
if ($client !== 'redis-tool-ffi' && $client !== 'redislock') {
    $c->del($key);
}

$cycle = function () use (&$c, $client, $reconnect, $key, $ms) {
    if ($client === 'redislock') {
        $c->acquire($key, ttlMs: $ms, waitMs: 0)->release();
        return;
    }
    if ($reconnect) {
        $c = connect_client($client);
    }
    $tok = new_token();
    if (!try_get_lock($c, $key, $tok, $ms)) throw new RuntimeException('lock not acquired');
    if (!release_lock($c, $key, $tok)) throw new RuntimeException('lock not released');
    if ($reconnect) {
        $c->disconnect();
    }
};

for ($i = 0; $i < 200; $i++) $cycle();          // warm-up

$lat = [];
$t0 = hrtime(true);
$end = $t0 + (int)($seconds * 1e9);
$now = $t0;
while ($now < $end) {
    $cycle();
    $t = hrtime(true);
    $lat[] = $t - $now;
    $now = $t;
}
sort($lat);
$n = count($lat);
$pct = fn($p) => $lat[max(0, min($n - 1, (int)round($p / 100 * $n + 0.5) - 1))] / 1000.0;
$rec = [
    'bench' => 'uncontended', 'impl' => "php-$mode", 'lang' => 'php', 'round' => $round,
    'cycles' => $n, 'cycles_per_s' => $n / (($now - $t0) / 1e9),
    'p50_us' => $pct(50), 'p99_us' => $pct(99),
];
$line = json_encode($rec);
echo $line, "\n";
if ($outfile) file_put_contents($outfile, $line . "\n", FILE_APPEND);
