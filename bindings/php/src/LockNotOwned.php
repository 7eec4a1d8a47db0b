<?php
declare(strict_types=1);

namespace RedisLock;

/** Release or extend of a lock that expired or was taken over (nothing was changed). */
class LockNotOwned extends LockException
{
}
