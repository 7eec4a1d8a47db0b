<?php
declare(strict_types=1);

use Illuminate\Cache\CacheManager;
use Illuminate\Config\Repository as Config;
use Illuminate\Container\Container;
use Illuminate\Redis\RedisManager;
use Illuminate\Support\Facades\Facade;
use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\Compat\RedisTool;
use RedisLock\ConnectionException;
use RedisLock\InvalidArgument;
use RedisLock\Laravel\LimitConcurrency;
use RedisLock\Laravel\RedisLockServiceProvider;
use RedisLock\Laravel\RedisLockStore;
use RedisLock\LockException;
use RedisLock\LockNotOwned;
use RedisLock\LockTimeout;
use RedisLock\Prometheus;
use RedisLock\ServerException;
use RedisLock\Symfony\SemaphoreStore;
use RedisLock\Symfony\SharedStore;
use RedisLock\Symfony\Store;
use Symfony\Component\Lock\Key;
use Symfony\Component\Semaphore\Key as SemaphoreKey;

// Laravel and symfony/lock as the other tests load them (Composer's
// autoloader, or Debian's php-laravel-framework and php-symfony-lock).
if (!class_exists(CacheManager::class)) {
    foreach (['Container', 'Config', 'Cache', 'Redis', 'Bus', 'Queue'] as $component) {
        if (stream_resolve_include_path("Illuminate/$component/autoload.php")) {
            require_once "Illuminate/$component/autoload.php";
        }
    }
}
foreach (['Lock', 'Semaphore'] as $component) {
    if (is_file("/usr/share/php/Symfony/Component/$component/autoload.php")) {
        require_once "/usr/share/php/Symfony/Component/$component/autoload.php";
    }
}

/** What NoPasswordLeakTest checks its check with: an object that shows a URL. */
final class NoPasswordLeakTestUrl
{
    public function __construct(public string $url)
    {
    }
}

/**
 * No object of the package shows the password of the URL it was made
 * with: not var_dump, print_r, var_export, json_encode, serialize,
 * debug_zval_dump, a string cast, nor an exception's message or trace (with
 * the arguments of the calls, zend.exception_ignore_args off). The server
 * has two users with passwords: a plain one, and one with characters that
 * a URL must escape (given escaped).
 */
final class NoPasswordLeakTest extends TestCase
{
    private const PASSWORD = 's3cr3t-pa55';
    /** Escaped in URLs: '@', '/', ':', '%', '#', '+', ' '. */
    private const ESCAPED_PASSWORD = 'p@ss/w:rd%#+ s3cr3t';
    private const SENTINEL_PASSWORD = 's3cr3t-sentinel';

    private RedisServer $server;
    private string|false $ignoreArgs;

    protected function setUp(): void
    {
        $this->server = new RedisServer();
        $raw = $this->server->raw();
        foreach (['app' => self::PASSWORD, 'esc' => self::ESCAPED_PASSWORD] as $user => $password) {
            $raw->rawCommand('ACL', 'SETUSER', $user, 'on', ">$password", '~*', '&*', '+@all');
        }
        // Traces with every argument, as development settings show them.
        $this->ignoreArgs = ini_get('zend.exception_ignore_args');
        ini_set('zend.exception_ignore_args', '0');
    }

    protected function tearDown(): void
    {
        ini_set('zend.exception_ignore_args', (string)$this->ignoreArgs);
        if (class_exists(Facade::class)) {
            Facade::clearResolvedInstances();
        }
        $this->server->stop();
    }

    private function url(string $user = 'app', string $password = self::PASSWORD, ?int $port = null): string
    {
        return "redis://$user:" . rawurlencode($password) . '@127.0.0.1:' . ($port ?? $this->server->port) . '/0';
    }

    /** @return list<string> every form in which a password could show */
    private static function needles(): array
    {
        $needles = ['s3cr3t'];
        foreach ([self::PASSWORD, self::ESCAPED_PASSWORD, self::SENTINEL_PASSWORD] as $p) {
            array_push($needles, $p, rawurlencode($p), urlencode($p), substr(json_encode($p), 1, -1), addslashes($p));
        }
        return array_values(array_unique($needles));
    }

