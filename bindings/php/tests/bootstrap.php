<?php
// PHPUnit bootstrap: the package (without Composer) and a throwaway
// redis-server harness. Servers run on free loopback ports in temporary
// directories and are killed when the test ends; port 6379 is never used.
// $REDIS_SERVER chooses the server binary, as for every suite of the
// project: redis-server on the PATH by default, or a path (a relative one
// is taken from the repository root), e.g. Valkey's (make test-valkey).
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

/**
 * Poll $ok until it holds; false once $seconds have passed without it. The
 * tests wait for events this way, with a deadline generous enough for a
 * busy machine (scheduling pauses of 50-300 ms are normal while a compiler
 * runs), instead of sleeping a fixed time or reading at once.
 */
function waitUntil(callable $ok, float $seconds = 10.0): bool
{
    $deadline = microtime(true) + $seconds;
    while (!$ok()) {
        if (microtime(true) > $deadline) {
            return false;
        }
        usleep(2000);
    }
    return true;
}

/**
 * How many scripts (EVAL, EVALSHA) the server behind $raw ran so far, not
 * counting the calls that failed (an EVALSHA of a script it did not know
 * yet): what a test counts instead of timing a call.
 */
/** How many times the server ran $command (lower case), failed calls left out. */
function commandCalls(Redis $raw, string $command): int
{
    $stats = $raw->info('commandstats')["cmdstat_$command"] ?? '';
    if (!preg_match('/(?:^|,)calls=(\d+)/', $stats, $calls)) {
        return 0;
    }
    return (int)$calls[1] - (preg_match('/failed_calls=(\d+)/', $stats, $failed) ? (int)$failed[1] : 0);
}

function scriptCalls(Redis $raw): int
{
    $n = 0;
    foreach ($raw->info('commandstats') as $name => $stats) {
        if (in_array($name, ['cmdstat_eval', 'cmdstat_evalsha'], true)
            && preg_match('/(?:^|,)calls=(\d+)/', $stats, $calls)) {
            $n += (int)$calls[1] - (preg_match('/failed_calls=(\d+)/', $stats, $failed) ? (int)$failed[1] : 0);
        }
    }
    return $n;
}

/** The server binary of $REDIS_SERVER (default redis-server on the PATH). */
function redisServerBin(): string
{
    $bin = getenv('REDIS_SERVER') ?: 'redis-server';
    if (str_contains($bin, '/') && $bin[0] !== '/') {
        $bin = dirname(__DIR__, 3) . '/' . $bin;
    }
    return $bin;
}

/**
 * [family, version] of the server behind $raw: ['valkey', valkey_version]
 * when INFO says server_name:valkey, else ['redis', redis_version]
 * (redis_version alone does not tell: Valkey reports 7.2.4 there).
 */
function serverInfo(Redis $raw): array
{
    $info = $raw->info('server');
    if (($info['server_name'] ?? null) === 'valkey') {
        return ['valkey', (string)$info['valkey_version']];
    }
    return ['redis', (string)$info['redis_version']];
}

final class RedisServer
{
    public int $port = 0;
    private $proc = null;
    private string $dir;

    public string $bin;

    public function __construct()
    {
        $this->bin = redisServerBin();
        if (str_contains($this->bin, '/') ? !is_executable($this->bin)
            : trim((string)shell_exec('command -v ' . escapeshellarg($this->bin))) === '') {
            throw new RuntimeException("cannot run {$this->bin}: apt-get install redis-server (make test does), "
                . 'or set REDIS_SERVER');
        }
        $this->dir = sys_get_temp_dir() . '/redislock-php-' . bin2hex(random_bytes(6));
        mkdir($this->dir);
        for ($try = 0; $try < 20; $try++) {
            $this->port = self::freePort();
            if ($this->launch()) {
                return;
            }
        }
        throw new RuntimeException('could not start redis-server on a free port');
    }

    /** Start redis-server on $this->port; false when it exited at once. */
    private function launch(): bool
    {
        $cmd = [$this->bin, '--port', (string)$this->port, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
            '--dir', $this->dir, '--logfile', 'redis.log', '--daemonize', 'no'];
        $null = ['file', '/dev/null', 'r'];
        $this->proc = proc_open($cmd, [0 => $null, 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
        if (!is_resource($this->proc)) {
            throw new RuntimeException("cannot run {$this->bin}: apt-get install redis-server (make test does)");
        }
        return $this->waitReady();
    }

    /** SHUTDOWN NOSAVE, then start again on the same port with no data. */
    public function restart(): void
    {
        try {
            $this->raw()->rawCommand('SHUTDOWN', 'NOSAVE');
        } catch (RedisException $e) {
            // the server closes the connection as it goes
        }
        $deadline = microtime(true) + 10;
        while (proc_get_status($this->proc)['running']) {
            if (microtime(true) > $deadline) {
                throw new RuntimeException("redis-server on port {$this->port} did not shut down");
            }
            usleep(10000);
        }
        proc_close($this->proc);
        while (!$this->launch()) {
            if (microtime(true) > $deadline) {
                throw new RuntimeException("could not restart redis-server on port {$this->port}");
            }
            usleep(50000);
        }
    }

    private function waitReady(): bool
    {
        $deadline = microtime(true) + 10;
        while (microtime(true) < $deadline) {
            if (!proc_get_status($this->proc)['running']) {
                return false;
            }
            $s = @fsockopen('127.0.0.1', $this->port, $errno, $errstr, 0.2);
            if ($s) {
                fwrite($s, "PING\r\n");
                $ok = fgets($s) === "+PONG\r\n";
                fclose($s);
                if ($ok) {
                    return true;
                }
            }
            usleep(10000);
        }
        throw new RuntimeException("redis-server on port {$this->port} did not answer");
    }

    public static function freePort(): int
    {
        do {
            $s = stream_socket_server('tcp://127.0.0.1:0');
            $name = stream_socket_get_name($s, false);
            fclose($s);
            $port = (int)substr($name, strrpos($name, ':') + 1);
        } while ($port === 6379);
        return $port;
    }

    /** The server's process id. */
    public function pid(): int
    {
        return proc_get_status($this->proc)['pid'];
    }

    public function url(): string
    {
        return "redis://127.0.0.1:{$this->port}/0";
    }

    /** A raw phpredis connection for checking what was written. */
    public function raw(): Redis
    {
        $r = new Redis();
        $r->connect('127.0.0.1', $this->port);
        return $r;
    }

    public function stop(): void
    {
        if ($this->proc !== null) {
            $status = proc_get_status($this->proc);
            if ($status['running']) {
                posix_kill($status['pid'], SIGKILL);
            }
            proc_close($this->proc);
            $this->proc = null;
            @unlink($this->dir . '/redis.log');
            @rmdir($this->dir);
        }
    }

    public function __destruct()
    {
        $this->stop();
    }
}
