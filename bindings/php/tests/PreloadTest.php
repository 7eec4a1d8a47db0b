<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;

/**
 * The php-fpm path: with ffi.enable=preload (the default), FFI::cdef is
 * refused at run time, so the declarations must be preloaded. Each way is
 * run in a fresh PHP process with tests/preload_smoke.php.
 */
final class PreloadTest extends TestCase
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

    /** @param list<string> $ini */
    private function runSmoke(array $ini, bool $unprivileged): string
    {
        $cmd = [PHP_BINARY];
        foreach ($ini as $setting) {
            $cmd[] = '-d';
            $cmd[] = $setting;
        }
        $cmd[] = __DIR__ . '/preload_smoke.php';
        $cmd[] = $this->server->url();
        if ($unprivileged && posix_geteuid() === 0) {
            // php-fpm's master drops to a pool user; opcache.preload as root
            // would demand opcache.preload_user, which FFI::load refuses.
            $cmd = array_merge(['runuser', '-u', 'nobody', '--'], $cmd);
        }
        $env = ['REDISLOCK_LIB' => (string)getenv('REDISLOCK_LIB'), 'PATH' => (string)getenv('PATH')];
        $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
        $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
        $code = proc_close($p);
        $this->assertSame(0, $code, $out);
        $this->assertStringContainsString(' passed, 0 failed', $out);
        return $out;
    }

    public function testOpcachePreloadScript(): void
    {
        $this->runSmoke([
            'ffi.enable=preload',
            'opcache.enable_cli=1',
            'opcache.preload=' . dirname(__DIR__) . '/preload.php',
        ], true);
    }

    public function testFfiPreloadIniSetting(): void
    {
        // For a root master with opcache.preload_user: ffi.preload loads the
        // header (FFI_SCOPE, FFI_LIB) at start-up. FFI_LIB is the installed
        // libredislock.so.0; here it points at the build under test.
        $lib = RedisLock\FFI::candidates()[0];
        $header = preg_replace(
            '/^#define FFI_LIB ".*"$/m',
            '#define FFI_LIB "' . $lib . '"',
            file_get_contents(dirname(__DIR__) . '/redislock_preload.h')
        );
        $file = tempnam(sys_get_temp_dir(), 'redislock-h-');
        file_put_contents($file, $header);
        try {
            $this->runSmoke(['ffi.enable=preload', "ffi.preload=$file"], false);
        } finally {
            unlink($file);
        }
    }
}
