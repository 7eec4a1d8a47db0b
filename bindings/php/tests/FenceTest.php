<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\LockNotOwned;

/**
 * Fencing numbers from shared slot counters: nothing of a lock name stays on
 * the server once released, and fences keep growing across a restart that
 * lost the counters.
 */
final class FenceTest extends TestCase
{
    private const MAX_FENCE = 9007199254740992; // 2^53

    private RedisServer $server;
    private Client $client;

    protected function setUp(): void
    {
        $this->server = new RedisServer();
        $this->client = new Client($this->server->url());
    }

    protected function tearDown(): void
    {
        $this->server->stop();
    }

    /** @return list<string> every key on the server */
    private function keys(): array
    {
        $raw = $this->server->raw();
        $raw->setOption(Redis::OPT_SCAN, Redis::SCAN_RETRY);
        $keys = [];
        $it = null;
        while (($batch = $raw->scan($it, '*', 1000)) !== false) {
            array_push($keys, ...$batch);
        }
        return $keys;
    }

    public function testManyNamesLeaveOnlyTheSlotCounters(): void
    {
        $n = 2000;
        for ($i = 1; $i <= $n; $i++) {
            $lock = $this->client->acquire("order:$i", ttlMs: 10000, waitMs: 0);
            $this->assertGreaterThan(0, $lock->fence());
            $this->assertLessThan(self::MAX_FENCE, $lock->fence());
            if ($i === 1) {
                // Drawn and extended: the holder's fence sits beside the lock, for its token.
                $lock->extend(10000);
                $this->assertSame($lock->fence() . ':' . $lock->token(), $this->server->raw()->get('{order:1}:meta'));
            }
            $lock->release();
        }
        $keys = $this->keys();
        $this->assertSame([], array_values(array_filter($keys, fn($k) => str_contains($k, 'order:'))));
        foreach ($keys as $k) {
            $this->assertStringStartsWith('redislock:fence:{', $k);
        }
        $this->assertGreaterThan(0, count($keys));
        $this->assertLessThanOrEqual(min($n, 16384), count($keys));
        $this->assertSame(count($keys), $this->server->raw()->dbSize());
    }

    public function testAFenceIsDrawnOnceWhileHeldAndNeverForALostLock(): void
    {
        $lock = $this->client->acquire('drawn', ttlMs: 10000, waitMs: 0);
        $first = $lock->fence();
        $this->assertSame($first, $lock->fence(), 'the same number once drawn');
        $this->assertSame($first, $this->client->fenceToken('drawn', $lock->token()), 'by token');
        $this->assertNull($this->client->fenceToken('drawn', 'another owner'));
        $lock->release();
        $next = $this->client->acquire('drawn', ttlMs: 10000, waitMs: 0);
        $this->server->raw()->set('drawn', 'thief');
        try {
            $next->fence();
            $this->fail('a lock lost before its fence was drawn got a number');
        } catch (LockNotOwned $e) {
            $this->assertTrue($next->isLost());
        }
    }

    public function testFencesGrowAcrossARestartThatLostTheCounter(): void
    {
        $lock = $this->client->acquire('restart-me', ttlMs: 10000, waitMs: 0);
        $f1 = $lock->fence();
        $lock->release();
        $this->server->restart();
        $this->assertSame(0, $this->server->raw()->dbSize(), 'the restart kept data');
        // The same client goes on: its pooled connection died with the server.
        $lock = $this->client->acquire('restart-me', ttlMs: 10000, waitMs: 0);
        $f2 = $lock->fence();
        $lock->release();
        $this->assertGreaterThan($f1, $f2);
        $this->assertLessThan(self::MAX_FENCE, $f2);
        // An evicted counter (DEL) does not send it back either.
        $raw = $this->server->raw();
        foreach ($raw->keys('redislock:fence:*') as $k) {
            $raw->del($k);
        }
        $lock = $this->client->acquire('restart-me', ttlMs: 10000, waitMs: 0);
        $this->assertGreaterThan($f2, $lock->fence());
        $lock->release();
    }

