<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\LockTimeout;
use RedisLock\Symfony\SemaphoreStore;
use RedisLock\Symfony\SharedStore;
use RedisLock\Symfony\Store;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\UnserializableKeyException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Semaphore\Exception\InvalidArgumentException as SemaphoreInvalidArgument;
use Symfony\Component\Semaphore\Exception\RuntimeException as SemaphoreRuntimeException;
use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Key as SemaphoreKey;
use Symfony\Component\Semaphore\SemaphoreFactory;

// Debian's php-symfony-lock and php-symfony-semaphore (scripts/deps.sh installs them).
const SYMFONY_AUTOLOADS = [
    '/usr/share/php/Symfony/Component/Lock/autoload.php',
    '/usr/share/php/Symfony/Component/Semaphore/autoload.php',
];
foreach (SYMFONY_AUTOLOADS as $autoload) {
    if (is_file($autoload)) {
        require_once $autoload;
    }
}

/**
 * RedisLock\Symfony\SharedStore (read and write locks) and SemaphoreStore
 * under Symfony's own LockFactory, Lock, SemaphoreFactory and Semaphore
 * (5.4, from Debian), against throwaway redis-servers. Other holders run in
 * other PHP processes; waits are shown by the clients' stats() counters and
 * the servers' queues, not by the clock.
 */
final class SymfonySharedTest extends TestCase
{
    /** A writer's permits of a read-write lock (a reader holds 1). */
    private const WRITER_PERMITS = 1 << 30;

    private RedisServer $server;
    private Client $client;
    private Redis $raw;
    private SharedStore $store;
    private LockFactory $factory;
    private SemaphoreStore $semaphores;

    /** @var list<resource> the PHP processes a test started */
    private array $children = [];

    /** @var list<resource> the stdout of each of them */
    private array $stdouts = [];

    public static function setUpBeforeClass(): void
    {
        // A failure, not a skip: a missing install step must not pass.
        if (!interface_exists(\Symfony\Component\Lock\BlockingSharedLockStoreInterface::class)) {
            self::fail('symfony/lock is missing: apt-get install php-symfony-lock');
        }
        if (!interface_exists(\Symfony\Component\Semaphore\PersistingStoreInterface::class)) {
            self::fail('symfony/semaphore is missing: apt-get install php-symfony-semaphore');
        }
    }

    protected function setUp(): void
    {
        $this->server = new RedisServer();
        $this->client = new Client($this->server->url());
        $this->raw = $this->server->raw();
        $this->store = new SharedStore($this->client);
        $this->factory = new LockFactory($this->store);
        $this->semaphores = new SemaphoreStore($this->client);
    }

    protected function tearDown(): void
    {
        foreach ($this->children as $child) {
            if (proc_get_status($child)['running']) {
                proc_terminate($child, SIGKILL);
            }
            proc_close($child);
        }
        $this->children = [];
        $this->stdouts = [];
        $this->server->stop();
    }

    /** A second, independent process's view: its own client, store and factory. */
    private function otherFactory(?float $waitTimeout = null): LockFactory
    {
        return new LockFactory(new SharedStore(new Client($this->server->url()), waitTimeout: $waitTimeout));
    }

    private function nothingLeft(string $name, string $kind): bool
    {
        return $this->raw->exists("{{$name}}:$kind", "{{$name}}:$kind:info", "{{$name}}:$kind:queue") === 0;
    }

    /** @return array<string, int> each holder's token => its permits, as the server keeps them */
    private function holders(string $name, string $kind): array
    {
        $holders = [];
        foreach ($this->raw->hGetAll("{{$name}}:$kind:info") as $token => $value) {
            $holders[$token] = (int)explode(':', $value)[0];
        }
        return $holders;
    }

    /** Milliseconds left on the lease of $lock's holder, by the server's clock. */
    private function leaseMs(string $name, string $kind, \RedisLock\Lock $lock): float
    {
        [$s, $us] = $this->raw->time();
        return $this->raw->zScore("{{$name}}:$kind", $lock->token()) - ((int)$s * 1000 + (int)$us / 1000);
    }

