<?php
declare(strict_types=1);

namespace RedisLock;

/** Redlock: no majority of the servers could be reached. */
class NoQuorum extends LockException
{
}
