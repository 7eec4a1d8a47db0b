<?php
declare(strict_types=1);

namespace RedisLock;

/** Base class of every redislock error. */
class LockException extends \RuntimeException
{
}
