<?php
declare(strict_types=1);

namespace RedisLock\Symfony;

use RedisLock\Client;
use RedisLock\Lock;
use RedisLock\LockNotOwned;
use RedisLock\LockTimeout;
use RedisLock\WrongType;
use Symfony\Component\Lock\BlockingSharedLockStoreInterface;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\Store\ExpiringStoreTrait;

/**
 * A Symfony Lock store (symfony/lock 5.4 to 7.x) with read (shared) locks,
 * on redislock's read-write lock:
 *
 *   $store = new RedisLock\Symfony\SharedStore(new RedisLock\Client('redis://127.0.0.1:6379'));
 *   $lock = (new LockFactory($store))->createLock('catalog', 30.0);
 *   $lock->acquireRead(true);   // any number of readers at once
 *   $lock->acquire(true);       // one writer, alone
 *
 * acquire() takes the write side, acquireRead() the read side; a blocking
 * call is woken by the release it waits for (no polling). Waiters are
 * served in arrival order: a queued writer stops new readers, so a stream
 * of readers cannot starve a writer (Symfony's RedisStore lets readers in
 * while a writer polls). The read-write lock lives under keys of its own
 * ({name}:rw, see docs/PROTOCOL.md), never under the plain lock of the same
 * name: Store and SharedStore locks of one name do not exclude each other,
 * and neither do SharedStore and Symfony's own RedisStore or a plain
 * SET NX holder of the name (Symfony 5.1), either way (docs/php.md,
 * rolling migration: drain first, or a new name).
 *
 * Switching sides: acquire() on a Key that holds the read side (promotion),
 * or acquireRead() on one that holds the write side (demotion), releases
 * the side held and then takes the other, as a new arrival. That is not
 * atomic: another owner can get in between (a writer queued meanwhile goes
 * first), and when the other side cannot be had (a non-blocking call finds
 * it held, or the wait runs out) the Key holds nothing afterwards: the
 * Lock's call returns false (a blocking one throws LockConflictedException,
 * as when the wait runs out). A promotion
 * of the only reader, or a demotion, succeeds at once when nobody waits.
 * Calling the side already held again sets its TTL to the initial TTL.
 *
 * The Key keeps the lock handle (a RedisLock\Lock) in its state, so it is
 * marked unserializable: the lock belongs to this process and is released,
 * as every RedisLock\Lock is, when the Key goes away or the PHP request
 * ends. exists() asks the server whether the handle still holds its side
 * (one round trip, none when this process already knows it does not). This
 * class never calls FFI itself (php-fpm's ffi.enable=preload):
 * it goes through RedisLock\Client.
 */
final class SharedStore implements BlockingSharedLockStoreInterface, BlockingStoreInterface
{
    use ExpiringStoreTrait;
    use LockStoreCalls;

    /** The longest TTL redislock takes, in seconds (30 days). */
    private const MAX_TTL = 30 * 86400;

    /** The side the Key holds: 'read' or 'write'. */
    private const SIDE = self::class . '::side';

    private const READ = 'read';
    private const WRITE = 'write';

    private readonly ?int $waitMs;

    /**
     * @param Client     $client      the connections (Client::persistent($url) under php-fpm)
     * @param float      $initialTtl  seconds a lock lives after a save, before the Lock's own TTL is applied
     * @param string     $prefix      put before every resource name to make the lock name
     * @param float|null $waitTimeout seconds acquire(true) and acquireRead(true) wait; null waits forever
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
     * Take the write side once, for the initial TTL.
     *
     * @throws LockConflictedException when readers or a writer hold it, or others wait for it
     * @throws LockAcquiringException  when Redis cannot be reached or answers an error
     * @throws LockExpiredException    when the call outlasted the initial TTL
     */
    public function save(Key $key): void
    {
        $this->take($key, self::WRITE, 0);
    }

    /**
     * Take the write side, waiting as long as the store's wait timeout
     * (forever by default): until the holders ahead release (woken by the
     * release) or their leases run out.
     *
     * @throws LockConflictedException when the wait timeout ran out
     * @throws LockAcquiringException  when Redis cannot be reached or answers an error
     */
    public function waitAndSave(Key $key): void
    {
        $this->take($key, self::WRITE, $this->waitMs);
    }

    /**
     * Take the read side once, for the initial TTL: with the other readers,
     * unless a writer holds it or anyone waits for it.
     *
     * @throws LockConflictedException when a writer holds it or others wait for it
     * @throws LockAcquiringException  when Redis cannot be reached or answers an error
     * @throws LockExpiredException    when the call outlasted the initial TTL
     */
    public function saveRead(Key $key): void
    {
        $this->take($key, self::READ, 0);
    }

    /**
     * Take the read side, waiting as long as the store's wait timeout
     * (forever by default). The readers queued behind a writer enter
     * together after it.
     *
     * @throws LockConflictedException when the wait timeout ran out
     * @throws LockAcquiringException  when Redis cannot be reached or answers an error
     */
    public function waitAndSaveRead(Key $key): void
    {
        $this->take($key, self::READ, $this->waitMs);
    }

