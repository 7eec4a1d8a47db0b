<?php
declare(strict_types=1);

namespace RedisLock\Symfony;

use RedisLock\Client;
use RedisLock\InvalidArgument;
use RedisLock\Lock;
use RedisLock\LockException;
use RedisLock\LockNotOwned;
use RedisLock\LockTimeout;
use RedisLock\WrongType;
use Symfony\Component\Semaphore\Exception\InvalidArgumentException;
use Symfony\Component\Semaphore\Exception\RuntimeException;
use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Exception\SemaphoreReleasingException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\PersistingStoreInterface;

/**
 * A Symfony Semaphore store (symfony/semaphore 5.4 to 7.x) on redislock's
 * counting semaphore:
 *
 *   $store = new RedisLock\Symfony\SemaphoreStore(new RedisLock\Client('redis://127.0.0.1:6379'), waitTimeout: 10.0);
 *   $semaphore = (new SemaphoreFactory($store))->createSemaphore('exports', limit: 4, weight: 1, ttlInSecond: 60.0);
 *   if ($semaphore->acquire()) { ... $semaphore->release(); }
 *
 * A Key of limit N and weight W takes W of the N permits of the semaphore
 * named prefix + resource, for the TTL Symfony's Semaphore gives. Symfony's
 * Semaphore::acquire() has no blocking variant: with $waitTimeout (seconds,
 * 0 by default: try once, as Symfony's RedisStore) the store waits that
 * long for the permits, woken by the release that frees them (no
 * polling); null waits forever. Waiters are served in arrival order: a
 * waiter for W permits is not overtaken by smaller ones. Each call is
 * admitted by its own Key's limit, so keep one limit per name.
 *
 * The semaphore lives under keys of its own ({name}:sem, see
 * docs/PROTOCOL.md), never colliding with the lock of the same name, and
 * not wire-compatible with Symfony's RedisStore. The Key keeps the permit's
 * handle (a RedisLock\Lock) in its state: the permits belong to this
 * process and are released, as every RedisLock\Lock is, when the Key goes
 * away or the PHP request ends; such a Key cannot be serialized. exists()
 * asks the server whether the handle still holds its permits (one round
 * trip, none when this process already knows it does not). This class never calls FFI itself (php-fpm's ffi.enable=preload): it goes
 * through RedisLock\Client.
 */
final class SemaphoreStore implements PersistingStoreInterface
{
    /** The longest TTL redislock takes, in seconds (30 days). */
    private const MAX_TTL = 30 * 86400;

    private readonly ?int $waitMs;

    /**
     * @param Client     $client      the connections (Client::persistent($url) under php-fpm)
     * @param string     $prefix      put before every resource name to make the semaphore name
     * @param float|null $waitTimeout seconds save() (Semaphore::acquire()) waits for free permits:
     *                                0 tries once, null waits forever
     * @throws InvalidArgumentException for a negative wait
     */
    public function __construct(
        private readonly Client $client,
        private readonly string $prefix = '',
        ?float $waitTimeout = 0.0,
    ) {
        if ($waitTimeout !== null && !($waitTimeout >= 0)) {
            throw new InvalidArgumentException("waitTimeout must be null (forever) or at least 0 seconds, got $waitTimeout");
        }
        $this->waitMs = $waitTimeout === null ? null : (int)ceil($waitTimeout * 1000);
    }

    /**
     * Take the Key's weight in permits for $ttlInSecond, waiting up to the
     * store's wait timeout. A Key that holds them already has its TTL set
     * to $ttlInSecond again.
     *
     * @throws SemaphoreAcquiringException when the permits were not free in time
     * @throws InvalidArgumentException    for a TTL not in (0, 30 days], a limit above 1,000,000, an empty name
     * @throws RuntimeException            when Redis cannot be reached or answers an error
     */
    public function save(Key $key, float $ttlInSecond): void
    {
        $ttlMs = self::ttlMs($ttlInSecond);
        if (self::held($key) !== null) {
            $key->reduceLifetime($ttlInSecond);
            try {
                $this->extend($key, $ttlMs);
                $this->checkNotExpired($key, SemaphoreAcquiringException::class);
                return;
            } catch (SemaphoreExpiredException) {
                // Its lease ran out: take the permits again as a new arrival.
            }
        }
        $start = microtime(true);
        $lock = $this->call(function () use ($key, $ttlMs): Lock {
            try {
                return $this->client->acquireSemaphore(
                    $this->name($key),
                    limit: $key->getLimit(),
                    ttlMs: $ttlMs,
                    waitMs: $this->waitMs,
                    permits: $key->getWeight(),
                );
            } catch (LockTimeout | WrongType $e) {
                throw new SemaphoreAcquiringException($key, sprintf('%d of its %d permits are not free (%s)', $key->getWeight(), $key->getLimit(), $e->getMessage()));
            }
        }, 'acquire', $key);
        $key->setState(self::class, $lock);
        $waited = microtime(true) - $start;
        if ($waited < $ttlInSecond / 2) {
            // The lease started within the call (at the hand-off after a
            // wait): counting it from the start of the call is a safe bound.
            $key->reduceLifetime($ttlInSecond - $waited);
        } else {
            // Handed over late in a long wait: set the TTL again to know it.
            $key->reduceLifetime($ttlInSecond);
            try {
                $this->extend($key, $ttlMs);
            } catch (SemaphoreExpiredException $e) {
                throw new SemaphoreAcquiringException($key, $e->getMessage());
            }
        }
        $this->checkNotExpired($key, SemaphoreAcquiringException::class);
    }

