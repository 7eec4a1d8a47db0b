<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\LockNotOwned;
use RedisLock\Prometheus;

/**
 * Client::stats(), its Prometheus samples, and synchronized() after a lost
 * lock. Hand-offs need a second process: a pcntl_fork() child with its own
 * client waits for (or hands over) the lock while this process does the
 * other side; a waiter shows in the lock's queue key, {KEY}:queue.
 */
final class StatsTest extends TestCase
{
    private const COUNTERS = [
        'acquired_at_once', 'acquired_after_wait', 'acquired_handed_over', 'acquire_timed_out', 'acquire_errors',
        'releases_ok', 'releases_not_owner', 'extends_ok', 'extends_lost', 'renewals_ok', 'renewals_lost',
        'locks_lost', 'handoffs_given', 'handoffs_received', 'connection_errors', 'reconnects',
        'held_now', 'waiters_now',
    ];

    /** Appended after the histograms (the C struct only grows at its end). */
    private const BY_KIND = [
        'acquired_locks', 'acquired_semaphores', 'acquired_reads', 'acquired_writes', 'permits_held_now',
    ];

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

    /**
     * Run $body in a pcntl_fork() child, which then dies by SIGKILL (no
     * PHP shutdown runs in it); returns its pid. The child's verdict goes to
     * the raw key "verdict:PID".
     */
    private function child(callable $body): int
    {
        $pid = pcntl_fork();
        if ($pid === 0) {
            $verdict = 'fail';
            try {
                $verdict = $body() ? 'ok' : 'fail';
            } catch (\Throwable $e) {
                $verdict = "child: $e";
            }
            $this->server->raw()->set('verdict:' . posix_getpid(), $verdict);
            posix_kill(posix_getpid(), SIGKILL);
        }
        $this->assertGreaterThan(0, $pid, 'pcntl_fork failed');
        return $pid;
    }

    private function assertChildSucceeded(int $pid): void
    {
        pcntl_waitpid($pid, $status);
        $this->assertSame('ok', $this->raw->get("verdict:$pid"));
        $this->raw->del("verdict:$pid");
    }

    /** Wait until $ok() holds; false after $seconds. */
    private static function until(callable $ok, float $seconds): bool
    {
        return waitUntil($ok, $seconds);
    }

    private function queued(string $key): bool
    {
        return $this->raw->lLen('{' . $key . '}:queue') > 0;
    }

