<?php
declare(strict_types=1);

namespace RedisLock\Symfony;

use RedisLock\Client;
use RedisLock\LockTimeout;
use RedisLock\WrongType;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\PersistingStoreInterface;
use Symfony\Component\Lock\Store\ExpiringStoreTrait;

/**
 * A Symfony Lock store (symfony/lock 5.4 to 7.x) on redislock:
 *
 *   $store = new RedisLock\Symfony\Store(new RedisLock\Client('redis://127.0.0.1:6379'));
 *   $lock = (new LockFactory($store))->createLock('reports', 30.0);
 *   $lock->acquire(true);   // woken by the holder's release, no polling
 *
 * The Redis key is the prefix plus the resource and holds the holder's
 * token and nothing else (SET NX PX semantics), so it excludes plain
 * SET NX users of the same name; it is neither a ZSET nor wire-compatible
 * with Symfony's RedisStore, and has no read (shared) locks (SharedStore
 * has, on a read-write lock of the same name, which a Store lock does not
 * exclude).
 * Symfony's RedisStore and Store exclude each other (each finds the
 * other's value under the name); a blocking acquire finding Symfony's
 * RedisStore's sorted set there gives up at once (LockConflictedException)
 * instead of waiting (docs/php.md, rolling migration). The token and
 * the fencing number live in the Key's state: a serialized Key can be
 * released or refreshed by another process. This class never calls FFI
 * itself (php-fpm's ffi.enable=preload): it goes through RedisLock\Client.
 */
final class Store implements PersistingStoreInterface, BlockingStoreInterface
{
    use ExpiringStoreTrait;
    use LockStoreCalls;

    /** The longest TTL redislock takes, in seconds (30 days). */
    private const MAX_TTL = 30 * 86400;

    private const FENCE = self::class . '::fence';

    private readonly ?int $waitMs;

    /**
     * @param Client     $client      the connections (Client::persistent($url) under php-fpm)
     * @param float      $initialTtl  seconds a lock lives after save(), before the Lock's own TTL is applied
     * @param string     $prefix      put before every resource name to make the Redis key
     * @param float|null $waitTimeout seconds waitAndSave() (acquire(true)) waits; null waits forever
     * @throws InvalidTtlException      for an initial TTL not in (0, 30 days]
     * @throws InvalidArgumentException for a negative wait
     */
    public function __construct(
        private readonly Client $client,
        private readonly float $initialTtl = 300.0,
        private readonly string $prefix = '',
        ?float $waitTimeout = null,
    ) {
        self::ttlMs($initialTtl);
        if ($waitTimeout !== null && !($waitTimeout >= 0)) {
            throw new InvalidArgumentException("waitTimeout must be null (forever) or at least 0 seconds, got $waitTimeout");
        }
        $this->waitMs = $waitTimeout === null ? null : (int)ceil($waitTimeout * 1000);
    }

    /**
     * Take the lock once for the initial TTL. A Key that holds it already
     * (acquire() called again) has its TTL set to the initial TTL again.
     *
     * @throws LockConflictedException when another owner holds it
     * @throws LockAcquiringException  when Redis cannot be reached or answers an error
     * @throws LockExpiredException    when the call outlasted the initial TTL
     */
    public function save(Key $key): void
    {
        $key->reduceLifetime($this->initialTtl);
        $this->take($key, 0);
        $this->checkNotExpired($key);
    }

    /**
     * Take the lock, waiting for it as long as the store's wait timeout
     * (forever by default). The waiter is woken when the holder releases
     * (hand-off), or retries by itself when the holder's TTL runs out.
     *
     * @throws LockConflictedException when the wait timeout ran out
     * @throws LockAcquiringException  when Redis cannot be reached or answers an error
     */
    public function waitAndSave(Key $key): void
    {
        $start = microtime(true);
        $this->take($key, $this->waitMs);
        $waited = microtime(true) - $start;
        if ($waited < $this->initialTtl / 2) {
            // The TTL started at the hand-off, somewhere in the wait:
            // counting it from the start of the wait is a safe bound.
            $key->reduceLifetime($this->initialTtl - $waited);
        } else {
            // Handed over late in a long wait: set the TTL again to know it.
            $key->reduceLifetime($this->initialTtl);
            $this->extend($key, $this->initialTtl, LockAcquiringException::class);
        }
        $this->checkNotExpired($key);
    }

