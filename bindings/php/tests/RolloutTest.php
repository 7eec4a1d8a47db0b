<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use Symfony\Component\Lock\Exception\LockConflictedException;

/**
 * A rolling migration, one deployment at a time: for a while a process on
 * the lock code a fleet replaces and a process on redislock contend for
 * the same name. Each pair runs in two PHP processes (tests/rollout_peer.php),
 * the peers as Debian 12 ships them (predis, phpredis, symfony/lock 5.4,
 * Laravel 8.83), in both directions: which one holds, which one tries or
 * waits, whether either releases or extends the other's lock without its
 * owner, and whether the name is free afterwards. Waits are seen on the
 * server (the waiter's queue entry, or the polling peer's commands), never
 * by the clock.
 *
 * Measured (docs/php.md, "Rolling migration"):
 * - the predis helper and RedisTool exclude each other; either releases
 *   the other's lock by request id;
 * - Symfony's RedisStore and RedisLock\Symfony\Store exclude each other
 *   (write and read locks of Symfony's against Store); Symfony's blocking
 *   acquire waits for Store, but Store's blocking acquire gives up at once
 *   (LockConflictedException) while Symfony's RedisStore holds the name;
 * - SharedStore and Symfony's RedisStore (or a 5.1-style SET NX holder)
 *   do not exclude each other, either way: drain first, or a new name;
 * - Laravel's own Redis lock and RedisLock\Laravel\Lock exclude each other,
 *   and either releases (ours also extends) the other's lock by owner.
 */
final class RolloutTest extends TestCase
{
    private RedisServer $server;
    private Redis $raw;

    /** @var list<RolloutPeer> */
    private array $peers = [];

    protected function setUp(): void
    {
        $this->server = new RedisServer();
        $this->raw = $this->server->raw();
    }

    protected function tearDown(): void
    {
        foreach ($this->peers as $peer) {
            $peer->stop();
        }
        $this->server->stop();
    }

    private function peer(string $library): RolloutPeer
    {
        return $this->peers[] = new RolloutPeer($library, $this->server->port);
    }

    /** The keys of $name on the server (the name and its companions), fence counters left out. */
    private function keysOf(string $name): array
    {
        $keys = array_values(array_filter($this->raw->keys("*$name*"), fn ($k) => !str_starts_with($k, 'redislock:fence:')));
        sort($keys);
        return $keys;
    }

    private function assertFree(string $name): void
    {
        $this->assertTrue(waitUntil(fn () => $this->keysOf($name) === []), "$name is not free: " . json_encode($this->keysOf($name)));
    }

    // ---------------------------------------------------------------- predis

