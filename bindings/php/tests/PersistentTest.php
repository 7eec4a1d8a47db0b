<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\InvalidArgument;
use RedisLock\LockNotOwned;

/** Client::persistent, and the operations by token that need no handle. */
final class PersistentTest extends TestCase
{
    private RedisServer $server;
    private Redis $raw;

    protected function setUp(): void
    {
        $this->server = new RedisServer();
        $this->raw = $this->server->raw();
    }

    protected function tearDown(): void
    {
        $this->server->stop();
    }

    private function connected(): int
    {
        return (int)$this->raw->info('clients')['connected_clients'];
    }

    public function testPersistentClientsOfOneUrlShareTheirConnections(): void
    {
        $base = $this->connected();
        for ($i = 0; $i < 5; $i++) {
            $client = Client::persistent($this->server->url());
            $client->acquire('p', ttlMs: 5000, waitMs: 0)->release();
            unset($client); // as at the end of a request
        }
        $this->assertSame($base + 1, $this->connected(), 'one connection for five clients of one URL');
        // Another URL (another database) is another client.
        Client::persistent("redis://127.0.0.1:{$this->server->port}/1")->acquire('p', ttlMs: 5000, waitMs: 0)->release();
        $this->assertSame($base + 2, $this->connected());
        // `new Client` keeps its own connections, closed when it goes.
        $own = new Client($this->server->url());
        $own->acquire('p', ttlMs: 5000, waitMs: 0)->release();
        $this->assertSame($base + 3, $this->connected());
        $own->close();
        // The server notices the closed socket on its next event loop.
        waitUntil(fn() => $this->connected() <= $base + 2, 10);
        $this->assertSame($base + 2, $this->connected(), 'close() left its connection open');
    }

    public function testALockOutlivesThePersistentHandleItCameThrough(): void
    {
        $client = Client::persistent($this->server->url());
        $lock = $client->acquire('outlive', ttlMs: 5000);
        $client->close();
        $this->assertSame($lock->token(), $this->raw->get('outlive'));
        $lock->release();
        $this->assertSame(0, $this->raw->exists('outlive'));
    }

    public function testAPersistentClientRejectsABadUrlAtOnce(): void
    {
        $this->expectException(InvalidArgument::class);
        Client::persistent('http://127.0.0.1:1');
    }

    public function testExtendAndOwnershipByToken(): void
    {
        $client = new Client($this->server->url());
        // TTLs far apart, and far longer than a busy machine pauses: held
        // for 10 s, extended to 60 s.
        $this->assertTrue($client->acquireToken('job', 'owner-1', 10000));
        $this->assertTrue($client->isOwnedBy('job', 'owner-1'));
        $this->assertFalse($client->isOwnedBy('job', 'owner-2'));
        $this->assertFalse($client->extendToken('job', 'owner-2', 60000));
        $this->assertLessThanOrEqual(10000, $this->raw->pttl('job'), "another owner's extend changed the TTL");
        $this->assertTrue($client->extendToken('job', 'owner-1', 60000));
        $pttl = $this->raw->pttl('job');
        $this->assertTrue($pttl > 30000 && $pttl <= 60000, "extended to 60 s: pttl $pttl");
        $this->assertTrue($client->releaseToken('job', 'owner-1'));
        $this->assertFalse($client->extendToken('job', 'owner-1', 10000));
        $this->assertSame(0, $this->raw->exists('job'), 'an extend after release re-created the lock');
        $this->assertFalse($client->isOwnedBy('job', 'owner-1'));
        $this->expectException(InvalidArgument::class);
        $client->extendToken('job', 'owner-1', 0);
    }

    public function testAcquireTokenWaitsAsAcquireDoes(): void
    {
        $client = new Client($this->server->url());
        // Held for 300 ms: waitMs null (the default, as acquire()'s) waits
        // until it expires; 0 tries once.
        $held = $client->acquire('waited', ttlMs: 300);
        $this->assertFalse($client->acquireToken('waited', 'owner-1', 10000, waitMs: 0));
        $this->assertTrue($client->acquireToken('waited', 'owner-1', 10000));
        $this->assertSame('owner-1', $this->raw->get('waited'));
        $this->assertTrue($client->releaseToken('waited', 'owner-1'));
        $held->forget();
    }

    public function testAForgottenLockStaysUntilReleasedByToken(): void
    {
        $client = new Client($this->server->url());
        $lock = $client->acquire('kept', ttlMs: 10000);
        $token = $lock->token();
        $lock->forget();
        unset($lock);
        $this->assertSame($token, $this->raw->get('kept'), 'forget released the lock');
        $this->assertNull($client->tryAcquire('kept', ttlMs: 1000));
        $this->assertTrue((new Client($this->server->url()))->releaseToken('kept', $token));
        $this->assertSame(0, $this->raw->exists('kept'));
    }

    public function testAForgottenHandleCannotBeUsed(): void
    {
        $lock = (new Client($this->server->url()))->acquire('gone', ttlMs: 10000);
        $lock->forget();
        $this->expectException(LockNotOwned::class);
        $lock->release();
    }
}
