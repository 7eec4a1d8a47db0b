<?php
declare(strict_types=1);

use Illuminate\Bus\UniqueLock;
use Illuminate\Cache\CacheManager;
use Illuminate\Config\Repository as Config;
use Illuminate\Container\Container;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Illuminate\Contracts\Cache\Repository as CacheRepository;
use Illuminate\Queue\Middleware\WithoutOverlapping;
use Illuminate\Redis\RedisManager;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Facade;
use PHPUnit\Framework\TestCase;
use RedisLock\ConnectionException;
use RedisLock\InvalidArgument;
use RedisLock\Laravel\ConnectionUrl;
use RedisLock\Laravel\Lock;
use RedisLock\Laravel\RedisLockServiceProvider;
use RedisLock\Laravel\RedisLockStore;

// Laravel from Composer's autoloader, or else Debian's php-laravel-framework.
if (!class_exists(CacheManager::class)) {
    foreach (['Container', 'Config', 'Cache', 'Redis', 'Bus', 'Queue'] as $component) {
        if (stream_resolve_include_path("Illuminate/$component/autoload.php")) {
            require_once "Illuminate/$component/autoload.php";
        }
    }
}

/** A queued job as Laravel's unique-job lock and WithoutOverlapping see it. */
final class LaravelTestJob
{
    public int $uniqueFor = 60;
    /** @var list<int> delays the job was released back to the queue with */
    public array $released = [];

    public function __construct(public string $uniqueId)
    {
    }

    public function release(int $delay = 0): void
    {
        $this->released[] = $delay;
    }
}

/**
 * The Laravel integration against a real Laravel (8.83 from Debian: the
 * container, config, RedisManager and CacheManager) and a throwaway
 * redis-server: the cache driver 'redislock' side by side with Laravel's
 * own 'redis' driver on the same connection, with a store prefix ('app')
 * and a connection prefix ('db_'), over predis and phpredis.
 */
final class LaravelTest extends TestCase
{
    private RedisServer $server;
    private Redis $raw;

    protected function setUp(): void
    {
        if (!class_exists(CacheManager::class) || !class_exists(RedisManager::class)) {
            $this->fail('Laravel is not installed: apt-get install php-laravel-framework (make test does)');
        }
        $this->server = new RedisServer();
        $this->raw = $this->server->raw();
    }

    protected function tearDown(): void
    {
        if (class_exists(Facade::class)) {
            Facade::clearResolvedInstances();
        }
        if (isset($this->server)) {
            $this->server->stop();
        }
    }

    public function clients(): array
    {
        return ['predis' => ['predis'], 'phpredis' => ['phpredis']];
    }

    /**
     * A Laravel container with our provider booted: cache store 'locks'
     * (driver redislock) and 'laravel' (Laravel's own redis driver), both
     * on the Redis connection 'default'.
     *
     * @param array<string, mixed> $connection merged into the connection's config
     * @param array<string, mixed> $store      merged into the 'locks' store's config
     */
    private function app(string $client, array $connection = [], array $store = []): Container
    {
        $app = new Container();
        Container::setInstance($app);
        $app->instance('config', new Config([
            'database' => ['redis' => [
                'client' => $client,
                'options' => ['prefix' => 'db_'],
                'default' => $connection + ['host' => '127.0.0.1', 'port' => $this->server->port, 'database' => 0],
            ]],
            'cache' => [
                'default' => 'locks',
                'prefix' => 'app',
                'stores' => [
                    'locks' => $store + ['driver' => 'redislock', 'connection' => 'default', 'lock_connection' => 'default'],
                    'laravel' => ['driver' => 'redis', 'connection' => 'default', 'lock_connection' => 'default'],
                ],
            ],
        ]));
        $app->singleton('redis', fn ($app) => new RedisManager(
            $app,
            $app['config']['database.redis.client'],
            $app['config']['database.redis'],
        ));
        $app->singleton('cache', fn ($app) => new CacheManager($app));
        $app->singleton('cache.store', fn ($app) => $app['cache']->driver());
        $app->alias('cache.store', CacheRepository::class);
        (new RedisLockServiceProvider($app))->boot();
        return $app;
    }

    /** The keys on the server, without redislock's shared fence counters. */
    private function keys(): array
    {
        $keys = array_values(array_filter($this->raw->keys('*'), fn ($k) => !str_starts_with($k, 'redislock:fence:')));
        sort($keys);
        return $keys;
    }