    public function testAScriptedRunAddsUpExactly(): void
    {
        $atOnce = 5;
        $tryOnce = 3;
        $handoffs = 3;
        // Renewed every third of it: a pause of 2 s in the renewal thread,
        // far more than a busy machine makes, before it could expire.
        $ttl = 3000;
        $url = $this->server->url();

        // Acquisitions at once, held together, one extended.
        $locks = [];
        for ($i = 0; $i < $atOnce; $i++) {
            $locks[] = $this->client->acquire("s:once:$i", ttlMs: 30000, waitMs: 0);
        }
        $this->assertSame($atOnce, $this->client->stats()['held_now']);
        $locks[0]->extend(20000);
        foreach ($locks as $lock) {
            $lock->release();
        }

        // Try-once failures on a lock another client holds.
        $other = new Client($url);
        $busy = $other->acquire('s:busy', ttlMs: 30000);
        for ($i = 0; $i < $tryOnce; $i++) {
            $this->assertNull($this->client->tryAcquire('s:busy', ttlMs: 30000));
        }
        $busy->release();

        // Hand-offs given: a child waits, our release hands it the lock.
        for ($i = 0; $i < $handoffs; $i++) {
            $held = $this->client->acquire('s:give', ttlMs: 30000, waitMs: 0);
            $pid = $this->child(function () use ($url) {
                (new Client($url))->acquire('s:give', ttlMs: 30000, waitMs: 10000)->release();
                return true;
            });
            $this->assertTrue(self::until(fn () => $this->queued('s:give'), 10), 'the child never queued');
            $held->release();
            $this->assertChildSucceeded($pid);
        }

        // Hand-offs received: a child holds, we wait, its release hands us the lock.
        for ($i = 0; $i < $handoffs; $i++) {
            $pid = $this->child(function () use ($url) {
                $raw = $this->server->raw();
                $lock = (new Client($url))->acquire('s:recv', ttlMs: 30000, waitMs: 0);
                $raw->set('s:recv:held', '1');
                if (!self::until(fn () => $raw->lLen('{s:recv}:queue') > 0, 10)) {
                    return false;
                }
                usleep(20000); // the parent's wait lasts at least this
                $lock->release();
                return true;
            });
            $this->assertTrue(self::until(fn () => $this->raw->get('s:recv:held') === '1', 10), 'the child holds');
            $this->raw->del('s:recv:held');
            $this->client->acquire('s:recv', ttlMs: 30000, waitMs: 10000)->release();
            $this->assertChildSucceeded($pid);
        }

        // A release that finds the lock taken over.
        $lock = $this->client->acquire('s:notowner', ttlMs: 30000);
        $this->raw->set('s:notowner', 'intruder');
        try {
            $lock->release();
            $this->fail('released a lock taken over');
        } catch (LockNotOwned) {
        }
        $this->raw->del('s:notowner');

        // An extend that finds it taken over, then its release.
        $lock = $this->client->acquire('s:extend', ttlMs: 30000);
        $this->raw->set('s:extend', 'intruder');
        try {
            $lock->extend(30000);
            $this->fail('extended a lock taken over');
        } catch (LockNotOwned) {
        }
        $this->assertTrue($lock->isLost());
        try {
            $lock->release();
            $this->fail('released a lost lock');
        } catch (LockNotOwned) {
        }
        $this->raw->del('s:extend');

        // Background renewal finds it taken over, within one TTL (it
        // renews every third of it). How many renewals succeeded before
        // the theft depends on the scheduler: at least two, then none.
        $lock = $this->client->acquire('s:renew', ttlMs: $ttl, autoRenew: true);
        $this->assertTrue(self::until(fn () => $this->client->stats()['renewals_ok'] >= 2, 15), 'no two renewals');
        $stolen = hrtime(true);
        $this->raw->set('s:renew', 'intruder');
        $this->assertTrue(self::until(fn () => $lock->isLost(), 10), 'renewal never found the theft');
        $ms = (hrtime(true) - $stolen) / 1e6;
        $this->assertLessThanOrEqual($ttl, $ms, "found lost $ms ms after the theft");
        $renewals = $this->client->stats()['renewals_ok'];
        $this->assertGreaterThanOrEqual(2, $renewals);
        try {
            $lock->release();
            $this->fail('released a lost lock');
        } catch (LockNotOwned) {
        }
        $this->raw->del('s:renew');

        $taken = $atOnce + $handoffs + 3;
        $s = $this->client->stats();
        $expected = [
            'acquired_at_once' => $taken,
            'acquired_after_wait' => 0,
            'acquired_handed_over' => $handoffs,
            'acquire_timed_out' => $tryOnce,
            'acquire_errors' => 0,
            'releases_ok' => $atOnce + 2 * $handoffs,
            'releases_not_owner' => 3,
            'extends_ok' => 1,
            'extends_lost' => 1,
            'renewals_ok' => $renewals,
            'renewals_lost' => 1,
            'locks_lost' => 3,
            'handoffs_given' => $handoffs,
            'handoffs_received' => $handoffs,
            'connection_errors' => 0,
            'reconnects' => 0,
            'held_now' => 0,
            'waiters_now' => 0,
        ];
        foreach ($expected as $key => $value) {
            $this->assertSame($value, $s[$key], $key);
        }
        $this->assertHistogram($s['wait'], $taken + $handoffs + $tryOnce);
        $this->assertHistogram($s['held'], $taken + $handoffs);
        // Our waits for a hand-off lasted until the child saw us queued,
        // and then 20 ms.
        $this->assertGreaterThan(0.02, $s['wait']['max']);

        $o = $other->stats();
        $this->assertSame([1, 1, 0], [$o['acquired_at_once'], $o['releases_ok'], $o['acquire_timed_out']]);
    }

