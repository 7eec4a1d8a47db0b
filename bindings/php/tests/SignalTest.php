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
        $holder = $client->acquire('sig', ttlMs: 10000, waitMs: 0);
        $seen = 0;
        self::countSignals($seen, $restart);
        $parent = getmypid();
        // A child sends SIGUSR1 to this process every 20 ms for 0.5 s, then
        // releases the holder's lock by its token.
        $pid = pcntl_fork();
        if ($pid === 0) {
            for ($i = 0; $i < 25; $i++) {
                posix_kill($parent, SIGUSR1);
                usleep(20000);
            }
            $r = new Redis();
            $r->connect('127.0.0.1', $this->server->port);
            $r->eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
                ['sig', $holder->token()], 1);
            posix_kill(getmypid(), SIGKILL);
        }
        try {
            $lock = $client->acquire('sig', ttlMs: 10000, waitMs: 20000);
            $this->assertGreaterThan(0, $lock->fence());
            $lock->release();
        } finally {
            pcntl_waitpid($pid, $status);
            pcntl_signal(SIGUSR1, SIG_DFL);
        }
        $this->assertGreaterThan(5, $seen, 'the signals did arrive');
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
        $client = new Client($this->server->url());
        $lock = $client->acquire('sig-release', ttlMs: 10000, waitMs: 0);
        $seen = 0;
        self::countSignals($seen, $restart);
        $parent = getmypid();
        $r = $this->server->raw();
        $r->rawCommand('CLIENT', 'PAUSE', '10000', 'WRITE');
        // A child waits until the release is held up, then sends SIGUSR1
        // every 20 ms for 0.5 s, checks that the same connection is still
        // waiting (the release was not given up and sent again), and lets
        // writes resume. Its exit status is the check.
        $pid = pcntl_fork();
        if ($pid === 0) {
            $w = new Redis();
            $w->connect('127.0.0.1', $this->server->port);
            for ($i = 0; $i < 1000 && self::heldUp($w) === []; $i++) {
                usleep(10000);
            }
            $before = self::heldUp($w);
            for ($i = 0; $i < 25; $i++) {
                posix_kill($parent, SIGUSR1);
                usleep(20000);
            }
            $same = $before !== [] && self::heldUp($w) === $before;
            $w->rawCommand('CLIENT', 'UNPAUSE');
            posix_kill(getmypid(), $same ? SIGKILL : SIGTERM);
        }
        try {
            $lock->release(); // no exception: released
        } finally {
            pcntl_waitpid($pid, $status);
            pcntl_signal(SIGUSR1, SIG_DFL);
        }
        $this->assertSame(SIGKILL, pcntl_wtermsig($status), 'the same connection waited for the reply');
        $this->assertGreaterThan(5, $seen, 'the signals did arrive');
        $this->assertFalse($r->get('sig-release'));
    }

    public function testAStoppedAndContinuedWaiterStillGetsTheLock(): void
    {
        $client = new Client($this->server->url());
        $holder = $client->acquire('stopped', ttlMs: 30000, waitMs: 0);
        $parent = getmypid();
        // A child waits until this process is queued, stops and continues
        // it five times, then releases the holder's lock by its token.
        $pid = pcntl_fork();
        if ($pid === 0) {
            $r = new Redis();
            $r->connect('127.0.0.1', $this->server->port);
            for ($i = 0; $i < 1000 && !$r->exists('{stopped}:queue'); $i++) {
                usleep(10000);
            }
            for ($i = 0; $i < 5; $i++) {
                posix_kill($parent, SIGSTOP);
                usleep(50000);
                posix_kill($parent, SIGCONT);
                usleep(50000);
            }
            $r->eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
                ['stopped', $holder->token()], 1);
            posix_kill(getmypid(), SIGKILL);
        }
        try {
            $lock = $client->acquire('stopped', ttlMs: 10000, waitMs: 20000);
            $this->assertGreaterThan($holder->fence(), $lock->fence());
            $lock->release();
        } finally {
            pcntl_waitpid($pid, $status);
        }
        $this->assertSame(SIGKILL, pcntl_wtermsig($status));
        unset($holder);
    }
}
