<?php
declare(strict_types=1);

namespace RedisLock\Laravel;

use Illuminate\Support\ConfigurationUrlParser;
use RedisLock\InvalidArgument;

/**
 * The redislock URL of a Laravel Redis connection, from
 * config('database.redis'): its `url`, or `scheme`/`host`/`port`/
 * `username`/`password`/`database` (a `url` wins over the keys it sets, as
 * in Laravel). TLS (`tls`, `ssl`, `rediss`) gives rediss://, a socket path
 * (scheme `unix`, `path`, or a host starting with `/`) unix:///path?db=N,
 * a connection under `clusters` redis+cluster:// (rediss+cluster:// when its
 * nodes use TLS). A `timeout` (seconds) becomes redislock's connect_timeout,
 * an SSL `cafile` its tls_ca_file.
 */
final class ConnectionUrl
{
    /**
     * @param array<string, mixed> $redis config('database.redis')
     * @throws InvalidArgument when $name is not configured or cannot be expressed as a URL
     */
    public static function fromConfig(array $redis, string $name): string
    {
        if (!in_array($name, ['client', 'options', 'clusters'], true) && isset($redis[$name])) {
            return self::server(self::parse($redis[$name]));
        }
        if (isset($redis['clusters'][$name]) && $name !== 'options') {
            return self::cluster($redis, $name);
        }
        throw new InvalidArgument("Redis connection [$name] not configured (config/database.php, redis)");
    }

    /** @param array<string, mixed> $c */
    private static function server(array $c): string
    {
        [$scheme, $host] = self::schemeAndHost($c);
        [$user, $pass] = self::credentials($c);
        $query = self::options($c, $scheme === 'rediss');
        $db = (int)($c['database'] ?? 0);
        if ($scheme === 'unix') {
            $path = (string)($c['path'] ?? $host);
            if (!str_starts_with($path, '/')) {
                throw new InvalidArgument('a Redis unix socket needs an absolute path, got ' . json_encode($path));
            }
            $query = ['db' => $db] + ($user !== null ? ['user' => $user] : []) + ($pass !== null ? ['pass' => $pass] : []) + $query;
            return 'unix://' . implode('/', array_map('rawurlencode', explode('/', $path)))
                . '?' . http_build_query($query, '', '&', PHP_QUERY_RFC3986);
        }
        $port = (int)($c['port'] ?? 0) ?: 6379;
        return "$scheme://" . self::auth($user, $pass) . self::host($host) . ":$port/$db"
            . ($query ? '?' . http_build_query($query, '', '&', PHP_QUERY_RFC3986) : '');
    }

    /** @param array<string, mixed> $redis */
    private static function cluster(array $redis, string $name): string
    {
        $options = array_merge($redis['options'] ?? [], $redis['clusters']['options'] ?? []);
        $nodes = $redis['clusters'][$name];
        $options = array_merge($options, is_array($nodes['options'] ?? null) ? $nodes['options'] : []);
        unset($nodes['options']);
        if (strtolower((string)($redis['client'] ?? 'phpredis')) === 'predis' && ($options['cluster'] ?? 'predis') !== 'redis') {
            throw new InvalidArgument(
                "Redis cluster [$name] is predis' client-side sharding: redislock locks need one server, "
                . "a Redis Cluster ('options' => ['cluster' => 'redis']) or a 'lock_url'"
            );
        }
        $hosts = [];
        $auth = null;
        $scheme = null;
        $nodeCa = null;
        foreach ($nodes as $node) {
            $node = self::parse($node);
            [$nodeScheme, $host] = self::schemeAndHost($node);
            if ($nodeScheme === 'unix') {
                throw new InvalidArgument("Redis cluster [$name]: a Cluster node needs a host and port, not a socket");
            }
            if ($scheme !== null && $nodeScheme !== $scheme) {
                throw new InvalidArgument("Redis cluster [$name] mixes TLS and plain TCP nodes: redislock needs one or the other");
            }
            $scheme = $nodeScheme;
            $hosts[] = self::host($host) . ':' . ((int)($node['port'] ?? 0) ?: 6379);
            $auth ??= self::credentials($node + array_intersect_key($options, ['username' => 1, 'password' => 1]));
            $nodeCa ??= self::options($node, true)['tls_ca_file'] ?? null;
        }
        if ($hosts === []) {
            throw new InvalidArgument("Redis cluster [$name] has no nodes");
        }
        $tls = $scheme === 'rediss';
        $query = self::options($options, $tls);
        if ($tls && $nodeCa !== null) {
            $query += ['tls_ca_file' => $nodeCa];
        }
        return "$scheme+cluster://" . self::auth(...$auth) . implode(',', $hosts)
            . ($query ? '?' . http_build_query($query, '', '&', PHP_QUERY_RFC3986) : '');
    }