    /**
     * Start `php -r $body` with this package, Symfony's Lock and Semaphore,
     * $url (the server) and $port defined. Returns [stdin, stdout].
     *
     * @return array{0: resource, 1: resource}
     */
    private function php(string $body): array
    {
        $preamble = 'require ' . var_export(realpath(__DIR__ . '/../autoload.php'), true) . ';';
        foreach (SYMFONY_AUTOLOADS as $autoload) {
            $preamble .= ' require_once ' . var_export($autoload, true) . ';';
        }
        $preamble .= ' $url = ' . var_export($this->server->url(), true) . '; $port = ' . $this->server->port . ';';
        $child = proc_open([PHP_BINARY, '-r', $preamble . $body], [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes, null, getenv());
        $this->assertIsResource($child);
        $this->children[] = $child;
        $this->stdouts[] = $pipes[1];
        return [$pipes[0], $pipes[1]];
    }

    /** The next line $out writes ('' when it ended), waiting at most $seconds. */
    private function line($out, float $seconds = 30.0): string
    {
        $deadline = microtime(true) + $seconds;
        $line = '';
        while (!str_ends_with($line, "\n")) {
            $left = $deadline - microtime(true);
            $read = [$out];
            $none = null;
            if ($left <= 0 || stream_select($read, $none, $none, (int)$left, (int)(fmod($left, 1) * 1e6)) < 1) {
                $this->fail("no line from the child within $seconds s (so far: '$line')");
            }
            $chunk = fgets($out);
            if ($chunk === false) {
                return $line;
            }
            $line .= $chunk;
        }
        return $line;
    }

    /** Wait for every child to exit, and check that each exited 0. */
    private function childrenExited(): void
    {
        foreach ($this->children as $child) {
            // Only the first status that shows the exit has its code.
            $code = null;
            $exited = waitUntil(function () use ($child, &$code): bool {
                $status = proc_get_status($child);
                $code = $status['exitcode'];
                return !$status['running'];
            }, 30);
            $this->assertTrue($exited, 'a child did not exit');
            $this->assertSame(0, $code, 'a child failed');
            proc_close($child);
        }
        $this->children = [];
        $this->stdouts = [];
    }

    public function testManyReadersAtOnceAndAWriterAlone(): void
    {
        $readers = [];
        for ($i = 0; $i < 5; $i++) {
            $reader = $this->otherFactory()->createLock('catalog', 30.0);
            $this->assertTrue($reader->acquireRead(), "reader $i was refused beside the others");
            $readers[] = $reader;
        }
        $this->assertSame([1, 1, 1, 1, 1], array_values($this->holders('catalog', 'rw')));
        $this->assertSame(0, $this->raw->exists('catalog'), 'the plain lock key was written');

        $writer = $this->factory->createLock('catalog', 30.0);
        foreach ($readers as $i => $reader) {
            $this->assertFalse($writer->acquire(), 'a writer got in beside ' . (5 - $i) . ' readers');
            $this->assertTrue($reader->isAcquired());
            $reader->release();
            $this->assertFalse($reader->isAcquired());
        }
        $this->assertSame(0, $this->raw->lLen('{catalog}:rw:queue'), 'a non-blocking attempt stayed queued');
        $this->assertTrue($writer->acquire());
        $this->assertSame([self::WRITER_PERMITS], array_values($this->holders('catalog', 'rw')));

        // The writer excludes readers and writers.
        $this->assertFalse($this->otherFactory()->createLock('catalog')->acquireRead());
        $this->assertFalse($this->otherFactory()->createLock('catalog')->acquire());
        try {
            (new SharedStore(new Client($this->server->url())))->save(new Key('catalog'));
            $this->fail('a non-blocking save of a held lock succeeded');
        } catch (LockConflictedException $e) {
            $this->assertInstanceOf(LockTimeout::class, $e->getPrevious());
        }
        // The plain lock of the same name (RedisLock\Symfony\Store) is another thing.
        $plain = (new LockFactory(new Store($this->client)))->createLock('catalog', 30.0);
        $this->assertTrue($plain->acquire());
        $plain->release();

        $writer->release();
        $this->assertFalse($writer->isAcquired());
        $this->assertTrue($this->nothingLeft('catalog', 'rw'), 'the release left keys behind');
        $this->assertSame([], $this->raw->keys('*catalog*'));
    }

    public function testAQueuedWriterStopsNewReadersAndIsHandedTheLockByTheRelease(): void
    {
        $reader = $this->factory->createLock('feed', 30.0);
        $this->assertTrue($reader->acquireRead());
        [$in, $out] = $this->php(<<<'PHP'
            $client = new RedisLock\Client($url);
            $lock = (new Symfony\Component\Lock\LockFactory(new RedisLock\Symfony\SharedStore($client, waitTimeout: 30.0)))
                ->createLock('feed', 30.0);
            $lock->acquire(true);
            echo 'writing, handed over: ', $client->stats()['acquired_handed_over'], "\n";
            fgets(STDIN);
            $lock->release();
            echo "released\n";
            PHP);
        $this->assertTrue(waitUntil(fn() => $this->raw->lLen('{feed}:rw:queue') === 1, 20), 'the writer never queued');

        // Only a reader holds the lock, yet a new reader is refused: the
        // writer waits first. (Symfony's RedisStore would let it in.)
        $late = $this->otherFactory()->createLock('feed', 30.0);
        $this->assertFalse($late->acquireRead(), 'a new reader got in ahead of the queued writer');
        $this->assertSame([1], array_values($this->holders('feed', 'rw')));

        $reader->release();
        $this->assertSame("writing, handed over: 1\n", $this->line($out), 'the writer was not handed the lock by the release');
        $this->assertSame([self::WRITER_PERMITS], array_values($this->holders('feed', 'rw')));
        $this->assertFalse($late->acquireRead(), 'a reader got in beside the writer');
        fwrite($in, "go\n");
        $this->assertSame("released\n", $this->line($out));
        $this->childrenExited();
        $this->assertTrue($late->acquireRead());
        $late->release();
        $this->assertTrue($this->nothingLeft('feed', 'rw'));
    }

    public function testAStreamOfReadersDoesNotStarveAWriter(): void
    {
        // Three readers in other processes read hand over hand: each takes
        // its next read before it lets go of the one it holds, so the lock
        // is never free of readers. Under a lock that prefers readers a
        // writer never gets in; here the queued writer stops new readers
        // (the next read is refused: the reader lets go and queues behind
        // the writer), so the last reader's release hands the writer the
        // lock. A reader that sees the writer's flag while it reads counts
        // a violation.
        for ($i = 0; $i < 3; $i++) {
            $this->php(<<<'PHP'
                $raw = new Redis();
                $raw->connect('127.0.0.1', $port);
                $factory = new Symfony\Component\Lock\LockFactory(
                    new RedisLock\Symfony\SharedStore(new RedisLock\Client($url), waitTimeout: 30.0));
                $held = $factory->createLock('stream', 30.0);
                $held->acquireRead(true);
                echo "reading\n";
                while (!$raw->exists('stop')) {
                    usleep(20000);
                    if ($raw->exists('writing')) {
                        $raw->incr('violations');
                    }
                    $next = $factory->createLock('stream', 30.0);
                    if ($next->acquireRead()) {
                        $held->release();
                    } else {
                        $raw->incr('refused');
                        $held->release();
                        $next->acquireRead(true);
                    }
                    $raw->incr('reads');
                    $held = $next;
                }
                $held->release();
                PHP);
        }
        foreach ($this->stdouts as $out) {
            $this->assertSame("reading\n", $this->line($out));
        }
        $this->assertTrue(waitUntil(fn() => (int)$this->raw->get('reads') >= 10, 20), 'the readers do not read on');

        // Polling, as Symfony's Lock does with a store that cannot block,
        // never gets in: a try that fails does not queue.
        $polling = $this->otherFactory()->createLock('stream', 30.0);
        for ($i = 0; $i < 10; $i++) {
            $this->assertFalse($polling->acquire(), 'the lock was free of readers');
            usleep(50000);
        }
        $this->assertSame(0, (int)$this->raw->get('refused'), 'a writer that only tries stopped a reader');

        $writer = (new LockFactory(new SharedStore($this->client, waitTimeout: 30.0)))->createLock('stream', 30.0);
        $this->assertTrue($writer->acquire(true));
        $this->raw->set('writing', '1');
        $this->assertSame(1, $this->client->stats()['acquired_handed_over'], "the writer was not handed the lock by a reader's release");
        $this->assertSame([self::WRITER_PERMITS], array_values($this->holders('stream', 'rw')));
        $this->assertSame(3, (int)$this->raw->get('refused'), 'each reader must have been refused once to let go');
        $reads = (int)$this->raw->get('reads');
        // Every reader is queued behind the writer now: none reads on.
        usleep(300000);
        $this->assertSame($reads, (int)$this->raw->get('reads'), 'a reader got in while the writer held the lock');
        $this->raw->del('writing');
        $writer->release();

        $this->assertTrue(waitUntil(fn() => (int)$this->raw->get('reads') >= $reads + 6, 20), 'the readers did not read on after the writer');
        $this->raw->set('stop', '1');
        $this->childrenExited();
        $this->assertFalse($this->raw->get('violations'), 'a reader read while the writer held the lock');
        $this->assertTrue($this->nothingLeft('stream', 'rw'));
    }

    public function testPromotionAndDemotionLetGoOfOneSideThenTakeTheOther(): void
    {
        $key = new Key('doc');
        $mine = $this->factory->createLockFromKey($key, 30.0);
        $theirs = $this->otherFactory()->createLock('doc', 30.0);
        $this->assertTrue($mine->acquireRead());
        $this->assertTrue($this->store->isRead($key));
        $this->assertTrue($theirs->acquireRead());

        // Promotion beside another reader: the read is let go first, then
        // the write is refused. The Key holds nothing; the other reader
        // keeps its read.
        $this->assertFalse($mine->acquire(), 'promoted beside another reader');
        $this->assertFalse($mine->isAcquired(), 'a failed promotion kept a side');
        $this->assertFalse($this->store->isRead($key));
        $this->assertNull($this->store->fence($key));
        $this->assertSame([1], array_values($this->holders('doc', 'rw')));
        $this->assertTrue($theirs->isAcquired());
        $theirs->release();

        // The only reader is promoted at once: a new acquisition, alone.
        $this->assertTrue($mine->acquireRead());
        $readFence = $this->store->fence($key);
        $this->assertTrue($mine->acquire());
        $this->assertFalse($this->store->isRead($key));
        $this->assertGreaterThan($readFence, $this->store->fence($key));
        $this->assertSame([self::WRITER_PERMITS], array_values($this->holders('doc', 'rw')));
        $this->assertFalse($theirs->acquireRead());

        // The side held, again: the same holder, its TTL set to the
        // store's initial one (300 s) again.
        $handle = $key->getState(SharedStore::class);
        $fence = $this->store->fence($key);
        $this->store->save($key);
        $this->assertSame($handle, $key->getState(SharedStore::class));
        $this->assertSame($fence, $this->store->fence($key), 'a re-save is not a new acquisition');
        $this->assertGreaterThan(290000, $this->leaseMs('doc', 'rw', $handle));

        // Demotion: the write is let go, the read taken; others read along.
        $this->assertTrue($mine->acquireRead());
        $this->assertTrue($this->store->isRead($key));
        $this->assertTrue($theirs->acquireRead(), 'no reader beside a demoted writer');
        $this->assertSame([1, 1], array_values($this->holders('doc', 'rw')));

        // A blocking promotion waits for the other reader to leave.
        [$in, $out] = $this->php(<<<'PHP'
            $lock = (new Symfony\Component\Lock\LockFactory(new RedisLock\Symfony\SharedStore(new RedisLock\Client($url))))
                ->createLock('doc', 30.0);
            $lock->acquireRead();
            echo "reading\n";
            fgets(STDIN);
            $lock->release();
            PHP);
        $this->assertSame("reading\n", $this->line($out));
        $theirs->release();
        $promoted = (new LockFactory(new SharedStore($this->client, waitTimeout: 30.0)))->createLockFromKey($key, 30.0);
        $pid = pcntl_fork();
        if ($pid === 0) {
            // Let the child's reader go once the promotion waits.
            waitUntil(fn() => $this->server->raw()->lLen('{doc}:rw:queue') === 1, 20);
            fwrite($in, "go\n");
            posix_kill(posix_getpid(), SIGKILL);
        }
        $handed = $this->client->stats()['acquired_handed_over'];
        $this->assertTrue($promoted->acquire(true));
        pcntl_waitpid($pid, $status);
        $this->assertSame($handed + 1, $this->client->stats()['acquired_handed_over'], 'the promotion was not handed the lock');
        $this->assertSame([self::WRITER_PERMITS], array_values($this->holders('doc', 'rw')));
        $this->childrenExited();
        $promoted->release();
        $this->assertTrue($this->nothingLeft('doc', 'rw'));
    }

    public function testRefreshReleaseAndALostLease(): void
    {
        $key = new Key('page');
        $lock = $this->factory->createLockFromKey($key, 30.0);
        $this->assertTrue($lock->acquireRead());
        $handle = $key->getState(SharedStore::class);
        $ms = $this->leaseMs('page', 'rw', $handle);
        $this->assertTrue($ms > 20000 && $ms <= 30000, "the Lock's 30 s TTL was not applied: $ms ms left");
        $lock->refresh(10.0);
        $ms = $this->leaseMs('page', 'rw', $handle);
        $this->assertTrue($ms > 5000 && $ms <= 10000, "refresh(10) left $ms ms");
        $this->assertTrue($lock->isAcquired());
        $this->assertIsInt($this->store->fence($key));
        try {
            serialize($key);
            $this->fail('a Key holding a lock handle was serialized');
        } catch (UnserializableKeyException) {
        }

        // The lease runs out on the server (its score put in the past):
        // the store asks the server, so the Lock knows at once.
        $this->raw->zAdd('{page}:rw', ['XX'], 1, $handle->token());
        $this->assertFalse($this->store->exists($key));
        $this->assertFalse($lock->isAcquired());
        try {
            $lock->refresh();
            $this->fail('refreshed a lease that ran out');
        } catch (LockConflictedException) {
        }
        $this->assertFalse($lock->isAcquired());
        $this->assertNull($this->store->fence($key));
        // Another owner takes it; the old Key's release leaves it alone.
        $theirs = $this->otherFactory()->createLock('page', 30.0);
        $this->assertTrue($theirs->acquire());
        $lock->release();
        $this->assertTrue($theirs->isAcquired());
        $this->assertSame([self::WRITER_PERMITS], array_values($this->holders('page', 'rw')));
        $theirs->release();

        // A store call that outlasts its TTL: expired, and let go.
        $key = new Key('page');
        $this->store->saveRead($key);
        try {
            // 1 µs cannot cover a round trip: the Key is expired on return.
            $this->store->putOffExpiration($key, 0.000001);
            $this->fail('no LockExpiredException');
        } catch (LockExpiredException) {
        }
        $this->assertFalse($this->store->exists($key));
        $this->assertTrue($this->nothingLeft('page', 'rw'), 'the expired lock was not released');
    }

    public function testAtMostTheLimitOfPermitsWithWeights(): void
    {
        $factory = new SemaphoreFactory($this->semaphores);
        $a = $factory->createSemaphore('pool', 5, 2, 30.0);
        $b = $factory->createSemaphore('pool', 5, 2, 30.0);
        $c = $factory->createSemaphore('pool', 5, 2, 30.0);
        $d = $factory->createSemaphore('pool', 5, 1, 30.0);
        $e = $factory->createSemaphore('pool', 5, 1, 30.0);
        $this->assertTrue($a->acquire());
        $this->assertTrue($b->acquire());
        $this->assertFalse($c->acquire(), 'took 2 permits with 1 of 5 free');
        $this->assertTrue($d->acquire());
        $this->assertFalse($e->acquire(), 'took a sixth permit of 5');
        $this->assertSame([1, 2, 2], $this->sorted($this->holders('pool', 'sem')));
        $this->assertSame(0, $this->raw->exists('pool'), 'the plain lock key was written');
        $a->release();
        $this->assertFalse($a->isAcquired());
        $this->assertTrue($c->acquire());
        $this->assertFalse($e->acquire());
        $this->assertSame([1, 2, 2], $this->sorted($this->holders('pool', 'sem')));
        foreach ([$b, $c, $d] as $s) {
            $this->assertTrue($s->isAcquired());
            $s->release();
        }
        $this->assertTrue($this->nothingLeft('pool', 'sem'), 'the releases left keys behind');
        $this->assertSame([], $this->raw->keys('*pool*'));
    }

    /** @param array<string, int> $holders @return list<int> */
    private function sorted(array $holders): array
    {
        $permits = array_values($holders);
        sort($permits);
        return $permits;
    }

    public function testWeightsFromManyProcessesNeverExceedTheLimit(): void
    {
        // Four processes with weights 3, 3, 2, 2 share 4 permits (only the
        // two 2s fit together), each taking and releasing 15 times through
        // a blocking store, all starting at once. Each adds its weight to a
        // counter while it holds and records the sum it saw.
        foreach ([3, 3, 2, 2] as $weight) {
            $this->php(<<<PHP
                \$raw = new Redis();
                \$raw->connect('127.0.0.1', \$port);
                \$client = new RedisLock\\Client(\$url);
                \$factory = new Symfony\\Component\\Semaphore\\SemaphoreFactory(
                    new RedisLock\\Symfony\\SemaphoreStore(\$client, waitTimeout: 30.0));
                echo "ready\\n";
                while (!\$raw->exists('go')) {
                    usleep(2000);
                }
                for (\$i = 0; \$i < 15; \$i++) {
                    \$s = \$factory->createSemaphore('quota', 4, $weight, 30.0);
                    if (!\$s->acquire()) {
                        exit(1);
                    }
                    \$raw->rPush('seen', \$raw->incrBy('in-use', $weight));
                    usleep(5000);
                    \$raw->decrBy('in-use', $weight);
                    \$s->release();
                }
                \$stats = \$client->stats();
                echo 'waited ', \$stats['acquired_handed_over'] + \$stats['acquired_after_wait'], "\\n";
                PHP);
        }
        foreach ($this->stdouts as $out) {
            $this->assertSame("ready\n", $this->line($out));
        }
        $this->raw->set('go', '1');
        $waited = 0;
        foreach ($this->stdouts as $out) {
            $line = $this->line($out);
            $this->assertMatchesRegularExpression('/^waited \d+\n$/', $line, 'a process did not finish');
            $waited += (int)substr($line, 7);
        }
        $this->childrenExited();
        $seen = array_map('intval', $this->raw->lRange('seen', 0, -1));
        $this->assertCount(60, $seen, 'not every acquisition was recorded');
        $this->assertLessThanOrEqual(4, max($seen), 'more than 4 permits were held at once');
        $this->assertTrue($this->nothingLeft('quota', 'sem'));
    }

    public function testABlockingSemaphoreStoreIsWokenByAReleaseInAnotherProcess(): void
    {
        [$in, $out] = $this->php(<<<'PHP'
            $semaphore = (new Symfony\Component\Semaphore\SemaphoreFactory(
                new RedisLock\Symfony\SemaphoreStore(new RedisLock\Client($url))))->createSemaphore('exports', 2, 2, 30.0);
            echo $semaphore->acquire() ? "held\n" : "refused\n";
            fgets(STDIN);
            $semaphore->release();
            echo "released\n";
            PHP);
        $this->assertSame("held\n", $this->line($out));

        // The default store tries once, as Symfony's RedisStore.
        $this->assertFalse((new SemaphoreFactory($this->semaphores))->createSemaphore('exports', 2)->acquire());
        // A bounded wait runs out: counted as such, and leaves the queue.
        $timedOut = $this->client->stats()['acquire_timed_out'];
        $t = hrtime(true);
        $bounded = new SemaphoreFactory(new SemaphoreStore($this->client, waitTimeout: 0.3));
        $this->assertFalse($bounded->createSemaphore('exports', 2)->acquire());
        $this->assertGreaterThanOrEqual(250, (hrtime(true) - $t) / 1e6, 'a 0.3 s wait did not wait');
        $this->assertSame($timedOut + 1, $this->client->stats()['acquire_timed_out']);
        $this->assertSame(0, $this->raw->lLen('{exports}:sem:queue'), 'the waiter that gave up is still queued');

        // A blocking store waits, woken by the child's release.
        $pid = pcntl_fork();
        if ($pid === 0) {
            waitUntil(fn() => $this->server->raw()->lLen('{exports}:sem:queue') === 1, 20);
            fwrite($in, "go\n");
            posix_kill(posix_getpid(), SIGKILL);
        }
        $key = new SemaphoreKey('exports', 2);
        $blocking = new SemaphoreStore($this->client, waitTimeout: 30.0);
        $semaphore = (new SemaphoreFactory($blocking))->createSemaphoreFromKey($key, 30.0);
        $this->assertTrue($semaphore->acquire());
        pcntl_waitpid($pid, $status);
        $this->assertSame(1, $this->client->stats()['acquired_handed_over'], 'the permit was not handed over by the release');
        $this->assertSame("released\n", $this->line($out));
        $this->childrenExited();
        $this->assertTrue($semaphore->isAcquired());
        $this->assertIsInt($blocking->fence($key));
        $this->assertSame([1], array_values($this->holders('exports', 'sem')));
        $semaphore->release();
        $this->assertNull($blocking->fence($key));
        $this->assertTrue($this->nothingLeft('exports', 'sem'));
    }

    public function testSemaphoreRefreshReleaseAndALostLease(): void
    {
        $key = new SemaphoreKey('jobs', 3);
        $semaphore = (new SemaphoreFactory($this->semaphores))->createSemaphoreFromKey($key, 30.0);
        $this->assertTrue($semaphore->acquire());
        $handle = $key->getState(SemaphoreStore::class);
        $ms = $this->leaseMs('jobs', 'sem', $handle);
        $this->assertTrue($ms > 20000 && $ms <= 30000, "the 30 s TTL was not applied: $ms ms left");
        $semaphore->refresh(10.0);
        $ms = $this->leaseMs('jobs', 'sem', $handle);
        $this->assertTrue($ms > 5000 && $ms <= 10000, "refresh(10) left $ms ms");
        $left = $semaphore->getRemainingLifetime();
        $this->assertTrue($left > 5.0 && $left <= 10.0, "refresh(10) left a lifetime of $left s");
        // Saved again: the same holder, its TTL set again.
        $this->semaphores->save($key, 20.0);
        $this->assertSame($handle, $key->getState(SemaphoreStore::class));
        $this->assertGreaterThan(10000, $this->leaseMs('jobs', 'sem', $handle));
        $this->assertCount(1, $this->holders('jobs', 'sem'));
        try {
            serialize($key);
            $this->fail('a Key holding a permit handle was serialized');
        } catch (\Exception $e) {
            $this->assertStringContainsString('RedisLock\\Lock cannot be serialized', $e->getMessage());
        }

        // The lease runs out on the server (its score put in the past):
        // the store asks the server, so the Semaphore knows at once.
        $this->raw->zAdd('{jobs}:sem', ['XX'], 1, $handle->token());
        $this->assertFalse($semaphore->isAcquired());
        try {
            $semaphore->refresh();
            $this->fail('refreshed a lease that ran out');
        } catch (SemaphoreExpiredException) {
        }
        $this->assertFalse($semaphore->isAcquired());
        $semaphore->release(); // silent: nothing held
        try {
            (new SemaphoreFactory($this->semaphores))->createSemaphore('never', 3)->refresh();
            $this->fail('refreshed a semaphore never acquired');
        } catch (SemaphoreExpiredException) {
        }

        // A store call that outlasts its TTL: expired, and let go.
        $key = new SemaphoreKey('jobs', 3);
        $this->semaphores->save($key, 30.0);
        try {
            $this->semaphores->putOffExpiration($key, 0.000001);
            $this->fail('no SemaphoreExpiredException');
        } catch (SemaphoreExpiredException) {
        }
        $this->assertFalse($this->semaphores->exists($key));
        try {
            $this->semaphores->save(new SemaphoreKey('jobs', 3), 0.000001);
            $this->fail('no SemaphoreAcquiringException');
        } catch (SemaphoreAcquiringException) {
        }
        $this->assertTrue($this->nothingLeft('jobs', 'sem'), 'the expired permits were not released');
    }

    public function testBadInput(): void
    {
        $cases = [
            'shared: initial TTL 0' => [fn() => new SharedStore($this->client, 0.0), InvalidTtlException::class],
            'shared: initial TTL over 30 days' => [fn() => new SharedStore($this->client, 31 * 86400.0), InvalidTtlException::class],
            'shared: negative wait' => [fn() => new SharedStore($this->client, waitTimeout: -1.0), InvalidArgumentException::class],
            'shared: refresh by a negative TTL' => [fn() => $this->store->putOffExpiration(new Key('x'), -1.0), InvalidTtlException::class],
            'shared: empty lock name' => [fn() => $this->store->saveRead(new Key('')), InvalidArgumentException::class],
            'shared: refresh of a Key never saved' => [fn() => $this->store->putOffExpiration(new Key('x'), 1.0), LockConflictedException::class],
            'semaphore: negative wait' => [fn() => new SemaphoreStore($this->client, waitTimeout: -1.0), SemaphoreInvalidArgument::class],
            'semaphore: TTL 0' => [fn() => $this->semaphores->save(new SemaphoreKey('x', 2), 0.0), SemaphoreInvalidArgument::class],
            'semaphore: TTL over 30 days' => [fn() => $this->semaphores->save(new SemaphoreKey('x', 2), 31 * 86400.0), SemaphoreInvalidArgument::class],
            'semaphore: limit over 1,000,000' => [fn() => $this->semaphores->save(new SemaphoreKey('x', 1000001), 30.0), SemaphoreInvalidArgument::class],
            'semaphore: empty name' => [fn() => $this->semaphores->save(new SemaphoreKey('', 2), 30.0), SemaphoreInvalidArgument::class],
            'semaphore: refresh by a negative TTL' => [fn() => $this->semaphores->putOffExpiration(new SemaphoreKey('x', 2), -1.0), SemaphoreInvalidArgument::class],
        ];
        foreach ($cases as $what => [$fn, $class]) {
            try {
                $fn();
                $this->fail("$what was accepted");
            } catch (\Throwable $e) {
                $this->assertInstanceOf($class, $e, "$what: " . $e->getMessage());
            }
        }
        // Through Symfony's Semaphore: a RuntimeException, the store's error inside.
        try {
            (new SemaphoreFactory($this->semaphores))->createSemaphore('x', 1000001)->acquire();
            $this->fail('a limit over 1,000,000 was accepted');
        } catch (SemaphoreRuntimeException $e) {
            $this->assertInstanceOf(SemaphoreInvalidArgument::class, $e->getPrevious());
        }
        $this->assertFalse($this->store->exists(new Key('never-saved')));
        $this->store->delete(new Key('never-saved')); // silent
        $this->assertFalse($this->semaphores->exists(new SemaphoreKey('never-saved', 2)));
        $this->semaphores->delete(new SemaphoreKey('never-saved', 2)); // silent
        $this->assertSame([], $this->raw->keys('*'), 'bad input wrote to the server');
    }
}
