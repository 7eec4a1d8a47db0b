<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/fpm/PhpFpm.php';

/**
 * The package under a real php-fpm master (Debian's php-fpm), configured as
 * docs/frameworks.md's php-fpm section says, driven over FastCGI by concurrent
 * requests: mutual exclusion across workers, connections opened once per
 * worker with Client::persistent, locks released whichever way a request
 * ends, and the configurations that must fail or warn doing so clearly.
 */
final class FpmTest extends TestCase
{
    private RedisServer $server;
    private Redis $raw;
    /** @var list<PhpFpm> */
    private array $fpms = [];
    /** @var list<string> */
    private array $files = [];

    protected function setUp(): void
    {
        $this->server = new RedisServer();
        $this->raw = $this->server->raw();
    }

    protected function tearDown(): void
    {
        foreach ($this->fpms as $fpm) {
            $fpm->stop();
        }
        foreach ($this->files as $f) {
            @unlink($f);
        }
        $this->server->stop();
    }

    private function fpm(string $mode, int $workers = 4, ?string $preload = null): PhpFpm
    {
        return $this->fpms[] = new PhpFpm($mode, $workers, $preload);
    }

    private function connectionsReceived(): int
    {
        return (int)$this->raw->info('stats')['total_connections_received'];
    }

    /** A counter file the workers (nobody) can write. */
    private function counterFile(PhpFpm $fpm): string
    {
        $file = "$fpm->dir/counter";
        file_put_contents($file, '0');
        chmod($file, 0666);
        return $file;
    }

    /**
     * $n requests, 8 at a time, each taking the lock and incrementing the
     * counter non-atomically; returns the fences in the order granted.
     *
     * @return list<int>
     */
    private function countTo(PhpFpm $fpm, string $file, int $n, string $client = 'persistent'): array
    {
        $query = http_build_query([
            'url' => $this->server->url(), 'file' => $file, 'client' => $client, 'pause_us' => 200,
        ]);
        $responses = $fpm->get('counter.php', array_fill(0, $n, $query), 8);
        $byN = [];
        foreach ($responses as $r) {
            $this->assertSame(200, $r['status'], $r['body'] . $r['stderr'] . $fpm->logs());
            $out = json_decode($r['body'], true);
            $this->assertIsArray($out, $r['body'] . "\n" . $fpm->logs());
            $byN[$out['n']] = $out['fence'];
        }
        ksort($byN);
        return array_values($byN);
    }

    /** The count is exact, and each holder's fence is above its predecessor's. */
    private function assertExclusive(string $file, int $expected, array $fences, int $before = 0): void
    {
        $this->assertSame((string)($before + $expected), file_get_contents($file), 'lost updates: two holders at once');
        $this->assertCount($expected, $fences, 'two requests saw the same count');
        for ($i = 1; $i < count($fences); $i++) {
            $this->assertGreaterThan($fences[$i - 1], $fences[$i], "fence $i went backwards");
        }
    }

    private function phpLog(PhpFpm $fpm): string
    {
        return is_file("$fpm->dir/php.log") ? file_get_contents("$fpm->dir/php.log") : '';
    }

    private function assertNoRedislockComplaint(PhpFpm $fpm): void
    {
        $this->assertStringNotContainsString('redislock', $this->phpLog($fpm), $fpm->logs());
    }

    public function testRootMasterPersistentClientsConnectOncePerWorker(): void
    {
        if (posix_geteuid() !== 0) {
            $this->markTestSkipped('the root master configuration needs root (make test runs as root)');
        }
        $fpm = $this->fpm('root', 4);
        $file = $this->counterFile($fpm);
        $before = $this->connectionsReceived();
        $fences = $this->countTo($fpm, $file, 1000);
        $this->assertExclusive($file, 1000, $fences);
        $cold = $this->connectionsReceived() - $before;
        // A worker's first request connects; its first wait opens the
        // subscriber: at most two connections per worker, once.
        $this->assertLessThanOrEqual(2 * $fpm->workers, $cold, "connections for the first 1,000 requests");
        $this->assertGreaterThanOrEqual(1, $cold);

        $before = $this->connectionsReceived();
        $fences = $this->countTo($fpm, $file, 1000);
        $this->assertExclusive($file, 1000, $fences, 1000);
        $warm = $this->connectionsReceived() - $before;
        $this->assertLessThanOrEqual($fpm->workers, $warm, 'connections for 1,000 more requests');

        // The measure itself: a client per request connects per request.
        $before = $this->connectionsReceived();
        $this->countTo($fpm, $file, 100, 'new');
        $this->assertGreaterThanOrEqual(100, $this->connectionsReceived() - $before);
        $this->assertNoRedislockComplaint($fpm);
        $this->assertSame([], $this->raw->keys('fpm-counter*'), 'keys left behind');
    }

