<?php
// One process of a fleet in the middle of a rolling migration, for
// RolloutTest: it takes and releases locks with one library, told what to
// do by the test, one JSON line per command on stdin, one JSON line per
// answer on stdout.
//
//   php rollout_peer.php LIBRARY PORT
//
// LIBRARY is the code the process runs:
//   predis-helper      the classic predis helper, as users write it
//                      (SET key id PX ms NX; compare-and-delete by id)
//   redistool          RedisLock\Compat\RedisTool, its drop-in
//   symfony-redis      Symfony's own RedisStore (Debian's symfony/lock), on phpredis
//   symfony-store      RedisLock\Symfony\Store
//   symfony-shared     RedisLock\Symfony\SharedStore
//   laravel-redis      Laravel's own Redis lock (Cache::lock() on the 'redis' driver), Debian's Laravel
//   laravel-redislock  RedisLock\Laravel\Lock (Cache::lock() on the 'redislock' driver)
// A Laravel library takes the Redis client after a colon (laravel-redis:predis).
//
// Commands ({"op": ..., "name": ...}):
//   acquire  ttl (s), wait (null: try once; a number: wait up to that many
//            seconds; "forever"), side ("write" default, or "read"), owner
//            (the request id or Laravel owner; made up when missing)
//            → {"ok": bool, "owner": ...}
//   release  → {"ok": bool} (the handle this process took)
//   release_by_owner  owner → {"ok": bool} (a lock restored from its owner, or the helper's id)
//   extend   ttl → {"ok": bool}
//   holds    → {"ok": bool} (the library's own check, where it has one)
// An exception is answered as {"error": class, "message": ...}.
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

[$library, $clientName] = array_pad(explode(':', $argv[1], 2), 2, 'phpredis');
$port = (int)$argv[2];
$url = "redis://127.0.0.1:$port/0";

/** @var array<string, mixed> the handles this process holds, by name */
$held = [];

function predis(int $port): \Predis\Client
{
    require_once '/usr/share/php/Predis/Autoloader.php';
    \Predis\Autoloader::register();
    return new \Predis\Client(['scheme' => 'tcp', 'host' => '127.0.0.1', 'port' => $port]);
}

function symfony(): void
{
    require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
}

/** Laravel's cache manager: store 'redislock' (ours) and 'redis' (Laravel's), prefix 'app', connection prefix 'db_'. */
function laravel(string $client, int $port): \Illuminate\Cache\CacheManager
{
    foreach (['Container', 'Config', 'Cache', 'Redis'] as $component) {
        require_once "Illuminate/$component/autoload.php";
    }
    $app = new \Illuminate\Container\Container();
    \Illuminate\Container\Container::setInstance($app);
    $app->instance('config', new \Illuminate\Config\Repository([
        'database' => ['redis' => [
            'client' => $client,
            'options' => ['prefix' => 'db_'],
            'default' => ['host' => '127.0.0.1', 'port' => $port, 'database' => 0],
        ]],
        'cache' => [
            'default' => 'redis',
            'prefix' => 'app',
            'stores' => [
                'redislock' => ['driver' => 'redislock', 'connection' => 'default', 'lock_connection' => 'default'],
                'redis' => ['driver' => 'redis', 'connection' => 'default', 'lock_connection' => 'default'],
            ],
        ],
    ]));
    $app->singleton('redis', fn ($app) => new \Illuminate\Redis\RedisManager(
        $app,
        $app['config']['database.redis.client'],
        $app['config']['database.redis'],
    ));
    $app->singleton('cache', fn ($app) => new \Illuminate\Cache\CacheManager($app));
    (new \RedisLock\Laravel\RedisLockServiceProvider($app))->boot();
    return $app['cache'];
}

const RELEASE_BY_ID = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

