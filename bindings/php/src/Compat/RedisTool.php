<?php
declare(strict_types=1);

namespace RedisLock\Compat;

use RedisLock\Client;

/**
 * A drop-in for the classic predis lock helper:
 *
 *   tryGetLock($key, $requestId, $expireTime)  SET key requestId PX expireTime NX
 *   releaseLock($key, $requestId)              compare-and-delete by request id
 *
 * Same signatures, same return values, and the very same value (the request
 * id) under the very same key, so old and new processes exclude each other
 * during a migration and either can release by request id.
 */
final class RedisTool
{
    public function __construct(private readonly Client $client)
    {
    }

    /** True when the lock was taken with $requestId for $expireTime ms. */
    public function tryGetLock(string $key, string $requestId, int $expireTime): bool
    {
        return $this->client->acquireToken($key, $requestId, $expireTime, 0);
    }

    /** True when the lock held $requestId and was released. */
    public function releaseLock(string $key, string $requestId): bool
    {
        return $this->client->releaseToken($key, $requestId);
    }
}
