<?php
declare(strict_types=1);

namespace RedisLock\Symfony;

use RedisLock\InvalidArgument;
use RedisLock\LockException;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Key;

/**
 * What the symfony/lock stores (Store, SharedStore) share: the Redis name
 * of a Key, TTLs in milliseconds, and redislock's exceptions turned into
 * Symfony's. The class using it has a $prefix and a MAX_TTL (seconds).
 *
 * @internal
 */
trait LockStoreCalls
{
    /**
     * Run $fn, turning redislock's exceptions into Symfony's: a bad argument
     * into InvalidArgumentException, anything else into $error.
     *
     * @param class-string<\Throwable> $error
     */
    private function call(\Closure $fn, string $error, string $what, Key $key): mixed
    {
        try {
            return $fn();
        } catch (InvalidArgument $e) {
            throw new InvalidArgumentException($e->getMessage(), 0, $e);
        } catch (LockException $e) {
            throw new $error(sprintf('Failed to %s the "%s" lock: %s', $what, $key, $e->getMessage()), 0, $e);
        }
    }

    private function name(Key $key): string
    {
        return $this->prefix . $key;
    }

    /**
     * $ttl seconds in milliseconds, at least 1.
     *
     * @throws InvalidTtlException for a TTL not in (0, 30 days]
     */
    private static function ttlMs(float $ttl): int
    {
        if (!($ttl > 0) || $ttl > self::MAX_TTL) {
            throw new InvalidTtlException(sprintf('A TTL must be more than 0 and at most 30 days (%d s), got %s s.', self::MAX_TTL, $ttl));
        }
        return max(1, (int)ceil($ttl * 1000));
    }
}