    /**
     * $value rendered every way PHP renders a value. An exception first
     * gives its message, its trace (each call's arguments: those of the
     * test's own calls, the test case and closures, by class name only)
     * and its string form, then loses its trace (and its previous ones'),
     * so that the object itself is rendered without PHPUnit's whole state.
     *
     * @return array<string, string>
     */
    private static function renderings(mixed $value): array
    {
        $out = [];
        if ($value instanceof \Throwable) {
            $out['getMessage'] = $value->getMessage();
            $out['getTraceAsString'] = $value->getTraceAsString();
            $out['cast to string'] = (string)$value;
            for ($e = $value, $i = 0; $e !== null; $e = $e->getPrevious(), $i++) {
                $args = array_map(fn ($frame) => array_map(self::arg(...), $frame['args'] ?? []), $e->getTrace());
                $out["trace arguments $i"] = print_r($args, true);
                $trace = new \ReflectionProperty($e instanceof \Exception ? \Exception::class : \Error::class, 'trace');
                $trace->setValue($e, []);
            }
        }
        ob_start();
        var_dump($value);
        $out['var_dump'] = (string)ob_get_clean();
        ob_start();
        debug_zval_dump($value);
        $out['debug_zval_dump'] = (string)ob_get_clean();
        $out['print_r'] = print_r($value, true);
        // As in production: a circular reference is a warning, and the rest is exported.
        $out['var_export'] = self::attempt(fn () => @var_export($value, true));
        $out['json_encode'] = self::attempt(fn () => (string)json_encode($value, JSON_PARTIAL_OUTPUT_ON_ERROR));
        $out['serialize'] = self::attempt(fn () => serialize($value));
        if ($value instanceof \Stringable || (is_object($value) && method_exists($value, '__toString'))) {
            $out['string'] = self::attempt(fn () => (string)$value);
        }
        return $out;
    }

    /**
     * A call's argument as a trace holds it, objects other than the
     * package's (PHPUnit's state, closures) by class name.
     */
    private static function arg(mixed $arg): mixed
    {
        if (is_object($arg) && !str_starts_with(get_class($arg), 'RedisLock\\') && !$arg instanceof \SensitiveParameterValue) {
            return get_class($arg);
        }
        return is_array($arg) ? array_map(self::arg(...), $arg) : $arg;
    }

    private static function throwWith(string $url): \Throwable
    {
        try {
            throw new \RuntimeException('no message');
        } catch (\RuntimeException $e) {
            return $e;
        }
    }

    /** What $render gives, or the message of what it threw. */
    private static function attempt(callable $render): string
    {
        try {
            return (string)$render();
        } catch (\Throwable $e) {
            return get_class($e) . ': ' . $e->getMessage() . "\n" . $e->getTraceAsString();
        }
    }

    private function assertNoLeak(string $what, mixed $value): void
    {
        foreach (self::renderings($value) as $how => $text) {
            foreach (self::needles() as $needle) {
                $at = strpos($text, $needle);
                // Where it shows, not the whole text (which can be long).
                $this->assertFalse($at, "$what: $how shows the password (" . json_encode($needle) . '): ...'
                    . substr($text, max(0, (int)$at - 300), 600 + strlen($needle)) . '...');
            }
        }
    }

    /** The exception $fn throws (it must throw one of $class). */
    private function thrown(string $class, callable $fn): \Throwable
    {
        try {
            $fn();
        } catch (\Throwable $e) {
            $this->assertInstanceOf($class, $e, (string)$e);
            return $e;
        }
        $this->fail("no $class was thrown");
    }

    public function testTheNeedlesFindAPasswordInEveryRendering(): void
    {
        // The check itself: a plain object with the URL is caught every way.
        $leaky = new NoPasswordLeakTestUrl($this->url('esc', self::ESCAPED_PASSWORD));
        foreach (self::renderings($leaky) as $how => $text) {
            $found = array_filter(self::needles(), fn ($n) => str_contains($text, $n));
            $this->assertNotEmpty($found, "$how: the password was not found in\n$text");
        }
        $e = new \RuntimeException('cannot open ' . $leaky->url);
        foreach (self::renderings($e) as $how => $text) {
            if (!str_starts_with($how, 'trace') && !in_array($how, ['getTraceAsString', 'json_encode'], true)) {
                $this->assertNotEmpty(array_filter(self::needles(), fn ($n) => str_contains($text, $n)), "$how of an exception");
            }
        }
        // And a call's argument in a trace.
        $this->assertStringContainsString(self::PASSWORD, self::renderings(self::throwWith($this->url()))['trace arguments 0']);
    }

