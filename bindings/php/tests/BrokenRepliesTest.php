<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;

/**
 * A server that lies never talks the library into a grant (issue 51).
 *
 * tests/fake/fake_redis.py --all serves, on one port per kind, a fake Redis
 * that answers the commands deciding a grant (SET ... NX ... GET and the
 * acquire scripts) with a broken reply of that kind. For every kind, in a
 * PHP process of its own (all at once, so that the suite takes seconds, and
 * a crash is the crash of one kind) with a client of its own
 * (command_timeout=1s, connect_timeout=1s): a tryAcquire(), then an
 * acquire() that waits 300 ms. Each must not crash the process, never
 * return a held lock, throw the expected exception (ConnectionException
 * for every kind but error_reply, ServerException there; a plain "not
 * acquired" only where the server's reply did say "held", as EXPECTED
 * says) and end within command_timeout + connect_timeout + wait + 1.5 s;
 * and no process's RSS grows by 64 MB or more.
 *
 * The fake server uses no real server: the Valkey pass of make test
 * (REDIS_SERVER=...valkey-server) would only repeat these tests, so they
 * are skipped there.
 */
final class BrokenRepliesTest extends TestCase
{
    private const COMMAND_TIMEOUT_MS = 1000;
    private const CONNECT_TIMEOUT_MS = 1000;
    private const WAIT_MS = 300;
    private const SLACK_MS = 1500;
    private const RSS_GROWTH_KB = 64 * 1024;

    /**
     * What each call may end in, per kind: [tryAcquire, acquire(waitMs)].
     * connection (ConnectionException), server (ServerException),
     * not_acquired (tryAcquire returned null: the lock is held), timeout (the
     * wait ran out: LockTimeout). "granted" is never right.
     */
    private const CONNECTION = [['connection'], ['connection']];
    private const EXPECTED = [
        'negative_bulk' => self::CONNECTION,
        'negative_array' => self::CONNECTION,
        // The first reply on a connection is a true "held"; the nil sent
        // 5 ms after it must never be read as the next command's reply.
        // Found at once (when both were read together) it is a protocol error.
        'reply_twice' => [['not_acquired', 'connection'], ['timeout', 'connection']],
        // A frame before any command is a protocol error; the replies after
        // it say "held".
        'unsolicited' => [['connection'], ['timeout', 'connection']],
        'dribble' => self::CONNECTION,
        'silent' => self::CONNECTION,
        'random_bytes' => self::CONNECTION,
        'truncated' => self::CONNECTION,
        'huge_bulk' => self::CONNECTION,
        'huge_array' => self::CONNECTION,
        'deep_nesting' => self::CONNECTION,
        'resp3' => self::CONNECTION,
        'int_overflow' => self::CONNECTION,
        'int_for_array' => self::CONNECTION,
        'array_for_int' => self::CONNECTION,
        'wrong_string' => self::CONNECTION,
        'trailing_garbage' => self::CONNECTION,
        'error_reply' => [['server'], ['server']],
        'bulk_too_long' => self::CONNECTION,
        'close_at_once' => self::CONNECTION,
        'empty_array' => self::CONNECTION,
    ];

    /** What one child process runs: $argv[1] the kind, $argv[2] the URL. Prints JSON. */
    private const CHILD = <<<'PHP'
        $rss = function (): int {
            preg_match('/^VmRSS:\s+(\d+)/m', (string)file_get_contents('/proc/self/status'), $m);
            return (int)$m[1];
        };
        [, $kind, $url, $wait] = $argv;
        pcntl_alarm(90); // a watchdog: SIGALRM ends a child hung anywhere
        $before = $rss();
        $client = new RedisLock\Client($url);
        $calls = [];
        foreach ([0, (int)$wait] as $n => $waitMs) {
            $t = hrtime(true);
            $message = '';
            try {
                $lock = $waitMs === 0
                    ? $client->tryAcquire("k:$kind:$n", ttlMs: 10000)
                    : $client->acquire("k:$kind:$n", ttlMs: 10000, waitMs: $waitMs);
                $out = $lock === null ? 'not_acquired' : 'granted';
                if ($lock !== null) {
                    try {
                        $lock->release();
                    } catch (Throwable) {
                    }
                }
            } catch (RedisLock\ConnectionException $e) {
                [$out, $message] = ['connection', $e->getMessage()];
            } catch (RedisLock\ServerException $e) {
                [$out, $message] = ['server', $e->getMessage()];
            } catch (RedisLock\LockTimeout $e) {
                [$out, $message] = ['timeout', $e->getMessage()];
            } catch (Throwable $e) {
                [$out, $message] = [get_class($e), $e->getMessage()];
            }
            $calls[] = ['wait' => $waitMs, 'out' => $out, 'message' => $message,
                        'elapsed_ms' => (hrtime(true) - $t) / 1e6];
            usleep(50000); // a leftover frame is there when the next call is sent
        }
        echo json_encode(['calls' => $calls, 'rss_growth_kb' => $rss() - $before]), "\n";
        PHP;