    public function testThePredisHelperAndRedisToolExcludeEachOtherAndReleaseByRequestId(): void
    {
        $old = $this->peer('predis-helper');
        $new = $this->peer('redistool');
        foreach ([[$old, $new], [$new, $old]] as $round => [$holder, $other]) {
            $name = "order-$round";
            $this->assertTrue($holder->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'owner' => 'req-59'])['ok']);
            $this->assertSame('req-59', $this->raw->get($name), 'the value is the request id');
            $pttl = $this->raw->pttl($name);
            $this->assertTrue($pttl > 0 && $pttl <= 30000, "pttl $pttl");
            $this->assertFalse($other->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'owner' => 'req-4'])['ok'], "round $round: the other took a held name");
            $this->assertFalse($holder->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'owner' => 'req-4'])['ok']);
            // No release without the request id...
            $this->assertFalse($other->call(['op' => 'release_by_owner', 'name' => $name, 'owner' => 'req-4'])['ok']);
            $this->assertSame('req-59', $this->raw->get($name));
            // ...and with it, either releases (documented: by request id).
            $this->assertTrue($other->call(['op' => 'release_by_owner', 'name' => $name, 'owner' => 'req-59'])['ok']);
            $this->assertFree($name);
            $this->assertFalse($holder->call(['op' => 'release_by_owner', 'name' => $name, 'owner' => 'req-59'])['ok'], 'a late release');
            $this->assertTrue($other->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'owner' => 'req-4'])['ok'], 'the freed name');
            $this->assertFalse($holder->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'owner' => 'req-59'])['ok']);
            $this->assertTrue($other->call(['op' => 'release_by_owner', 'name' => $name, 'owner' => 'req-4'])['ok']);
            $this->assertFree($name);
        }
    }

    // --------------------------------------------------------------- Symfony

    public function testSymfonysRedisStoreAndStoreExcludeEachOther(): void
    {
        $theirs = $this->peer('symfony-redis');
        $ours = $this->peer('symfony-store');
        foreach ([[$theirs, $ours, 'write'], [$theirs, $ours, 'read'], [$ours, $theirs, 'write']] as $round => [$holder, $other, $side]) {
            $name = "reports-$round";
            $this->assertTrue($holder->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'side' => $side])['ok']);
            $this->assertTrue($this->raw->exists($name) === 1);
            $before = $this->raw->dump($name);
            $this->assertFalse($other->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30])['ok'], "round $round: a write lock beside a $side lock");
            if ($other === $theirs) {
                $this->assertFalse($other->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'side' => 'read'])['ok'], "Symfony's read lock beside Store's");
            }
            // A Lock of the name that never acquired neither releases nor extends it.
            $other->call(['op' => 'release_stranger', 'name' => $name]);
            $this->assertFalse($other->call(['op' => 'extend', 'name' => $name, 'ttl' => 60])['ok']);
            $this->assertSame($before, $this->raw->dump($name), 'the holder\'s entry changed');
            $this->assertTrue($holder->call(['op' => 'holds', 'name' => $name])['ok']);
            $this->assertTrue($holder->call(['op' => 'release', 'name' => $name])['ok']);
            $this->assertFree($name);
            $this->assertTrue($other->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30])['ok'], 'the freed name');
            $this->assertTrue($other->call(['op' => 'release', 'name' => $name])['ok']);
            $this->assertFree($name);
        }
    }

    public function testSymfonysRedisStoreWaitsForStoreButStoreDoesNotWaitForIt(): void
    {
        $theirs = $this->peer('symfony-redis');
        $ours = $this->peer('symfony-store');

        // Symfony's lock holds (a sorted set under the name): Store's
        // acquire(true) does not wait for it, it gives up at once with
        // LockConflictedException, as for any key that holds no lock
        // (measured; docs/php.md says to drain first or catch and retry).
        $this->assertTrue($theirs->call(['op' => 'acquire', 'name' => 'a', 'ttl' => 30])['ok']);
        $before = $this->raw->dump('a');
        $refused = $ours->call(['op' => 'acquire', 'name' => 'a', 'ttl' => 30, 'wait' => 'forever']);
        $this->assertFalse($refused['ok']);
        $this->assertSame(LockConflictedException::class, $refused['error']);
        $this->assertStringContainsString('zset', $refused['message']);
        $this->assertSame($before, $this->raw->dump('a'), 'Symfony\'s entry changed');
        $this->assertSame(0, $this->raw->lLen('{a}:queue'), 'a waiter that gave up stayed queued');
        $this->assertTrue($theirs->call(['op' => 'release', 'name' => 'a'])['ok']);
        $this->assertFree('a');
        $this->assertTrue($ours->call(['op' => 'acquire', 'name' => 'a', 'ttl' => 30, 'wait' => 'forever'])['ok']);
        $this->assertSame('string', $this->typeOf('a'));
        $this->assertFalse($theirs->call(['op' => 'acquire', 'name' => 'a', 'ttl' => 30])['ok']);
        $this->assertTrue($ours->call(['op' => 'release', 'name' => 'a'])['ok']);
        $this->assertFree('a');

        // Store holds; Symfony's acquire(true) polls (its RedisStore does not block).
        $this->assertTrue($ours->call(['op' => 'acquire', 'name' => 'b', 'ttl' => 30])['ok']);
        $this->assertPollsUntilReleased($theirs, 'b', 'b', fn () => scriptCalls($this->raw), $ours);
        $this->assertSame('zset', $this->typeOf('b'));
        $this->assertFalse($ours->call(['op' => 'acquire', 'name' => 'b', 'ttl' => 30])['ok']);
        $this->assertTrue($theirs->call(['op' => 'release', 'name' => 'b'])['ok']);
        $this->assertFree('b');
    }

    public function testSharedStoreAndSymfonysRedisStoreDoNotExcludeEachOther(): void
    {
        // SharedStore is a redislock read-write lock: its holders and queue
        // live under {K}:rw, and a read-write lock named K never collides
        // with anything under K itself (the contract of the read-write locks).
        // Symfony's RedisStore, and Symfony 5.1's SET NX holder, keep theirs
        // under K. So neither stops the other, either way: a rollout from
        // RedisStore to SharedStore drains first, or takes a new name
        // (docs/php.md). This test keeps that sentence true.
        $shared = $this->peer('symfony-shared');
        $this->assertTrue($this->raw->set('catalog', 'symfony-5.1-token', ['NX', 'PX' => 30000]));
        foreach (['write', 'read'] as $ourSide) {
            $this->assertTrue($shared->call(['op' => 'acquire', 'name' => 'catalog', 'ttl' => 30, 'side' => $ourSide])['ok'], "SharedStore's $ourSide lock is refused beside a SET NX holder: update docs/php.md");
            $this->assertTrue($shared->call(['op' => 'release', 'name' => 'catalog'])['ok']);
        }
        $this->assertSame('symfony-5.1-token', $this->raw->get('catalog'), 'the SET NX holder untouched');
        $this->raw->del('catalog');

        $theirs = $this->peer('symfony-redis');
        foreach (['write', 'read'] as $side) {
            $this->assertTrue($theirs->call(['op' => 'acquire', 'name' => 'catalog', 'ttl' => 30, 'side' => $side])['ok']);
            foreach (['write', 'read'] as $ourSide) {
                $this->assertTrue($shared->call(['op' => 'acquire', 'name' => 'catalog', 'ttl' => 30, 'side' => $ourSide])['ok'], "SharedStore's $ourSide lock is refused beside Symfony's $side lock: update docs/php.md");
                $this->assertTrue($shared->call(['op' => 'release', 'name' => 'catalog'])['ok']);
            }
            $this->assertSame('zset', $this->typeOf('catalog'), "Symfony's holder untouched");
            $this->assertTrue($theirs->call(['op' => 'release', 'name' => 'catalog'])['ok']);
            $this->assertFree('catalog');
        }
        foreach (['write', 'read'] as $ourSide) {
            $this->assertTrue($shared->call(['op' => 'acquire', 'name' => 'catalog', 'ttl' => 30, 'side' => $ourSide])['ok']);
            $this->assertTrue($theirs->call(['op' => 'acquire', 'name' => 'catalog', 'ttl' => 30])['ok'], "Symfony's write lock is refused beside SharedStore's $ourSide lock: update docs/php.md");
            $this->assertTrue($theirs->call(['op' => 'release', 'name' => 'catalog'])['ok']);
            $this->assertTrue($shared->call(['op' => 'holds', 'name' => 'catalog'])['ok']);
            $this->assertTrue($shared->call(['op' => 'release', 'name' => 'catalog'])['ok']);
            $this->assertFree('catalog');
        }
    }

    // --------------------------------------------------------------- Laravel

    public function laravelClients(): array
    {
        return ['phpredis' => ['phpredis'], 'predis' => ['predis']];
    }

    /** @dataProvider laravelClients */
    public function testLaravelsRedisLockAndOursExcludeEachOtherAndReleaseByOwner(string $client): void
    {
        $theirs = $this->peer("laravel-redis:$client");
        $ours = $this->peer("laravel-redislock:$client");
        foreach ([[$theirs, $ours], [$ours, $theirs]] as $round => [$holder, $other]) {
            $name = "report-$round";
            $key = "db_app:$name";
            $got = $holder->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30]);
            $this->assertTrue($got['ok']);
            $owner = $got['owner'];
            $this->assertSame($owner, $this->raw->get($key), 'the key holds the owner');
            $this->assertFalse($other->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30])['ok'], "round $round: the other took a held name");
            $this->assertFalse($other->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'wait' => 0.2])['ok'], "round $round: a timed wait took a held name");
            // Without the owner, nothing is released or extended.
            $this->assertFalse($other->call(['op' => 'release_by_owner', 'name' => $name, 'owner' => 'intruder'])['ok']);
            $this->assertFalse($ours->call(['op' => 'extend', 'name' => $name, 'owner' => 'intruder', 'ttl' => 300])['ok']);
            $this->assertSame($owner, $this->raw->get($key));
            $this->assertLessThanOrEqual(30000, $this->raw->pttl($key));
            // By owner: ours extends either lock, either releases the other's.
            $this->assertTrue($ours->call(['op' => 'extend', 'name' => $name, 'owner' => $owner, 'ttl' => 300])['ok']);
            $this->assertGreaterThan(30000, $this->raw->pttl($key));
            $this->assertTrue($other->call(['op' => 'release_by_owner', 'name' => $name, 'owner' => $owner])['ok'], "round $round: release by owner");
            $this->assertFree($name);
            $this->assertFalse($holder->call(['op' => 'release', 'name' => $name])['ok'], 'a late release');
            $this->assertTrue($other->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30])['ok'], 'the freed name');
            $this->assertFalse($holder->call(['op' => 'acquire', 'name' => $name, 'ttl' => 30])['ok']);
            $this->assertTrue($other->call(['op' => 'release', 'name' => $name])['ok']);
            $this->assertFree($name);
        }
    }

    /** @dataProvider laravelClients */
    public function testLaravelsBlockAndOursWaitForEachOther(string $client): void
    {
        $theirs = $this->peer("laravel-redis:$client");
        $ours = $this->peer("laravel-redislock:$client");

        // Laravel's lock holds; our block() queues.
        $held = $theirs->call(['op' => 'acquire', 'name' => 'a', 'ttl' => 30]);
        $this->assertTrue($held['ok']);
        $ours->send(['op' => 'acquire', 'name' => 'a', 'ttl' => 30, 'wait' => 'forever']);
        $this->assertTrue(waitUntil(fn () => $this->raw->lLen('{db_app:a}:queue') === 1), 'our waiter did not queue');
        $this->assertFalse($ours->answered(), 'our waiter got a held lock');
        $this->assertSame($held['owner'], $this->raw->get('db_app:a'));
        $this->assertTrue($theirs->call(['op' => 'release', 'name' => 'a'])['ok']);
        $got = $ours->answer(60);
        $this->assertTrue($got['ok']);
        $this->assertSame($got['owner'], $this->raw->get('db_app:a'));
        $this->assertFalse($theirs->call(['op' => 'acquire', 'name' => 'a', 'ttl' => 30])['ok']);
        $this->assertTrue($ours->call(['op' => 'release', 'name' => 'a'])['ok']);
        $this->assertFree('a');

        // Our lock holds; Laravel's block() polls with SET NX.
        $held = $ours->call(['op' => 'acquire', 'name' => 'b', 'ttl' => 30]);
        $this->assertTrue($held['ok']);
        $got = $this->assertPollsUntilReleased($theirs, 'b', 'db_app:b', fn () => commandCalls($this->raw, 'set'), $ours);
        $this->assertSame($got['owner'], $this->raw->get('db_app:b'));
        $this->assertFalse($ours->call(['op' => 'acquire', 'name' => 'b', 'ttl' => 30])['ok']);
        $this->assertTrue($theirs->call(['op' => 'release', 'name' => 'b'])['ok']);
        $this->assertFree('b');
    }

    // --------------------------------------------------------------- helpers

    /**
     * $waiter (a peer whose wait polls) waits for $name, held by $holder
     * under $key: it tries again and again ($attempts counts its tries on
     * the server) without getting it, the holder's value stays, and it
     * gets the lock once $holder releases. Its answer.
     */
    private function assertPollsUntilReleased(RolloutPeer $waiter, string $name, string $key, callable $attempts, RolloutPeer $holder): array
    {
        $held = $this->raw->get($key);
        $this->assertIsString($held, 'the holder holds no string');
        $waiter->send(['op' => 'acquire', 'name' => $name, 'ttl' => 30, 'wait' => 'forever']);
        $start = $attempts();
        $this->assertTrue(waitUntil(fn () => $attempts() >= $start + 3, 30), 'the waiter does not try again');
        $this->assertFalse($waiter->answered(), 'the waiter got a held lock');
        $this->assertSame($held, $this->raw->get($key), 'the holder\'s entry changed');
        $this->assertTrue($holder->call(['op' => 'release', 'name' => $name])['ok']);
        $got = $waiter->answer(60);
        $this->assertTrue($got['ok']);
        return $got;
    }

    private function typeOf(string $key): string
    {
        return match ($this->raw->type($key)) {
            Redis::REDIS_STRING => 'string',
            Redis::REDIS_ZSET => 'zset',
            Redis::REDIS_NOT_FOUND => 'none',
            default => 'other',
        };
    }
}

