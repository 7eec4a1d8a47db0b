<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * A lock held by this process. Going out of scope releases it (best
 * effort), except in a child made by pcntl_fork(), where it is inert: the
 * parent keeps its lock.
 */
final class Lock
{
    private ?\FFI\CData $handle;

    /** The fencing number once drawn (kept after the release). */
    private ?int $fence = null;
    private ?string $token = null;

    /** @internal made by Client */
    public function __construct(\FFI\CData $handle, private readonly string $key)
    {
        $this->handle = $handle;
        RequestEnd::track($this);
    }

    public function __destruct()
    {
        $this->releaseQuietly();
    }

    /**
     * Release the lock. Throws LockNotOwned when it expired or was taken
     * over (the new holder's key is left alone). fence() still answers
     * afterwards with the number drawn while it was held.
     */
    public function release(): void
    {
        $handle = $this->letGo();
        FFI::checkStatus(FFI::get()->redislock_release($handle));
    }

    /**
     * The handle, taken out of this object (which then holds nothing), with
     * the fence drawn while it was held (by the acquire, a hand-off or
     * fence()) kept for fence(): read from memory, no round trip.
     */
    private function letGo(): \FFI\CData
    {
        $handle = $this->handle();
        if ($this->fence === null) {
            $fence = FFI::get()->redislock_lock_fence_if_drawn($handle);
            $this->fence = $fence > 0 ? (int)$fence : null;
        }
        $this->token ??= self::readToken($handle);
        $this->handle = null;
        return $handle;
    }

    /**
     * Drop this handle and keep the lock on the server until its TTL runs
     * out or Client::releaseToken($key, $token) releases it, from this or
     * another process (token() still answers). It then outlives the request.
     * Background renewal stops.
     */
    public function forget(): void
    {
        FFI::get()->redislock_lock_forget($this->letGo());
    }

    /** Release now if still held, ignoring errors (the end of a request). @internal */
    public function releaseQuietly(): void
    {
        if ($this->handle !== null) {
            FFI::get()->redislock_lock_free($this->letGo());
        }
    }

    /** Set the remaining time to $ttlMs (not added to it). Throws LockNotOwned when lost. */
    public function extend(int $ttlMs): void
    {
        if ($ttlMs <= 0) {
            throw new InvalidArgument("ttlMs must be at least 1, got $ttlMs");
        }
        FFI::checkStatus(FFI::get()->redislock_extend($this->handle(), $ttlMs));
    }

    /** Renew in the background at about a third of the TTL until released. */
    public function autoRenew(): void
    {
        FFI::checkStatus(FFI::get()->redislock_lock_auto_renew($this->handle()));
    }

    /**
     * True once background renewal or an extend found the lock
     * gone (it expired, or another owner took it): from then on, work done
     * "under" it is unprotected.
     *
     * This is the way for PHP code to learn of a loss during long work.
     * With autoRenew, renewal runs on a thread of the native library, also
     * under PHP, while PHP code runs: when a renewal finds the key taken
     * over, this turns true at once. PHP gets no callback from that thread
     * (PHP code cannot run there), so check this between the steps of long
     * work and stop when it is true. It reads a flag: no round trip, cheap
     * enough for every iteration of a loop. (Client::isOwnedBy() asks the
     * server, one round trip.) Client::synchronized() checks it when the
     * callable returns.
     */
    public function isLost(): bool
    {
        return FFI::get()->redislock_lock_is_lost($this->handle());
    }

    /**
     * Whether this handle still holds its lock (or its semaphore permits,
     * or its side of a read-write lock), asked of the server now: one
     * round trip. False does not mark the handle lost.
     *
     * @throws LockException when the server cannot be reached
     */
    public function owned(): bool
    {
        $ffi = FFI::get();
        $out = $ffi->new('bool');
        FFI::checkStatus($ffi->redislock_lock_owned($this->handle(), \FFI::addr($out)));
        return (bool)$out->cdata;
    }

    /**
     * The token stored under the key (binary-safe). Still answers after
     * release() or forget(), as fence() does.
     */
    public function token(): string
    {
        return $this->token ??= self::readToken($this->handle());
    }

    private static function readToken(\FFI\CData $handle): string
    {
        $ffi = FFI::get();
        $n = $ffi->redislock_lock_token($handle, null, 0);
        $buf = $ffi->new("char[$n]");
        $ffi->redislock_lock_token($handle, $buf, $n);
        return \FFI::string($buf, $n);
    }

    /**
     * The fencing number: greater than any handed out before for this name
     * to an earlier holder, also across a server restart that lost the
     * counter (it is at least the server's clock in microseconds, about
     * 1.8e15, and below 2^53). Drawn on the first call, with a check that
     * the lock is still held (one round trip; later calls answer from
     * memory; `fenced: true` at acquire draws it there instead, and so do
     * semaphores, read-write locks and Redlock).
     *
     * After release() (or forget(), or the end of the request) it is the
     * number drawn while the lock was held; a fence is never drawn for a
     * lock no longer held.
     *
     * @throws LockNotOwned when the lock expired or was taken over before
     *                      its fence was drawn, or was released before that
     */
    public function fence(): int
    {
        if ($this->fence !== null) {
            return $this->fence;
        }
        if ($this->handle === null) {
            throw new LockNotOwned(
                'the lock ' . self::show($this->key) . ' was released before its fence was drawn: '
                . 'read fence() while holding it, or acquire with fenced: true',
                FFI::NOT_OWNER,
            );
        }
        $ffi = FFI::get();
        $out = $ffi->new('uint64_t');
        FFI::checkStatus($ffi->redislock_lock_draw_fence($this->handle, \FFI::addr($out)));
        return $this->fence = (int)$out->cdata;
    }

    public function key(): string
    {
        return $this->key;
    }

    /**
     * What var_dump() and print_r() show.
     *
     * @return array{key: string, held: bool, fence: ?int}
     */
    public function __debugInfo(): array
    {
        return ['key' => $this->key, 'held' => $this->handle !== null, 'fence' => $this->fence];
    }

    /**
     * A Lock is a live handle: it cannot be serialized. To hand a lock to
     * another process, forget() it and pass its key and token()
     * (Client::releaseToken(), extendToken(), fenceToken()).
     *
     * @throws \LogicException always
     */
    public function __serialize(): array
    {
        throw new \LogicException('a RedisLock\\Lock cannot be serialized: pass its key and token() instead');
    }

    /** @throws \LogicException always */
    public function __unserialize(array $data): void
    {
        throw new \LogicException('a RedisLock\\Lock cannot be unserialized');
    }

    /**
     * One acquisition has one handle: a clone would release it twice.
     *
     * @throws \LogicException always
     */
    public function __clone()
    {
        // The copy is destroyed when this throws: it must not free the original's handle.
        $this->handle = null;
        throw new \LogicException('a RedisLock\\Lock cannot be cloned');
    }

    /** A key for a message: printable as it is, else in hex. */
    private static function show(string $key): string
    {
        return preg_match('/^[\x20-\x7e]*$/', $key) ? '"' . $key . '"' : 'hex:' . bin2hex($key);
    }

    private function handle(): \FFI\CData
    {
        return $this->handle ?? throw new LockNotOwned('this Lock was already released');
    }
}
