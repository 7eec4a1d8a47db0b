<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * One thing Client::doctor() checked on one server: one entry of
 * Report::$findings. Read-only.
 */
final class Finding
{
    /**
     * @internal made by Report
     * @param string $severity how much it matters: 'ok', 'warning' or 'unsafe'
     * @param string $check    which check (server, eviction, scripting, time, pubsub, acl, persistence,
     *                         replication, clients, cluster, sentinel, redlock, latency, lock-cycle, ...):
     *                         stable names, to match on
     * @param string $server   host:port or socket path (never credentials), or the deployment for
     *                         checks of the whole
     * @param string $message  what was found, and why it matters for a lock
     * @param string $fix      what to change; '' when nothing needs to
     */
    public function __construct(
        public readonly string $severity,
        public readonly string $check,
        public readonly string $server,
        public readonly string $message,
        public readonly string $fix,
    ) {
    }
}