    /** Run $body in a pcntl_fork() child, which then dies; returns its pid. */
    private static function child(callable $body): int
    {
        $pid = pcntl_fork();
        if ($pid === 0) {
            try {
                $body();
            } finally {
                posix_kill(posix_getpid(), SIGKILL);
            }
        }
        return $pid;
    }

    /** @dataProvider clients */
    public function testTheKeyAndValueAreThoseOfLaravelsOwnLock(string $client): void
    {
        $cache = $this->app($client)['cache'];
        $theirs = $cache->store('laravel')->lock('report', 60, 'owner-1');
        $this->assertTrue($theirs->get());
        $laravelKeys = $this->keys();
        $laravelValue = $this->raw->get($laravelKeys[0]);
        $this->assertTrue($theirs->release());
        $this->assertSame([], $this->keys());

        $ours = $cache->store('locks')->lock('report', 60, 'owner-1');
        $this->assertInstanceOf(Lock::class, $ours);
        $this->assertTrue($ours->get());
        // Laravel 8: the store prefix gets a ':'; the connection's prefix comes first.
        $this->assertSame(['db_app:report'], $laravelKeys);
        $this->assertSame($laravelKeys, $this->keys());
        $this->assertSame($laravelValue, $this->raw->get('db_app:report'));
        $this->assertSame('owner-1', $laravelValue);
        // Seconds, as Laravel's: bounds seconds apart from the call.
        $pttl = $this->raw->pttl('db_app:report');
        $this->assertTrue($pttl > 30000 && $pttl <= 60000, "a 60 s lock: pttl $pttl");
        $this->assertTrue($ours->release());
        $this->assertSame([], $this->keys());
    }

    /** @dataProvider clients */
    public function testBothLocksExcludeEachOtherAndReleaseEachOtherByOwner(string $client): void
    {
        $cache = $this->app($client)['cache'];
        $ours = $cache->store('locks');
        $theirs = $cache->store('laravel');

        $mine = $ours->lock('a', 30);
        $this->assertTrue($mine->get());
        $this->assertFalse($theirs->lock('a', 30)->get(), "Laravel's lock took a name redislock holds");
        $this->assertFalse($theirs->restoreLock('a', 'intruder')->release());
        $this->assertFalse($ours->restoreLock('a', 'intruder')->release());
        $this->assertSame($mine->owner(), $this->raw->get('db_app:a'));
        $this->assertTrue($theirs->restoreLock('a', $mine->owner())->release(), "Laravel's release by owner");
        $this->assertSame([], $this->keys());

        $old = $theirs->lock('b', 30);
        $this->assertTrue($old->get());
        $this->assertFalse($ours->lock('b', 30)->get(), "redislock took a name Laravel's lock holds");
        $this->assertFalse($ours->restoreLock('b', 'intruder')->release());
        $this->assertTrue($ours->restoreLock('b', $old->owner())->isOwnedByCurrentProcess());
        $this->assertFalse($ours->restoreLock('b', 'intruder')->isOwnedByCurrentProcess());
        $this->assertTrue($ours->restoreLock('b', $old->owner())->release(), "redislock's release by owner");
        $this->assertSame([], $this->keys());
        $this->assertFalse($old->release());
    }

    public function testPhpredisSerializedOwnersAsLaravelStoresThem(): void
    {
        $cache = $this->app('phpredis', ['options' => ['serializer' => Redis::SERIALIZER_PHP]])['cache'];
        $mine = $cache->store('locks')->lock('s', 30, 'me');
        $this->assertTrue($mine->get());
        $this->assertSame(serialize('me'), $this->raw->get('db_app:s'));
        $this->assertTrue($mine->isOwnedByCurrentProcess());
        $this->assertFalse($cache->store('laravel')->lock('s', 30)->get());
        $this->assertTrue($cache->store('laravel')->restoreLock('s', 'me')->release());

        $theirs = $cache->store('laravel')->lock('s', 30, 'them');
        $this->assertTrue($theirs->get());
        $this->assertFalse($cache->store('locks')->lock('s', 30)->get());
        $this->assertTrue($cache->store('locks')->restoreLock('s', 'them')->release());
        $this->assertSame([], $this->keys());
    }

