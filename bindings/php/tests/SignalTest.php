<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;

/**
 * Signals never turn into false errors: a waiting acquire gets SIGUSR1 many
 * times (a pcntl handler installed, restarting system calls or not) and
 * still acquires; a release held up by the server gets them too and reports
 * its true outcome; a waiter stopped and continued still acquires.
 */
final class SignalTest extends TestCase
{
    private RedisServer $server;

    protected function setUp(): void
    {
        $this->server = new RedisServer();
    }

    protected function tearDown(): void
    {
        $this->server->stop();
    }

    /** pcntl_signal's $restart_syscalls (SA_RESTART). */
    public function restarts(): array
    {
        return ['SA_RESTART' => [true], 'no SA_RESTART' => [false]];
    }

    /** Whether $signo was sent to process $pid and not yet delivered. */
    private static function pending(int $pid, int $signo): bool
    {
        $status = (string)@file_get_contents("/proc/$pid/status");
        foreach (['ShdPnd', 'SigPnd'] as $field) {
            if (preg_match("/^$field:\\s*([0-9a-f]+)/m", $status, $m)
                && (hexdec(substr($m[1], -8)) & (1 << ($signo - 1)))) {
                return true;
            }
        }
        return false;
    }

    /**
     * Send SIGUSR1 to $pid $n times, 20 ms apart, each once the one before
     * was delivered: on a busy machine $pid may not run for a while, and
     * signals sent meanwhile would merge into one.
     */
    private static function sendSignals(int $pid, int $n): void
    {
        for ($i = 0; $i < $n; $i++) {
            posix_kill($pid, SIGUSR1);
            waitUntil(fn() => !self::pending($pid, SIGUSR1), 5);
            usleep(20000);
        }
    }

    /**
     * Run $body in a pcntl_fork() child, which then dies by SIGKILL when
     * $body returned true and by SIGTERM otherwise (also when it threw), so
     * that no PHP shutdown (PHPUnit's) runs in it. Returns its pid.
     */
    private static function child(callable $body): int
    {
        $pid = pcntl_fork();
        if ($pid === 0) {
            $ok = false;
            try {
                $ok = (bool)$body();
            } catch (\Throwable $e) {
                fwrite(STDERR, "child: $e\n");
            } finally {
                posix_kill(posix_getpid(), $ok ? SIGKILL : SIGTERM);
            }
        }
        return $pid;
    }

    /** Wait for the child $pid to end (also through signals); its status. */
    private static function reap(int $pid): int
    {
        do {
            $r = pcntl_waitpid($pid, $status);
        } while ($r === -1 && pcntl_get_last_error() === PCNTL_EINTR);
        return $status;
    }

    /** Count SIGUSR1 in $seen, delivered as soon as it arrives. */
    private static function countSignals(int &$seen, bool $restart): void
    {
        pcntl_async_signals(true);
        pcntl_signal(SIGUSR1, function () use (&$seen) {
            $seen++;
        }, $restart);
    }