    /**
     * Release the Key's permits; nothing happens when it holds none (never
     * took them, released, or their lease ran out).
     *
     * @throws SemaphoreReleasingException when Redis cannot be reached or answers an error
     */
    public function delete(Key $key): void
    {
        $lock = self::held($key);
        if ($lock === null) {
            return;
        }
        $key->removeState(self::class);
        try {
            $lock->release();
        } catch (LockNotOwned) {
            // expired or lost: nothing to release
        } catch (LockException $e) {
            throw new SemaphoreReleasingException($key, $e->getMessage());
        }
    }

    /**
     * Whether this Key holds its permits: it took them and has not released
     * them, no extend found the lease gone, the Key's lifetime has not run
     * out, and the server still lists its token (one round trip).
     */
    public function exists(Key $key): bool
    {
        $lock = self::held($key);
        if ($lock === null || $lock->isLost() || $key->isExpired()) {
            return false;
        }
        return $this->call(fn(): bool => $lock->owned(), 'check', $key);
    }

    /**
     * Set the remaining time of the Key's permits to $ttlInSecond. A lease
     * that ran out is never re-created.
     *
     * @throws SemaphoreExpiredException when the Key does not hold them (never took them, released, expired),
     *                                   or the call outlasted $ttlInSecond
     * @throws InvalidArgumentException  for a TTL not in (0, 30 days]
     * @throws RuntimeException          when Redis cannot be reached or answers an error
     */
    public function putOffExpiration(Key $key, float $ttlInSecond): void
    {
        $ttlMs = self::ttlMs($ttlInSecond);
        $key->reduceLifetime($ttlInSecond);
        $this->extend($key, $ttlMs);
        $this->checkNotExpired($key, SemaphoreExpiredException::class);
    }

    /**
     * The fencing number of the Key's permits: each holder has its own,
     * greater than any handed out before for this name. Null when the Key
     * holds none. No round trip: it is drawn when the Key enters.
     */
    public function fence(Key $key): ?int
    {
        $lock = self::held($key);
        if ($lock === null) {
            return null;
        }
        return $this->call(function () use ($lock): ?int {
            try {
                return $lock->fence();
            } catch (LockNotOwned) {
                return null;
            }
        }, 'check', $key);
    }

    /**
     * Set the remaining time of the Key's lease to $ttlMs. A Key whose
     * lease is gone drops its handle.
     *
     * @throws SemaphoreExpiredException when the Key holds nothing
     */
    private function extend(Key $key, int $ttlMs): void
    {
        $lock = self::held($key);
        $extended = $lock !== null && $this->call(function () use ($lock, $ttlMs): bool {
            try {
                $lock->extend($ttlMs);
                return true;
            } catch (LockNotOwned) {
                return false;
            }
        }, 'put off the expiration of', $key);
        if (!$extended) {
            $key->removeState(self::class);
            throw new SemaphoreExpiredException($key, 'it is not held by this key (never taken, released, or its lease ran out)');
        }
    }

    /**
     * When the Key's lifetime ran out during the call: release, and throw.
     *
     * @param class-string<SemaphoreAcquiringException|SemaphoreExpiredException> $error
     */
    private function checkNotExpired(Key $key, string $error): void
    {
        if ($key->isExpired()) {
            try {
                $this->delete($key);
            } catch (\Exception) {
                // swallow the exception not to hide the original issue
            }
            throw new $error($key, 'the call outlasted its TTL');
        }
    }

    private static function held(Key $key): ?Lock
    {
        return $key->hasState(self::class) ? $key->getState(self::class) : null;
    }

    /**
     * Run $fn, turning redislock's exceptions into Symfony's: a bad argument
     * into InvalidArgumentException, anything else into RuntimeException.
     */
    private function call(\Closure $fn, string $what, Key $key): mixed
    {
        try {
            return $fn();
        } catch (InvalidArgument $e) {
            throw new InvalidArgumentException($e->getMessage(), 0, $e);
        } catch (LockException $e) {
            throw new RuntimeException(sprintf('Failed to %s the "%s" semaphore: %s', $what, $key, $e->getMessage()), 0, $e);
        }
    }

    private function name(Key $key): string
    {
        return $this->prefix . $key;
    }

    /**
     * $ttl seconds in milliseconds, at least 1.
     *
     * @throws InvalidArgumentException for a TTL not in (0, 30 days]
     */
    private static function ttlMs(float $ttl): int
    {
        if (!($ttl > 0) || $ttl > self::MAX_TTL) {
            throw new InvalidArgumentException(sprintf('A TTL must be more than 0 and at most 30 days (%d s), got %s s.', self::MAX_TTL, $ttl));
        }
        return max(1, (int)ceil($ttl * 1000));
    }
}
