<?php
declare(strict_types=1);

namespace RedisLock;

/** The lock is held by another owner and the wait ran out. */
class LockTimeout extends LockException
{
}
