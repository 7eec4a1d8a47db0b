<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\Client;
use RedisLock\ConnectionException;
use RedisLock\InvalidArgument;
use RedisLock\NoQuorum;

/**
 * The connect, command and Redlock node timeouts given to the Client
 * constructor and to Client::persistent() (connectTimeoutMs,
 * commandTimeoutMs, nodeTimeoutMs): checked before any I/O, handed to the
 * core as URL parameters, and the ones that end a call to a server that
 * does not answer. The core's error names the timeout that ran out and its
 * value, which is what these tests read (beside lower bounds on the time
 * taken, which the core guarantees).
 */
final class ClientTimeoutTest extends TestCase
{
    private const OPTIONS = ['connectTimeoutMs', 'commandTimeoutMs', 'nodeTimeoutMs'];

    /** @var list<resource> listening sockets, closed at the end */
    private array $sockets = [];

    protected function tearDown(): void
    {
        foreach ($this->sockets as $s) {
            fclose($s);
        }
    }

    /** A listening socket nobody accepts from or reads: connecting works, no reply ever comes. */
    private function silent(int $backlog = 50): string
    {
        $ctx = stream_context_create(['socket' => ['backlog' => $backlog]]);
        $s = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr, STREAM_SERVER_BIND | STREAM_SERVER_LISTEN, $ctx);
        $this->assertNotFalse($s, $errstr);
        $this->sockets[] = $s;
        return 'redis://' . stream_socket_get_name($s, false) . '/0';
    }

    /**
     * A try-once acquire (TTL 30 s) that must fail with $class: the
     * exception, and the milliseconds it took.
     *
     * @param class-string<\Throwable> $class
     * @return array{0: \Throwable, 1: float}
     */
    private function failedTry(Client $client, string $class, string $what): array
    {
        $start = hrtime(true);
        try {
            $client->tryAcquire('php:timeout', ttlMs: 30000);
        } catch (\Throwable $e) {
            $this->assertInstanceOf($class, $e, (string)$e);
            return [$e, (hrtime(true) - $start) / 1e6];
        }
        $this->fail("acquired from $what");
    }

    public function testBadTimeoutsAreRefusedBeforeAnyIo(): void
    {
        foreach (self::OPTIONS as $option) {
            foreach ([0, -1, 3600001, PHP_INT_MAX, PHP_INT_MIN] as $bad) {
                foreach ([fn () => new Client('redis://127.0.0.1:1', ...[$option => $bad]),
                    fn () => Client::persistent('redis://127.0.0.1:1', ...[$option => $bad])] as $open) {
                    try {
                        $open();
                        $this->fail("$option: $bad was taken");
                    } catch (InvalidArgument $e) {
                        $this->assertStringContainsString("$option must be 1 ms to 1 hour", $e->getMessage());
                    }
                }
            }
            // The longest and the shortest.
            new Client('redis://127.0.0.1:1', ...[$option => 3600000]);
            new Client(['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3'], ...[$option => 1]);
        }
    }

    /** What var_dump() shows of a client is its URL (without its password): the one the core was given. */
    private static function urlOf(Client $c): string
    {
        return $c->__debugInfo()['url'];
    }

    /** Client::withTimeouts(), the private step that makes the core's URL. */
    private static function withTimeouts(string|array $url, ?int $connect, ?int $command, ?int $node = null): string|array
    {
        return (new ReflectionMethod(Client::class, 'withTimeouts'))->invoke(null, $url, $connect, $command, $node);
    }

    public function testTheTimeoutsBecomeUrlParameters(): void
    {
        $cases = [
            'redis://h:1/0' => 'redis://h:1/0?connect_timeout=250ms&command_timeout=1500ms',
            'unix:///run/r.sock?db=2' => 'unix:///run/r.sock?db=2&connect_timeout=250ms&command_timeout=1500ms',
            'redis://h:1?' => 'redis://h:1?connect_timeout=250ms&command_timeout=1500ms',
            'redis://h:1/?db=1&' => 'redis://h:1/?db=1&connect_timeout=250ms&command_timeout=1500ms',
            // The query ends where a fragment begins: the parameters go before it.
            'redis+cluster://h:1,h:2#x' => 'redis+cluster://h:1,h:2?connect_timeout=250ms&command_timeout=1500ms#x',
            // Another parameter of the same prefix is not the same one.
            'redis://h:1?command_timeouts=1' => 'redis://h:1?command_timeouts=1&connect_timeout=250ms&command_timeout=1500ms',
        ];
        foreach ($cases as $url => $want) {
            $this->assertSame($want, self::withTimeouts($url, 250, 1500), $url);
        }
        $this->assertSame('redis://h:1/0', self::withTimeouts('redis://h:1/0', null, null));
        $this->assertSame('redis://h:1?node_timeout=3600000ms', self::withTimeouts('redis://h:1', null, null, 3600000));

        // What the core is given, as var_dump() shows it.
        $this->assertSame('redis://h:1/0', self::urlOf(new Client('redis://h:1/0')));
        $this->assertSame(
            'redis://h:1/0?connect_timeout=250ms&command_timeout=1500ms',
            self::urlOf(new Client('redis://h:1/0', connectTimeoutMs: 250, commandTimeoutMs: 1500)),
        );
        $this->assertSame('redis://h:1?node_timeout=1ms', self::urlOf(new Client('redis://h:1', nodeTimeoutMs: 1)));
        // The password stays hidden; every URL of a Redlock list gets them.
        $this->assertSame(
            '[redis://:***@a:1?command_timeout=300ms&node_timeout=50ms, redis://b:2/0?db=0&command_timeout=300ms&node_timeout=50ms]',
            self::urlOf(new Client(['redis://:secret@a:1', 'redis://b:2/0?db=0'], commandTimeoutMs: 300, nodeTimeoutMs: 50)),
        );
        $this->assertSame(
            'redis://h:1?connect_timeout=250ms',
            self::urlOf(Client::persistent('redis://h:1', connectTimeoutMs: 250)),
        );
    }

    /**
     * Given both in the URL and as an option: the option wins. Every
     * occurrence of the URL's own parameter goes (its name read
     * percent-decoded, with a value or without), on every URL of a Redlock
     * list; the rest of the URL stays as it was.
     */
    public function testTheOptionWinsOverTheUrlsParameter(): void
    {
        $cases = [
            'redis://h:1?command_timeout=5s' => 'redis://h:1?command_timeout=300ms',
            'redis://h:1/0?db=0&command%5Ftimeout=5s' => 'redis://h:1/0?db=0&command_timeout=300ms',
            'redis://h:1?command_timeout' => 'redis://h:1?command_timeout=300ms',
            'redis://u:p%40ss@h:1/0?command_timeout=5s&db=0&node_timeout=9s&command%5ftimeout=7s&command_timeout#frag'
                => 'redis://u:p%40ss@h:1/0?db=0&node_timeout=9s&command_timeout=300ms#frag',
            // A timeout the option does not set stays the URL's.
            'redis://h:1?connect_timeout=1s&db=0' => 'redis://h:1?connect_timeout=1s&db=0&command_timeout=300ms',
        ];
        foreach ($cases as $url => $want) {
            $this->assertSame($want, self::withTimeouts($url, null, 300), $url);
        }
        $this->assertSame(
            ['redis://a:1?db=1&command_timeout=300ms', 'redis://b:2?command_timeout=300ms'],
            self::withTimeouts(['redis://a:1?command_timeout=5s&db=1', 'redis://b:2?command_timeout=7s'], null, 300),
        );
        // What the core is given, as var_dump() shows it: the password stays hidden.
        $this->assertSame(
            '[redis://:***@a:1?command_timeout=300ms, redis://b:2/0?db=0&command_timeout=300ms]',
            self::urlOf(new Client(['redis://:secret@a:1?command_timeout=5s', 'redis://b:2/0?command%5Ftimeout=5s&db=0'],
                commandTimeoutMs: 300)),
        );
        $this->assertSame(
            'redis://h:1?command_timeout=300ms',
            self::urlOf(Client::persistent('redis://h:1?command_timeout=5s', commandTimeoutMs: 300)),
        );
        // The URL's alone, or another timeout beside it: taken as they are.
        $this->assertSame('redis://h:1?command_timeout=5s', self::urlOf(new Client('redis://h:1?command_timeout=5s')));
        $this->assertSame(
            'redis://h:1?command_timeout=5s&connect_timeout=300ms',
            self::urlOf(new Client('redis://h:1?command_timeout=5s', connectTimeoutMs: 300)),
        );
    }

    /**
     * The URL says 5 s and the options 300 ms against a server that never
     * answers: it fails after the option's 300 ms, well before the URL's
     * 5 s and the default 2 s; on every URL of a Redlock list too.
     */
    public function testTheOptionWinsAgainstAServerThatDoesNotAnswer(): void
    {
        $client = new Client($this->silent() . '?connect_timeout=5s&command_timeout=5s',
            connectTimeoutMs: 300, commandTimeoutMs: 300);
        [$e, $tookMs] = $this->failedTry($client, ConnectionException::class, 'a server that never answers');
        $this->assertStringContainsString('300ms', $e->getMessage());
        $this->assertLessThan(1900, $tookMs, 'not the option\'s 300 ms: ' . $e->getMessage());
        $urls = [];
        for ($i = 0; $i < 3; $i++) {
            $urls[] = $this->silent() . '?node_timeout=5s&command_timeout=5s';
        }
        $client = new Client($urls, commandTimeoutMs: 300, nodeTimeoutMs: 300);
        [$e, $tookMs] = $this->failedTry($client, \RedisLock\LockException::class, 'servers that never answer');
        $this->assertStringContainsString('300ms', $e->getMessage());
        $this->assertLessThan(1900, $tookMs, 'Redlock: not the option\'s 300 ms: ' . $e->getMessage());
    }

    public function testACommandTimeoutEndsACallToAServerThatDoesNotAnswer(): void
    {
        $client = new Client($this->silent(), commandTimeoutMs: 300);
        [$e, $tookMs] = $this->failedTry($client, ConnectionException::class, 'a server that never answers');
        $this->assertStringContainsString('command timeout 300ms', $e->getMessage());
        $this->assertGreaterThanOrEqual(300, $tookMs, 'failed before the command timeout');
    }

    /** Longer than the default (2 s): the option, not the default, decides. */
    public function testACommandTimeoutLongerThanTheDefaultIsWaitedOut(): void
    {
        $client = Client::persistent($this->silent(), commandTimeoutMs: 2600);
        [$e, $tookMs] = $this->failedTry($client, ConnectionException::class, 'a server that never answers');
        $this->assertStringContainsString('command timeout 2.6s', $e->getMessage());
        $this->assertGreaterThanOrEqual(2600, $tookMs, 'failed before the command timeout');
    }

    /**
     * A listening socket whose accept queue is full: the kernel drops the
     * client's SYN, so connecting hangs until the connect timeout.
     */
    public function testAConnectTimeoutEndsAConnectThatHangs(): void
    {
        $url = $this->silent(1);
        $at = 'tcp://' . parse_url($url, PHP_URL_HOST) . ':' . parse_url($url, PHP_URL_PORT);
        $queued = [];
        $hangs = false;
        for ($i = 0; $i < 20 && !$hangs; $i++) {
            $s = @stream_socket_client($at, $errno, $errstr, 0.5);
            if ($s === false) {
                $hangs = true;
            } else {
                $queued[] = $s;
            }
        }
        $this->assertTrue($hangs, 'connecting to a listening socket with a full accept queue never hung on this system');
        $client = new Client($url, connectTimeoutMs: 400);
        try {
            [$e, $tookMs] = $this->failedTry($client, ConnectionException::class, 'a server that never accepts');
            $this->assertStringContainsString('connect timeout 400ms', $e->getMessage());
            $this->assertGreaterThanOrEqual(400, $tookMs, 'failed before the connect timeout');
        } finally {
            foreach ($queued as $s) {
                fclose($s);
            }
        }
    }

    /**
     * Redlock, one server answering and two silent: no majority once the
     * node timeout ran out (longer than the default for a 30 s TTL, 2 s).
     */
    public function testANodeTimeoutEndsARedlockAcquireWithoutAMajority(): void
    {
        $live = new RedisServer();
        try {
            $client = new Client([$live->url(), $this->silent(), $this->silent()], nodeTimeoutMs: 2700);
            [$e, $tookMs] = $this->failedTry($client, NoQuorum::class, 'no majority');
            $this->assertStringContainsString('node timeout 2.7s', $e->getMessage());
            $this->assertGreaterThanOrEqual(2700, $tookMs, 'no quorum before the node timeout: ' . $e->getMessage());
            $raw = $live->raw();
            $this->assertTrue(waitUntil(fn () => $raw->exists('php:timeout') === 0, 30), "the live node's grant was not taken back");
        } finally {
            $live->stop();
        }
    }
}
