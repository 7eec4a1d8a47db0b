<?php
declare(strict_types=1);

namespace RedisLock\Laravel;

use Illuminate\Cache\Lock as LaravelLock;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Illuminate\Redis\Connections\PhpRedisConnection;
use RedisLock\Client;
use RedisLock\LockTimeout;

/**
 * Laravel's cache lock (Cache::lock()) on redislock, wire-compatible with
 * Laravel's own Redis lock: the same key (store prefix, then the
 * connection's prefix) holds the owner, and release compares and deletes.
 * Both kinds of lock exclude each other on a name, and either releases
 * the other by owner (restoreLock($name, $owner)->release()).
 *
 * The lock is kept on the server by its owner, not by this object: it
 * outlives the request that took it (a unique job's lock is taken in a web
 * request and released in a worker). Differences from Laravel's lock:
 * block() waits by hand-off (woken by the release, no 250 ms polling);
 * seconds = 0, Laravel's "no expiry", is 30 days, redislock's longest TTL
 * (so are longer TTLs); fence() gives the fencing number.
 */
class Lock extends LaravelLock
{
    /** redislock's longest TTL in seconds (30 days): what seconds = 0 gives. */
    public const MAX_SECONDS = 2_592_000;

    /** The key on the server: the connection's prefix, then the name. */
    private string $key;

    /** What the key holds for this owner (the owner, packed as phpredis stores it). */
    private string $token;

    private ?int $fence = null;

    /** Whether this object acquired the lock (its fence is then drawn when asked for). */
    private bool $took = false;

    /** @var \Closure(): \Illuminate\Redis\Connections\Connection Laravel's lock connection */
    private readonly \Closure $connection;

    /**
     * @param Client                                   $client  redislock's client for the lock connection's server
     * @param \Illuminate\Redis\Connections\Connection $redis   Laravel's lock connection: its key prefix and
     *                                                          serializer apply as to Laravel's own lock; it
     *                                                          reads the owner and force-releases
     * @param string                                   $name    the name with the store's prefix
     * @param int|float                                $seconds the TTL; 0 (or less) is 30 days
     * @param string|null                              $owner   null for a random one
     */
    public function __construct(
        private readonly Client $client,
        $redis,
        $name,
        $seconds,
        $owner = null,
    ) {
        parent::__construct((string)$name, $seconds, $owner === null ? null : (string)$owner);
        // Held by a closure: var_dump(), print_r() and var_export() would
        // show the connection's configuration, passwords included.
        $this->connection = static fn () => $redis;
        $this->key = self::connectionPrefix($redis) . $this->name;
        $this->token = $redis instanceof PhpRedisConnection ? (string)$redis->pack([$this->owner])[0] : $this->owner;
    }

    /**
     * One attempt to take the lock for this owner.
     *
     * @return bool false when another owner holds it
     * @throws \RedisLock\LockException when the server cannot be reached (ConnectionException) or the key holds another type
     */
    public function acquire()
    {
        $lock = $this->client->tryAcquire($this->key, ttlMs: self::ttlMs($this->seconds), token: $this->token);
        if ($lock === null) {
            return false;
        }
        $this->took($lock);
        return true;
    }

    /**
     * Wait up to $seconds for the lock (0 tries once), then run $callback
     * and release it afterwards, also when $callback throws. The wait is
     * redislock's hand-off: a release by a redislock process gives the lock
     * to the oldest waiter at once; releases by other clients (Laravel's
     * own lock) are noticed by retries that back off from 25 ms.
     *
     * @param  int|float  $seconds
     * @param  callable|null  $callback
     * @return mixed what $callback returns, or true without one
     * @throws LockTimeoutException when the wait ran out
     * @throws \RedisLock\LockException when the server cannot be reached (ConnectionException)
     */
    public function block($seconds, $callback = null)
    {
        $waitMs = (int)min(max(0, ceil((float)$seconds * 1000)), 2 ** 53);
        try {
            $lock = $this->client->acquire(
                $this->key,
                ttlMs: self::ttlMs($this->seconds),
                waitMs: $waitMs,
                token: $this->token,
            );
        } catch (LockTimeout $e) {
            throw new LockTimeoutException($e->getMessage(), 0, $e);
        }
        $this->took($lock);
        if (is_callable($callback)) {
            try {
                return $callback();
            } finally {
                $this->release();
            }
        }
        return true;
    }

    /**
     * Release the lock if this owner holds it (compare-and-delete; a
     * redislock process waiting for it gets it at once).
     *
     * @return bool false when it is not held by this owner (expired, or another owner's); nothing changes then
     */
    public function release()
    {
        return $this->client->releaseToken($this->key, $this->token);
    }

