<?php
declare(strict_types=1);

namespace RedisLock;

/** Redis cannot be reached, an I/O error, or a timeout. */
class ConnectionException extends LockException
{
}
