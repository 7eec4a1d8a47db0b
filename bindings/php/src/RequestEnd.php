<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * Releases what a request still holds when it ends, whichever way it ends.
 *
 * Objects normally clean up in their destructors, but PHP runs no
 * destructor after a fatal error (a memory or time limit, an Error in a
 * shutdown path): under php-fpm the worker lives on, and a Lock left behind
 * would stay held until its TTL ran out, or forever with autoRenew, and a
 * Client's connections would stay open. The first object of a request
 * registers a shutdown function, which PHP runs after fatal errors and
 * exit() too; it puts itself last in the queue, so that the application's
 * own shutdown functions still hold their locks.
 *
 * @internal
 */
final class RequestEnd
{
    /** @var \WeakMap<Lock|Client, true>|null what this request made and may still hold */
    private static ?\WeakMap $live = null;

    public static function track(Lock|Client $object): void
    {
        if (self::$live === null) {
            self::$live = new \WeakMap();
            register_shutdown_function(static function (): void {
                register_shutdown_function([self::class, 'finish']);
            });
        }
        self::$live[$object] = true;
    }

    /** Release the locks, then free the clients, left at the end of the request. */
    public static function finish(): void
    {
        $live = self::$live ?? new \WeakMap();
        self::$live = null;
        $clients = [];
        foreach ($live as $object => $_) {
            if ($object instanceof Lock) {
                $object->releaseQuietly();
            } else {
                $clients[] = $object;
            }
        }
        foreach ($clients as $client) {
            $client->close();
        }
    }
}