    /**
     * Set the remaining time of the side this Key holds to $ttl seconds (at
     * least 1 ms). A lease that ran out is never re-created.
     *
     * @throws LockConflictedException when the Key does not hold the lock (never took it, released, expired)
     * @throws InvalidTtlException     for a TTL not in (0, 30 days]
     * @throws LockStorageException    when Redis cannot be reached or answers an error
     * @throws LockExpiredException    when the call outlasted $ttl
     */
    public function putOffExpiration(Key $key, float $ttl): void
    {
        $ttlMs = self::ttlMs($ttl);
        $key->reduceLifetime($ttl);
        $this->extend($key, $ttlMs, LockStorageException::class);
        $this->checkNotExpired($key);
    }

    /**
     * Release the side this Key holds; nothing happens when it holds none
     * (never took it, released, or its lease ran out).
     *
     * @throws LockReleasingException when Redis cannot be reached or answers an error
     */
    public function delete(Key $key): void
    {
        $this->letGo($key, LockReleasingException::class, 'release');
    }

    /**
     * Whether this Key holds the lock (either side): it took it and has not
     * released it, no extend found the lease gone, the Key's lifetime has
     * not run out, and the server still lists its token (one round trip).
     */
    public function exists(Key $key): bool
    {
        $lock = self::held($key);
        if ($lock === null || $lock->isLost() || $key->isExpired()) {
            return false;
        }
        return $this->call(fn(): bool => $lock->owned(), LockStorageException::class, 'check', $key);
    }

    /**
     * Whether this Key holds the read side (false for the write side, or
     * nothing held).
     */
    public function isRead(Key $key): bool
    {
        return self::held($key) !== null && $key->getState(self::SIDE) === self::READ;
    }

    /**
     * The fencing number of the Key's latest acquisition through this
     * store, either side: greater than any handed out before for this name
     * (readers at the same time each have their own). Null when the Key
     * holds nothing. No round trip: it is drawn when the Key enters.
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
        }, LockStorageException::class, 'check', $key);
    }

    /**
     * Take $side for the initial TTL: once ($waitMs 0), until a deadline,
     * or forever (null). The side held already has its TTL set again; the
     * other side is released first.
     */
    private function take(Key $key, string $side, ?int $waitMs): void
    {
        $name = $this->name($key);
        $ttlMs = self::ttlMs($this->initialTtl);
        if (self::held($key) !== null) {
            if ($key->getState(self::SIDE) === $side) {
                $key->reduceLifetime($this->initialTtl);
                try {
                    $this->extend($key, $ttlMs, LockAcquiringException::class);
                    $this->checkNotExpired($key);
                    return;
                } catch (LockConflictedException) {
                    // Its lease ran out: take it again as a new arrival.
                }
            }
            $this->letGo($key, LockAcquiringException::class, 'acquire');
        }
        $start = microtime(true);
        $lock = $this->call(function () use ($key, $name, $side, $ttlMs, $waitMs): Lock {
            try {
                return $side === self::READ
                    ? $this->client->acquireRead($name, ttlMs: $ttlMs, waitMs: $waitMs)
                    : $this->client->acquireWrite($name, ttlMs: $ttlMs, waitMs: $waitMs);
            } catch (LockTimeout | WrongType $e) {
                throw new LockConflictedException(sprintf('The "%s" lock is held by another owner, or others wait for it: %s', $key, $e->getMessage()), 0, $e);
            }
        }, LockAcquiringException::class, 'acquire', $key);
        $key->markUnserializable();
        $key->setState(self::class, $lock);
        $key->setState(self::SIDE, $side);
        $waited = microtime(true) - $start;
        if ($waited < $this->initialTtl / 2) {
            // The lease started within the call (at the hand-off after a
            // wait): counting it from the start of the call is a safe bound.
            $key->reduceLifetime($this->initialTtl - $waited);
        } else {
            // Handed over late in a long wait: set the TTL again to know it.
            $key->reduceLifetime($this->initialTtl);
            $this->extend($key, $ttlMs, LockAcquiringException::class);
        }
        $this->checkNotExpired($key);
    }

    /**
     * Set the remaining time of the Key's lease to $ttlMs. A Key whose
     * lease is gone drops its handle.
     *
     * @param class-string<\Throwable> $error thrown for a connection or server failure
     * @throws LockConflictedException when the Key holds nothing
     */
    private function extend(Key $key, int $ttlMs, string $error): void
    {
        $lock = self::held($key);
        $extended = $lock !== null && $this->call(function () use ($lock, $ttlMs): bool {
            try {
                $lock->extend($ttlMs);
                return true;
            } catch (LockNotOwned) {
                return false;
            }
        }, $error, 'put off the expiration of', $key);
        if (!$extended) {
            $this->forget($key);
            throw new LockConflictedException(sprintf('The "%s" lock is not held by this key (never taken, released, or its lease ran out).', $key));
        }
    }

    /**
     * Release the side the Key holds, if any; a lease that ran out is no
     * error. The Key holds nothing afterwards, also when this throws.
     *
     * @param class-string<\Throwable> $error thrown for a connection or server failure
     */
    private function letGo(Key $key, string $error, string $what): void
    {
        $lock = self::held($key);
        if ($lock === null) {
            return;
        }
        $this->forget($key);
        $this->call(function () use ($lock): void {
            try {
                $lock->release();
            } catch (LockNotOwned) {
                // expired or lost: nothing to release
            }
        }, $error, $what, $key);
    }

    private function forget(Key $key): void
    {
        $key->removeState(self::class);
        $key->removeState(self::SIDE);
    }

    private static function held(Key $key): ?Lock
    {
        return $key->hasState(self::class) ? $key->getState(self::class) : null;
    }
}