/**
 * A PHP process running tests/rollout_peer.php with one lock library,
 * driven line by line.
 */
final class RolloutPeer
{
    private $proc;
    private $stdin;
    private $stdout;

    public function __construct(public readonly string $library, int $port)
    {
        $this->proc = proc_open(
            [PHP_BINARY, __DIR__ . '/rollout_peer.php', $library, (string)$port],
            [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => STDERR],
            $pipes,
            null,
            getenv(),
        );
        if (!is_resource($this->proc)) {
            throw new RuntimeException("cannot run the $library peer");
        }
        [$this->stdin, $this->stdout] = [$pipes[0], $pipes[1]];
        $ready = $this->answer(30);
        if (($ready['ready'] ?? null) !== explode(':', $library)[0]) {
            throw new RuntimeException("the $library peer did not start: " . json_encode($ready));
        }
    }

    public function send(array $command): void
    {
        fwrite($this->stdin, json_encode($command) . "\n");
        fflush($this->stdin);
    }

    /** Whether an answer is waiting to be read (without waiting for one). */
    public function answered(): bool
    {
        $read = [$this->stdout];
        $none = [];
        return stream_select($read, $none, $none, 0) > 0;
    }

    /** The next answer, waited for up to $seconds; an error answer throws. */
    public function answer(float $seconds = 30): array
    {
        $read = [$this->stdout];
        $none = [];
        $s = (int)$seconds;
        if (stream_select($read, $none, $none, $s, (int)(($seconds - $s) * 1e6)) < 1) {
            throw new RuntimeException("the {$this->library} peer did not answer within $seconds s");
        }
        $line = fgets($this->stdout);
        if ($line === false) {
            throw new RuntimeException("the {$this->library} peer exited");
        }
        $answer = json_decode($line, true, 8, JSON_THROW_ON_ERROR);
        if (isset($answer['error']) && !array_key_exists('ok', $answer)) {
            throw new RuntimeException("the {$this->library} peer failed: {$answer['error']}: {$answer['message']}");
        }
        return $answer;
    }

    public function call(array $command): array
    {
        $this->send($command);
        return $this->answer();
    }

    public function stop(): void
    {
        if ($this->proc === null) {
            return;
        }
        $this->send(['op' => 'quit']);
        fclose($this->stdin);
        $proc = $this->proc;
        if (!waitUntil(fn () => !proc_get_status($proc)['running'], 10)) {
            proc_terminate($proc, SIGKILL);
        }
        fclose($this->stdout);
        proc_close($proc);
        $this->proc = null;
    }
}
