<?php
// A small FastCGI client (the responder role, one request per connection,
// as a web server talks to php-fpm), running many requests at once over
// non-blocking sockets. Used by the php-fpm tests and by `make bench`.
declare(strict_types=1);

final class FastCgi
{
    private const BEGIN_REQUEST = 1;
    private const END_REQUEST = 3;
    private const PARAMS = 4;
    private const STDIN = 5;
    private const STDOUT = 6;
    private const STDERR = 7;

    /**
     * Run every request, at most $concurrency at a time, against php-fpm at
     * $address (tcp://127.0.0.1:PORT). Each request is the script's path and
     * its query string. Fails when php-fpm sends nothing for $timeout
     * seconds: a busy machine makes a thousand requests take several times
     * longer, but never stops them all that long.
     *
     * @param list<array{0: string, 1: string}> $requests [script, query]
     * @return list<array{status: int, headers: string, body: string, stderr: string, ms: float}>
     *         in the order of $requests
     */
    public static function run(string $address, array $requests, int $concurrency, float $timeout = 60.0): array
    {
        $results = [];
        $pending = $requests;
        $active = [];
        $next = 0;
        $deadline = microtime(true) + $timeout;
        $done = 0;
        while ($next < count($pending) || $active !== []) {
            while ($next < count($pending) && count($active) < $concurrency) {
                [$script, $query] = $pending[$next];
                $active[$next] = self::start($address, $script, $query);
                $next++;
            }
            $read = array_map(fn($a) => $a['socket'], $active);
            $write = $except = [];
            $left = $deadline - microtime(true);
            if ($left <= 0) {
                throw new RuntimeException('php-fpm sent nothing for ' . count($active)
                    . " request(s) in {$timeout} s ($done of " . count($pending) . ' answered)');
            }
            if (stream_select($read, $write, $except, (int)$left, (int)(fmod($left, 1.0) * 1e6)) === false) {
                throw new RuntimeException('stream_select failed');
            }
            foreach ($read as $socket) {
                $i = array_search($socket, array_map(fn($a) => $a['socket'], $active), true);
                $chunk = fread($socket, 65536);
                if ($chunk === false || ($chunk === '' && feof($socket))) {
                    fclose($socket);
                    throw new RuntimeException("php-fpm closed the connection of request $i without an answer");
                }
                $active[$i]['in'] .= $chunk;
                $deadline = microtime(true) + $timeout;
                $response = self::parse($active[$i]);
                if ($response !== null) {
                    fclose($socket);
                    $response['ms'] = (hrtime(true) - $active[$i]['started']) / 1e6;
                    $results[$i] = $response;
                    unset($active[$i]);
                    $done++;
                }
            }
        }
        ksort($results);
        return array_values($results);
    }

    /** @return array{socket: resource, in: string, started: int} */
    private static function start(string $address, string $script, string $query): array
    {
        $socket = @stream_socket_client($address, $errno, $errstr, 5.0);
        if ($socket === false) {
            throw new RuntimeException("cannot connect to php-fpm at $address: $errstr");
        }
        $params = [
            'GATEWAY_INTERFACE' => 'FastCGI/1.0',
            'REQUEST_METHOD' => 'GET',
            'SCRIPT_FILENAME' => $script,
            'SCRIPT_NAME' => '/' . basename($script),
            'REQUEST_URI' => '/' . basename($script) . ($query === '' ? '' : "?$query"),
            'QUERY_STRING' => $query,
            'SERVER_SOFTWARE' => 'redislock-tests',
            'SERVER_PROTOCOL' => 'HTTP/1.1',
            'REMOTE_ADDR' => '127.0.0.1',
            'SERVER_NAME' => 'localhost',
            'SERVER_PORT' => '80',
        ];
        $body = '';
        foreach ($params as $name => $value) {
            $body .= self::length(strlen($name)) . self::length(strlen($value)) . $name . $value;
        }
        $out = self::record(self::BEGIN_REQUEST, pack('nCx5', 1, 0))
            . self::record(self::PARAMS, $body)
            . self::record(self::PARAMS, '')
            . self::record(self::STDIN, '');
        fwrite($socket, $out);
        stream_set_blocking($socket, false);
        return ['socket' => $socket, 'in' => '', 'started' => hrtime(true)];
    }

    private static function length(int $n): string
    {
        return $n < 128 ? chr($n) : pack('N', $n | 0x80000000);
    }

    private static function record(int $type, string $content): string
    {
        $pad = (8 - strlen($content) % 8) % 8;
        return pack('CCnnCx', 1, $type, 1, strlen($content), $pad) . $content . str_repeat("\0", $pad);
    }

    /**
     * The response once END_REQUEST has arrived, null before.
     *
     * @param array{in: string} $conn
     * @return array{status: int, headers: string, body: string, stderr: string}|null
     */
    private static function parse(array $conn): ?array
    {
        $in = $conn['in'];
        $stdout = $stderr = '';
        $at = 0;
        while (strlen($in) - $at >= 8) {
            $h = unpack('Cversion/Ctype/nid/nlength/Cpad', substr($in, $at, 8));
            if (strlen($in) - $at < 8 + $h['length'] + $h['pad']) {
                return null;
            }
            $content = substr($in, $at + 8, $h['length']);
            $at += 8 + $h['length'] + $h['pad'];
            if ($h['type'] === self::STDOUT) {
                $stdout .= $content;
            } elseif ($h['type'] === self::STDERR) {
                $stderr .= $content;
            } elseif ($h['type'] === self::END_REQUEST) {
                [$headers, $body] = array_pad(explode("\r\n\r\n", $stdout, 2), 2, '');
                $status = preg_match('/^Status: (\d+)/mi', $headers, $m) ? (int)$m[1] : 200;
                return ['status' => $status, 'headers' => $headers, 'body' => $body, 'stderr' => $stderr];
            }
        }
        return null;
    }
}