    public function testClientsOfEveryKindOfUrl(): void
    {
        $port = $this->server->port;
        $escaped = rawurlencode(self::ESCAPED_PASSWORD);
        $sentinel = rawurlencode(self::SENTINEL_PASSWORD);
        $urls = [
            'single' => $this->url(),
            'escaped' => $this->url('esc', self::ESCAPED_PASSWORD),
            'password only' => "redis://:$escaped@127.0.0.1:$port",
            'no user name' => "redis://$escaped@127.0.0.1:$port",
            'tls' => 'rediss://app:' . self::PASSWORD . "@127.0.0.1:$port/0",
            'sentinel' => 'redis+sentinel://app:' . self::PASSWORD . "@127.0.0.1:$port,127.0.0.1:1/mymaster"
                . "?sentinel_user=watcher&sentinel_password=$sentinel",
            'cluster' => "rediss+cluster://esc:$escaped@127.0.0.1:$port,127.0.0.1:1",
            'unix socket' => "unix:///tmp/redislock-none.sock?db=0&user=app&pass=$escaped",
        ];
        foreach ($urls as $what => $url) {
            try {
                $client = new Client($url);
            } catch (InvalidArgument $e) {
                // A build without TLS refuses rediss://: the refusal must not show it either.
                $this->assertNoLeak("$what: the refusal", $e);
                continue;
            }
            $this->assertNoLeak($what, $client);
            $this->assertStringContainsString('***', print_r($client, true), "$what: the URL is shown redacted");
            $this->assertNoLeak("$what: the persistent client", Client::persistent($url));
        }
        $redlock = new Client([$this->url(), $this->url('esc', self::ESCAPED_PASSWORD), $this->url(port: 1)]);
        $this->assertNoLeak('Redlock', $redlock);
        $this->assertStringContainsString('redis://app:***@127.0.0.1:' . $port . '/0', print_r($redlock, true));

        foreach (['redis://app:' . self::PASSWORD . '@127.0.0.1:notaport/0', 'redis://app:' . self::PASSWORD . '@',
                  'redis+sentinel://app:' . self::PASSWORD . '@127.0.0.1:1', 'redis+cluster://app:' . self::PASSWORD . '@h:1#frag',
                  "redis://127.0.0.1:$port/0?sentinel_password=$sentinel", 'ftp://app:' . self::PASSWORD . '@host/'] as $bad) {
            $this->assertNoLeak('a malformed URL', $this->thrown(InvalidArgument::class, fn () => new Client($bad)));
            $this->assertNoLeak('a malformed URL', $this->thrown(InvalidArgument::class, fn () => Client::persistent([$bad])));
        }

        $this->assertInstanceOf(\LogicException::class, $this->thrown(\LogicException::class, fn () => clone $redlock));
        $this->assertTrue($redlock->releaseToken('nothing', 'x') === false, 'the client still works after a clone was refused');
    }

    public function testLocksReportsStatsAndCompat(): void
    {
        foreach ([$this->url(), $this->url('esc', self::ESCAPED_PASSWORD)] as $url) {
            $client = new Client($url);
            $lock = $client->acquire('leak:lock', ttlMs: 10000, waitMs: 0);
            $this->assertNoLeak('a lock', $lock);
            $lock->fence();
            $this->assertNoLeak('a lock with its fence', $lock);
            $lock->release();
            $this->assertNoLeak('a released lock', $lock);
            $fenced = $client->acquire('leak:fenced', ttlMs: 10000, waitMs: 0, fenced: true, autoRenew: true);
            $this->assertNoLeak('a fenced lock', $fenced);
            $semaphore = $client->acquireSemaphore('leak:sem', limit: 2, ttlMs: 10000, waitMs: 0);
            $this->assertNoLeak('a semaphore permit', $semaphore);
            $read = $client->acquireRead('leak:rw', ttlMs: 10000, waitMs: 0);
            $this->assertNoLeak('a read lock', $read);
            $read->release();
            $write = $client->acquireWrite('leak:rw', ttlMs: 10000, waitMs: 0);
            $this->assertNoLeak('a write lock', $write);

            $this->assertNoLeak('a timeout', $this->thrown(LockTimeout::class, fn () => $client->acquire('leak:fenced', ttlMs: 1000, waitMs: 1)));
            $this->assertNoLeak('a lost lock', $this->thrown(LockNotOwned::class, function () use ($client) {
                $lock = $client->acquire('leak:lost', ttlMs: 10000, waitMs: 0);
                $this->server->raw()->del('leak:lost');
                $lock->release();
            }));
            $this->assertNoLeak('a synchronized() error', $this->thrown(
                \RuntimeException::class,
                fn () => $client->synchronized('leak:sync', fn () => throw new \RuntimeException('inside')),
            ));

            $report = $client->doctor();
            $this->assertNoLeak('a doctor report', $report);
            $this->assertNotEmpty($report->findings);
            foreach ($report->findings as $finding) {
                $this->assertNoLeak('a finding', $finding);
            }
            $stats = $client->stats();
            $this->assertNoLeak('the stats', $stats);
            $this->assertNoLeak('the Prometheus rows', Prometheus::rows($stats));

            $tool = new RedisTool($client);
            $this->assertTrue($tool->tryGetLock('leak:tool', 'request-1', 10000));
            $this->assertNoLeak('a RedisTool', $tool);
            $this->assertTrue($tool->releaseLock('leak:tool', 'request-1'));
            foreach ([$fenced, $semaphore, $write] as $held) {
                $held->release();
            }
        }
    }

