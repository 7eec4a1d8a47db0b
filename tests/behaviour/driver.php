<?php
// The behaviour table's scenarios in PHP (tests/behaviour/run.py runs it
// and says what each line means; driver.py is the reference).
declare(strict_types=1);

require __DIR__ . '/../../bindings/php/autoload.php';

use RedisLock\Client;
use RedisLock\LockException;
use RedisLock\LockNotOwned;

function ask(string $question): string
{
    echo "? $question\n";
    fflush(STDOUT);
    return trim((string)fgets(STDIN));
}

function pttl(string $key): int
{
    return (int)ask("pttl $key");
}

function short(string $class): string
{
    $at = strrpos($class, '\\');
    return $at === false ? $class : substr($class, $at + 1);
}

/** The library's classes from its base down to $e's, or $e's class. */
function chain(\Throwable $e): string
{
    if (!$e instanceof LockException) {
        return short(get_class($e));
    }
    $names = [];
    for ($c = get_class($e); $c !== false; $c = get_parent_class($c)) {
        $names[] = short($c);
        if ($c === LockException::class) {
            break;
        }
    }
    return implode(' ⊃ ', array_reverse($names));
}

/** A value as PHP code writes it: null, true, false, or the value itself. */
function show(mixed $v): string
{
    return match (true) {
        $v === null => 'null',
        is_bool($v) => $v ? 'true' : 'false',
        default => (string)$v,
    };
}

function say(string $id, string $value): void
{
    echo "$id\t$value\n";
    fflush(STDOUT);
}

function gone(string $key): void
{
    $deadline = hrtime(true) + 10e9;
    while (pttl($key) !== -2) {
        if (hrtime(true) > $deadline) {
            throw new \RuntimeException("$key still there after 10 s");
        }
        usleep(50000);
    }
}

function now(): float
{
    return hrtime(true) / 1e9;
}

function scenario(string $id, callable $fn): void
{
    try {
        $value = show($fn(new Client(getenv('BEHAVIOUR_URL'))));
    } catch (\Throwable $e) {
        $value = chain($e);
    }
    say($id, $value);
}

scenario('ttl-default', function (Client $client) {
    $lock = $client->acquire('behaviour:ttl-default');
    $left = pttl('behaviour:ttl-default');
    $lock->release();
    return (int)ceil($left / 1000) . ' s';
});

scenario('ttl-unit', function (Client $client) {
    $lock = $client->acquire('behaviour:ttl-unit', ttlMs: 2000);
    $left = pttl('behaviour:ttl-unit');
    $lock->release();
    return $left > 1000 && $left <= 2000 ? 'ms' : "PTTL $left";
});

scenario('wait-default', function (Client $client) {
    $holder = $client->acquire('behaviour:wait-default', ttlMs: 1000);
    $started = now();
    $lock = $client->acquire('behaviour:wait-default');
    $waited = now() - $started;
    $lock->release();
    return $waited >= 0.5 ? 'waits' : sprintf('%s after %.1f s', get_debug_type($lock), $waited);
});

scenario('try-held', function (Client $client) {
    $holder = $client->acquire('behaviour:try-held');
    $got = $client->tryAcquire('behaviour:try-held');
    $holder->release();
    return $got;
});

scenario('wait-timeout', function (Client $client) {
    $holder = $client->acquire('behaviour:wait-timeout');
    $client->acquire('behaviour:wait-timeout', waitMs: 200);
    return 'acquired';
});

scenario('release-expired', function (Client $client) {
    $lock = $client->acquire('behaviour:release-expired', ttlMs: 200);
    gone('behaviour:release-expired');
    $other = $client->tryAcquire('behaviour:release-expired');
    $lock->release();
    return 'released';
});

scenario('unconfirmed', function (Client $client) {
    $lock = (new Client(getenv('BEHAVIOUR_CUTTER')))
        ->acquire('behaviour:unconfirmed', token: 'behaviour-unconfirmed');
    ask('arm behaviour-unconfirmed');
    try {
        $lock->release();
    } catch (LockNotOwned $e) {
        return chain($e);
    } catch (LockException $e) {
        return 'not caught as not-owned: ' . chain($e);
    }
    return 'released';
});

scenario('fence-first', function (Client $client) {
    $lock = $client->acquire('behaviour:fence-first');
    $fence = $lock->fence();
    $lock->release();
    return abs($fence - microtime(true) * 1e6) < 60e6 ? 'server µs' : $fence;
});

scenario('fence-after-release', function (Client $client) {
    $lock = $client->acquire('behaviour:fence-after-release');
    $lock->release();
    return $lock->fence();
});

scenario('fence-read-after-release', function (Client $client) {
    $lock = $client->acquire('behaviour:fence-read-after-release');
    $fence = $lock->fence();
    $lock->release();
    return $lock->fence() === $fence ? 'same' : $lock->fence();
});

scenario('token-after-release', function (Client $client) {
    $lock = $client->acquire('behaviour:token-after-release');
    $token = $lock->token();
    $lock->release();
    return $lock->token() === $token ? 'same' : $lock->token();
});

scenario('name', function (Client $client) {
    $lock = $client->acquire('behaviour:name');
    $type = get_debug_type($lock->key());
    $lock->release();
    return $type;
});

scenario('scoped-renews', function (Client $client) {
    $left = $client->synchronized('behaviour:scoped-renews', function () {
        usleep(900000);
        return pttl('behaviour:scoped-renews');
    }, ttlMs: 300);
    return $left > 0 ? 'renewed' : "PTTL $left at the end of the work";
});

function silent(callable $open): string
{
    $started = now();
    try {
        $open()->tryAcquire('behaviour:timeout');
        return 'acquired';
    } catch (\Throwable $e) {
        $took = now() - $started;
        return $took < 1.9 ? chain($e) : sprintf('after %.1f s: %s', $took, chain($e));
    }
}

scenario('timeout-option', fn () => silent(
    fn () => new Client(getenv('BEHAVIOUR_SILENT'), connectTimeoutMs: 300, commandTimeoutMs: 300),
));

scenario('timeout-url', fn () => silent(
    fn () => new Client(getenv('BEHAVIOUR_SILENT') . '?connect_timeout=300ms&command_timeout=300ms'),
));

scenario('timeout-both', fn () => silent(
    fn () => new Client(
        getenv('BEHAVIOUR_SILENT') . '?connect_timeout=5s&command_timeout=5s',
        connectTimeoutMs: 300,
        commandTimeoutMs: 300,
    ),
));

scenario('bad-ttl', function (Client $client) {
    try {
        $client->acquire('behaviour:bad-ttl', ttlMs: 0);
    } catch (\Throwable $e) {
        return short(get_class($e));
    }
    return 'acquired';
});

scenario('wrong-type', function (Client $client) {
    $client->tryAcquire('behaviour:wrong-type');
    return 'acquired';
});

scenario('no-server', function (Client $client) {
    (new Client(getenv('BEHAVIOUR_DEAD')))->tryAcquire('behaviour:no-server');
    return 'acquired';
});

exit(0);