    public function testBlockIsHandedTheLockByARelease(): void
    {
        $store = $this->app('predis')['cache']->store('locks');
        $this->assertTrue($store->lock('handoff', 30, 'holder')->get());
        $before = $store->getStore()->lockClient()->stats();
        $port = $this->server->port;
        // A child waits until the parent queues (10 s at most), then 100 ms
        // more, releases the holder's lock by owner, having noted the time.
        $pid = self::child(function () use ($store, $port) {
            $r = new Redis();
            $r->connect('127.0.0.1', $port);
            $r->set('queued', waitUntil(fn () => $r->exists('{db_app:handoff}:queue') > 0, 10) ? 'yes' : 'no');
            usleep(100000);
            $lock = $store->restoreLock('handoff', 'holder');
            $t = hrtime(true);
            $released = $lock->release();
            $r->set('released-at', $released ? (string)$t : 'not released');
        });
        try {
            $waiter = $store->lock('handoff', 30, 'waiter');
            $t0 = hrtime(true);
            [$at, $heldBy, $fence, $kept] = $waiter->block(20, fn () => [
                hrtime(true),
                $this->raw->get('db_app:handoff'),
                $waiter->fence(),
                $this->raw->get('{db_app:handoff}:meta'),
            ]);
        } finally {
            pcntl_waitpid($pid, $status);
        }
        $this->assertSame('yes', $this->raw->get('queued'), "block() did not join the lock's queue: it polls");
        $released = $this->raw->get('released-at');
        $this->assertIsNumeric($released, 'the child released the lock');
        $this->assertGreaterThan(100, ($at - $t0) / 1e6, 'block() waited for the release');
        // CLOCK_MONOTONIC is the machine's: taken before the release, the
        // child's time comes before the callback's unless two held the lock.
        $this->assertGreaterThanOrEqual(0, $at - (int)$released, 'the callback ran before the release');
        // Woken by the release's hand-off, not by polling as Laravel's
        // block() does every 250 ms (its tries would find the lock free).
        $after = $store->getStore()->lockClient()->stats();
        $this->assertSame(1, $after['acquired_handed_over'] - $before['acquired_handed_over'], 'handed over by the release');
        $this->assertSame(0, $after['acquired_at_once'] - $before['acquired_at_once'], 'found free by a try');
        $this->assertSame('waiter', $heldBy);
        // The new holder's fence, drawn while it held the lock, is kept beside the lock for it.
        $this->assertSame("$fence:waiter", $kept);
        $this->assertSame($fence, $waiter->fence(), 'the same number once drawn');
        $this->assertSame(['queued', 'released-at'], $this->keys(), 'released after the callback');
    }

    public function testBlockNoticesAReleaseByLaravelsOwnLock(): void
    {
        $app = $this->app('predis');
        $this->assertTrue($app['cache']->store('laravel')->lock('mixed', 30, 'old-process')->get());
        $client = $app['cache']->store('locks')->getStore()->lockClient();
        $before = $client->stats();
        // A child with its own Laravel waits until this process is queued
        // (10 s at most), then 300 ms more, and releases it with Laravel's
        // lock (no hand-off).
        $port = $this->server->port;
        $pid = self::child(function () use ($port) {
            $r = new Redis();
            $r->connect('127.0.0.1', $port);
            $r->set('queued', waitUntil(fn () => $r->exists('{db_app:mixed}:queue') > 0, 10) ? 'yes' : 'no');
            usleep(300000);
            $this->app('predis')['cache']->store('laravel')->restoreLock('mixed', 'old-process')->release();
        });
        try {
            $t = hrtime(true);
            $this->assertTrue($app['cache']->store('locks')->lock('mixed', 30, 'new-process')->block(20));
            $ms = (hrtime(true) - $t) / 1e6;
        } finally {
            pcntl_waitpid($pid, $status);
        }
        $this->assertSame('yes', $this->raw->get('queued'), "block() did not join the lock's queue: it polls");
        $this->assertGreaterThan(300, $ms, 'block() returned before the release');
        // Taken by the waiter's own retry, long before the holder's 30 s TTL.
        $after = $client->stats();
        $this->assertSame(1, $after['acquired_after_wait'] - $before['acquired_after_wait'], 'taken by a retry after a wait');
        $this->assertLessThan(10000, $ms, 'the waiter retried on its own');
        $this->assertSame('new-process', $this->raw->get('db_app:mixed'));
    }

