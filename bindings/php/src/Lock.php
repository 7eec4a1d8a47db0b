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
     * over (the new holder's key is left alone).
     */
    public function release(): void
    {
        $handle = $this->handle();
        $this->handle = null;
        FFI::checkStatus(FFI::get()->redislock_release($handle));
    }

    /**
     * Drop this handle and keep the lock on the server until its TTL runs
     * out or Client::releaseToken($key, $token) releases it, from this or
     * another process (read token() first). It then outlives the request.
     * Background renewal stops.
     */
    public function forget(): void
    {
        $handle = $this->handle();
        $this->handle = null;
        FFI::get()->redislock_lock_forget($handle);
    }

    /** Release now if still held, ignoring errors (the end of a request). @internal */
    public function releaseQuietly(): void
    {
        if ($this->handle !== null) {
            $handle = $this->handle;
            $this->handle = null;
            FFI::get()->redislock_lock_free($handle);
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

    /** The token stored under the key (binary-safe). */
    public function token(): string
    {
        $ffi = FFI::get();
        $n = $ffi->redislock_lock_token($this->handle(), null, 0);
        $buf = $ffi->new("char[$n]");
        $ffi->redislock_lock_token($this->handle(), $buf, $n);
        return \FFI::string($buf, $n);
    }

    /**
     * The fencing number: greater than any handed out before for this name
     * to an earlier holder, also across a server restart that lost the
     * counter (it is at least the server's clock in microseconds, about
     * 1.8e15, and below 2^53). Drawn on the first call, with a check that
     * the lock is still held (one round trip; later calls answer from
     * memory; `fenced: true` at acquire draws it there instead).
     *
     * @throws LockNotOwned when the lock expired or was taken over before that
     */
    public function fence(): int
    {
        $ffi = FFI::get();
        $out = $ffi->new('uint64_t');
        FFI::checkStatus($ffi->redislock_lock_draw_fence($this->handle(), \FFI::addr($out)));
        return (int)$out->cdata;
    }

    public function key(): string
    {
        return $this->key;
    }

    private function handle(): \FFI\CData
    {
        return $this->handle ?? throw new LockNotOwned('this Lock was already released');
    }
}