    public function testTheFenceDrawnWhileHeldIsKeptAfterTheRelease(): void
    {
        $lock = $this->client->acquire('kept', ttlMs: 10000, waitMs: 0);
        $drawn = $lock->fence();
        $lock->release();
        $this->assertSame($drawn, $lock->fence(), 'after release(): the fence drawn while held');
        $this->assertSame($drawn, $lock->fence(), 'and again');

        // Drawn by the acquire (fenced: true), never read while held.
        $fenced = $this->client->acquire('kept', ttlMs: 10000, waitMs: 0, fenced: true);
        $fenced->release();
        $this->assertGreaterThan($drawn, $fenced->fence());
        $tried = $this->client->tryAcquire('kept', ttlMs: 10000, fenced: true);
        $tried->release();
        $this->assertGreaterThan($fenced->fence(), $tried->fence());

        // forget() and the end of a request keep it too.
        $forgotten = $this->client->acquire('kept', ttlMs: 10000, waitMs: 0);
        $forgottenFence = $forgotten->fence();
        $token = $forgotten->token();
        $forgotten->forget();
        $this->assertSame($forgottenFence, $forgotten->fence());
        $this->assertTrue($this->client->releaseToken('kept', $token));
        $quiet = $this->client->acquire('kept', ttlMs: 10000, waitMs: 0, fenced: true);
        $quiet->releaseQuietly();
        $this->assertGreaterThan($forgottenFence, $quiet->fence());
    }

    public function testAFenceNeverDrawnWhileHeldIsNotOwnedAfterTheRelease(): void
    {
        $lock = $this->client->acquire('undrawn', ttlMs: 10000, waitMs: 0);
        $lock->release();
        try {
            $lock->fence();
            $this->fail('a fence for a lock released before its fence was drawn');
        } catch (LockNotOwned $e) {
            $this->assertStringContainsString('"undrawn" was released before its fence was drawn', $e->getMessage());
        }
        $this->assertSame([], array_values(array_filter($this->keys(), fn ($k) => str_contains($k, 'undrawn'))),
            'nothing drawn after the release');
    }

    public function testALockLostAfterItsFenceWasDrawnKeepsIt(): void
    {
        $lock = $this->client->acquire('stolen', ttlMs: 10000, waitMs: 0);
        $drawn = $lock->fence();
        $this->server->raw()->set('stolen', 'thief');
        try {
            $lock->release();
            $this->fail('released a lock another owner holds');
        } catch (LockNotOwned $e) {
        }
        $this->assertSame($drawn, $lock->fence());
    }

    public function testSemaphoresAndReadWriteLocksHaveTheirFenceFromTheAcquire(): void
    {
        $previous = 0;
        foreach ([
            'semaphore' => fn () => $this->client->acquireSemaphore('shared', limit: 2, ttlMs: 10000, waitMs: 0),
            'read' => fn () => $this->client->acquireRead('shared', ttlMs: 10000, waitMs: 0),
            'write' => fn () => $this->client->acquireWrite('shared', ttlMs: 10000, waitMs: 0),
        ] as $what => $take) {
            $unread = $take();
            $unread->release();
            $fence = $unread->fence();
            $this->assertGreaterThan($previous, $fence, "$what: the fence drawn by the acquire, never read while held");
            $read = $take();
            $whileHeld = $read->fence();
            $read->release();
            $this->assertSame($whileHeld, $read->fence(), $what);
            $this->assertGreaterThan($fence, $whileHeld, $what);
            $previous = $whileHeld;
        }
    }

    public function testRedlockDrawsTheFenceInTheAcquire(): void
    {
        $others = [new RedisServer(), new RedisServer()];
        try {
            $client = new Client([$this->server->url(), $others[0]->url(), $others[1]->url()]);
            $lock = $client->acquire('redlock', ttlMs: 10000, waitMs: 0);
            $lock->release();
            $this->assertGreaterThan(0, $lock->fence(), 'Redlock draws the fence in the acquire');
        } finally {
            foreach ($others as $server) {
                $server->stop();
            }
        }
    }
}
