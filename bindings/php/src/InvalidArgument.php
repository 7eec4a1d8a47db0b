<?php
declare(strict_types=1);

namespace RedisLock;

/** A bad argument, rejected before anything was sent to Redis. */
class InvalidArgument extends \InvalidArgumentException
{
}
