<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\ConnectionException;
use RedisLock\Symfony\Store;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

// Debian's php-symfony-lock (scripts/deps.sh installs it).
if (is_file('/usr/share/php/Symfony/Component/Lock/autoload.php')) {
    require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
}

/**
 * RedisLock\Symfony\Store under Symfony's own LockFactory and Lock (5.4 from
 * Debian's php-symfony-lock), against throwaway redis-servers.
 */
final class SymfonyTest extends TestCase
{
    private RedisServer $server;
    private Client $client;
    private Redis $raw;
    private Store $store;
    private LockFactory $factory;

    public static function setUpBeforeClass(): void
    {
        if (!interface_exists(\Symfony\Component\Lock\BlockingStoreInterface::class)) {
            // A failure, not a skip: a missing install step must not pass.
            self::fail('symfony/lock is missing: apt-get install php-symfony-lock');
        }
    }

    protected function setUp(): void
    {
        $this->server = new RedisServer();
        $this->client = new Client($this->server->url());
        $this->raw = $this->server->raw();
        $this->store = new Store($this->client);
        $this->factory = new LockFactory($this->store);
    }

    protected function tearDown(): void
    {
        $this->server->stop();
    }

    /** A second, independent process's view: its own client, store and factory. */
    private function otherFactory(?float $waitTimeout = null): LockFactory
    {
        return new LockFactory(new Store(new Client($this->server->url()), waitTimeout: $waitTimeout));
    }

    /** @return list<string> the keys on the server whose name contains $name */
    private function keysOf(string $name): array
    {
        return array_values(array_filter($this->raw->keys('*'), fn($k) => str_contains($k, $name)));
    }

    public function testAcquireRefreshAndReleaseThroughTheLockFactory(): void
    {
        $key = new Key('reports');
        $lock = $this->factory->createLockFromKey($key, 30.0);
        $this->assertFalse($lock->isAcquired());
        $this->assertTrue($lock->acquire());
        $this->assertTrue($lock->isAcquired());
        $token = $key->getState(Store::class);
        $this->assertSame($token, $this->raw->get('reports'));
        // Bounds seconds apart from the call (a busy machine pauses) and
        // from the other TTLs (the store's initial 300 s, the refresh's 10 s).
        $pttl = $this->raw->pttl('reports');
        $this->assertTrue($pttl > 20000 && $pttl <= 30000, "the Lock's 30 s TTL was not applied: pttl $pttl");

        $lock->refresh(10.0);
        $pttl = $this->raw->pttl('reports');
        $this->assertTrue($pttl > 5000 && $pttl <= 10000, "refresh(10) gave pttl $pttl");
        $left = $lock->getRemainingLifetime();
        $this->assertTrue($left > 5.0 && $left <= 10.0, "refresh(10) left a lifetime of $left s");
        $this->assertFalse($lock->isExpired());

        $lock->release();
        $this->assertFalse($lock->isAcquired());
        $this->assertSame([], $this->keysOf('reports'), 'the release left a key behind');
        // Released: another owner gets it at once.
        $this->assertTrue($this->otherFactory()->createLock('reports')->acquire());
    }

    public function testTwoClientsExcludeEachOther(): void
    {
        $mine = $this->factory->createLock('shared', 30.0);
        $theirs = $this->otherFactory()->createLock('shared', 30.0);
        $this->assertTrue($mine->acquire());
        [$scripts, $sets] = [scriptCalls($this->raw), commandCalls($this->raw, 'set')];
        $t = hrtime(true);
        $this->assertFalse($theirs->acquire());
        $ms = (hrtime(true) - $t) / 1e6;
        $this->assertSame(0, scriptCalls($this->raw) - $scripts, 'a non-blocking acquire runs no script');
        $this->assertSame(1, commandCalls($this->raw, 'set') - $sets, 'a non-blocking acquire sends one SET');
        $this->assertLessThan(3000, $ms, "a non-blocking acquire took $ms ms: it waited (the holder has 30 s)");
        $this->assertFalse($theirs->isAcquired());
        $this->assertTrue($mine->isAcquired());
        // A failed owner's release must not free the holder's lock.
        $theirs->release();
        $this->assertTrue($mine->isAcquired());
        $mine->release();
        $this->assertTrue($theirs->acquire());
        $this->assertFalse($mine->acquire());
        $theirs->release();
    }