    /** @param array<string, mixed> $h */
    private function assertHistogram(array $h, int $count): void
    {
        $this->assertSame($count, $h['count']);
        $this->assertSame($count, array_sum($h['buckets']));
        $this->assertTrue(
            0 < $h['p50'] && $h['p50'] <= $h['p90'] && $h['p90'] <= $h['p99'] && $h['p99'] <= $h['max'],
            json_encode($h)
        );
        $this->assertTrue($h['max'] <= $h['sum'] && $h['sum'] <= $count * $h['max'], json_encode($h));
    }

    public function testTheShapeOfStats(): void
    {
        $fresh = $this->client->stats();
        $this->assertSame(array_merge(self::COUNTERS, ['wait', 'held'], self::BY_KIND), array_keys($fresh));
        foreach (array_merge(self::COUNTERS, self::BY_KIND) as $key) {
            $this->assertSame(0, $fresh[$key], $key);
        }
        $this->client->acquire('shape', ttlMs: 5000)->release();
        $s = $this->client->stats();
        $this->assertSame(1, $s['acquired_at_once']);
        $this->assertSame(1, $s['acquired_locks']);
        $this->assertSame(0, $s['acquired_semaphores']);
        foreach (['wait', 'held'] as $which) {
            $h = $s[$which];
            $this->assertSame(['count', 'sum', 'max', 'p50', 'p90', 'p99', 'buckets', 'bounds'], array_keys($h));
            $this->assertSame(1, $h['count']);
            foreach (['sum', 'max', 'p50', 'p90', 'p99'] as $k) {
                $this->assertIsFloat($h[$k], "$which $k");
                $this->assertGreaterThan(0.0, $h[$k], "$which $k");
                $this->assertLessThan(5.0, $h[$k], "$which $k");
            }
            $this->assertCount(23, $h['buckets']);
            $this->assertTrue(array_is_list($h['buckets']));
            $this->assertContainsOnly('int', $h['buckets']);
            $this->assertCount(22, $h['bounds']);
            $this->assertTrue(array_is_list($h['bounds']));
            $this->assertContainsOnly('float', $h['bounds']);
            $this->assertSame(0.00005, $h['bounds'][0]);
            $this->assertSame(3600.0, $h['bounds'][21]);
            for ($i = 1; $i < 22; $i++) {
                $this->assertGreaterThan($h['bounds'][$i - 1], $h['bounds'][$i]);
            }
            // The one duration is in the bucket whose bounds hold it.
            $i = array_search(1, $h['buckets'], true);
            $this->assertLessThanOrEqual($h['bounds'][$i], $h['max']);
            $this->assertGreaterThan($i === 0 ? 0.0 : $h['bounds'][$i - 1], $h['max']);
        }
        $this->assertSame(0, $fresh['wait']['count']);
        $this->assertSame(0.0, $fresh['wait']['p99']);
    }

    /** A stats array with every counter and gauge different, and small histograms. */
    private static function sample(): array
    {
        $s = [];
        foreach (array_merge(self::COUNTERS, self::BY_KIND) as $i => $key) {
            $s[$key] = 10 * ($i + 1);
        }
        $bounds = (new Client('redis://127.0.0.1:1'))->stats()['wait']['bounds'];
        $buckets = array_fill(0, 23, 0);
        $buckets[4] = 3;  // (0.5 ms, 1 ms]
        $buckets[13] = 1; // (0.5 s, 1 s]
        $buckets[22] = 1; // over an hour
        $s['wait'] = ['count' => 5, 'sum' => 4000.0035, 'max' => 3999.0, 'p50' => 0.001, 'p90' => 3999.0,
            'p99' => 3999.0, 'buckets' => $buckets, 'bounds' => $bounds];
        $s['held'] = ['count' => 0, 'sum' => 0.0, 'max' => 0.0, 'p50' => 0.0, 'p90' => 0.0, 'p99' => 0.0,
            'buckets' => array_fill(0, 23, 0), 'bounds' => $bounds];
        return $s;
    }

