<?php
declare(strict_types=1);

namespace RedisLock;

/** The Redis server answered with an error (authentication, permissions, ...). */
class ServerException extends LockException
{
}
