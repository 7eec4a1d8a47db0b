<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\ConnectionException;
use RedisLock\Finding;
use RedisLock\Report;

/**
 * Client::doctor(): the core's checks (redislock_doctor) through FFI, as
 * Report and Finding objects.
 */
final class DoctorTest extends TestCase
{
    private RedisServer $server;

    protected function setUp(): void
    {
        $this->server = new RedisServer();
    }

    protected function tearDown(): void
    {
        $this->server->stop();
    }

    /** @return array<string, Finding> the findings by check (one server: one each) */
    private static function byCheck(Report $report): array
    {
        $by = [];
        foreach ($report->findings as $f) {
            $by[$f->check] = $f;
        }
        return $by;
    }

    public function testADefaultServerIsSafeWithOneWarning(): void
    {
        $report = (new Client($this->server->url()))->doctor();
        $text = (string)$report;
        $this->assertTrue($report->isSafe(), $text);
        $this->assertTrue(array_is_list($report->findings));
        $this->assertContainsOnlyInstancesOf(Finding::class, $report->findings);
        $by = self::byCheck($report);
        foreach (['server', 'eviction', 'scripting', 'time', 'pubsub', 'clients', 'latency', 'lock-cycle'] as $check) {
            $this->assertArrayHasKey($check, $by, $text);
            $this->assertSame('ok', $by[$check]->severity, "$check:\n$text");
            $this->assertSame('', $by[$check]->fix, $check);
            $this->assertSame("127.0.0.1:{$this->server->port}", $by[$check]->server, $check);
            $this->assertNotSame('', $by[$check]->message, $check);
        }
        // The harness runs its servers without persistence.
        $this->assertSame('warning', $by['persistence']->severity, $text);
        $this->assertStringContainsString('appendonly yes', $by['persistence']->fix);
        foreach ($report->findings as $f) {
            $this->assertContains($f->severity, ['ok', 'warning'], $text);
        }
        $this->assertMatchesRegularExpression('/\nverdict: safe for locks, 1 warning$/', $text);
        $this->assertStringContainsString("persistence  127.0.0.1:{$this->server->port}: ", $text);
    }

    public function testAnEvictingServerIsUnsafe(): void
    {
        $raw = $this->server->raw();
        $raw->config('SET', 'maxmemory', '100mb');
        $raw->config('SET', 'maxmemory-policy', 'allkeys-lru');
        $report = (new Client($this->server->url()))->doctor();
        $text = (string)$report;
        $this->assertFalse($report->isSafe(), $text);
        $eviction = self::byCheck($report)['eviction'];
        $this->assertSame('unsafe', $eviction->severity, $text);
        $this->assertStringContainsString('allkeys-lru', $eviction->message);
        $this->assertNotSame('', $eviction->fix);
        $this->assertStringContainsString('UNSAFE  eviction', $text);
        $this->assertMatchesRegularExpression('/\nverdict: UNSAFE: [^\n]*$/', $text);
    }

    public function testAnUnreachableServerThrowsConnectionException(): void
    {
        $port = RedisServer::freePort(); // nobody listens there
        $client = new Client("redis://127.0.0.1:$port/0");
        try {
            $client->doctor();
            $this->fail('doctor() returned for a server nobody listens on');
        } catch (ConnectionException $e) {
            $this->assertSame(RedisLock\FFI::CONNECTION, $e->getCode());
            $this->assertStringContainsString('cannot reach Redis', $e->getMessage());
        }
    }

    public function testAClosedClientThrows(): void
    {
        $client = new Client($this->server->url());
        $client->close();
        $this->expectException(RedisLock\LockException::class);
        $client->doctor();
    }

    public function testThroughThePreloadedDeclarations(): void
    {
        // php-fpm's way (ffi.enable=preload, opcache.preload): Report and
        // Finding are preloaded with the rest of src/.
        $code = 'try { FFI::scope("redislock"); } catch (FFI\Exception $e) { echo "not preloaded\n"; exit(1); }'
            . ' $r = (new RedisLock\Client($argv[1]))->doctor();'
            . ' echo get_class($r->findings[0]), " ", count($r->findings), " ", $r->isSafe() ? "safe" : "unsafe", "\n";'
            . ' echo $r, "\n";';
        $cmd = [PHP_BINARY, '-d', 'ffi.enable=preload', '-d', 'opcache.enable_cli=1',
            '-d', 'opcache.preload=' . dirname(__DIR__) . '/preload.php', '-r', $code, '--', $this->server->url()];
        if (posix_geteuid() === 0) {
            // As PreloadTest: opcache.preload as root demands opcache.preload_user.
            $cmd = array_merge(['runuser', '-u', 'nobody', '--'], $cmd);
        }
        $env = ['REDISLOCK_LIB' => (string)getenv('REDISLOCK_LIB'), 'PATH' => (string)getenv('PATH')];
        $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
        $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
        $this->assertSame(0, proc_close($p), $out);
        $this->assertMatchesRegularExpression('/^RedisLock\\\\Finding \d+ safe\n/', $out);
        $this->assertStringContainsString("\nverdict: safe for locks, 1 warning\n", $out);
    }
}
