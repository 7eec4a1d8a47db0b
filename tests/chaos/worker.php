<?php
// One chaos worker in PHP (started by chaos.py, not by hand).
//
//   php worker.php URL DIR ID TTL_MS WAIT_MS      (URL: several separated by spaces: Redlock)
//
// The protocol of worker.c: DIR/ready-ID once the client exists, wait for
// DIR/go, loop until DIR/stop exists: a fenced acquisition of the lock
// "chaos" through the project's PHP package (bindings/php), the critical
// section on the file store DIR/store (flock on DIR/store.lock; read, 1 ms,
// write: two sections, so that two owners lose an update), release; one
// JSON line per attempt in DIR/events-ID.jsonl with CLOCK_MONOTONIC
// nanoseconds from hrtime() (t0 acquire called, t1 returned, t2 release
// called, t3 returned). The library is $REDISLOCK_LIB (chaos.py sets it).
declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use RedisLock\FFI as Native;

const NAME = 'chaos';

[, $url, $dir, $id, $ttlMs, $waitMs] = $argv;
$ttlMs = (int)$ttlMs;
$waitMs = (int)$waitMs;

/** The error class every worker reports for a status (the exception's code). */
function errClass(\Throwable $e): string
{
    if (!$e instanceof RedisLock\LockException) {
        return $e instanceof \InvalidArgumentException ? 'invalid_argument' : 'other';
    }
    return match ($e->getCode()) {
        Native::NOT_ACQUIRED => 'timeout',
        Native::NOT_OWNER => 'not_owner',
        Native::CONNECTION => 'connection',
        Native::INVALID_ARGUMENT => 'invalid_argument',
        Native::WRONG_TYPE => 'wrong_type',
        Native::NO_QUORUM => 'no_quorum',
        Native::SERVER => 'server',
        Native::UNCONFIRMED => 'unconfirmed',
        default => 'other',
    };
}

/** @return array{0: int, 1: int}|null counter and fence */
function storeRead(string $path): ?array
{
    $s = @file_get_contents($path);
    if ($s === false || !preg_match('/^(\d+) (\d+)\s*$/', $s, $m)) {
        return null;
    }
    return [(int)$m[1], (int)$m[2]];
}

/** @return array{0: string, 1: int, 2: bool} outcome, stored fence, interleaved */
function criticalSection($lockFp, string $store, int $fence): array
{
    flock($lockFp, LOCK_EX);
    $first = storeRead($store);
    flock($lockFp, LOCK_UN);
    if ($first === null) {
        return ['store_error', 0, false];
    }
    if ($fence <= $first[1]) {
        return ['refused', $first[1], false];
    }
    usleep(1000);  // the increment is not atomic: a second owner loses an update
    flock($lockFp, LOCK_EX);
    try {
        $now = storeRead($store);
        if ($now === null) {
            return ['store_error', 0, false];
        }
        if ($fence <= $now[1]) {
            return ['refused', $now[1], false];
        }
        file_put_contents($store, sprintf("%d %d\n", $first[0] + 1, $fence));
        return ['ok', $now[1], $now[0] !== $first[0]];
    } finally {
        flock($lockFp, LOCK_UN);
    }
}

// A fenced acquisition: Client::acquire(fenced: true) where the package has
// it, else redislock_acquire_fenced through the package's FFI handle.
$hasFenced = false;
foreach ((new ReflectionMethod(RedisLock\Client::class, 'acquire'))->getParameters() as $p) {
    $hasFenced = $hasFenced || $p->getName() === 'fenced';
}
$ffi = Native::get();
if ($hasFenced) {
    $urls = explode(' ', $url); // several: Redlock
    $client = new RedisLock\Client(count($urls) > 1 ? $urls : $url);
    $acquire = fn () => $client->acquire(NAME, ttlMs: $ttlMs, waitMs: $waitMs, fenced: true);
} else {
    $handle = $ffi->new('redislock_client*');
    Native::checkStatus($ffi->redislock_client_open($url, \FFI::addr($handle)));
    $acquire = function () use ($ffi, $handle, $ttlMs, $waitMs): RedisLock\Lock {
        $out = $ffi->new('redislock_lock*');
        Native::checkStatus($ffi->redislock_acquire_fenced(
            $handle, NAME, strlen(NAME), $ttlMs, $waitMs, null, 0, \FFI::addr($out)));
        return new RedisLock\Lock($out, NAME);
    };
}

$out = fopen("$dir/events-$id.jsonl", 'w');
$lockFp = fopen("$dir/store.lock", 'c');
$store = "$dir/store";
touch("$dir/ready-$id");
$deadline = hrtime(true) + 120_000_000_000;
while (!file_exists("$dir/go")) {
    if (hrtime(true) > $deadline) {
        exit(1);
    }
    usleep(1000);
}

while (true) {
    clearstatcache();
    if (file_exists("$dir/stop")) {
        break;
    }
    $ev = ['w' => $id, 'lang' => 'php', 't0' => hrtime(true)];
    try {
        $lock = $acquire();
        $ev['t1'] = hrtime(true);
        $ev['ok'] = true;
    } catch (\Throwable $e) {
        $ev['t1'] = hrtime(true);
        $ev['ok'] = false;
        $ev['err'] = errClass($e);
        $ev['msg'] = get_class($e) . ': ' . $e->getMessage();
        fwrite($out, json_encode($ev) . "\n");
        if ($ev['err'] !== 'timeout') {
            usleep(10000);  // an error that comes at once must not spin
        }
        continue;
    }
    try {
        $fence = $lock->fence();  // drawn in the acquisition: from memory
    } catch (\Throwable $e) {
        $fence = 0;               // refused by the store below: a figure, not a crash
        $ev['fence_msg'] = get_class($e) . ': ' . $e->getMessage();
    }
    [$outcome, $stored, $interleaved] = criticalSection($lockFp, $store, $fence);
    $ev += ['fence' => $fence, 'cs' => $outcome, 'stored' => $stored, 'interleaved' => $interleaved,
            't2' => hrtime(true)];
    try {
        $lock->release();
        $ev['rel'] = 'ok';
    } catch (\Throwable $e) {
        $ev['rel'] = errClass($e);
        $ev['rel_msg'] = get_class($e) . ': ' . $e->getMessage();
    }
    $ev['t3'] = hrtime(true);
    unset($lock);
    fwrite($out, json_encode($ev) . "\n");
}
fclose($out);
