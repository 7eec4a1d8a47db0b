<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * A release whose outcome is unknown: the connection broke after it was
 * sent, and when sent again the lock was no longer this owner's (most
 * likely the first attempt released it; it may also have expired just
 * before). A kind of LockNotOwned, so that code catching that catches it
 * too; catch Unconfirmed first to tell it apart.
 */
class Unconfirmed extends LockNotOwned
{
}