    /**
     * A connection's config with its `url` merged in, as Laravel's RedisManager does.
     *
     * @return array<string, mixed>
     */
    private static function parse(mixed $config): array
    {
        if (!is_array($config) && !is_string($config)) {
            throw new InvalidArgument('a Redis connection config must be an array or a URL');
        }
        $c = (new ConfigurationUrlParser())->parseConfiguration($config);
        $driver = strtolower((string)($c['driver'] ?? ''));
        if (in_array($driver, ['tcp', 'tls'], true)) {
            $c['scheme'] = $driver;
        }
        return $c;
    }

    /**
     * @param array<string, mixed> $c
     * @return array{0: string, 1: string} redis, rediss or unix, and the host (or socket path)
     */
    private static function schemeAndHost(array $c): array
    {
        $scheme = strtolower((string)($c['scheme'] ?? 'tcp'));
        $host = (string)($c['host'] ?? '127.0.0.1');
        if (preg_match('#^([a-z0-9.+-]+)://(.*)$#i', $host, $m)) {
            // phpredis takes "tls://host" as the host
            [$scheme, $host] = [strtolower($m[1]), $m[2]];
        }
        if ($scheme === 'unix' || str_starts_with($host, '/')) {
            return ['unix', $host];
        }
        if (in_array($scheme, ['tcp', 'redis', ''], true)) {
            return ['redis', $host];
        }
        if (in_array($scheme, ['tls', 'ssl', 'rediss'], true) || str_starts_with($scheme, 'tlsv') || str_starts_with($scheme, 'sslv')) {
            return ['rediss', $host];
        }
        throw new InvalidArgument("unsupported Redis scheme \"$scheme\" (tcp, tls or unix)");
    }

    /**
     * @param array<string, mixed> $c
     * @return array{0: ?string, 1: ?string} the user and the password (phpredis also takes ['user', 'pass'])
     */
    private static function credentials(array $c): array
    {
        $user = $c['username'] ?? null;
        $pass = $c['password'] ?? null;
        if (is_array($pass)) {
            $pass = array_values($pass);
            [$user, $pass] = count($pass) >= 2 ? [$pass[0], $pass[1]] : [$user, $pass[0] ?? null];
        }
        $user = $user === null || $user === '' ? null : (string)$user;
        $pass = $pass === null || $pass === '' ? null : (string)$pass;
        return [$user, $pass];
    }

    /**
     * redislock's own URL parameters from Laravel's `timeout` and SSL `cafile`.
     *
     * @param array<string, mixed> $c
     * @return array<string, string>
     */
    private static function options(array $c, bool $tls): array
    {
        $query = [];
        $timeout = (float)($c['timeout'] ?? 0);
        if ($timeout > 0) {
            $query['connect_timeout'] = (int)min(3_600_000, max(1, round($timeout * 1000))) . 'ms';
        }
        $ca = $c['context']['ssl']['cafile'] ?? $c['ssl']['cafile'] ?? null;
        if ($tls && is_string($ca) && $ca !== '') {
            $query['tls_ca_file'] = $ca;
        }
        return $query;
    }

    private static function auth(?string $user, ?string $pass): string
    {
        if ($user === null && $pass === null) {
            return '';
        }
        return rawurlencode($user ?? '') . ($pass !== null ? ':' . rawurlencode($pass) : '') . '@';
    }

    private static function host(string $host): string
    {
        return str_contains($host, ':') && !str_starts_with($host, '[') ? "[$host]" : $host;
    }
}