    /** @dataProvider clients */
    public function testBlockTimesOutWithLaravelsException(string $client): void
    {
        $store = $this->app($client)['cache']->store('locks');
        $this->assertTrue($store->lock('busy', 30, 'holder')->get());
        // Laravel's own block() would sleep this long between its tries:
        // the bounds below are seconds away from it and from the TTL.
        $sleepMs = 6000;
        $ran = false;
        $t = hrtime(true);
        try {
            $store->lock('busy', 30)->betweenBlockedAttemptsSleepFor($sleepMs)->block(0, function () use (&$ran) {
                $ran = true;
            });
            $this->fail('block(0) took a held lock');
        } catch (LockTimeoutException $e) {
            $ms = (hrtime(true) - $t) / 1e6;
            $this->assertLessThan(3000, $ms, "block(0) tries once: it took $ms ms");
        }
        $t = hrtime(true);
        try {
            $store->lock('busy', 30)->betweenBlockedAttemptsSleepFor($sleepMs)->block(0.4);
            $this->fail('block(0.4) took a held lock');
        } catch (LockTimeoutException $e) {
            $ms = (hrtime(true) - $t) / 1e6;
            $this->assertTrue($ms >= 350 && $ms < 3000, "a 0.4 s wait took $ms ms");
            $this->assertInstanceOf(RedisLock\LockTimeout::class, $e->getPrevious());
        }
        $this->assertFalse($ran);
        $this->assertSame('holder', $this->raw->get('db_app:busy'));
    }

    public function testGetAndBlockReleaseAfterTheCallbackAlsoWhenItThrows(): void
    {
        $store = $this->app('phpredis')['cache']->store('locks');
        $this->assertSame('done', $store->lock('cb', 30)->get(function () {
            $this->assertNotFalse($this->raw->get('db_app:cb'));
            return 'done';
        }));
        $this->assertFalse($this->raw->get('db_app:cb'));
        $this->assertSame(42, $store->lock('cb', 30)->block(1, fn () => 42));
        $this->assertFalse($this->raw->get('db_app:cb'));
        foreach (['get' => fn ($l, $cb) => $l->get($cb), 'block' => fn ($l, $cb) => $l->block(1, $cb)] as $how => $call) {
            try {
                $call($store->lock('cb', 30), function () {
                    throw new RuntimeException('boom');
                });
                $this->fail("$how: the exception was lost");
            } catch (RuntimeException $e) {
                $this->assertSame('boom', $e->getMessage());
            }
            $this->assertFalse($this->raw->get('db_app:cb'), "$how released after the exception");
        }
        $this->assertTrue($store->lock('cb', 30, 'other')->get());
        $ran = false;
        $this->assertFalse($store->lock('cb', 30)->get(function () use (&$ran) {
            $ran = true;
        }));
        $this->assertFalse($ran);
    }

    /** @dataProvider clients */
    public function testRefreshByOwnerOnlyAndNeverRecreates(string $client): void
    {
        $store = $this->app($client)['cache']->store('locks');
        $lock = $store->lock('r', 10, 'me');
        $this->assertTrue($lock->get());
        // Bounds seconds apart from the call (a busy machine pauses), and
        // from the other TTLs (10 s, 100 s, 5 s).
        $this->assertTrue($lock->refresh(100));
        $this->assertGreaterThan(50000, $this->raw->pttl('db_app:r'), 'refresh(100) gives 100 s');
        $this->assertFalse($store->restoreLock('r', 'other')->refresh(5));
        $this->assertGreaterThan(50000, $this->raw->pttl('db_app:r'), "another owner's refresh changed the TTL");
        $this->assertTrue($lock->refresh());
        $pttl = $this->raw->pttl('db_app:r');
        $this->assertTrue($pttl > 5000 && $pttl <= 10000, "refresh() gives the lock's own 10 s: $pttl");
        $this->assertTrue($store->restoreLock('r', 'me')->refresh(), 'a restored lock (seconds = 0) refreshes to 30 days');
        $this->assertGreaterThan((Lock::MAX_SECONDS - 60) * 1000, $this->raw->pttl('db_app:r'));
        $this->assertTrue($lock->release());
        $this->assertFalse($lock->refresh(10));
        $this->assertFalse((bool)$this->raw->exists('db_app:r'));
    }

