<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\NoQuorum;

/** Redlock from PHP: new Client([...]) over three throwaway servers. */
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

    public function testAMajorityHoldsTheLockAndReleaseReachesEveryNode(): void
    {
        $urls = array_map(fn(RedisServer $s) => $s->url(), $this->servers);
        $raws = array_map(fn(RedisServer $s) => $s->raw(), $this->servers);
        $client = new Client($urls);
        $lock = $client->acquire('rl', ttlMs: 10000, waitMs: 0);
        foreach ($raws as $r) {
            $this->assertSame($lock->token(), $r->get('rl'));
        }
        $this->assertNull($client->tryAcquire('rl'));
        $lock->extend(20000);
        foreach ($raws as $r) {
            $this->assertGreaterThan(19000, $r->pttl('rl'));
        }
        $lock->release();
        foreach ($raws as $r) {
            $this->assertFalse($r->get('rl'));
        }
        // The request-id helper works the same way over Redlock.
        $tool = new RedisLock\Compat\RedisTool($client);
        $this->assertTrue($tool->tryGetLock('rl', '59', 5000));
        $this->assertFalse($tool->tryGetLock('rl', '4', 5000));
        $this->assertTrue($tool->releaseLock('rl', '59'));
    }

    public function testOneDeadNodeIsToleratedTwoAreNoQuorum(): void
    {
        $dead = 'redis://127.0.0.1:' . RedisServer::freePort();
        $ok = new Client([$this->servers[0]->url(), $this->servers[1]->url(), $dead]);
        $ok->acquire('rl', ttlMs: 5000, waitMs: 0)->release();
        $bad = new Client([$this->servers[0]->url(), $dead, $dead]);
        try {
            $bad->acquire('rl', ttlMs: 5000, waitMs: 1000);
            $this->fail('acquired without a majority');
        } catch (NoQuorum $e) {
            $this->assertStringContainsString('majority', $e->getMessage());
        }
        $this->assertFalse($this->servers[0]->raw()->get('rl'), 'left behind');
    }
}