    public function testAcquiringAHeldLockAgainSucceedsAndResetsTheTtl(): void
    {
        $key = new Key('again');
        $lock = $this->factory->createLockFromKey($key, null);
        $this->assertTrue($lock->acquire());
        $token = $key->getState(Store::class);
        $fence = $this->store->fence($key);
        $this->raw->pExpire('again', 10000);
        $this->assertTrue($lock->acquire(), 'a second acquire() of a held lock failed');
        $this->assertTrue($lock->acquire(true), 'a blocking acquire() of a held lock failed');
        $this->assertSame($token, $this->raw->get('again'));
        $this->assertGreaterThan(290000, $this->raw->pttl('again'), 'the re-save did not set the initial TTL again');
        $this->assertSame($fence, $this->store->fence($key), 'a re-save is not a new acquisition');
        $lock->release();
        $this->assertFalse($this->raw->get('again'));
    }

    /**
     * Run $body in a pcntl_fork() child; its string result is written for
     * childResult(). The child ends with SIGKILL after writing, so that no
     * PHP shutdown (PHPUnit's, the test server's, Symfony's destructors) runs
     * in it.
     */
    private function inChild(callable $body): int
    {
        $file = tempnam(sys_get_temp_dir(), 'redislock-symfony-');
        $pid = pcntl_fork();
        if ($pid === 0) {
            $out = 'fail';
            try {
                $out = (string)$body();
            } catch (\Throwable $e) {
                fwrite(STDERR, "child: $e\n");
            }
            file_put_contents($file, $out);
            posix_kill(posix_getpid(), SIGKILL);
        }
        $this->assertGreaterThan(0, $pid, 'pcntl_fork failed');
        $this->results[$pid] = $file;
        return $pid;
    }

    /** @var array<int, string> the result file of each child */
    private array $results = [];

    private function childResult(int $pid): string
    {
        pcntl_waitpid($pid, $status);
        $file = $this->results[$pid];
        unset($this->results[$pid]);
        $out = (string)file_get_contents($file);
        unlink($file);
        return $out;
    }

    public function testABlockingAcquireInAnotherProcessIsWokenByTheRelease(): void
    {
        $holder = $this->factory->createLock('wake', 30.0);
        $this->assertTrue($holder->acquire());
        $url = $this->server->url();
        $pid = $this->inChild(function () use ($url) {
            $client = new Client($url);
            $lock = (new LockFactory(new Store($client)))->createLock('wake', 10.0);
            $lock->acquire(true);
            $at = microtime(true);
            $lock->release();
            return sprintf('%.6f %d', $at, $client->stats()['acquired_handed_over']);
        });
        // Once the child is queued, skip its first quick retries (the head
        // of the queue backs off from 25 ms, doubling, each pause jittered
        // down to half: retries 12-25, 37-75, 87-175, 187-375 ms after it
        // queued), then count its scripts for a second. Its next retries
        // come 0.2-0.4, 0.4-0.8 and 0.8-1.6 s apart: at most three, even if
        // a busy machine stretches the second to 2.5 s. Symfony's fallback
        // for stores that cannot block polls save() every ~100 ms instead.
        $this->assertTrue(waitUntil(fn() => $this->raw->lLen('{wake}:queue') > 0, 10), 'the child never queued');
        usleep(400000);
        $scripts = scriptCalls($this->raw);
        $t = hrtime(true);
        usleep(1000000);
        $scripts = scriptCalls($this->raw) - $scripts;
        $window = (hrtime(true) - $t) / 1e6;
        $this->assertSame(0, pcntl_waitpid($pid, $status, WNOHANG), 'the child did not wait for the held lock');
        $this->assertLessThan(5, $scripts, "the waiter ran $scripts scripts in $window ms: it polls");
        $this->assertTrue($holder->isAcquired());
        $releasedAt = microtime(true);
        $holder->release();
        $got = $this->childResult($pid);
        $this->assertMatchesRegularExpression('/^\d+\.\d+ \d+$/', $got, 'the child did not get the lock');
        [$at, $handed] = explode(' ', $got);
        $this->assertSame('1', $handed, 'the child was not handed the lock by the release');
        $ms = ((float)$at - $releasedAt) * 1000;
        $this->assertGreaterThanOrEqual(0, $ms, 'the child got the lock before the holder released it');
        // Long before the holder's 30 s TTL (a busy machine adds pauses, not seconds).
        $this->assertLessThan(10000, $ms, "the child got the lock $ms ms after the release (TTL 30 s: no hand-off)");
        $this->assertSame([], $this->keysOf('wake'));
    }

