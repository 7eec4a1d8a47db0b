<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\ConnectionException;
use RedisLock\InvalidArgument;
use RedisLock\LockException;
use RedisLock\LockNotOwned;
use RedisLock\LockTimeout;
use RedisLock\Unconfirmed;
use RedisLock\WrongType;

final class LockTest extends TestCase
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

    public function testAcquireExtendReleaseAndFence(): void
    {
        $lock = $this->client->acquire('reports', ttlMs: 30000, waitMs: 1000);
        $this->assertSame(32, strlen($lock->token()));
        $this->assertSame($lock->token(), $this->raw->get('reports'));
        // Bounds seconds apart from the TTLs: a busy machine may pause
        // between the call and the check.
        $pttl = $this->raw->pttl('reports');
        $this->assertTrue($pttl > 20000 && $pttl <= 30000, "acquired for 30 s: pttl $pttl");
        // Extend sets the remaining time (here shorter), it does not add to it.
        $lock->extend(10000);
        $pttl = $this->raw->pttl('reports');
        $this->assertTrue($pttl > 5000 && $pttl <= 10000, "extended to 10 s: pttl $pttl");
        $first = $lock->fence();
        $this->assertGreaterThanOrEqual(1, $first);
        $lock->release();
        $this->assertFalse($this->raw->get('reports'));
        $again = $this->client->acquire('reports', ttlMs: 10000);
        $this->assertGreaterThan($first, $again->fence());
        $this->assertFalse($again->isLost());
        $again->release();
        $this->expectException(LockNotOwned::class);
        $again->release();
    }

    public function testTheTokenAnswersAfterReleaseAndForgetWhenNeverReadBefore(): void
    {
        $lock = $this->client->acquire('reports', ttlMs: 30000);
        $stored = $this->raw->get('reports');
        $lock->release();
        $this->assertSame($stored, $lock->token(), 'released, then read');
        $forgotten = $this->client->acquire('reports', ttlMs: 30000);
        $stored = $this->raw->get('reports');
        $forgotten->forget();
        $this->assertSame($stored, $forgotten->token(), 'forgotten, then read');
        $this->assertTrue($this->client->releaseToken('reports', $forgotten->token()));
    }

    public function testForceReleaseTakesTheLockFromWhoeverHoldsIt(): void
    {
        $held = $this->client->acquire('stuck', ttlMs: 600000, fenced: true);
        $broken = $held->fence();
        $this->assertTrue($this->client->forceRelease('stuck'));
        $this->assertFalse($this->raw->get('stuck'));
        $next = $this->client->acquire('stuck', ttlMs: 10000, fenced: true);
        $this->assertGreaterThan($broken, $next->fence(), 'fences stay monotonic');
        try {
            $held->release();
            $this->fail('the broken holder released the new owner');
        } catch (LockNotOwned) {
        }
        $this->assertSame($next->token(), $this->raw->get('stuck'));
        $next->release();
        $this->assertFalse($this->client->forceRelease('stuck'), 'nobody holds it');
        $this->raw->set('stuck', 'a foreign value');
        $this->assertTrue($this->client->forceRelease('stuck'));
        $this->raw->rPush('stuck', 'x');
        try {
            $this->client->forceRelease('stuck');
            $this->fail('a list was taken for a lock');
        } catch (\RedisLock\WrongType) {
        }
        $this->assertSame(['x'], $this->raw->lRange('stuck', 0, -1));
        $this->raw->del('stuck');
    }

    public function testBinaryKeysAndTokens(): void
    {
        $key = "bin\0\xff";
        $token = "tok\0\xfe";
        $lock = $this->client->acquire($key, ttlMs: 5000, token: $token);
        $this->assertSame($token, $lock->token());
        $this->assertSame($token, $this->raw->get($key));
        $this->assertSame($key, $lock->key());
        $this->assertFalse($this->client->releaseToken($key, 'other'));
        $this->assertTrue($this->client->releaseToken($key, $token));
        $this->assertFalse($this->raw->get($key));
    }

    public function testTryAcquireAndATimeoutWithinBounds(): void
    {
        // The holder's 30 s TTL is what a try that waited would wait for;
        // the upper bounds below are far from it (a busy machine pauses
        // for 50-300 ms, not seconds).
        $held = $this->client->acquire('busy', ttlMs: 30000);
        [$scripts, $sets] = [scriptCalls($this->raw), commandCalls($this->raw, 'set')];
        $t = hrtime(true);
        $this->assertNull($this->client->tryAcquire('busy'));
        $ms = (hrtime(true) - $t) / 1e6;
        $this->assertLessThan(3000, $ms, "a try-once took $ms ms: it waited");
        // The hand-written helper's one SET NX (a wait queues and retries).
        $this->assertSame(0, scriptCalls($this->raw) - $scripts, 'a try-once runs no script');
        $this->assertSame(1, commandCalls($this->raw, 'set') - $sets, 'a try-once sends one SET');
        $t = hrtime(true);
        try {
            $this->client->acquire('busy', ttlMs: 5000, waitMs: 400);
            $this->fail('acquired a held lock');
        } catch (LockTimeout $e) {
            $ms = (hrtime(true) - $t) / 1e6;
            $this->assertTrue($ms >= 350 && $ms < 3000, "400 ms wait took $ms ms");
            $this->assertStringContainsString('"busy"', $e->getMessage());
        }
        $held->release();
    }

    public function testStolenAndExpiredLocksAreNotOwnedAndNeverRecreated(): void
    {
        $lock = $this->client->acquire('exp', ttlMs: 150);
        usleep(250000);
        try {
            $lock->extend(5000);
            $this->fail('extended an expired lock');
        } catch (LockNotOwned) {
        }
        $this->assertTrue($lock->isLost());
        $this->assertFalse($this->raw->get('exp'), 'extend re-created the key');
        try {
            $lock->release();
            $this->fail('released an expired lock');
        } catch (LockNotOwned) {
        }
        $this->assertFalse($this->raw->get('exp'));

        $lock = $this->client->acquire('stolen', ttlMs: 30000);
        $this->raw->set('stolen', 'thief', ['PX' => 60000]);
        try {
            $lock->release();
            $this->fail('released a stolen lock');
        } catch (LockNotOwned) {
        }
        $this->assertSame('thief', $this->raw->get('stolen'));
        $this->assertGreaterThan(50000, $this->raw->pttl('stolen'));
    }

    public function testWrongTypeLeavesTheKeyIntact(): void
    {
        $this->raw->hSet('h', 'f', 'v');
        try {
            $this->client->acquire('h', ttlMs: 5000, waitMs: 0);
            $this->fail('acquired a hash');
        } catch (WrongType $e) {
            $this->assertStringContainsString('hash', $e->getMessage());
        }
        $this->assertSame('v', $this->raw->hGet('h', 'f'));
    }

    public function testInvalidArguments(): void
    {
        $cases = [
            'ttl 0' => fn() => $this->client->acquire('k', ttlMs: 0),
            'negative ttl' => fn() => $this->client->acquire('k', ttlMs: -5),
            'empty key' => fn() => $this->client->acquire('', ttlMs: 1000),
            'negative wait' => fn() => $this->client->acquire('k', ttlMs: 1000, waitMs: -1),
            'empty token' => fn() => $this->client->acquire('k', ttlMs: 1000, token: ''),
            'malformed URL' => fn() => new Client('not a url'),
            'wrong scheme' => fn() => new Client('http://127.0.0.1:1'),
            'extend 0' => fn() => $this->client->acquire('k2', ttlMs: 1000)->extend(0),
        ];
        foreach ($cases as $what => $fn) {
            try {
                $fn();
                $this->fail("$what was accepted");
            } catch (InvalidArgument $e) {
                $this->assertInstanceOf(\InvalidArgumentException::class, $e);
                $this->assertNotSame('', $e->getMessage(), $what);
            }
        }
    }

    public function testADeadServerIsAConnectionExceptionWithinFiveSeconds(): void
    {
        $dead = new Client('redis://127.0.0.1:' . RedisServer::freePort());
        $t = hrtime(true);
        try {
            $dead->acquire('k', ttlMs: 1000, waitMs: 2000);
            $this->fail('no error from a dead server');
        } catch (ConnectionException $e) {
            $this->assertInstanceOf(LockException::class, $e);
            $this->assertStringContainsString('cannot reach Redis at 127.0.0.1:', $e->getMessage());
        }
        $this->assertLessThan(5000, (hrtime(true) - $t) / 1e6);
    }

    public function testSynchronizedReturnsTheValueAndReleasesOnException(): void
    {
        $this->assertSame(42, $this->client->synchronized('sync', fn() => 42, ttlMs: 5000, waitMs: 1000));
        $this->assertFalse($this->raw->get('sync'));
        try {
            $this->client->synchronized('sync', function ($lock) {
                $this->assertNotFalse($this->raw->get('sync'));
                throw new DomainException('boom');
            }, ttlMs: 5000);
            $this->fail('the exception was swallowed');
        } catch (DomainException $e) {
            $this->assertSame('boom', $e->getMessage());
        }
        $this->assertFalse($this->raw->get('sync'), 'synchronized did not release on exception');
    }

    public function testALockGoingOutOfScopeIsReleased(): void
    {
        (function () {
            $lock = $this->client->acquire('scoped', ttlMs: 30000);
            $this->assertNotFalse($this->raw->get('scoped'));
        })();
        $this->assertFalse($this->raw->get('scoped'));
    }

    public function testAutoRenewAndIsLost(): void
    {
        // Renewed every third of the TTL: a 1.5 s TTL survives a pause of
        // a second in the renewal thread. Held past twice its TTL and
        // renewed at least twice, it can only be there by renewal.
        $t = microtime(true);
        $lock = $this->client->acquire('renew', ttlMs: 1500, autoRenew: true);
        $this->assertTrue(waitUntil(fn() => $this->client->stats()['renewals_ok'] >= 2
            && microtime(true) - $t > 3.0, 15), 'renewals: ' . $this->client->stats()['renewals_ok']);
        $this->assertFalse($lock->isLost());
        $this->assertSame($lock->token(), $this->raw->get('renew'));
        $this->raw->set('renew', 'thief', ['PX' => 60000]);
        $this->assertTrue(waitUntil(fn() => $lock->isLost(), 10), 'renewal never found the theft');
        $this->assertSame('thief', $this->raw->get('renew'));
    }

    /**
     * Run $body in a pcntl_fork() child; returns whether it returned true.
     * The child ends with SIGKILL after writing its verdict, so that no
     * PHP shutdown (PHPUnit's, the test server's) runs in it.
     */
    private function inChild(callable $body): int
    {
        $verdict = tempnam(sys_get_temp_dir(), 'redislock-child-');
        $pid = pcntl_fork();
        if ($pid === 0) {
            $ok = false;
            try {
                $ok = (bool)$body();
            } catch (\Throwable $e) {
                fwrite(STDERR, "child: $e\n");
            }
            file_put_contents($verdict, $ok ? 'ok' : 'fail');
            posix_kill(posix_getpid(), SIGKILL);
        }
        $this->assertGreaterThan(0, $pid, 'pcntl_fork failed');
        $this->verdicts[$pid] = $verdict;
        return $pid;
    }

    /** @var array<int, string> the verdict file of each child */
    private array $verdicts = [];

    private function childSucceeded(int $pid): bool
    {
        pcntl_waitpid($pid, $status);
        $file = $this->verdicts[$pid];
        unset($this->verdicts[$pid]);
        $ok = file_get_contents($file) === 'ok';
        unlink($file);
        return $ok;
    }

    public function testAReleaseWakesAWaiterInAForkedChildLongBeforeTheTtl(): void
    {
        $holder = $this->client->acquire('wake', ttlMs: 30000);
        $url = $this->server->url();
        $pid = $this->inChild(function () use ($url) {
            $client = new Client($url);
            $lock = $client->acquire('wake', ttlMs: 5000, waitMs: 20000);
            $lock->release();
            // Handed over by the release, not found free by a retry.
            $handed = $client->stats()['acquired_handed_over'];
            if ($handed !== 1) {
                fwrite(STDERR, "child: acquired_handed_over $handed\n");
            }
            return $handed === 1;
        });
        // The child waits in the lock's queue before the release.
        $this->assertTrue(waitUntil(fn() => $this->raw->lLen('{wake}:queue') > 0, 10), 'the child never queued');
        $t = hrtime(true);
        $holder->release();
        $this->assertSame(1, $this->client->stats()['handoffs_given'], 'the release handed the lock over');
        $this->assertTrue($this->childSucceeded($pid), 'the child was not handed the lock');
        // Long before the 30 s TTL (a busy machine adds pauses, not seconds).
        $ms = (hrtime(true) - $t) / 1e6;
        $this->assertLessThan(10000, $ms, "the child got the lock $ms ms after the release");
    }

    public function testAForkedChildNeverReleasesTheParentsLock(): void
    {
        $lock = $this->client->acquire('parent', ttlMs: 30000);
        $token = $lock->token();
        $pid = $this->inChild(function () use (&$lock) {
            // The child uses the client (fresh connections)...
            $ok = $this->client->tryAcquire('child-own', ttlMs: 5000) !== null;
            // ...and drops the inherited Lock: its destructor must be inert.
            $lock = null;
            gc_collect_cycles();
            return $ok && $this->server->raw()->get('parent') !== false;
        });
        $this->assertTrue($this->childSucceeded($pid));
        $this->assertSame($token, $this->raw->get('parent'), "the child released the parent's lock");
        $lock->release();
    }

    public function testAnUnconfirmedReleaseHasItsOwnException(): void
    {
        // A kind of LockNotOwned (DESIGN.md), and still told apart.
        $this->assertTrue(is_subclass_of(Unconfirmed::class, LockNotOwned::class));
        $this->assertTrue(is_subclass_of(Unconfirmed::class, LockException::class));
        $this->assertFalse(is_subclass_of(LockNotOwned::class, Unconfirmed::class));
        $this->expectException(Unconfirmed::class);
        \RedisLock\FFI::checkStatus(\RedisLock\FFI::UNCONFIRMED);
    }

    public function testAnUnconfirmedReleaseIsCaughtAsNotOwned(): void
    {
        // A proxy (tests/fake/reply_cutter.py) lets the release through to
        // the server, waits for its reply, and closes the connection instead
        // of passing it on; the retry on a fresh connection finds the lock
        // no longer this owner's.
        $proxy = proc_open(['python3', dirname(__DIR__, 3) . '/tests/fake/reply_cutter.py', (string)$this->server->port],
            [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
        $this->assertIsResource($proxy);
        try {
            $port = (int)self::line($pipes[1]);
            $this->assertGreaterThan(0, $port);
            $client = new Client("redis://127.0.0.1:$port/0?command_timeout=30s");
            // The release script is loaded (a first sending that met
            // NOSCRIPT would lose only that refusal).
            $client->acquire('cut', ttlMs: 10000, waitMs: 0)->release();

            $lock = $client->acquire('cut', ttlMs: 10000, waitMs: 0);
            fwrite($pipes[0], 'arm ' . bin2hex($lock->token()) . "\n");
            fflush($pipes[0]);
            $this->assertSame('armed', self::line($pipes[1]));
            $caught = null;
            try {
                $lock->release();
            } catch (LockNotOwned $e) {
                $caught = $e;
            }
            $this->assertSame('cut', self::line($pipes[1]), 'the proxy cut no reply');
            $this->assertInstanceOf(Unconfirmed::class, $caught);
            $this->assertStringContainsString('unconfirmed', $caught->getMessage());
            // It did take effect: the lock is free.
            $this->assertFalse($this->raw->get('cut'));
        } finally {
            fclose($pipes[0]);
            fclose($pipes[1]);
            proc_terminate($proxy, 9);
            proc_close($proxy);
        }
    }

    /** A line from $pipe without its newline; '' when none came within 20 s. */
    private static function line($pipe): string
    {
        $read = [$pipe];
        $none = null;
        if (stream_select($read, $none, $none, 20) !== 1) {
            return '';
        }
        return trim((string)fgets($pipe));
    }

    public function testSynchronizedRenewsTheLockByDefault(): void
    {
        // 700 ms of work under a 300 ms TTL: renewed every 100 ms, it is
        // still held when the work ends, and synchronized() returns.
        $result = $this->client->synchronized('long', function ($lock) {
            usleep(700000);
            return [$this->raw->get('long') === $lock->token(), $lock->isLost()];
        }, ttlMs: 300);
        $this->assertSame([true, false], $result, 'not renewed: the lock expired while the work ran');
        $this->assertGreaterThanOrEqual(1, $this->client->stats()['renewals_ok']);
        $this->assertFalse($this->raw->get('long'));
    }

    public function testSynchronizedWithoutRenewalLosesALockThatOutlivesItsTtl(): void
    {
        try {
            $this->client->synchronized('short', function () {
                // Until the 300 ms TTL has run out.
                $this->assertTrue(waitUntil(fn () => $this->raw->get('short') === false, 20), 'the lock never expired');
                return 'done';
            }, ttlMs: 300, autoRenew: false);
            $this->fail('synchronized() returned after its lock expired');
        } catch (LockNotOwned $e) {
            $this->assertStringContainsString('ran unprotected', $e->getMessage());
        }
        $this->assertSame(0, $this->client->stats()['renewals_ok']);
    }
}
