<?php
declare(strict_types=1);

namespace RedisLock\Laravel;

use Illuminate\Container\Container;
use RedisLock\InvalidArgument;

/**
 * Queued-job middleware: at most $limit jobs run at once under $name,
 * across workers and servers, each holding a permit of a redislock
 * semaphore (the funnel of that name: RedisLockStore::funnel()).
 *
 *   public function middleware(): array
 *   {
 *       return [(new LimitConcurrency('payments', 3))->releaseAfter(30)];
 *   }
 *
 * A job that gets no permit within block() seconds (by default it tries
 * once) is released back onto the queue after releaseAfter() seconds, as
 * WithoutOverlapping does (each release counts as an attempt), or deleted
 * after dontRelease(). The permit is released when the job returns or
 * throws; it is renewed in the background while the job runs, and its
 * lease (expireAfter(), 60 s) bounds how long a worker that died keeps it.
 * The permits live in the default cache store, or useStore()'s, which must
 * use the driver 'redislock'.
 */
class LimitConcurrency
{
    /**
     * The funnel's name: every job (and funnel()) with this name shares the permits.
     *
     * @var string
     */
    public $name;

    /**
     * How many jobs may run at once.
     *
     * @var int
     */
    public $limit;

    /**
     * Seconds before the job is available again when no permit was free; null deletes it.
     *
     * @var \DateTimeInterface|int|null
     */
    public $releaseAfter = 0;

    /**
     * Seconds to wait for a permit (0 tries once).
     *
     * @var int|float
     */
    public $block = 0;

    /**
     * The lease of a permit in seconds, renewed while the job runs.
     *
     * @var int|float
     */
    public $expiresAfter = 60;

    /**
     * The cache store of the permits; null for the default one.
     *
     * @var string|null
     */
    public $store;

    /**
     * @param  string  $name
     * @param  int  $limit  1 to 1,000,000
     */
    public function __construct($name, $limit)
    {
        $this->name = (string)$name;
        $this->limit = (int)$limit;
    }

    /**
     * Process the job.
     *
     * @param  mixed  $job
     * @param  callable  $next
     * @return mixed
     *
     * @throws \RedisLock\InvalidArgument when the cache store does not use the driver 'redislock'
     */
    public function handle($job, $next)
    {
        return $this->funnelStore()->funnel($this->name)
            ->limit($this->limit)
            ->releaseAfter($this->expiresAfter)
            ->autoRenew()
            ->block($this->block)
            ->then(fn () => $next($job), function () use ($job) {
                if ($this->releaseAfter === null) {
                    return false;
                }
                $job->release($this->releaseAfter);
                return null;
            });
    }

    /**
     * Wait up to $seconds for a permit (fractions allowed; 0, the default,
     * tries once). The wait is woken by the release that frees a permit;
     * the worker runs nothing else meanwhile.
     *
     * @param  int|float  $seconds
     * @return $this
     */
    public function block($seconds)
    {
        $this->block = $seconds;

        return $this;
    }

    /**
     * Set the delay (in seconds) to release the job back to the queue when
     * no permit was free.
     *
     * @param  \DateTimeInterface|int  $releaseAfter
     * @return $this
     */
    public function releaseAfter($releaseAfter)
    {
        $this->releaseAfter = $releaseAfter;

        return $this;
    }

    /**
     * Delete the job, rather than release it back to the queue, when no
     * permit was free.
     *
     * @return $this
     */
    public function dontRelease()
    {
        $this->releaseAfter = null;

        return $this;
    }

    /**
     * Set the permit's lease in seconds (60 by default; 0 is 30 days). It is
     * renewed while the job runs: it bounds how long the permit of a worker
     * that died (killed at its timeout, say) stays taken.
     *
     * @param  int|float  $expiresAfter
     * @return $this
     */
    public function expireAfter($expiresAfter)
    {
        $this->expiresAfter = $expiresAfter;

        return $this;
    }

    /**
     * Keep the permits in the cache store $store (config/cache.php) rather
     * than the default one.
     *
     * @param  string|null  $store
     * @return $this
     */
    public function useStore($store)
    {
        $this->store = $store;

        return $this;
    }

    /** The redislock store of the permits. */
    private function funnelStore(): RedisLockStore
    {
        $store = Container::getInstance()->make('cache')->store($this->store)->getStore();
        if (!$store instanceof RedisLockStore) {
            throw new InvalidArgument(sprintf(
                "LimitConcurrency needs a cache store with the driver 'redislock'; the store [%s] is a %s",
                $this->store ?? 'default',
                get_class($store),
            ));
        }
        return $store;
    }
}