    public function testASerializedKeyIsReleasedByAnotherProcess(): void
    {
        $key = new Key('handover');
        $lock = $this->factory->createLockFromKey($key, 30.0, false);
        $this->assertTrue($lock->acquire());
        $fence = $this->store->fence($key);
        $serialized = serialize($key);
        $url = $this->server->url();
        $pid = $this->inChild(function () use ($url, $serialized, $fence) {
            $key = unserialize($serialized);
            $store = new Store(new Client($url));
            $lock = (new LockFactory($store))->createLockFromKey($key, 30.0);
            if (!$lock->isAcquired() || $store->fence($key) !== $fence) {
                return 'the unserialized Key does not hold the lock';
            }
            $lock->refresh(20.0);
            $lock->release();
            return 'ok';
        });
        $this->assertSame('ok', $this->childResult($pid));
        $this->assertFalse($lock->isAcquired());
        $this->assertFalse($this->raw->get('handover'));
    }

    public function testRefreshingAnExpiredLockThrowsAndNeverRecreatesIt(): void
    {
        // The server expires the locks (PEXPIRE 1 ms): a lock made to
        // expire by a short TTL could already be expired when acquire()
        // returns on a busy machine.
        $lock = $this->factory->createLock('brief', 30.0);
        $this->assertTrue($lock->acquire());
        $this->expire('brief');
        $this->assertFalse($lock->isAcquired());
        try {
            $lock->refresh();
            $this->fail('refreshed an expired lock');
        } catch (LockConflictedException | LockExpiredException $e) {
        }
        $this->assertFalse($this->raw->get('brief'), 'refresh re-created the key');

        // Taken over by another owner: a conflict, and the new holder keeps it.
        $lock = $this->factory->createLock('taken', 30.0);
        $this->assertTrue($lock->acquire());
        $this->expire('taken');
        $theirs = $this->otherFactory()->createLock('taken', 30.0);
        $this->assertTrue($theirs->acquire());
        try {
            $lock->refresh(30.0);
            $this->fail('refreshed a lock another owner holds');
        } catch (LockConflictedException) {
        }
        $this->assertTrue($theirs->isAcquired());
        $lock->release();
        $this->assertTrue($theirs->isAcquired(), "a release removed another owner's lock");
    }

    /** Let the server expire $name now, and wait until it has. */
    private function expire(string $name): void
    {
        $this->assertTrue($this->raw->pExpire($name, 1));
        $this->assertTrue(waitUntil(fn() => $this->raw->exists($name) === 0, 10), "$name did not expire");
    }

    public function testAStoreCallThatOutlastsTheTtlIsExpired(): void
    {
        $key = new Key('outlasted');
        $this->store->save($key);
        try {
            // 1 µs cannot cover a round trip: the Key is expired on return.
            $this->store->putOffExpiration($key, 0.000001);
            $this->fail('no LockExpiredException');
        } catch (LockExpiredException) {
        }
        $this->assertFalse($this->raw->get('outlasted'), 'the expired lock was not deleted');
    }

    public function testFencesStrictlyIncreaseAndAreReadableThroughTheKey(): void
    {
        $other = $this->otherFactory();
        $previous = 0;
        for ($i = 0; $i < 4; $i++) {
            $key = new Key('fenced');
            $this->assertNull($this->store->fence($key));
            $lock = $i % 2 === 0 ? $this->factory->createLockFromKey($key) : $other->createLockFromKey($key);
            $this->assertTrue($lock->acquire());
            $fence = $this->store->fence($key);
            $this->assertIsInt($fence);
            $this->assertGreaterThan($previous, $fence);
            $this->assertSame($fence, $this->store->fence(unserialize(serialize($key))));
            $previous = $fence;
            $lock->release();
            $this->assertNull($this->store->fence($key), 'a released Key still shows a fence');
        }
    }

    public function testTheWireFormatIsTheTokenUnderThePrefixedName(): void
    {
        $store = new Store($this->client, prefix: 'app:');
        $factory = new LockFactory($store);
        $key = new Key('job');
        $lock = $factory->createLockFromKey($key, 30.0);
        $this->assertTrue($lock->acquire());
        $this->assertSame($key->getState(Store::class), $this->raw->get('app:job'));
        $this->assertSame(Redis::REDIS_STRING, $this->raw->type('app:job'));
        $this->assertFalse($this->raw->get('job'));
        // A plain SET NX user of the same name is excluded, and excludes.
        $this->assertFalse($this->raw->set('app:job', 'foreign', ['NX', 'PX' => 30000]));
        $lock->release();
        $this->assertTrue($this->raw->set('app:job', 'foreign', ['NX', 'PX' => 30000]));
        $this->assertFalse($lock->acquire());
        $this->raw->del('app:job');
        $this->assertTrue($lock->acquire());
        $lock->release();

        // Symfony's RedisStore keeps a ZSET: a conflict, left untouched.
        $this->raw->zAdd('app:zset', 1, 'sf-token');
        $this->assertFalse($factory->createLock('zset')->acquire());
        $this->assertSame(1, $this->raw->zCard('app:zset'));
    }

