<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\InvalidArgument;
use RedisLock\LockTimeout;

/**
 * Semaphores and read-write locks from PHP: permits up to the limit, each
 * with its own fence; a permit handed over by a release in another process;
 * readers together and a writer alone; bad arguments refused before any I/O;
 * nothing left on the server.
 */
final class SemaphoreTest extends TestCase
{
    private RedisServer $server;
    private Client $client;
    private Redis $raw;

    protected function setUp(): void
    {
        $this->server = new RedisServer();
        $this->client = new Client($this->server->url());
        $this->raw = $this->server->raw();
    }

    protected function tearDown(): void
    {
        $this->server->stop();
    }

    private function nothingLeft(string $name, string $kind): bool
    {
        return $this->raw->exists("{{$name}}:$kind", "{{$name}}:$kind:info", "{{$name}}:$kind:queue") === 0;
    }

    public function testPermitsUpToTheLimitEachWithItsOwnFence(): void
    {
        $a = $this->client->acquireSemaphore('exports', limit: 2, waitMs: 0);
        $b = $this->client->acquireSemaphore('exports', limit: 2, waitMs: 0);
        $this->assertGreaterThan($a->fence(), $b->fence());
        try {
            $this->client->acquireSemaphore('exports', limit: 2, waitMs: 0);
            $this->fail('a third permit of two');
        } catch (LockTimeout) {
        }
        // The lock of the same name is another thing.
        $this->client->acquire('exports', waitMs: 0)->release();
        $a->release();
        $b->release();
        $this->assertTrue($this->nothingLeft('exports', 'sem'));
    }

    public function testOwnedAsksTheServer(): void
    {
        $lock = $this->client->acquire('owned', ttlMs: 10000, waitMs: 0);
        $permit = $this->client->acquireSemaphore('owned', limit: 2, waitMs: 0);
        $this->assertTrue($lock->owned());
        $this->assertTrue($permit->owned());
        // Taken over, and the lease ended on the server: neither is held.
        $this->raw->set('owned', 'someone else');
        $this->raw->zAdd('{owned}:sem', ['XX'], 1, $permit->token());
        $this->assertFalse($lock->owned());
        $this->assertFalse($permit->owned());
        $this->assertFalse($lock->isLost(), 'owned() marks nothing lost');
        $lock->forget();
        $permit->releaseQuietly();
    }

    public function testAPermitIsHandedOverByAReleaseInAnotherProcess(): void
    {
        $autoload = realpath(__DIR__ . '/../autoload.php');
        $url = $this->server->url();
        $code = "require '$autoload'; \$c = new RedisLock\\Client('$url');"
            . " \$l = \$c->acquireSemaphore('handed', limit: 1, waitMs: 0);"
            . " echo \"held\\n\"; fgets(STDIN); \$l->release(); echo \"released\\n\";";
        $env = getenv();
        $child = proc_open([PHP_BINARY, '-r', $code], [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes, null, $env);
        $this->assertIsResource($child);
        $this->assertSame("held\n", fgets($pipes[1]));
        $waiter = null;
        $pid = pcntl_fork();
        if ($pid === 0) {
            // Let go once the parent waits in the queue.
            waitUntil(fn() => $this->server->raw()->lLen('{handed}:sem:queue') === 1, 20);
            fwrite($pipes[0], "go\n");
            posix_kill(posix_getpid(), SIGKILL);
        }
        $waiter = $this->client->acquireSemaphore('handed', limit: 1, ttlMs: 5000, waitMs: 20000);
        pcntl_waitpid($pid, $status);
        $this->assertSame(1, $this->client->stats()['acquired_handed_over']);
        $this->assertSame("released\n", fgets($pipes[1]));
        $waiter->release();
        fclose($pipes[0]);
        fclose($pipes[1]);
        $this->assertSame(0, proc_close($child));
        $this->assertTrue($this->nothingLeft('handed', 'sem'));
    }

    public function testASigkilledHoldersPermitsComeBackWhenItsLeaseEnds(): void
    {
        // Another PHP process takes 2 permits of 3 with a 2 s lease and is
        // killed; a waiter for 2 permits gets them by its own retry once the
        // lease ran out on the server's clock: not before, and not long after.
        $autoload = realpath(__DIR__ . '/../autoload.php');
        $url = $this->server->url();
        $code = "require '$autoload'; \$c = new RedisLock\\Client('$url');"
            . " \$l = \$c->acquireSemaphore('killed', limit: 3, ttlMs: 2000, waitMs: 0, permits: 2);"
            . " echo \"held\\n\"; sleep(600);";
        $child = proc_open([PHP_BINARY, '-r', $code], [1 => ['pipe', 'w']], $pipes, null, getenv());
        $this->assertIsResource($child);
        try {
            $this->assertSame("held\n", fgets($pipes[1]));
            $holders = $this->raw->zRange('{killed}:sem', 0, -1, true);
            $this->assertCount(1, $holders);
            $leaseEnd = (int) array_values($holders)[0];
            proc_terminate($child, SIGKILL);
            $waiter = $this->client->acquireSemaphore('killed', limit: 3, ttlMs: 5000, waitMs: 30000, permits: 2);
            [$sec, $usec] = $this->raw->time();
            $entered = (int) $sec * 1000 + intdiv((int) $usec, 1000);
            $s = $this->client->stats();
            $this->assertSame([1, 0], [$s['acquired_after_wait'], $s['acquired_handed_over']]);
            $this->assertGreaterThanOrEqual($leaseEnd, $entered, 'taken before the dead lease ended');
            $this->assertLessThan(5000, $entered - $leaseEnd, 'ms after the dead lease ended');
            $this->assertSame([$waiter->token()], $this->raw->zRange('{killed}:sem', 0, -1));
            $waiter->release();
            $this->assertTrue($this->nothingLeft('killed', 'sem'));
        } finally {
            proc_terminate($child, SIGKILL);
            fclose($pipes[1]);
            proc_close($child);
        }
    }

    public function testReadersTogetherAndAWriterAlone(): void
    {
        $r1 = $this->client->acquireRead('catalog', waitMs: 0);
        $r2 = $this->client->acquireRead('catalog', waitMs: 0);
        try {
            $this->client->acquireWrite('catalog', waitMs: 0);
            $this->fail('a writer beside readers');
        } catch (LockTimeout) {
        }
        $r1->release();
        $r2->release();
        $w = $this->client->acquireWrite('catalog', waitMs: 0);
        try {
            $this->client->acquireRead('catalog', waitMs: 0);
            $this->fail('a reader beside the writer');
        } catch (LockTimeout) {
        }
        $w->extend(60000);
        $w->release();
        $this->assertTrue($this->nothingLeft('catalog', 'rw'));
    }

    /** @return list<array{int, int}> */
    public static function badLimits(): array
    {
        return [[0, 1], [2, 0], [2, 3], [1000001, 1], [-1, 1]];
    }

    /** @dataProvider badLimits */
    public function testBadLimitsAreRefused(int $limit, int $permits): void
    {
        $this->expectException(InvalidArgument::class);
        (new Client('redis://127.0.0.1:1/0'))->acquireSemaphore('bad', limit: $limit, permits: $permits);
    }
}