    public function testUnprivilegedMasterWithOpcachePreloadAlone(): void
    {
        $fpm = $this->fpm('user', 3);
        $file = $this->counterFile($fpm);
        $before = $this->connectionsReceived();
        $fences = $this->countTo($fpm, $file, 600);
        $this->assertExclusive($file, 600, $fences);
        $this->assertLessThanOrEqual(2 * $fpm->workers, $this->connectionsReceived() - $before);
        $this->assertNoRedislockComplaint($fpm);
    }

    public function testWorkersForkedAfterTheMasterUsedTheClientOpenTheirOwnConnections(): void
    {
        // The master itself (an unprivileged one runs the preload script
        // in-process) opens the shared client and takes a lock before it forks
        // the workers; they must not share its socket.
        $preload = sys_get_temp_dir() . '/redislock-preload-master-' . bin2hex(random_bytes(4)) . '.php';
        file_put_contents($preload, sprintf(
            "<?php\nrequire %s;\n\$c = RedisLock\\Client::persistent(%s);\n"
            . "\$c->acquire('preload-master', ttlMs: 5000, waitMs: 1000)->release();\n",
            var_export(dirname(__DIR__) . '/preload.php', true),
            var_export($this->server->url(), true),
        ));
        chmod($preload, 0644);
        $this->files[] = $preload;
        $before = $this->connectionsReceived();
        $fpm = $this->fpm('user', 4, $preload);
        $this->assertGreaterThan($before, $this->connectionsReceived(), 'the master did not connect at preload');
        $file = $this->counterFile($fpm);
        $fences = $this->countTo($fpm, $file, 400);
        $this->assertExclusive($file, 400, $fences);
        $this->assertNoRedislockComplaint($fpm);
    }

    /** @return list<array{0: string, 1: string}> */
    public static function endings(): array
    {
        $cases = [];
        foreach (['return', 'exception', 'exit', 'fatal', 'renew'] as $how) {
            foreach (['persistent', 'new'] as $client) {
                $cases["$how, $client client"] = [$how, $client];
            }
        }
        return $cases;
    }

    public function testALockHeldWhenTheRequestEndsIsReleased(): void
    {
        $fpm = $this->fpm(posix_geteuid() === 0 ? 'root' : 'user', 1);
        foreach (self::endings() as $name => [$how, $client]) {
            $key = "held-$how-$client";
            $query = http_build_query(['url' => $this->server->url(), 'key' => $key, 'how' => $how, 'client' => $client]);
            [$r] = $fpm->get('hold.php', [$query]);
            $this->assertStringStartsWith('held ', $r['body'], "$name: " . $r['body'] . $fpm->logs());
            if ($how !== 'return') {
                $this->assertStringNotContainsString('not reached', $r['body'], $name);
            }
            $this->assertSame(0, $this->raw->exists($key), "$name: the lock outlived its request");
            // And renewal, if any, does not bring it back.
            usleep(50000);
            $this->assertSame(0, $this->raw->exists($key), "$name: the lock came back");
        }
        // The one worker lived through it all and still serves locks.
        $file = $this->counterFile($fpm);
        $this->assertExclusive($file, 20, $this->countTo($fpm, $file, 20));
        $log = $this->phpLog($fpm);
        $this->assertStringContainsString('Allowed memory size', $log, 'the fatal cases did not run');
        $this->assertStringContainsString('the request failed while holding a lock', $log);
    }

    public function testTheCdefFallbackWorksAndSaysSoOncePerWorker(): void
    {
        $fpm = $this->fpm('cdef', 2);
        $file = $this->counterFile($fpm);
        $fences = $this->countTo($fpm, $file, 40);
        $this->assertExclusive($file, 40, $fences);
        $said = substr_count($this->phpLog($fpm), 'loads the FFI declarations in every request');
        $this->assertGreaterThanOrEqual(1, $said, $fpm->logs());
        $this->assertLessThanOrEqual($fpm->workers, $said, 'said more than once per worker');
    }

    public function testWithoutOpcachePreloadTheErrorSaysWhatToSet(): void
    {
        $fpm = $this->fpm('noclass', 1);
        $query = http_build_query(['url' => $this->server->url()]);
        [$r] = $fpm->get('cycle.php', [$query]);
        $this->assertSame(500, $r['status'], $r['body']);
        $log = $this->phpLog($fpm);
        $this->assertStringContainsString('only preloaded code may', $log, $fpm->logs());
        $this->assertStringContainsString('opcache.preload=', $log);
    }
}