    public function testADeadServerIsAClearErrorAtOnce(): void
    {
        $dead = new Store(new Client('redis://127.0.0.1:' . RedisServer::freePort()));
        $lock = (new LockFactory($dead))->createLock('k', 10.0, false);
        $t = hrtime(true);
        try {
            $lock->acquire(true);
            $this->fail('no error from a dead server');
        } catch (LockAcquiringException $e) {
            $chain = [];
            for ($p = $e; $p !== null; $p = $p->getPrevious()) {
                $chain[] = $p;
            }
            $last = end($chain);
            $this->assertInstanceOf(ConnectionException::class, $last);
            $this->assertStringContainsString('cannot reach Redis at 127.0.0.1:', $chain[1]->getMessage());
        }
        $this->assertLessThan(5000, (hrtime(true) - $t) / 1e6);

        $key = new Key('k');
        $key->setState(Store::class, 'some-token');
        $this->expectException(LockStorageException::class);
        try {
            $dead->delete($key);
            $this->fail('no error from a dead server');
        } catch (LockReleasingException $e) {
            $this->assertInstanceOf(ConnectionException::class, $e->getPrevious());
        }
        $dead->exists($key);
    }

    public function testTheWaitLimitEndsABlockingAcquireWithAConflict(): void
    {
        $holder = $this->factory->createLock('limited', 30.0);
        $this->assertTrue($holder->acquire());
        $waiter = $this->otherFactory(waitTimeout: 0.3)->createLock('limited', 30.0);
        $t = hrtime(true);
        try {
            $waiter->acquire(true);
            $this->fail('acquired a held lock');
        } catch (LockConflictedException $e) {
            $ms = (hrtime(true) - $t) / 1e6;
            // Far from the holder's 30 s.
            $this->assertTrue($ms >= 250 && $ms < 3000, "a 0.3 s wait took $ms ms");
            $this->assertInstanceOf(\RedisLock\LockTimeout::class, $e->getPrevious());
        }
        $this->assertTrue($holder->isAcquired());
        $holder->release();
    }

    public function testAWaitLongerThanTheInitialTtlStillHoldsTheLock(): void
    {
        // The holder's TTL runs out while the waiter waits (no release to
        // hand off): the waiter gets the lock after more than its store's
        // initial TTL and must not take it for expired. The initial TTL is
        // 1 s: what the checks after the wait have, on a busy machine too.
        $t = hrtime(true);
        $this->client->acquire('slow', ttlMs: 1500)->forget();
        $store = new Store(new Client($this->server->url()), initialTtl: 1.0);
        $key = new Key('slow');
        $lock = (new LockFactory($store))->createLockFromKey($key, null);
        $this->assertTrue($lock->acquire(true));
        $ms = (hrtime(true) - $t) / 1e6;
        $this->assertGreaterThan(1000, $ms, 'the wait was not longer than the initial TTL');
        $this->assertFalse($lock->isExpired());
        $this->assertTrue($lock->isAcquired());
        $this->assertSame($key->getState(Store::class), $this->raw->get('slow'));
        $lock->release();
    }

    public function testInvalidSettings(): void
    {
        $cases = [
            'initial TTL 0' => [fn() => new Store($this->client, 0.0), InvalidTtlException::class],
            'initial TTL over 30 days' => [fn() => new Store($this->client, 31 * 86400.0), InvalidTtlException::class],
            'negative wait' => [fn() => new Store($this->client, waitTimeout: -1.0), InvalidArgumentException::class],
            'refresh by a negative TTL' => [fn() => $this->store->putOffExpiration(new Key('x'), -1.0), InvalidTtlException::class],
            'empty lock name' => [fn() => $this->store->save(new Key('')), InvalidArgumentException::class],
        ];
        foreach ($cases as $what => [$fn, $class]) {
            try {
                $fn();
                $this->fail("$what was accepted");
            } catch (\Throwable $e) {
                $this->assertInstanceOf($class, $e, $what);
            }
        }
        $this->assertFalse($this->store->exists(new Key('never-saved')));
        $this->store->delete(new Key('never-saved')); // silent
    }
}