    /** @var array<string, array{status: int, stdout: string, stderr: string}>|null */
    private static ?array $results = null;
    /** @var list<string> */
    private static array $listed = [];

    private static function fake(): string
    {
        return dirname(__DIR__, 3) . '/tests/fake/fake_redis.py';
    }

    protected function setUp(): void
    {
        if (str_contains((string)getenv('REDIS_SERVER'), 'valkey')) {
            $this->markTestSkipped('the fake server uses no real server: not repeated on Valkey');
        }
    }

    /** Every kind at once, each in a PHP process; the fake server started and killed around. */
    private static function results(): array
    {
        if (self::$results !== null) {
            return self::$results;
        }
        self::$results = []; // made once: a failure to make them fails every test
        self::$listed = preg_split('/\s+/', trim((string)shell_exec('python3 ' . escapeshellarg(self::fake()) . ' --list')));
        // --lifetime: it exits by itself then, which ends any call still hung on it.
        $server = proc_open(['python3', self::fake(), '--all', '--lifetime', '60'], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w']], $pipes);
        self::assertIsResource($server);
        $results = [];
        try {
            $ports = [];
            while (($line = fgets($pipes[1])) !== false && trim($line) !== 'ready') {
                [$kind, $port] = explode(' ', trim($line));
                $ports[$kind] = (int)$port;
            }
            $autoload = realpath(__DIR__ . '/../autoload.php');
            $children = [];
            foreach ($ports as $kind => $port) {
                $url = sprintf('redis://127.0.0.1:%d/0?command_timeout=%dms&connect_timeout=%dms',
                    $port, self::COMMAND_TIMEOUT_MS, self::CONNECT_TIMEOUT_MS);
                $code = "require '$autoload';\n" . self::CHILD;
                $p = proc_open([PHP_BINARY, '-r', $code, $kind, $url, (string)self::WAIT_MS],
                    [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $cpipes, null, getenv());
                $children[$kind] = [$p, $cpipes];
            }
            foreach ($children as $kind => [$p, $cpipes]) {
                $stdout = stream_get_contents($cpipes[1]);
                $stderr = stream_get_contents($cpipes[2]);
                fclose($cpipes[1]);
                fclose($cpipes[2]);
                $results[$kind] = ['status' => proc_close($p), 'stdout' => $stdout, 'stderr' => $stderr];
            }
        } finally {
            proc_terminate($server, 9);
            fclose($pipes[1]);
            proc_close($server);
        }
        return self::$results = $results;
    }

    public function testEveryKindTheFakeServerHasIsInTheTable(): void
    {
        self::results();
        $this->assertSame(array_keys(self::EXPECTED), self::$listed,
            'fake_redis.py --list and EXPECTED differ: give each new kind its expected outcome');
    }

    public static function kinds(): array
    {
        $out = [];
        foreach (array_keys(self::EXPECTED) as $kind) {
            $out[$kind] = [$kind];
        }
        return $out;
    }

    /** @dataProvider kinds */
    public function testABrokenReplyIsNeverAGrant(string $kind): void
    {
        $r = self::results()[$kind] ?? null;
        $this->assertNotNull($r, "$kind did not run");
        $got = json_decode(trim($r['stdout']), true);
        $this->assertIsArray($got, "$kind: the process died (exit status {$r['status']}): {$r['stdout']}{$r['stderr']}");
        $failures = [];
        foreach ($got['calls'] as $i => $c) {
            $what = $c['wait'] === 0 ? 'tryAcquire' : "acquire(waitMs: {$c['wait']})";
            $allowed = self::EXPECTED[$kind][$i];
            if ($c['out'] === 'granted') {
                $failures[] = "$kind $what: GRANTED a lock the server never gave";
            } elseif (!in_array($c['out'], $allowed, true)) {
                $failures[] = "$kind $what: {$c['out']} (expected " . implode(' or ', $allowed) . "): {$c['message']}";
            }
            $bound = self::COMMAND_TIMEOUT_MS + self::CONNECT_TIMEOUT_MS + $c['wait'] + self::SLACK_MS;
            if ($c['elapsed_ms'] > $bound) {
                $failures[] = sprintf('%s %s: took %.0f ms (bound %d ms)', $kind, $what, $c['elapsed_ms'], $bound);
            }
        }
        if ($got['rss_growth_kb'] >= self::RSS_GROWTH_KB) {
            $failures[] = sprintf('%s: RSS grew by %d MB (bound %d MB)', $kind, $got['rss_growth_kb'] / 1024,
                self::RSS_GROWTH_KB / 1024);
        }
        $this->assertSame([], $failures, implode('; ', $failures));
        $this->assertSame(0, $r['status'], "$kind: exit status {$r['status']}: {$r['stderr']}");
    }
}