    /**
     * Set the remaining time of a lock this Key holds to $ttl seconds (at
     * least 1 ms). An expired lock is never re-created.
     *
     * @throws LockConflictedException when the Key does not hold it (expired, or another owner)
     * @throws InvalidTtlException     for a TTL not in (0, 30 days]
     * @throws LockStorageException    when Redis cannot be reached or answers an error
     * @throws LockExpiredException    when the call outlasted $ttl
     */
    public function putOffExpiration(Key $key, float $ttl): void
    {
        self::ttlMs($ttl);
        $key->reduceLifetime($ttl);
        $this->extend($key, $ttl, LockStorageException::class);
        $this->checkNotExpired($key);
    }

    /**
     * Release the lock if this Key holds it; nothing happens when it does
     * not (expired, or another owner holds it).
     *
     * @throws LockReleasingException when Redis cannot be reached or answers an error
     */
    public function delete(Key $key): void
    {
        if (!$key->hasState(self::class)) {
            return;
        }
        $token = $key->getState(self::class);
        $this->call(fn() => $this->client->releaseToken($this->name($key), $token), LockReleasingException::class, 'release', $key);
        $key->removeState(self::FENCE);
    }

    /**
     * Whether this Key holds the lock right now (one round trip).
     *
     * @throws LockStorageException when Redis cannot be reached or answers an error
     */
    public function exists(Key $key): bool
    {
        if (!$key->hasState(self::class)) {
            return false;
        }
        $token = $key->getState(self::class);
        return $this->call(function () use ($key, $token): bool {
            try {
                return $this->client->isOwnedBy($this->name($key), $token);
            } catch (WrongType) {
                return false;
            }
        }, LockStorageException::class, 'check', $key);
    }

    /**
     * The fencing number of the Key's latest acquisition through this
     * store: greater than any handed out before for this lock name. Null
     * when the Key never acquired, or released. Keep the Key to read it:
     * $factory->createLockFromKey($key).
     */
    public function fence(Key $key): ?int
    {
        if (!$key->hasState(self::FENCE) && $key->hasState(self::class)) {
            // Drawn on the first request, with a check that the Key still
            // holds the lock: null when it does not.
            $token = $key->getState(self::class);
            $fence = $this->call(fn() => $this->client->fenceToken($this->name($key), $token), LockStorageException::class, 'check', $key);
            if ($fence === null) {
                return null;
            }
            $key->setState(self::FENCE, $fence);
        }
        return $key->hasState(self::FENCE) ? $key->getState(self::FENCE) : null;
    }

    /**
     * Take the lock for the initial TTL: once ($waitMs 0), until a deadline,
     * or forever (null). A Key that holds it already has it extended.
     */
    private function take(Key $key, ?int $waitMs): void
    {
        $name = $this->name($key);
        $ttlMs = self::ttlMs($this->initialTtl);
        $token = $key->hasState(self::class) ? $key->getState(self::class) : null;
        $this->call(function () use ($key, $name, $ttlMs, $token, $waitMs): void {
            try {
                $lock = $this->client->tryAcquire($name, ttlMs: $ttlMs, token: $token);
                // redislock refuses a token the key already holds: a re-save.
                if ($lock === null && $token !== null && $this->client->extendToken($name, $token, $ttlMs)) {
                    return;
                }
                if ($lock === null && $waitMs !== 0) {
                    $lock = $this->client->acquire($name, ttlMs: $ttlMs, waitMs: $waitMs, token: $token);
                }
            } catch (LockTimeout | WrongType $e) {
                throw new LockConflictedException(sprintf('The "%s" lock is held by another owner: %s', $key, $e->getMessage()), 0, $e);
            }
            if ($lock === null) {
                throw new LockConflictedException(sprintf('The "%s" lock is held by another owner.', $key));
            }
            $key->setState(self::class, $lock->token());
            $key->removeState(self::FENCE);
            $lock->forget();
        }, LockAcquiringException::class, 'acquire', $key);
    }

    /**
     * Set the remaining time of the Key's lock to $ttl seconds.
     *
     * @param class-string<\Throwable> $error thrown for a connection or server failure
     * @throws LockConflictedException when the Key does not hold the lock
     */
    private function extend(Key $key, float $ttl, string $error): void
    {
        $extended = $key->hasState(self::class) && $this->call(function () use ($key, $ttl): bool {
            try {
                return $this->client->extendToken($this->name($key), $key->getState(self::class), self::ttlMs($ttl));
            } catch (WrongType) {
                return false;
            }
        }, $error, 'put off the expiration of', $key);
        if (!$extended) {
            throw new LockConflictedException(sprintf('The "%s" lock is not held by this key (it expired, or another owner took it).', $key));
        }
    }
}
