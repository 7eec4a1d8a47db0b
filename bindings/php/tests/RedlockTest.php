<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\LockTimeout;
use RedisLock\NoQuorum;

/**
 * Redlock from PHP: new Client([...]) over three throwaway servers.
 *
 * A Redlock call returns once a majority answered: the node beyond the
 * majority may be written a moment later, so a check of every node waits
 * for it (everyNode) instead of reading at once. The URLs give each node
 * 2 s to answer (?node_timeout=2s), more than the default (a tenth of
 * the TTL): these tests are about majorities, not about slow nodes.
 */
final class RedlockTest extends TestCase
{
    /** @var list<RedisServer> */
    private array $servers = [];

    protected function setUp(): void
    {
        for ($i = 0; $i < 3; $i++) {
            $this->servers[] = new RedisServer();
        }
    }

    protected function tearDown(): void
    {
        foreach ($this->servers as $s) {
            $s->stop();
        }
    }

    private static function url(string $url): string
    {
        return "$url?node_timeout=2s";
    }

    /**
     * Wait until $ok($raw) holds on every node (10 s at most), then assert
     * it, naming the nodes where it did not and what $show($raw) read there.
     *
     * @param list<Redis> $raws
     */
    private function assertEveryNode(array $raws, callable $ok, callable $show, string $what): void
    {
        $failing = fn() => array_keys(array_filter($raws, fn(Redis $r) => !$ok($r)));
        waitUntil(fn() => $failing() === [], 10);
        $bad = [];
        foreach ($failing() as $i) {
            $bad[] = "node $i: " . var_export($show($raws[$i]), true);
        }
        $this->assertSame([], $bad, "$what, 10 s after the call");
    }

    public function testAMajorityHoldsTheLockAndReleaseReachesEveryNode(): void
    {
        $urls = array_map(fn(RedisServer $s) => self::url($s->url()), $this->servers);
        $raws = array_map(fn(RedisServer $s) => $s->raw(), $this->servers);
        $client = new Client($urls);
        $lock = $client->acquire('rl', ttlMs: 10000, waitMs: 0);
        $token = $lock->token();
        $this->assertEveryNode($raws, fn(Redis $r) => $r->get('rl') === $token, fn(Redis $r) => $r->get('rl'),
            'the lock is not on every node');
        $this->assertNull($client->tryAcquire('rl'));
        $lock->extend(20000);
        // Not extended: at most the 10 s it was taken for.
        $this->assertEveryNode($raws, fn(Redis $r) => $r->pttl('rl') > 10000, fn(Redis $r) => $r->pttl('rl'),
            'the extend did not reach every node (pttl)');
        $lock->release();
        $this->assertEveryNode($raws, fn(Redis $r) => $r->exists('rl') === 0, fn(Redis $r) => $r->get('rl'),
            'the release did not reach every node');
        // The request-id helper works the same way over Redlock.
        $tool = new RedisLock\Compat\RedisTool($client);
        $this->assertTrue($tool->tryGetLock('rl', '59', 5000));
        $this->assertFalse($tool->tryGetLock('rl', '4', 5000));
        $this->assertTrue($tool->releaseLock('rl', '59'));
    }

    public function testSemaphoresNeedEveryNodeOfThreeAndReadWriteLocksAMajority(): void
    {
        $urls = array_map(fn(RedisServer $s) => self::url($s->url()), $this->servers);
        $client = new Client($urls);
        $a = $client->acquireSemaphore('rl-sem', limit: 2, ttlMs: 10000, waitMs: 0);
        $b = $client->acquireSemaphore('rl-sem', limit: 2, ttlMs: 10000, waitMs: 0);
        $this->assertGreaterThan(0, $a->fence());
        try {
            $client->acquireSemaphore('rl-sem', limit: 2, ttlMs: 10000, waitMs: 0);
            $this->fail('a third permit of two over Redlock');
        } catch (LockTimeout) {
        }
        $this->assertTrue($b->owned());
        $a->release();
        $b->release();
        $read = $client->acquireRead('rl-rw', ttlMs: 10000, waitMs: 0);
        try {
            $client->acquireWrite('rl-rw', ttlMs: 10000, waitMs: 0);
            $this->fail('a writer beside a reader over Redlock');
        } catch (LockTimeout) {
        }
        $read->release();
        // (A release returns once a majority answered.)
        $raws = array_map(fn(RedisServer $s) => $s->raw(), $this->servers);
        $this->assertTrue(waitUntil(fn() => array_sum(array_map(fn(Redis $r) => $r->exists('{rl-rw}:rw'), $raws)) === 0, 20),
            'the reader was not released on every node');
        // One node down: a majority is left for the read-write lock; the
        // semaphore of 2 needs all three nodes.
        $this->servers[2]->stop();
        $client->acquireWrite('rl-rw', ttlMs: 10000, waitMs: 0)->release();
        try {
            $client->acquireSemaphore('rl-down', limit: 2, ttlMs: 10000, waitMs: 0);
            $this->fail('a semaphore of 2 over 2 of 3 nodes');
        } catch (NoQuorum) {
        }
    }

    public function testOneDeadNodeIsToleratedTwoAreNoQuorum(): void
    {
        $dead = self::url('redis://127.0.0.1:' . RedisServer::freePort());
        $live = self::url($this->servers[0]->url());
        $ok = new Client([$live, self::url($this->servers[1]->url()), $dead]);
        $ok->acquire('rl', ttlMs: 5000, waitMs: 0)->release();
        $bad = new Client([$live, $dead, $dead]);
        try {
            // A TTL far longer than the wait below: the key cannot go by expiry.
            $bad->acquire('rl', ttlMs: 60000, waitMs: 1000);
            $this->fail('acquired without a majority');
        } catch (NoQuorum $e) {
            $this->assertStringContainsString('majority', $e->getMessage());
        }
        // The live node's grant may come after the two refusals decided the
        // attempt: it is then taken back as it arrives, after the call.
        $raw = $this->servers[0]->raw();
        $this->assertTrue(waitUntil(fn() => $raw->exists('rl') === 0, 10),
            'left behind on the live node: ' . var_export($raw->get('rl'), true) . ', pttl ' . $raw->pttl('rl'));
    }
}
