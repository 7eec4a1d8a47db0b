<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;

/**
 * $REDIS_SERVER chooses the server every test runs against (Redis or
 * Valkey): the harness runs that binary, and tells the family from INFO.
 */
final class ServerTest extends TestCase
{
    public function testTheServerIsTheBinaryRedisServerNames(): void
    {
        $server = new RedisServer();
        try {
            $path = str_contains($server->bin, '/') ? $server->bin
                : trim((string)shell_exec('command -v ' . escapeshellarg($server->bin)));
            // Debian's redis-server is a link to redis-check-rdb: compare real paths.
            $this->assertSame(realpath($path), readlink("/proc/{$server->pid()}/exe"));
            [$family, $version] = serverInfo($server->raw());
            $this->assertSame(str_starts_with(basename($path), 'valkey') ? 'valkey' : 'redis', $family);
            $banner = (string)shell_exec(escapeshellarg($path) . ' --version');
            $this->assertStringContainsString("v=$version ", $banner);
        } finally {
            $server->stop();
        }
    }
}