    /**
     * @param list<array<string, mixed>> $rows
     * @return array<string, int|float> "name{label=value}" => value
     */
    private static function byName(array $rows): array
    {
        $out = [];
        foreach ($rows as $r) {
            $labels = [];
            foreach ($r['labelNames'] as $i => $n) {
                $labels[] = $n . '=' . $r['labelValues'][$i];
            }
            $out[$r['namespace'] . '_' . $r['name'] . ($labels ? '{' . implode(',', $labels) . '}' : '')] = $r['value'];
        }
        return $out;
    }

    public function testPrometheusRows(): void
    {
        $s = self::sample();
        $rows = Prometheus::rows($s);
        foreach ($rows as $r) {
            $this->assertSame(['type', 'namespace', 'name', 'help', 'labelNames', 'labelValues', 'value'], array_keys($r));
            $this->assertSame('redislock', $r['namespace']);
            $this->assertStringStartsNotWith('redislock_', $r['name']);
            $this->assertMatchesRegularExpression('/^[a-zA-Z_:][a-zA-Z0-9_:]*$/', $r['namespace'] . '_' . $r['name']);
            $this->assertNotSame('', $r['help']);
            $this->assertCount(count($r['labelNames']), $r['labelValues']);
            $this->assertContainsOnly('string', $r['labelValues']);
        }
        $types = [];
        foreach ($rows as $r) {
            $base = preg_replace('/_(bucket|sum|count)$/', '', $r['name']);
            $types['redislock_' . ($r['type'] === 'histogram' ? $base : $r['name'])][$r['type']] = true;
        }
        $this->assertSame([
            'redislock_acquisitions_total' => ['counter' => true],
            'redislock_releases_total' => ['counter' => true],
            'redislock_extends_total' => ['counter' => true],
            'redislock_renewals_total' => ['counter' => true],
            'redislock_locks_lost_total' => ['counter' => true],
            'redislock_handoffs_total' => ['counter' => true],
            'redislock_connection_errors_total' => ['counter' => true],
            'redislock_reconnects_total' => ['counter' => true],
            'redislock_acquisitions_by_kind_total' => ['counter' => true],
            'redislock_locks_held' => ['gauge' => true],
            'redislock_waiters' => ['gauge' => true],
            'redislock_permits_held' => ['gauge' => true],
            'redislock_acquire_wait_seconds' => ['histogram' => true],
            'redislock_held_seconds' => ['histogram' => true],
        ], $types);

        $v = self::byName($rows);
        $this->assertSame(2 * 23 + 2 * 2 + 23, count($v), 'one row per sample');
        $this->assertSame($s['acquired_at_once'], $v['redislock_acquisitions_total{outcome=at_once}']);
        $this->assertSame($s['acquired_after_wait'], $v['redislock_acquisitions_total{outcome=after_wait}']);
        $this->assertSame($s['acquired_handed_over'], $v['redislock_acquisitions_total{outcome=handed_over}']);
        $this->assertSame($s['acquire_timed_out'], $v['redislock_acquisitions_total{outcome=timed_out}']);
        $this->assertSame($s['acquire_errors'], $v['redislock_acquisitions_total{outcome=error}']);
        $this->assertSame($s['releases_ok'], $v['redislock_releases_total{outcome=ok}']);
        $this->assertSame($s['releases_not_owner'], $v['redislock_releases_total{outcome=not_owner}']);
        $this->assertSame($s['extends_ok'], $v['redislock_extends_total{outcome=ok}']);
        $this->assertSame($s['extends_lost'], $v['redislock_extends_total{outcome=lost}']);
        $this->assertSame($s['renewals_ok'], $v['redislock_renewals_total{outcome=ok}']);
        $this->assertSame($s['renewals_lost'], $v['redislock_renewals_total{outcome=lost}']);
        $this->assertSame($s['locks_lost'], $v['redislock_locks_lost_total']);
        $this->assertSame($s['handoffs_given'], $v['redislock_handoffs_total{direction=given}']);
        $this->assertSame($s['handoffs_received'], $v['redislock_handoffs_total{direction=received}']);
        $this->assertSame($s['connection_errors'], $v['redislock_connection_errors_total']);
        $this->assertSame($s['reconnects'], $v['redislock_reconnects_total']);
        $this->assertSame($s['held_now'], $v['redislock_locks_held']);
        $this->assertSame($s['waiters_now'], $v['redislock_waiters']);
        $this->assertSame($s['acquired_locks'], $v['redislock_acquisitions_by_kind_total{kind=lock}']);
        $this->assertSame($s['acquired_semaphores'], $v['redislock_acquisitions_by_kind_total{kind=semaphore}']);
        $this->assertSame($s['acquired_reads'], $v['redislock_acquisitions_by_kind_total{kind=read}']);
        $this->assertSame($s['acquired_writes'], $v['redislock_acquisitions_by_kind_total{kind=write}']);
        $this->assertSame($s['permits_held_now'], $v['redislock_permits_held']);

        // Histograms: cumulative buckets under le, then sum and count.
        $les = [];
        foreach ($rows as $r) {
            if ($r['name'] === 'acquire_wait_seconds_bucket') {
                $les[] = $r['labelValues'][0];
            }
        }
        $this->assertSame(['5e-05', '0.0001', '0.00025', '0.0005', '0.001', '0.0025', '0.005', '0.01', '0.025',
            '0.05', '0.1', '0.25', '0.5', '1.0', '2.5', '5.0', '10.0', '30.0', '60.0', '300.0', '900.0', '3600.0',
            '+Inf'], $les);
        $w = 'redislock_acquire_wait_seconds';
        $this->assertSame(0, $v["{$w}_bucket{le=0.0005}"]);
        $this->assertSame(3, $v["{$w}_bucket{le=0.001}"]);
        $this->assertSame(3, $v["{$w}_bucket{le=0.5}"]);
        $this->assertSame(4, $v["{$w}_bucket{le=1.0}"]);
        $this->assertSame(4, $v["{$w}_bucket{le=3600.0}"]);
        $this->assertSame(5, $v["{$w}_bucket{le=+Inf}"]);
        $this->assertSame(5, $v["{$w}_count"]);
        $this->assertSame(4000.0035, $v["{$w}_sum"]);
        $this->assertSame(0, $v['redislock_held_seconds_bucket{le=+Inf}']);
        $this->assertSame(0.0, $v['redislock_held_seconds_sum']);

        // Increments since an earlier snapshot: counters and histogram
        // samples by their growth (from zero after a reset), gauges by their change.
        $later = $s;
        $later['acquired_at_once'] += 7;
        $later['held_now'] -= 4;
        $later['reconnects'] = 1; // below before: a reset
        $later['wait']['buckets'][13] += 2;
        $later['wait']['count'] += 2;
        $later['wait']['sum'] += 1.5;
        $d = self::byName(Prometheus::rows($later, $s));
        $this->assertSame(7, $d['redislock_acquisitions_total{outcome=at_once}']);
        $this->assertSame(0, $d['redislock_releases_total{outcome=ok}']);
        $this->assertSame(-4, $d['redislock_locks_held']);
        $this->assertSame(1, $d['redislock_reconnects_total']);
        $this->assertSame(0, $d["{$w}_bucket{le=0.5}"]);
        $this->assertSame(2, $d["{$w}_bucket{le=1.0}"]);
        $this->assertSame(2, $d["{$w}_bucket{le=+Inf}"]);
        $this->assertSame(2, $d["{$w}_count"]);
        $this->assertEqualsWithDelta(1.5, $d["{$w}_sum"], 1e-9);

        // A live client's stats go through as they are.
        $this->client->acquire('prom', ttlMs: 5000)->release();
        $live = self::byName(Prometheus::rows($this->client->stats()));
        $this->assertSame(1, $live['redislock_acquisitions_total{outcome=at_once}']);
        $this->assertSame(1, $live['redislock_held_seconds_count']);
        $this->assertSame(1, $live['redislock_held_seconds_bucket{le=+Inf}']);
        // By kind, and the permits a semaphore handle holds.
        $sem = $this->client->acquireSemaphore('prom', limit: 3, ttlMs: 5000, waitMs: 0, permits: 2);
        $read = $this->client->acquireRead('prom', ttlMs: 5000, waitMs: 0);
        $live = self::byName(Prometheus::rows($this->client->stats()));
        $this->assertSame(1, $live['redislock_acquisitions_by_kind_total{kind=lock}']);
        $this->assertSame(1, $live['redislock_acquisitions_by_kind_total{kind=semaphore}']);
        $this->assertSame(1, $live['redislock_acquisitions_by_kind_total{kind=read}']);
        $this->assertSame(0, $live['redislock_acquisitions_by_kind_total{kind=write}']);
        $this->assertSame(2, $live['redislock_permits_held']);
        $this->assertSame(2, $live['redislock_locks_held']);
        $sem->release();
        $read->release();
        $this->assertSame(0, $this->client->stats()['permits_held_now']);
    }

