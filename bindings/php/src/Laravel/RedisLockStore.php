<?php
declare(strict_types=1);

namespace RedisLock\Laravel;

use Closure;
use Illuminate\Cache\RedisStore;
use Illuminate\Contracts\Redis\Factory as Redis;
use RedisLock\Client;
use RedisLock\LockException;

/**
 * Laravel's Redis cache store whose locks are redislock's: the cache
 * (get, put, tags...) stays Laravel's, lock() and restoreLock() give a
 * RedisLock\Laravel\Lock on the very key Laravel's own lock would use (the
 * store's prefix, then the lock connection's own prefix).
 *
 * funnel() gives a concurrency limit shaped like Laravel's Redis::funnel().
 *
 * RedisLockServiceProvider registers it as the cache driver 'redislock';
 * made by hand, it needs setLockClient().
 */
class RedisLockStore extends RedisStore
{
    /** @var Client|Closure(string): Client|null */
    private Client|Closure|null $lockClient = null;

    /** @var array<string, Client> the clients made so far, by lock connection name */
    private array $lockClients = [];

    /**
     * As Laravel's RedisStore: the Redis factory (the RedisManager), then
     * RedisStore's other arguments (prefix, connection, ...). The factory is
     * kept out of var_dump(), print_r() and var_export(), which would show
     * its configuration and its passwords; getRedis() gives it back.
     *
     * @param \Illuminate\Contracts\Redis\Factory $redis
     */
    public function __construct(Redis $redis, mixed ...$rest)
    {
        parent::__construct($redis instanceof HiddenRedis ? $redis : new HiddenRedis($redis), ...$rest);
    }

    /**
     * The Redis factory the store was made with.
     *
     * @return \Illuminate\Contracts\Redis\Factory
     */
    public function getRedis()
    {
        return $this->redis instanceof HiddenRedis ? $this->redis->factory() : $this->redis;
    }

    /**
     * What var_dump() and print_r() show: the names and prefix, and the
     * lock clients (their URLs without passwords); neither Laravel's Redis
     * factory nor the function that makes the lock clients (they hold the
     * configuration, passwords included).
     *
     * @return array<string, mixed>
     */
    public function __debugInfo(): array
    {
        return [
            'prefix' => $this->prefix,
            'connection' => $this->connection,
            'lockConnection' => $this->lockConnection,
            'lockClient' => $this->lockClient instanceof \Closure ? 'a Client per lock connection' : $this->lockClient,
            'lockClients' => $this->lockClients,
        ];
    }

    /**
     * A store holds connections and its configuration (passwords
     * included): it is not serialized.
     *
     * @throws \LogicException always
     */
    public function __serialize(): array
    {
        throw new \LogicException('a RedisLock\\Laravel\\RedisLockStore cannot be serialized');
    }

    /** @throws \LogicException always */
    public function __unserialize(array $data): void
    {
        throw new \LogicException('a RedisLock\\Laravel\\RedisLockStore cannot be unserialized');
    }

    /**
     * Where the locks are taken: one Client, or a function that makes the
     * Client of a lock connection from its name (called once per name).
     *
     * @return $this
     */
    public function setLockClient(Client|Closure $client): static
    {
        $this->lockClient = $client;
        $this->lockClients = [];
        return $this;
    }

    /**
     * The redislock client of the lock connection.
     *
     * @throws LockException when no client was set
     * @throws \RedisLock\InvalidArgument when the connection's config gives no valid URL
     */
    public function lockClient(): Client
    {
        if ($this->lockClient instanceof Client) {
            return $this->lockClient;
        }
        if ($this->lockClient === null) {
            throw new LockException('RedisLockStore has no redislock client: call setLockClient()');
        }
        $name = (string)($this->lockConnection ?? $this->connection);
        return $this->lockClients[$name] ??= ($this->lockClient)($name);
    }

    /**
     * A lock on $name for $seconds (0: 30 days, redislock's longest TTL).
     *
     * @param  string  $name
     * @param  int|float  $seconds
     * @param  string|null  $owner  null for a random one
     * @return Lock
     */
    public function lock($name, $seconds = 0, $owner = null)
    {
        return new Lock($this->lockClient(), $this->lockConnection(), $this->prefix . $name, $seconds, $owner);
    }

    /**
     * The lock on $name of $owner, taken elsewhere (another request, a
     * worker, or Laravel's own Redis lock), e.g. to release it.
     *
     * @param  string  $name
     * @param  string  $owner
     * @return Lock
     */
    public function restoreLock($name, $owner)
    {
        return $this->lock($name, 0, $owner);
    }

    /**
     * A concurrency limit on $name, shaped like Laravel's Redis::funnel():
     * funnel($name)->limit(3)->releaseAfter(60)->block(10)->then($callback, $failure).
     * Its permits are a redislock semaphore on the key the store's lock of
     * $name would have (the semaphore never collides with that lock).
     *
     * @param  string  $name
     * @return Funnel
     */
    public function funnel($name)
    {
        // The connection's key prefix, then the store's, as for Lock.
        $prefix = Lock::connectionPrefix($this->lockConnection());
        return new Funnel($this->lockClient(), $prefix . $this->prefix . $name);
    }
}