switch ($library) {
    case 'predis-helper':
        $predis = predis($port);
        $run = function (array $c) use ($predis): array {
            // The helper as it is written by hand: no waiting, no extend.
            return match ($c['op']) {
                'acquire' => ['ok' => 'OK' === (string)$predis->set($c['name'], $c['owner'], 'PX', (int)($c['ttl'] * 1000), 'NX')],
                'release_by_owner' => ['ok' => 1 === $predis->eval(RELEASE_BY_ID, 1, $c['name'], $c['owner'])],
            };
        };
        break;
    case 'redistool':
        $tool = new \RedisLock\Compat\RedisTool(new \RedisLock\Client($url));
        $run = fn (array $c): array => match ($c['op']) {
            'acquire' => ['ok' => $tool->tryGetLock($c['name'], $c['owner'], (int)($c['ttl'] * 1000))],
            'release_by_owner' => ['ok' => $tool->releaseLock($c['name'], $c['owner'])],
        };
        break;
    case 'symfony-redis':
    case 'symfony-store':
    case 'symfony-shared':
        symfony();
        if ($library === 'symfony-redis') {
            $redis = new \Redis();
            $redis->connect('127.0.0.1', $port);
            $store = new \Symfony\Component\Lock\Store\RedisStore($redis);
        } elseif ($library === 'symfony-store') {
            $store = new \RedisLock\Symfony\Store(new \RedisLock\Client($url));
        } else {
            $store = new \RedisLock\Symfony\SharedStore(new \RedisLock\Client($url));
        }
        $factory = new \Symfony\Component\Lock\LockFactory($store);
        $run = function (array $c) use ($factory, &$held): array {
            switch ($c['op']) {
                case 'acquire':
                    // Symfony's Lock waits forever (acquire(true)) or not at all.
                    $lock = $factory->createLock($c['name'], (float)$c['ttl'], false);
                    $blocking = $c['wait'] !== null;
                    try {
                        $ok = ($c['side'] ?? 'write') === 'read' ? $lock->acquireRead($blocking) : $lock->acquire($blocking);
                    } catch (\Symfony\Component\Lock\Exception\LockConflictedException $e) {
                        // A blocking acquire that gave up.
                        return ['ok' => false, 'error' => get_class($e), 'message' => $e->getMessage()];
                    }
                    if ($ok) {
                        $held[$c['name']] = $lock;
                    }
                    return ['ok' => $ok];
                case 'release':
                    $lock = $held[$c['name']] ?? $factory->createLock($c['name'], 30.0, false);
                    unset($held[$c['name']]);
                    $lock->release();
                    return ['ok' => !$lock->isAcquired()];
                case 'release_stranger':
                    // A Lock of the same name this process never acquired.
                    $lock = $factory->createLock($c['name'], 30.0, false);
                    try {
                        $lock->release();
                    } catch (\Symfony\Component\Lock\Exception\LockReleasingException $e) {
                        return ['ok' => false, 'error' => get_class($e)];
                    }
                    return ['ok' => true];
                case 'extend':
                    $lock = $held[$c['name']] ?? $factory->createLock($c['name'], 30.0, false);
                    try {
                        $lock->refresh((float)$c['ttl']);
                    } catch (\Symfony\Component\Lock\Exception\LockConflictedException $e) {
                        return ['ok' => false];
                    }
                    return ['ok' => true];
                case 'holds':
                    return ['ok' => isset($held[$c['name']]) && $held[$c['name']]->isAcquired()];
            }
        };
        break;
    case 'laravel-redis':
    case 'laravel-redislock':
        $store = laravel($clientName, $port)->store($library === 'laravel-redis' ? 'redis' : 'redislock');
        $run = function (array $c) use ($store, &$held): array {
            switch ($c['op']) {
                case 'acquire':
                    $lock = $store->lock($c['name'], (int)$c['ttl'], $c['owner'] ?? null);
                    if ($c['wait'] === null) {
                        $ok = $lock->get();
                    } else {
                        try {
                            $ok = $lock->block($c['wait'] === 'forever' ? 3600 : $c['wait']);
                        } catch (\Illuminate\Contracts\Cache\LockTimeoutException $e) {
                            $ok = false;
                        }
                    }
                    if ($ok) {
                        $held[$c['name']] = $lock;
                    }
                    return ['ok' => (bool)$ok, 'owner' => $lock->owner()];
                case 'release':
                    $lock = $held[$c['name']];
                    unset($held[$c['name']]);
                    return ['ok' => $lock->release()];
                case 'release_by_owner':
                    return ['ok' => $store->restoreLock($c['name'], $c['owner'])->release()];
                case 'extend':
                    // Laravel 8's own lock has no refresh(): ours only.
                    return ['ok' => $store->restoreLock($c['name'], $c['owner'])->refresh((int)$c['ttl'])];
            }
        };
        break;
    default:
        fwrite(STDERR, "unknown library $library\n");
        exit(2);
}

fwrite(STDOUT, json_encode(['ready' => $library, 'pid' => getmypid()]) . "\n");
while (($line = fgets(STDIN)) !== false) {
    $c = json_decode($line, true, 8, JSON_THROW_ON_ERROR);
    if ($c['op'] === 'quit') {
        break;
    }
    try {
        $out = $run($c + ['wait' => null]);
    } catch (\Throwable $e) {
        $out = ['error' => get_class($e), 'message' => $e->getMessage()];
    }
    fwrite(STDOUT, json_encode($out) . "\n");
}
