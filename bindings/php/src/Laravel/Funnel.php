<?php
declare(strict_types=1);

namespace RedisLock\Laravel;

use Illuminate\Contracts\Redis\LimiterTimeoutException;
use Illuminate\Support\InteractsWithTime;
use RedisLock\Client;
use RedisLock\InvalidArgument;
use RedisLock\LockNotOwned;
use RedisLock\LockTimeout;

/**
 * A concurrency limit shaped like Laravel's Redis::funnel() (its
 * ConcurrencyLimiterBuilder): at most limit() callbacks run at once under
 * a name, across processes and servers.
 *
 *   Cache::store('redis')->getStore()->funnel('payments')
 *       ->limit(3)->releaseAfter(60)->block(10)
 *       ->then(fn () => charge($order), fn () => $this->release(30));
 *
 * A slot is a permit of the redislock semaphore on the name. Differences
 * from Laravel's:
 * - block() waits in the semaphore's queue (first come, first served) and
 *   is woken by the release that frees a permit, not by trying every
 *   250 ms; fractions of a second are allowed, 0 tries once;
 * - the permit is released when the callback returns or throws; a failure
 *   callback is called only when no permit was free in time, never for an
 *   exception of the callback itself;
 * - releaseAfter() is the permit's lease on the server's clock; 0 is 30
 *   days (redislock's longest), as for the locks of the store.
 *
 * RedisLockStore::funnel() makes one on the key its lock of that name would
 * have (a semaphore never collides with the lock of the same name).
 */
class Funnel
{
    use InteractsWithTime;

    /**
     * The semaphore's key.
     *
     * @var string
     */
    public $name;

    /**
     * The number of callbacks that may run at once.
     *
     * @var int|null
     */
    public $maxLocks;

    /**
     * The lease of a permit in seconds: it is freed then even if its holder
     * never released it (a process that died).
     *
     * @var int|float
     */
    public $releaseAfter = 60;

    /**
     * How long to wait for a permit, in seconds (0 tries once).
     *
     * @var int|float
     */
    public $timeout = 3;

    /**
     * Whether the permit is renewed in the background while the callback runs.
     *
     * @var bool
     */
    public $autoRenew = false;

    /**
     * @param Client $client redislock's client for the server of the semaphore
     * @param string $name   the semaphore's key
     */
    public function __construct(private readonly Client $client, $name)
    {
        $this->name = (string)$name;
    }

    /**
     * Set how many callbacks may run at once (1 to 1,000,000).
     *
     * @param  int  $maxLocks
     * @return $this
     */
    public function limit($maxLocks)
    {
        $this->maxLocks = (int)$maxLocks;

        return $this;
    }

    /**
     * Set the permit's lease: seconds (fractions allowed), a DateInterval or
     * a DateTimeInterface. 0 is 30 days.
     *
     * @param  \DateTimeInterface|\DateInterval|int|float  $releaseAfter
     * @return $this
     */
    public function releaseAfter($releaseAfter)
    {
        $this->releaseAfter = is_int($releaseAfter) || is_float($releaseAfter)
            ? $releaseAfter
            : $this->secondsUntil($releaseAfter);

        return $this;
    }

    /**
     * Set how long then() waits for a permit, in seconds (0 tries once).
     *
     * @param  int|float  $timeout
     * @return $this
     */
    public function block($timeout)
    {
        $this->timeout = $timeout;

        return $this;
    }

    /**
     * Accepted for code written for Laravel 12's Cache::funnel(); it has no
     * effect: the wait is woken by a release, nothing polls.
     *
     * @param  int  $sleep
     * @return $this
     */
    public function sleep($sleep)
    {
        return $this;
    }

    /**
     * Renew the permit in the background (every third of releaseAfter)
     * while the callback runs, so that it may run longer than releaseAfter;
     * releaseAfter then only bounds how long the permit of a process that
     * died outlives it.
     *
     * @return $this
     */
    public function autoRenew(bool $autoRenew = true)
    {
        $this->autoRenew = $autoRenew;

        return $this;
    }

    /**
     * Run $callback holding a permit, and release it afterwards, also when
     * $callback throws. When no permit is free within block()'s time, call
     * $failure with the LimiterTimeoutException instead, or throw it.
     *
     * @param  callable  $callback
     * @param  callable|null  $failure
     * @return mixed what $callback (or $failure) returns
     *
     * @throws \Illuminate\Contracts\Redis\LimiterTimeoutException when no permit was free in time and there is no $failure
     * @throws \RedisLock\LockException when the server cannot be reached (ConnectionException)
     */
    public function then(callable $callback, ?callable $failure = null)
    {
        if ($this->maxLocks === null) {
            throw new InvalidArgument("funnel [{$this->name}]: call limit() before then()");
        }
        try {
            $permit = $this->client->acquireSemaphore(
                $this->name,
                $this->maxLocks,
                ttlMs: Lock::ttlMs($this->releaseAfter),
                waitMs: (int)min(max(0, ceil((float)$this->timeout * 1000)), 2 ** 53),
            );
        } catch (LockTimeout $e) {
            $e = new LimiterTimeoutException($e->getMessage(), 0, $e);
            if ($failure) {
                return $failure($e);
            }

            throw $e;
        }
        try {
            if ($this->autoRenew) {
                $permit->autoRenew();
            }
            $result = $callback();
        } catch (\Throwable $e) {
            $permit->releaseQuietly();
            throw $e;
        }
        try {
            $permit->release();
        } catch (LockNotOwned) {
            // The lease ran out while the callback ran: the permit was
            // already freed, as Laravel's slot is after releaseAfter.
        }

        return $result;
    }
}