    /** @dataProvider clients */
    public function testForceReleaseWhoeverHoldsIt(string $client): void
    {
        $cache = $this->app($client)['cache'];
        $this->assertTrue($cache->store('laravel')->lock('f', 30)->get());
        $cache->store('locks')->lock('f')->forceRelease();
        $this->assertSame([], $this->keys());
        $this->assertTrue($cache->store('locks')->lock('f', 30)->get());
        $cache->store('locks')->lock('f')->forceRelease();
        $this->assertSame([], $this->keys());
        $cache->store('locks')->lock('f')->forceRelease(); // free: nothing to do
        $this->assertTrue($cache->store('locks')->lock('f', 30)->get());
    }

    /** @dataProvider clients */
    public function testZeroSecondsIsThirtyDaysAndSoIsMore(string $client): void
    {
        $store = $this->app($client)['cache']->store('locks');
        $max = Lock::MAX_SECONDS * 1000;
        $this->assertSame(2_592_000_000, $max);
        $this->assertTrue($store->lock('forever')->get());
        $pttl = $this->raw->pttl('db_app:forever');
        $this->assertTrue($pttl > $max - 60000 && $pttl <= $max, "seconds = 0: pttl $pttl");
        $this->assertTrue($store->lock('long', 90 * 86400)->get());
        $this->assertLessThanOrEqual($max, $this->raw->pttl('db_app:long'));
        $this->assertSame(1, Lock::ttlMs(0.0001));
        $this->assertSame($max, Lock::ttlMs(-5));
    }

    public function testFencesIncreaseAndARestoredLockHasNone(): void
    {
        $store = $this->app('predis')['cache']->store('locks');
        $lock = $store->lock('fenced', 30);
        $this->assertNull($lock->fence());
        $this->assertTrue($lock->get());
        $first = $lock->fence();
        $this->assertGreaterThan(0, $first);
        $this->assertTrue($lock->release());
        $this->assertSame($first, $lock->fence(), 'the last acquisition');
        $again = $store->lock('fenced', 30);
        $this->assertTrue($again->block(1));
        $this->assertGreaterThan($first, $again->fence());
        $this->assertNull($store->restoreLock('fenced', $again->owner())->fence());
    }

    public function testTheDriverThroughTheCacheManagerRepositoryAndFacade(): void
    {
        $app = $this->app('phpredis');
        $repository = $app['cache']->store('locks');
        $this->assertInstanceOf(RedisLockStore::class, $repository->getStore());
        $this->assertSame('app:', $repository->getStore()->getPrefix());
        // The cache itself stays Laravel's.
        $repository->put('item', ['a' => 1], 60);
        $this->assertSame(['a' => 1], $repository->get('item'));
        $this->assertSame(['a' => 1], $app['cache']->store('laravel')->get('item'));
        $this->assertSame(['db_app:item'], $this->keys());
        $repository->forget('item');
        // Cache::lock() and Cache::restoreLock() on the default store.
        Facade::setFacadeApplication($app);
        $lock = Cache::lock('facade', 10);
        $this->assertInstanceOf(Lock::class, $lock);
        $this->assertSame('default', $lock->getConnectionName());
        $this->assertTrue($lock->get());
        $this->assertInstanceOf(Lock::class, $app['cache']->restoreLock('facade', $lock->owner()));
        $this->assertTrue(Cache::restoreLock('facade', $lock->owner())->release());
        $this->assertSame([], $this->keys());
    }

