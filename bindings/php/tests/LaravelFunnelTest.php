<?php
declare(strict_types=1);

use Illuminate\Bus\BusServiceProvider;
use Illuminate\Bus\Queueable;
use Illuminate\Cache\CacheManager;
use Illuminate\Config\Repository as Config;
use Illuminate\Container\Container;
use Illuminate\Contracts\Bus\Dispatcher as Bus;
use Illuminate\Contracts\Cache\Repository as CacheRepository;
use Illuminate\Contracts\Container\Container as ContainerContract;
use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Contracts\Events\Dispatcher as Events;
use Illuminate\Contracts\Queue\Factory as QueueFactory;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Contracts\Redis\LimiterTimeoutException;
use Illuminate\Events\EventServiceProvider;
use Illuminate\Foundation\Exceptions\Handler;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\QueueServiceProvider;
use Illuminate\Queue\WorkerOptions;
use Illuminate\Redis\RedisManager;
use PHPUnit\Framework\TestCase;
use RedisLock\InvalidArgument;
use RedisLock\Laravel\Funnel;
use RedisLock\Laravel\LimitConcurrency;
use RedisLock\Laravel\RedisLockServiceProvider;
use RedisLock\Laravel\RedisLockStore;
use RedisLock\LockTimeout;

// Laravel from Composer's autoloader, or else Debian's php-laravel-framework
// (the whole framework: the queue worker reports through Foundation's
// exception handler).
if (!class_exists(Handler::class) && stream_resolve_include_path('Illuminate/autoload.php')) {
    require_once 'Illuminate/autoload.php';
}

/**
 * A queued job limited by LimitConcurrency('reports', $limit) through its
 * middleware() method. The worker runs it in the test's own process, so
 * what handle() does is a closure the test sets.
 */
final class LaravelFunnelTestJob implements ShouldQueue
{
    use InteractsWithQueue;
    use Queueable;

    /** @var (Closure(self): void)|null */
    public static ?Closure $body = null;

    /**
     * @param int      $limit   the funnel's limit
     * @param int|null $retryIn releaseAfter() seconds, null for dontRelease()
     * @param float    $wait    block() seconds
     */
    public function __construct(public int $limit, public ?int $retryIn = 30, public float $wait = 0)
    {
    }

    public function middleware(): array
    {
        $limit = (new LimitConcurrency('reports', $this->limit))->block($this->wait)->expireAfter(60);
        return [$this->retryIn === null ? $limit->dontRelease() : $limit->releaseAfter($this->retryIn)];
    }

    public function handle(): void
    {
        (self::$body)($this);
    }
}

/**
 * The funnel (a concurrency limit shaped like Laravel's Redis::funnel()) and
 * the LimitConcurrency job middleware, against a real Laravel (8.83 from
 * Debian: container, config, RedisManager, CacheManager, and for the
 * middleware the bus dispatcher, the Redis queue and the queue worker) and
 * a throwaway redis-server. Bookkeeping of the tests goes to database 1, so
 * that database 0 holds only what the funnel and the queue leave.
 */
final class LaravelFunnelTest extends TestCase
{
    private RedisServer $server;
    private Redis $raw;
    private Redis $book;
    /** @var list<Throwable> what the worker reported */
    private array $reported = [];
    /** @var list<JobFailed> */
    private array $failed = [];

    protected function setUp(): void
    {
        if (!class_exists(CacheManager::class) || !class_exists(RedisManager::class) || !class_exists(Handler::class)) {
            $this->fail('Laravel is not installed: apt-get install php-laravel-framework (make test does)');
        }
        $this->server = new RedisServer();
        $this->raw = $this->server->raw();
        $this->book = $this->book();
        LaravelFunnelTestJob::$body = null;
    }

    protected function tearDown(): void
    {
        LaravelFunnelTestJob::$body = null;
        if (isset($this->server)) {
            $this->server->stop();
        }
    }

    public function clients(): array
    {
        return ['predis' => ['predis'], 'phpredis' => ['phpredis']];
    }

    /** A new connection to the bookkeeping database. */
    private function book(): Redis
    {
        $r = $this->server->raw();
        $r->select(1);
        return $r;
    }

