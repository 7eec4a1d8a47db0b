<?php
declare(strict_types=1);

namespace RedisLock;

/** The key exists and holds something other than a lock; it was left untouched. */
class WrongType extends LockException
{
}