    public function testUniqueJobsAndWithoutOverlapping(): void
    {
        $app = $this->app('predis');
        $cache = $app['cache']->store('locks');
        $job = new LaravelTestJob('42');
        // ShouldBeUnique: taken when dispatched...
        $this->assertTrue((new UniqueLock($cache))->acquire($job));
        $this->assertFalse((new UniqueLock($cache))->acquire(new LaravelTestJob('42')));
        $key = 'db_app:laravel_unique_job:' . LaravelTestJob::class . '42';
        $this->assertSame([$key], $this->keys());
        $pttl = $this->raw->pttl($key);
        $this->assertTrue($pttl > 30000 && $pttl <= 60000, "uniqueFor 60: pttl $pttl");
        // ...and released by the worker (Laravel 8's CallQueuedHandler).
        $cache->lock('laravel_unique_job:' . LaravelTestJob::class . '42')->forceRelease();
        $this->assertSame([], $this->keys());
        $this->assertTrue((new UniqueLock($cache))->acquire($job));
        $cache->lock('laravel_unique_job:' . LaravelTestJob::class . '42')->forceRelease();

        // WithoutOverlapping: a second run of the same key is released back to the queue.
        $ran = [];
        $middleware = new WithoutOverlapping('order-7', 0, 60);
        $middleware->handle($job, function ($job) use (&$ran, $middleware) {
            $ran[] = 'outer';
            $this->assertSame(['db_app:laravel-queue-overlap:' . LaravelTestJob::class . ':order-7'], $this->keys());
            $middleware->handle($job, function () use (&$ran) {
                $ran[] = 'inner';
            });
        });
        $this->assertSame(['outer'], $ran);
        $this->assertSame([0], $job->released);
        $this->assertSame([], $this->keys());
    }

    public function testAnUnreachableServerIsAConnectionException(): void
    {
        $this->app('predis', ['port' => RedisServer::freePort()]);
        $t = hrtime(true);
        foreach (['get' => fn ($l) => $l->get(), 'block' => fn ($l) => $l->block(10)] as $how => $call) {
            try {
                $call(Container::getInstance()['cache']->store('locks')->lock('x', 10));
                $this->fail("$how: no exception");
            } catch (ConnectionException $e) {
                $this->assertStringContainsString('cannot reach Redis', $e->getMessage());
            }
        }
        // Refused at once; a hang would last block()'s 10 s.
        $ms = (hrtime(true) - $t) / 1e6;
        $this->assertLessThan(5000, $ms, "no hang: $ms ms");
        // lock_url: the locks go there rather than to lock_connection's server.
        $this->app('predis', [], ['lock_url' => 'redis://127.0.0.1:' . RedisServer::freePort()]);
        $this->expectException(ConnectionException::class);
        Container::getInstance()['cache']->store('locks')->lock('x', 10)->get();
    }

    public function testAnUnknownLockConnectionIsAClearError(): void
    {
        $store = $this->app('predis')['cache']->store('locks')->getStore();
        $store->setLockConnection('missing');
        $this->expectException(InvalidArgument::class);
        $this->expectExceptionMessage('Redis connection [missing] not configured');
        $store->lockClient();
    }