    public function testSynchronizedThrowsWhenTheLockWasLostWhileTheCallableRan(): void
    {
        // The release finds the key taken over.
        try {
            $this->client->synchronized('sync', function () {
                $this->raw->set('sync', 'intruder');
                return 'done';
            }, ttlMs: 30000);
            $this->fail('synchronized returned after its lock was taken over');
        } catch (LockNotOwned $e) {
            $this->assertStringContainsString('ran unprotected', $e->getMessage());
            $this->assertStringContainsString('"sync"', $e->getMessage());
            $this->assertInstanceOf(LockNotOwned::class, $e->getPrevious());
        }
        $this->assertSame('intruder', $this->raw->get('sync'), "the other owner's key was left alone");

        // Background renewal finds it taken over while the callable runs.
        try {
            $this->client->synchronized('renewed', function ($lock) {
                $this->raw->set('renewed', 'intruder');
                $this->assertTrue(self::until(fn () => $lock->isLost(), 10), 'renewal never found the theft');
                return 'done';
            }, ttlMs: 300, autoRenew: true);
            $this->fail('synchronized returned after renewal found its lock lost');
        } catch (LockNotOwned $e) {
            $this->assertStringContainsString('ran unprotected', $e->getMessage());
        }
        $this->assertSame('intruder', $this->raw->get('renewed'));

        // A callable that throws: its exception, not the loss.
        try {
            $this->client->synchronized('thrown', function () {
                $this->raw->set('thrown', 'intruder');
                throw new DomainException('boom');
            }, ttlMs: 30000);
            $this->fail('the exception was swallowed');
        } catch (DomainException $e) {
            $this->assertSame('boom', $e->getMessage());
        }
        $this->assertSame('intruder', $this->raw->get('thrown'));

        // Not lost: the value, and the lock released (a TTL that no pause
        // of a busy machine runs out).
        $this->assertSame(42, $this->client->synchronized('kept', fn () => 42, ttlMs: 10000, autoRenew: true));
        $this->assertFalse($this->raw->get('kept'));
        // Three releases found another owner's key (also the one after the
        // throw); two of them found the lock lost, the third freed it.
        $s = $this->client->stats();
        $this->assertSame([3, 2, 1, 0], [$s['releases_not_owner'], $s['locks_lost'], $s['releases_ok'], $s['held_now']]);
    }
}