    /**
     * Set the remaining time to $seconds (default: the lock's own) if this
     * owner holds the lock; an expired lock is never re-created. 0 is 30
     * days (Laravel 12+ would remove the expiry). A lock from restoreLock()
     * has seconds = 0: give it $seconds.
     *
     * @param  int|float|null  $seconds
     * @return bool false when this owner does not hold the lock
     */
    public function refresh($seconds = null)
    {
        return $this->client->extendToken($this->key, $this->token, self::ttlMs($seconds ?? $this->seconds));
    }

    /**
     * Release the lock whoever holds it (this library's holder, Laravel's
     * own lock, any value under the key), through redislock's forced
     * release: a redislock process waiting for it is handed it at once, and
     * fences stay monotonic. A key of another type is left alone.
     *
     * @return void
     * @throws \RedisLock\WrongType when the key holds another type
     */
    public function forceRelease()
    {
        $this->client->forceRelease($this->key);
    }

    /**
     * Whether this owner holds the lock right now (one round trip).
     *
     * @return bool
     */
    public function isOwnedByCurrentProcess()
    {
        return $this->client->isOwnedBy($this->key, $this->token);
    }

    /**
     * The fencing number of this object's last acquisition (acquire(),
     * get() or block()): greater than any handed out before for this name.
     * Drawn on the first call, with a check that the lock is still held
     * (one round trip). Null before an acquisition (e.g. on a lock from
     * restoreLock()), and once the lock is no longer held by this owner.
     */
    public function fence(): ?int
    {
        if ($this->fence === null && $this->took) {
            $this->fence = $this->client->fenceToken($this->key, $this->token);
        }
        return $this->fence;
    }

    /**
     * The name of Laravel's Redis connection used for the lock.
     *
     * @return string|null
     */
    public function getConnectionName()
    {
        return $this->redis()->getName();
    }

    /**
     * The owner the lock holds now, as Laravel's lock reads it.
     *
     * @return string|null null when it is free
     */
    protected function getCurrentOwner()
    {
        return $this->redis()->get($this->name);
    }

    /**
     * What var_dump() and print_r() show: the name, owner, TTL and fence;
     * never the connection (its configuration holds passwords).
     *
     * @return array{name: string, owner: string, seconds: int|float, fence: ?int, connection: ?string}
     */
    public function __debugInfo(): array
    {
        return [
            'name' => $this->name,
            'owner' => $this->owner,
            'seconds' => $this->seconds,
            'fence' => $this->fence,
            'connection' => $this->redis()->getName(),
        ];
    }

    /** @throws \LogicException always: the lock holds Laravel's connection (use restoreLock($name, $owner)) */
    public function __serialize(): array
    {
        throw new \LogicException('a RedisLock\\Laravel\\Lock cannot be serialized: keep its owner() and use restoreLock()');
    }

    /** @throws \LogicException always */
    public function __unserialize(array $data): void
    {
        throw new \LogicException('a RedisLock\\Laravel\\Lock cannot be unserialized');
    }

    /** The lock connection. */
    private function redis()
    {
        return ($this->connection)();
    }

    /** Laravel's seconds as redislock's TTL: 0 or less (no expiry) and over 30 days give 30 days. */
    public static function ttlMs(int|float|string|null $seconds): int
    {
        $ms = ceil((float)$seconds * 1000);
        return $ms <= 0 ? self::MAX_SECONDS * 1000 : (int)min($ms, self::MAX_SECONDS * 1000);
    }

    /** The key prefix the connection's client adds (predis' prefix option, phpredis' OPT_PREFIX). */
    /**
     * The key prefix of a Laravel Redis connection's client (predis's
     * prefix option, phpredis's OPT_PREFIX), '' without one. Internal:
     * RedisLockStore::funnel() names its semaphore the same way.
     *
     * @internal
     */
    public static function connectionPrefix($redis): string
    {
        $client = $redis->client();
        if ($client instanceof \Predis\ClientInterface) {
            $prefix = $client->getOptions()->prefix;
            return is_object($prefix) && method_exists($prefix, 'getPrefix') ? (string)$prefix->getPrefix() : '';
        }
        if (($client instanceof \Redis || $client instanceof \RedisCluster) && defined('Redis::OPT_PREFIX')) {
            return (string)$client->getOption(\Redis::OPT_PREFIX);
        }
        return '';
    }

    /** Leave a lock just taken to its owner on the server; its fence is drawn when asked for. */
    private function took(\RedisLock\Lock $lock): void
    {
        $this->fence = null;
        $this->took = true;
        $lock->forget();
    }
}