    public function testConnectionAndCredentialErrors(): void
    {
        $port = RedisServer::freePort(); // nobody listens there
        foreach ([$this->url(port: $port), $this->url('esc', self::ESCAPED_PASSWORD, $port),
                  [$this->url(port: $port), $this->url('esc', self::ESCAPED_PASSWORD, $port), $this->url(port: RedisServer::freePort())]] as $url) {
            $client = new Client($url);
            $e = $this->thrown(LockException::class, fn () => $client->acquire('leak:down', ttlMs: 1000, waitMs: 0));
            $this->assertNoLeak('a connection error', $e);
            $this->assertNoLeak('a connection error of doctor()', $this->thrown(LockException::class, fn () => $client->doctor()));
            $this->assertNoLeak('a client that cannot connect', $client);
        }
        $this->assertInstanceOf(ConnectionException::class, $this->thrown(
            LockException::class,
            fn () => (new Client($this->url(port: $port)))->acquire('leak:down', ttlMs: 1000, waitMs: 0),
        ));
        // A wrong password: the server refuses it, and the error does not repeat it.
        $wrong = new Client($this->url('app', self::PASSWORD . '-wrong-s3cr3t'));
        $this->assertNoLeak('a refused password', $this->thrown(ServerException::class, fn () => $wrong->acquire('leak:auth', ttlMs: 1000, waitMs: 0)));
    }

    public function testSymfonyStores(): void
    {
        if (!interface_exists(\Symfony\Component\Lock\BlockingStoreInterface::class)) {
            $this->fail('symfony/lock is missing: apt-get install php-symfony-lock');
        }
        $client = new Client($this->url('esc', self::ESCAPED_PASSWORD));
        foreach (['Store' => new Store($client), 'SharedStore' => new SharedStore($client)] as $what => $store) {
            $key = new Key("leak:symfony:$what");
            $store->save($key);
            $this->assertNoLeak("a Symfony $what", $store);
            $this->assertNoLeak("a Key saved in a Symfony $what", $key);
            $store->delete($key);
        }
        $store = new SemaphoreStore($client);
        $key = new SemaphoreKey('leak:symfony:semaphore', 2);
        $store->save($key, 10.0);
        $this->assertNoLeak('a Symfony SemaphoreStore', $store);
        $this->assertNoLeak('a Key saved in a Symfony SemaphoreStore', $key);
        $store->delete($key);
    }

    public function testLaravelStoreAndMiddleware(): void
    {
        if (!class_exists(CacheManager::class) || !class_exists(RedisManager::class)) {
            $this->fail('Laravel is not installed: apt-get install php-laravel-framework (make test does)');
        }
        // Laravel 8 authenticates as the default user: it gets the password.
        $this->server->raw()->config('SET', 'requirepass', self::ESCAPED_PASSWORD);
        foreach (['phpredis', 'predis'] as $redisClient) {
            foreach ([[], ['lock_url' => $this->url('esc', self::ESCAPED_PASSWORD)]] as $storeConfig) {
                $app = new Container();
                Container::setInstance($app);
                $app->instance('config', new Config([
                    'database' => ['redis' => [
                        'client' => $redisClient,
                        'default' => ['host' => '127.0.0.1', 'port' => $this->server->port, 'database' => 0,
                                      'password' => self::ESCAPED_PASSWORD],
                    ]],
                    'cache' => ['default' => 'locks', 'prefix' => 'app', 'stores' => [
                        'locks' => $storeConfig + ['driver' => 'redislock', 'connection' => 'default'],
                    ]],
                ]));
                $app->singleton('redis', fn ($app) => new RedisManager($app, $redisClient, $app['config']['database.redis']));
                $app->singleton('cache', fn ($app) => new CacheManager($app));
                (new RedisLockServiceProvider($app))->boot();
                $store = $app['cache']->store('locks')->getStore();
                $this->assertInstanceOf(RedisLockStore::class, $store);
                $lock = $store->lock('leak:laravel', 10);
                $this->assertTrue($lock->get(), 'the lock connection works');
                $this->assertNoLeak("a Laravel lock ($redisClient)", $lock);
                $this->assertNoLeak("the Laravel store ($redisClient)", $store);
                $this->assertNoLeak('its lock client', $store->lockClient());
                $this->assertNoLeak('a funnel', $store->funnel('leak:funnel'));
                $this->assertNoLeak('the LimitConcurrency middleware', (new LimitConcurrency('leak:jobs', 2))->useStore('locks'));
                $this->assertTrue($lock->release());
            }
        }
    }
}