    public function urls(): array
    {
        $host = ['host' => 'redis.internal', 'port' => 6380, 'database' => 2];
        $ca = '/etc/ssl/certs/ca-certificates.crt'; // a PEM file: redislock reads it when the client is made
        return [
            'host, port, db' => [['default' => $host], 'redis://redis.internal:6380/2'],
            // Unset host and port: those of Laravel's clients (predis' defaults).
            'defaults' => [['default' => []], sprintf('redis://127.0.0.1:%d/0', Predis\Connection\Parameters::create([])->port)],
            'string port and db' => [['default' => ['host' => 'h', 'port' => '7002', 'database' => '3']], 'redis://h:7002/3'],
            'password' => [['default' => $host + ['password' => 'p@ss/w:rd']], 'redis://:p%40ss%2Fw%3Ard@redis.internal:6380/2'],
            'username and password' => [['default' => $host + ['username' => 'app', 'password' => 'pw']], 'redis://app:pw@redis.internal:6380/2'],
            'phpredis [user, pass]' => [['default' => $host + ['password' => ['app', 'pw']]], 'redis://app:pw@redis.internal:6380/2'],
            'url' => [['default' => ['url' => 'redis://u:pw@cache.example:7000/4', 'host' => 'ignored']], 'redis://u:pw@cache.example:7000/4'],
            'url without a db keeps database' => [['default' => ['url' => 'redis://cache.example:7000', 'database' => 5]], 'redis://cache.example:7000/5'],
            'rediss url' => [['default' => ['url' => 'rediss://cache.example:6380/1']], 'rediss://cache.example:6380/1'],
            'tls scheme and CA' => [
                ['default' => $host + ['scheme' => 'tls', 'context' => ['ssl' => ['cafile' => $ca]]]],
                'rediss://redis.internal:6380/2?tls_ca_file=' . rawurlencode($ca),
            ],
            'phpredis tls:// host' => [['default' => ['host' => 'tls://secure.example', 'port' => 6380]], 'rediss://secure.example:6380/0'],
            'timeout' => [['default' => $host + ['timeout' => 0.5]], 'redis://redis.internal:6380/2?connect_timeout=500ms'],
            'IPv6' => [['default' => ['host' => '::1', 'port' => 7003]], 'redis://[::1]:7003/0'],
            'phpredis socket as host' => [
                ['default' => ['host' => '/run/redis/redis.sock', 'port' => 0, 'database' => 1, 'password' => 'pw']],
                'unix:///run/redis/redis.sock?db=1&pass=pw',
            ],
            'predis unix scheme and path' => [
                ['default' => ['scheme' => 'unix', 'path' => '/tmp/r.sock']],
                'unix:///tmp/r.sock?db=0',
            ],
            'phpredis cluster' => [
                ['client' => 'phpredis', 'options' => ['password' => 'pw'], 'clusters' => ['default' => [
                    ['host' => '10.0.0.1', 'port' => 7000], ['host' => '10.0.0.2', 'port' => 7001],
                ]]],
                'redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001',
            ],
            'predis Redis Cluster' => [
                ['client' => 'predis', 'options' => ['cluster' => 'redis'], 'clusters' => ['default' => [['host' => 'n1', 'port' => 7000]]]],
                'redis+cluster://n1:7000',
            ],
            'TLS cluster with the CA in the options' => [
                ['client' => 'phpredis', 'options' => ['password' => 'pw', 'context' => ['ssl' => ['cafile' => $ca]]], 'clusters' => ['default' => [
                    ['scheme' => 'tls', 'host' => '10.0.0.1', 'port' => 7000], ['scheme' => 'tls', 'host' => '10.0.0.2', 'port' => 7001],
                ]]],
                'rediss+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001?tls_ca_file=' . rawurlencode($ca),
            ],
            'TLS cluster with the CA on a node' => [
                ['client' => 'predis', 'options' => ['cluster' => 'redis'], 'clusters' => ['default' => [
                    ['scheme' => 'tls', 'host' => 'n1', 'port' => 7000, 'ssl' => ['cafile' => $ca]],
                ]]],
                'rediss+cluster://n1:7000?tls_ca_file=' . rawurlencode($ca),
            ],
            'phpredis tls:// cluster hosts' => [
                ['client' => 'phpredis', 'clusters' => ['default' => [['host' => 'tls://n1', 'port' => 7000], ['host' => 'tls://n2', 'port' => 7001]]]],
                'rediss+cluster://n1:7000,n2:7001',
            ],
            'rediss cluster urls' => [
                ['client' => 'phpredis', 'clusters' => ['default' => [['url' => 'rediss://:pw@n1:7000'], ['url' => 'rediss://:pw@n2:7001']]]],
                'rediss+cluster://:pw@n1:7000,n2:7001',
            ],
        ];
    }

    /** @dataProvider urls */
    public function testTheUrlOfALaravelConnection(array $redis, string $url): void
    {
        $this->assertSame($url, ConnectionUrl::fromConfig($redis, 'default'));
        if (str_contains($url, 'tls_ca_file=') && !is_readable('/etc/ssl/certs/ca-certificates.crt')) {
            return;
        }
        $this->assertInstanceOf(RedisLock\Client::class, new RedisLock\Client($url), 'redislock takes it');
    }

    public function testConnectionsWithoutAUrl(): void
    {
        foreach ([
            'missing' => [['default' => []], 'other'],
            'not a connection' => [['options' => ['prefix' => 'x']], 'options'],
            "predis' client-side sharding" => [['client' => 'predis', 'clusters' => ['default' => [['host' => 'n1']]]], 'default'],
            'unsupported scheme' => [['default' => ['scheme' => 'http']], 'default'],
            'a cluster of TLS and plain nodes' => [
                ['clusters' => ['default' => [['host' => 'tls://n1', 'port' => 7000], ['host' => 'n2', 'port' => 7001]]]],
                'default',
            ],
            'a cluster node on a socket' => [['clusters' => ['default' => [['host' => '/run/redis.sock']]]], 'default'],
        ] as $case => [$redis, $name]) {
            try {
                ConnectionUrl::fromConfig($redis, $name);
                $this->fail("$case: no exception");
            } catch (InvalidArgument $e) {
                $this->assertNotSame('', $e->getMessage());
            }
        }
    }
}