    /**
     * A Laravel container with our provider booted: the default cache store
     * 'locks' (driver redislock), 'laravel' (Laravel's own redis driver),
     * and the queue connection 'redis' (the default), all on the Redis
     * connection 'default' with the prefix 'db_'; the store prefix is 'app'.
     */
    private function app(string $client = 'predis'): Container
    {
        $app = new Container();
        Container::setInstance($app);
        $app->instance(ContainerContract::class, $app);
        $app->instance('config', new Config([
            'database' => ['redis' => [
                'client' => $client,
                'options' => ['prefix' => 'db_'],
                'default' => ['host' => '127.0.0.1', 'port' => $this->server->port, 'database' => 0],
            ]],
            'cache' => [
                'default' => 'locks',
                'prefix' => 'app',
                'stores' => [
                    'locks' => ['driver' => 'redislock', 'connection' => 'default', 'lock_connection' => 'default'],
                    'laravel' => ['driver' => 'redis', 'connection' => 'default', 'lock_connection' => 'default'],
                ],
            ],
            'queue' => [
                'default' => 'redis',
                'connections' => [
                    'redis' => ['driver' => 'redis', 'connection' => 'default', 'queue' => 'default', 'retry_after' => 90],
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
        (new EventServiceProvider($app))->register();
        (new BusServiceProvider($app))->register();
        (new QueueServiceProvider($app))->register();
        $app->alias('events', Events::class);
        $app->alias('queue', QueueFactory::class);
        $app->singleton(ExceptionHandler::class, function ($app) {
            $handler = new Handler($app);
            $handler->reportable(function (Throwable $e) {
                $this->reported[] = $e;
                return false;
            });
            return $handler;
        });
        $app['events']->listen(JobFailed::class, function (JobFailed $event) {
            $this->failed[] = $event;
        });
        (new RedisLockServiceProvider($app))->boot();
        return $app;
    }

    /** The redislock store of the default cache store. */
    private function store(Container $app): RedisLockStore
    {
        return $app['cache']->store()->getStore();
    }

    /** One job off the queue 'default' through Laravel's worker. */
    private function work(Container $app, int $maxTries = 1): void
    {
        $app['queue.worker']->runNextJob('redis', 'default', new WorkerOptions('default', 0, 128, 60, 0, $maxTries));
    }

    /** The keys of database 0, without redislock's shared fence counters. */
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

    public function limits(): array
    {
        return ['limit 1' => [1], 'limit 3' => [3]];
    }

    /**
     * 5 processes run 4 callbacks each through funnel('pool')->limit(N):
     * never more than N at once, and N at once indeed (the first N wait for
     * one another inside). Under limit 1, a read-increment-write of a
     * counter with a pause in between loses no update.
     *
     * @dataProvider limits
     */
    public function testAtMostLimitCallbacksRunAtOnceAcrossProcesses(int $limit): void
    {
        $procs = 5;
        $rounds = 4;
        $pids = [];
        for ($p = 0; $p < $procs; $p++) {
            $pids[] = self::child(function () use ($p, $limit, $rounds) {
                $book = $this->book();
                try {
                    $store = $this->store($this->app('predis'));
                    for ($i = 0; $i < $rounds; $i++) {
                        $book->rPush('results', $store->funnel('pool')->limit($limit)->releaseAfter(60)->block(60)
                            ->then(function () use ($book, $limit, $p, $i) {
                                $inside = $book->incr('inside');
                                $book->rPush('seen', (string)$inside);
                                if ($inside >= $limit) {
                                    $book->set('full', '1');
                                }
                                if (!waitUntil(fn () => $book->get('full') === '1', 20)) {
                                    $book->rPush('errors', "$p.$i: never $limit inside at once");
                                }
                                if ($limit === 1) {
                                    $n = (int)$book->get('counter');
                                    usleep(3000);
                                    $book->set('counter', (string)($n + 1));
                                }
                                usleep(10000);
                                $book->decr('inside');
                                return "$p.$i";
                            }));
                    }
                } catch (Throwable $e) {
                    $book->rPush('errors', "$p: " . get_class($e) . ': ' . $e->getMessage());
                }
            });
        }
        foreach ($pids as $pid) {
            pcntl_waitpid($pid, $status);
        }
        $this->assertSame([], $this->book->lRange('errors', 0, -1));
        $results = $this->book->lRange('results', 0, -1);
        $this->assertCount($procs * $rounds, $results, 'then() returned every callback value');
        $this->assertCount($procs * $rounds, array_unique($results));
        $seen = array_map('intval', $this->book->lRange('seen', 0, -1));
        $this->assertCount($procs * $rounds, $seen);
        $this->assertSame($limit, max($seen), "at most $limit at once, and $limit at once indeed");
        $this->assertSame('0', $this->book->get('inside'));
        if ($limit === 1) {
            $this->assertSame((string)($procs * $rounds), $this->book->get('counter'), 'a non-atomic counter lost an update');
        }
        $this->assertSame([], $this->keys(), 'every permit released');
    }

    /** @dataProvider clients */
    public function testThenRunsUnderAPermitAndReleasesItAlsoWhenTheCallbackThrows(string $client): void
    {
        $cache = $this->app($client)['cache']->store('locks');
        // Laravel 8-11's cache repository hands funnel() to its store.
        $funnel = $cache->funnel('exports');
        $this->assertInstanceOf(Funnel::class, $funnel);
        // The key is the one the store's lock of the name has (connection
        // prefix, then store prefix); the semaphore's keys hang off it.
        $this->assertSame('db_app:exports', $funnel->name);
        [$holders, $pttl] = $funnel->limit(2)->releaseAfter(20)->block(0)->then(fn () => [
            $this->raw->zCard('{db_app:exports}:sem'),
            $this->raw->pttl('{db_app:exports}:sem'),
        ]);
        $this->assertSame(1, $holders, 'the callback ran holding one permit');
        $this->assertTrue($pttl > 10000 && $pttl <= 20000, "releaseAfter(20) is the lease: pttl $pttl");
        $this->assertSame([], $this->keys(), 'released after the callback');

        $boom = new RuntimeException('boom');
        try {
            $cache->getStore()->funnel('exports')->limit(1)->then(function () use ($boom) {
                $this->assertSame(1, $this->raw->zCard('{db_app:exports}:sem'));
                throw $boom;
            }, fn () => $this->fail('the failure callback is for a full funnel only'));
            $this->fail('the exception was lost');
        } catch (RuntimeException $e) {
            $this->assertSame($boom, $e);
        }
        $this->assertSame([], $this->keys(), 'the permit was released after the exception');
        $this->assertSame('again', $cache->getStore()->funnel('exports')->limit(1)->block(0)->then(fn () => 'again'));
    }

    public function testNothingFreeCallsTheFailureCallbackOrThrowsLaravelsException(): void
    {
        $store = $this->store($this->app());
        $client = $store->lockClient();
        $before = $client->stats();
        $ran = false;
        $outer = $store->funnel('busy')->limit(1)->releaseAfter(30)->then(function () use ($store, &$ran) {
            $failure = null;
            $this->assertSame('full', $store->funnel('busy')->limit(1)->block(0)->then(
                function () use (&$ran) {
                    $ran = true;
                },
                function ($e) use (&$failure) {
                    $failure = $e;
                    return 'full';
                },
            ));
            $this->assertInstanceOf(LimiterTimeoutException::class, $failure);
            $this->assertInstanceOf(LockTimeout::class, $failure->getPrevious());

            $t = hrtime(true);
            try {
                $store->funnel('busy')->limit(1)->block(0.5)->then(function () use (&$ran) {
                    $ran = true;
                });
                $this->fail('a second permit of one');
            } catch (LimiterTimeoutException $e) {
                $ms = (hrtime(true) - $t) / 1e6;
                $this->assertTrue($ms >= 450 && $ms < 10000, "block(0.5) waited $ms ms");
            }
            return 'outer';
        });
        $this->assertSame('outer', $outer);
        $this->assertFalse($ran, 'a callback ran without a permit');
        $this->assertSame(2, $client->stats()['acquire_timed_out'] - $before['acquire_timed_out']);

        // A LimiterTimeoutException of the callback itself is not a full
        // funnel: it propagates, and the failure callback is not called.
        try {
            $store->funnel('inner')->limit(1)->then(
                fn () => throw new LimiterTimeoutException('from the callback'),
                fn () => $this->fail('the failure callback ran for the callback\'s exception'),
            );
            $this->fail('the exception was lost');
        } catch (LimiterTimeoutException $e) {
            $this->assertSame('from the callback', $e->getMessage());
        }
        try {
            $store->funnel('busy')->then(fn () => null);
            $this->fail('a funnel without limit()');
        } catch (InvalidArgument $e) {
            $this->assertStringContainsString('limit()', $e->getMessage());
        }
        $this->assertSame([], $this->keys());
    }

    public function testABlockedFunnelIsWokenByAReleaseInAnotherProcess(): void
    {
        // A child holds the only permit until this process waits in the
        // queue (20 s at most), then 100 ms more, and releases it.
        $pid = self::child(function () {
            $book = $this->book();
            $raw = $this->server->raw();
            $this->store($this->app())->funnel('handoff')->limit(1)->releaseAfter(30)->block(0)
                ->then(function () use ($book, $raw) {
                    $book->set('holding', '1');
                    $queued = waitUntil(fn () => $raw->lLen('{db_app:handoff}:sem:queue') === 1, 20);
                    $book->set('queued', $queued ? 'yes' : 'no');
                    usleep(100000);
                });
        });
        try {
            $this->assertTrue(waitUntil(fn () => $this->book->get('holding') === '1', 20), 'the child took the permit');
            $store = $this->store($this->app());
            $before = $store->lockClient()->stats();
            [$queued, $holders] = $store->funnel('handoff')->limit(1)->releaseAfter(30)->block(30)->then(fn () => [
                $this->book->get('queued'),
                $this->raw->zCard('{db_app:handoff}:sem'),
            ]);
        } finally {
            pcntl_waitpid($pid, $status);
        }
        $this->assertSame('yes', $queued, 'this process waited in the queue while the child held the permit');
        $this->assertSame(1, $holders);
        // Handed over by the child's release, not found free by a retry.
        $after = $store->lockClient()->stats();
        $this->assertSame(1, $after['acquired_handed_over'] - $before['acquired_handed_over'], 'handed over by the release');
        $this->assertSame(0, $after['acquired_at_once'] - $before['acquired_at_once']);
        $this->assertSame(0, $after['acquired_after_wait'] - $before['acquired_after_wait'], 'taken by a retry');
        $this->assertSame([], $this->keys());
    }

    public function testTheMiddlewareRunsAJobUnderAPermitAndAJobThatThrowsFreesIt(): void
    {
        $app = $this->app();
        $runs = [];
        LaravelFunnelTestJob::$body = function (LaravelFunnelTestJob $job) use (&$runs) {
            $runs[] = $this->raw->zCard('{db_app:reports}:sem');
            if (count($runs) === 2) {
                throw new RuntimeException('the job failed');
            }
        };
        $app[Bus::class]->dispatch(new LaravelFunnelTestJob(1));
        $this->assertSame(1, $this->raw->lLen('db_queues:default'), 'queued on the Redis queue');
        $this->work($app);
        $this->assertSame([], $this->reported);
        $this->assertSame([1], $runs, 'the job ran holding a permit');
        $this->assertSame([], $this->keys(), 'the job was deleted and its permit released');

        $app[Bus::class]->dispatch(new LaravelFunnelTestJob(1));
        $this->work($app);
        $this->assertSame([1, 1], $runs);
        $this->assertCount(1, $this->reported, 'the worker reported the exception');
        $this->assertSame('the job failed', $this->reported[0]->getMessage());
        $this->assertCount(1, $this->failed, 'the job failed (1 try)');
        $this->assertSame([], $this->keys(), "the failed job's permit was released");

        $app[Bus::class]->dispatch(new LaravelFunnelTestJob(1));
        $this->work($app);
        $this->assertSame([1, 1, 1], $runs, 'the next job got the permit');
        $this->assertSame([], $this->keys());

        // The permits live in a redislock store.
        try {
            (new LimitConcurrency('reports', 1))->useStore('laravel')->handle(new LaravelFunnelTestJob(1), fn () => null);
            $this->fail("a store of Laravel's redis driver was taken");
        } catch (InvalidArgument $e) {
            $this->assertStringContainsString("driver 'redislock'", $e->getMessage());
        }
    }

    public function testAJobWithoutAPermitIsReleasedBackWithTheDelayOrDeleted(): void
    {
        $app = $this->app();
        $runs = [];
        LaravelFunnelTestJob::$body = function (LaravelFunnelTestJob $job) use (&$runs) {
            $runs[] = [$this->raw->zCard('{db_app:reports}:sem'), $job->attempts()];
        };
        // This process holds the only permit while the worker runs two jobs.
        [$t0, $t1] = $this->store($app)->funnel('reports')->limit(1)->then(function () use ($app) {
            $app[Bus::class]->dispatch(new LaravelFunnelTestJob(1, retryIn: 30));
            $t0 = time();
            $this->work($app, 3);
            $t1 = time();
            $app[Bus::class]->dispatch(new LaravelFunnelTestJob(1, retryIn: null));
            $this->work($app, 3);
            return [$t0, $t1];
        });
        $this->assertSame([], $runs, 'a job ran without a permit');
        $this->assertSame([], $this->failed);
        $this->assertSame([], $this->reported);
        // The first is back on the queue 30 s later (Laravel's delayed set
        // holds it with the time it becomes available); the second is gone.
        $delayed = $this->raw->zRange('db_queues:default:delayed', 0, -1, true);
        $this->assertCount(1, $delayed, 'released back: the first; deleted: the second');
        $at = (int)reset($delayed);
        $this->assertTrue($at >= $t0 + 30 && $at <= $t1 + 30, "released with a 30 s delay: available at $at, now $t1");
        $this->assertSame(1, json_decode(key($delayed), true)['attempts']);
        $this->assertSame(['db_queues:default:delayed'], $this->keys());

        // Brought forward, the released job runs now that the permit is free.
        $this->raw->zAdd('db_queues:default:delayed', time() - 1, key($delayed));
        $this->work($app, 3);
        $this->assertSame([[1, 2]], $runs, 'run under a permit; the release counted as an attempt');
        $this->assertSame([], $this->reported);
        $this->assertSame([], $this->keys());
    }

    public function testAJobWaitsUpToBlockAndIsHandedThePermitByAnotherProcess(): void
    {
        $pid = self::child(function () {
            $book = $this->book();
            $raw = $this->server->raw();
            $this->store($this->app())->funnel('reports')->limit(1)->releaseAfter(30)->then(function () use ($book, $raw) {
                $book->set('holding', '1');
                $queued = waitUntil(fn () => $raw->lLen('{db_app:reports}:sem:queue') === 1, 20);
                $book->set('queued', $queued ? 'yes' : 'no');
                usleep(100000);
            });
        });
        $runs = [];
        try {
            $this->assertTrue(waitUntil(fn () => $this->book->get('holding') === '1', 20), 'the child took the permit');
            $app = $this->app();
            LaravelFunnelTestJob::$body = function () use (&$runs) {
                $runs[] = [$this->book->get('queued'), $this->raw->zCard('{db_app:reports}:sem')];
            };
            $app[Bus::class]->dispatch(new LaravelFunnelTestJob(1, retryIn: 30, wait: 30));
            $client = $this->store($app)->lockClient();
            $before = $client->stats();
            $this->work($app);
        } finally {
            pcntl_waitpid($pid, $status);
        }
        $this->assertSame([], $this->reported);
        $this->assertSame([['yes', 1]], $runs, 'the job waited in the queue, then ran holding the permit');
        $after = $client->stats();
        $this->assertSame(1, $after['acquired_handed_over'] - $before['acquired_handed_over'], 'handed over by the release');
        $this->assertSame([], $this->reported);
        $this->assertSame([], $this->keys(), 'run and deleted, not released back');
    }
}
