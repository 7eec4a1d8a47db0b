<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\Compat\RedisTool;

/**
 * The drop-in for the classic predis helper, side by side with the real
 * helper on predis (the migration: old and new processes on the same keys).
 */
final class RedisToolTest extends TestCase
{
    private const RELEASE_LUA = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private RedisServer $server;
    private RedisTool $tool;
    private \Predis\Client $predis;

    protected function setUp(): void
    {
        require_once '/usr/share/php/Predis/Autoloader.php';
        \Predis\Autoloader::register();
        $this->server = new RedisServer();
        $this->tool = new RedisTool(new Client($this->server->url()));
        $this->predis = new \Predis\Client(['host' => '127.0.0.1', 'port' => $this->server->port]);
    }

    protected function tearDown(): void
    {
        $this->server->stop();
    }

    // The classic helper, as it is found in PHP code bases.
    private function predisTryGetLock(string $key, string $requestId, int $expireTime): bool
    {
        $result = $this->predis->set($key, $requestId, 'PX', $expireTime, 'NX');
        return 'OK' === (string)$result;
    }

    private function predisReleaseLock(string $key, string $requestId): bool
    {
        return 1 === $this->predis->eval(self::RELEASE_LUA, 1, $key, $requestId);
    }

    public function testTheSeedScenario(): void
    {
        // A holds it for 2 s: B's first try comes well within that, even
        // on a busy machine; B's second comes once the server expired it.
        $this->assertTrue($this->tool->tryGetLock('order', '59', 2000), 'request A');
        $this->assertFalse($this->tool->tryGetLock('order', '4', 2000), 'request B while A holds it');
        $this->assertTrue(waitUntil(fn() => $this->predis->exists('order') === 0, 10), 'A\'s lock never expired');
        $this->assertTrue($this->tool->tryGetLock('order', '4', 10000), 'request B after expiry');
        $this->assertFalse($this->tool->releaseLock('order', '59'), "A's late release");
        $this->assertSame('4', $this->predis->get('order'));
        $this->assertTrue($this->tool->releaseLock('order', '4'));
        $this->assertNull($this->predis->get('order'));
    }

    public function testTheSameValueUnderTheSameKey(): void
    {
        $this->assertTrue($this->tool->tryGetLock('k', 'req-1', 60000));
        $this->assertSame('req-1', $this->predis->get('k'));
        // Milliseconds, as SET PX: seconds apart from the call on a busy machine.
        $pttl = $this->predis->pttl('k');
        $this->assertTrue($pttl > 30000 && $pttl <= 60000, "pttl $pttl");
    }

    public function testAMixedFleetExcludesEachOtherAndReleasesByRequestId(): void
    {
        // Old process first.
        $this->assertTrue($this->predisTryGetLock('fleet', 'old-1', 5000));
        $this->assertFalse($this->tool->tryGetLock('fleet', 'new-1', 5000));
        $this->assertFalse($this->tool->releaseLock('fleet', 'new-1'));
        $this->assertTrue($this->tool->releaseLock('fleet', 'old-1'), 'the new helper releases an old lock');
        // New process first.
        $this->assertTrue($this->tool->tryGetLock('fleet', 'new-2', 5000));
        $this->assertFalse($this->predisTryGetLock('fleet', 'old-2', 5000));
        $this->assertFalse($this->predisReleaseLock('fleet', 'old-2'));
        $this->assertTrue($this->predisReleaseLock('fleet', 'new-2'), 'the old helper releases a new lock');
        $this->assertNull($this->predis->get('fleet'));
    }

    public function testBadArgumentsAreInvalidArguments(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->tool->tryGetLock('k', 'id', 0);
    }
}