    /** @dataProvider restarts */
    public function testAWaitRidesOutSignalsWithAHandler(bool $restart): void
    {
        $client = new Client($this->server->url());
        $holder = $client->acquire('sig', ttlMs: 30000, waitMs: 0);
        $seen = 0;
        self::countSignals($seen, $restart);
        $parent = getmypid();
        // A child waits until this process is queued, sends it SIGUSR1 25
        // times, 20 ms apart, then releases the holder's lock by its token.
        $port = $this->server->port;
        $token = $holder->token();
        $pid = self::child(function () use ($port, $parent, $token) {
            $r = new Redis();
            $r->connect('127.0.0.1', $port);
            $queued = waitUntil(fn() => $r->exists('{sig}:queue') > 0, 10);
            if ($queued) {
                self::sendSignals($parent, 25);
            }
            $r->eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
                ['sig', $token], 1);
            return $queued;
        });
        try {
            $lock = $client->acquire('sig', ttlMs: 10000, waitMs: 20000);
            $this->assertGreaterThan(0, $lock->fence());
            $lock->release();
        } finally {
            $status = self::reap($pid);
            pcntl_signal(SIGUSR1, SIG_DFL);
        }
        $this->assertSame(SIGKILL, pcntl_wtermsig($status), 'the child never saw this process queued');
        $this->assertSame(25, $seen, 'the signals did arrive, each on its own');
        unset($holder);
    }

    /** The connections whose script is held up by CLIENT PAUSE WRITE. */
    private static function heldUp(Redis $r): array
    {
        $ids = [];
        foreach ($r->client('list') as $c) {
            if (($c['cmd'] ?? '') === 'evalsha' && str_contains($c['flags'] ?? '', 'b')) {
                $ids[] = $c['id'];
            }
        }
        sort($ids);
        return $ids;
    }

    /** @dataProvider restarts */
    public function testAReleaseHeldUpByTheServerRidesOutSignals(bool $restart): void
    {
        // The release may wait 30 s for its reply (the default is 2 s): the
        // signals below take longer than that on a busy machine.
        $client = new Client($this->server->url() . '?command_timeout=30s');
        $lock = $client->acquire('sig-release', ttlMs: 60000, waitMs: 0);
        $seen = 0;
        self::countSignals($seen, $restart);
        $parent = getmypid();
        $r = $this->server->raw();
        $r->rawCommand('CLIENT', 'PAUSE', '30000', 'WRITE');
        // A child waits until the release is held up, then sends SIGUSR1
        // 25 times, 20 ms apart, checks that the same connection is still
        // waiting (the release was not given up and sent again), and lets
        // writes resume. Its exit status is the check.
        $port = $this->server->port;
        $pid = self::child(function () use ($port, $parent) {
            $w = new Redis();
            $w->connect('127.0.0.1', $port);
            try {
                waitUntil(fn() => self::heldUp($w) !== [], 10);
                $before = self::heldUp($w);
                self::sendSignals($parent, 25);
                return $before !== [] && self::heldUp($w) === $before;
            } finally {
                $w->rawCommand('CLIENT', 'UNPAUSE');
            }
        });
        try {
            $lock->release(); // no exception: released
        } finally {
            $status = self::reap($pid);
            pcntl_signal(SIGUSR1, SIG_DFL);
        }
        $this->assertSame(SIGKILL, pcntl_wtermsig($status), 'the same connection waited for the reply');
        $this->assertSame(25, $seen, 'the signals did arrive, each on its own');
        $this->assertFalse($r->get('sig-release'));
    }

    public function testAStoppedAndContinuedWaiterStillGetsTheLock(): void
    {
        $client = new Client($this->server->url());
        $holder = $client->acquire('stopped', ttlMs: 30000, waitMs: 0);
        $parent = getmypid();
        // A child waits until this process is queued, stops and continues
        // it five times, then releases the holder's lock by its token.
        $port = $this->server->port;
        $token = $holder->token();
        $holderFence = $holder->fence(); // drawn while it holds the lock
        $pid = self::child(function () use ($port, $parent, $token) {
            $r = new Redis();
            $r->connect('127.0.0.1', $port);
            $queued = waitUntil(fn() => $r->exists('{stopped}:queue') > 0, 10);
            for ($i = 0; $queued && $i < 5; $i++) {
                posix_kill($parent, SIGSTOP);
                usleep(50000);
                posix_kill($parent, SIGCONT);
                usleep(50000);
            }
            $r->eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
                ['stopped', $token], 1);
            return $queued;
        });
        try {
            $lock = $client->acquire('stopped', ttlMs: 10000, waitMs: 20000);
            $this->assertGreaterThan($holderFence, $lock->fence());
            $lock->release();
        } finally {
            $status = self::reap($pid);
        }
        $this->assertSame(SIGKILL, pcntl_wtermsig($status), 'the child never saw this process queued');
        unset($holder);
    }
}
