<?php
declare(strict_types=1);

use PHPUnit\Framework\TestCase;
use RedisLock\FFI;

/**
 * How RedisLock\FFI finds and checks the library, as an installed Composer
 * package does (a copy of the package laid out as the release tarball has
 * it: src/, the headers, bin/, lib/libredislock.so), each case in a fresh
 * PHP process started from another working directory, without
 * REDISLOCK_LIB unless the case sets it: the bundled library first by its
 * absolute path; REDISLOCK_LIB alone when set; every place tried named in
 * the error; a library of another version refused (also one that
 * ffi.preload loaded); a truncated or wrong-architecture file refused
 * before dlopen, the process exiting normally; the vendor/bin command's
 * ffi.preload header.
 */
final class LoaderTest extends TestCase
{
    private static string $dir;
    /** The package laid out as the tarball has it, with its lib/libredislock.so. */
    private static string $package;
    /** The same without lib/: what a checkout or a broken install looks like. */
    private static string $bare;
    private static string $lib;
    private static string $other;

    public static function setUpBeforeClass(): void
    {
        self::$lib = FFI::libraryFile(); // the library under test (REDISLOCK_LIB in make test-php)
        self::$dir = sys_get_temp_dir() . '/redislock-php-loader-' . bin2hex(random_bytes(6));
        mkdir(self::$dir);
        chmod(self::$dir, 0755);
        $src = dirname(__DIR__);
        foreach (['package', 'bare'] as $name) {
            $to = self::$dir . "/$name";
            self::copyTree("$src/src", "$to/src");
            foreach (['autoload.php', 'preload.php', 'redislock.h', 'redislock_preload.h', 'bin/redislock-preload-header'] as $f) {
                self::copyTree("$src/$f", "$to/$f");
            }
            self::$$name = $to;
        }
        mkdir(self::$package . '/lib');
        copy(self::$lib, self::$package . '/lib/libredislock.so');
        self::$other = strtr(FFI::VERSION, '0123456789', '9876543210');
        mkdir(self::$dir . '/cwd');
        file_put_contents(self::$dir . '/probe.php', <<<'PHP'
            <?php
            // php probe.php PACKAGE [lock REDIS_URL]: load the package's library, print what was loaded as JSON.
            declare(strict_types=1);
            require $argv[1] . '/autoload.php';
            try {
                $out = ['version' => RedisLock\FFI::libraryVersion(), 'file' => RedisLock\FFI::libraryFile(),
                    'from' => RedisLock\FFI::loadedFrom()];
                if (($argv[2] ?? '') === 'lock') {
                    $client = new RedisLock\Client($argv[3]);
                    $out['fence'] = $client->acquire('loader', ttlMs: 5000, waitMs: 1000)->fence();
                }
            } catch (Throwable $e) {
                $out = ['error' => get_class($e), 'message' => $e->getMessage()];
            }
            preg_match_all('~\S*libredislock\S*~', file_get_contents('/proc/self/maps'), $m);
            $out['mapped'] = array_values(array_unique($m[0]));
            echo json_encode($out);
            PHP);
    }

    public static function tearDownAfterClass(): void
    {
        if (isset(self::$dir)) {
            exec('rm -rf ' . escapeshellarg(self::$dir));
        }
    }

    private static function copyTree(string $from, string $to): void
    {
        if (!is_dir(dirname($to))) {
            mkdir(dirname($to), 0755, true);
        }
        if (is_file($from)) {
            copy($from, $to);
            chmod($to, fileperms($from) & 0777);
            return;
        }
        mkdir($to, 0755);
        foreach (scandir($from) as $f) {
            if ($f !== '.' && $f !== '..') {
                self::copyTree("$from/$f", "$to/$f");
            }
        }
    }

    /** A copy of the library with $patch(bytes) applied. */
    private static function libCopy(string $name, callable $patch): string
    {
        $file = self::$dir . "/$name";
        if (!is_file($file)) {
            file_put_contents($file, $patch(file_get_contents(self::$lib)));
        }
        return $file;
    }

    /** The library, but its redislock_version() says self::$other: a stale build. */
    private static function otherVersion(): string
    {
        return self::libCopy('other-version.so', function (string $bytes): string {
            $from = FFI::VERSION . "\0";
            self::assertSame(1, substr_count($bytes, $from), 'the version string is not in the library once');
            return str_replace($from, self::$other . "\0", $bytes);
        });
    }

    /**
     * Run PHP ($args) in a fresh process from a directory holding no
     * library, with only PATH and $env in its environment.
     *
     * @param list<string> $args
     * @param array<string, string> $env
     * @return array{0: int, 1: string, 2: string} exit code, stdout, stderr
     */
    private function php(array $args, array $env = [], ?string $user = null): array
    {
        $cmd = array_merge([PHP_BINARY], $args);
        if ($user !== null && posix_geteuid() === 0) {
            $cmd = array_merge(['runuser', '-u', $user, '--'], $cmd);
        }
        $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, self::$dir . '/cwd',
            ['PATH' => (string)getenv('PATH')] + $env);
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        while (($status = proc_get_status($p))['running']) {
            usleep(2000);
        }
        proc_close($p);
        return [$status['signaled'] ? 128 + $status['termsig'] : $status['exitcode'], $out, $err];
    }

    /** The probe's JSON, after checking it exited normally. */
    private function probe(string $package, array $env = [], array $ini = [], array $extra = [], ?string $user = null): array
    {
        $args = [];
        foreach ($ini as $setting) {
            array_push($args, '-d', $setting);
        }
        [$code, $out, $err] = $this->php([...$args, self::$dir . '/probe.php', $package, ...$extra], $env, $user);
        $this->assertSame(0, $code, "the probe did not exit normally (a signal gives 128+N):\n$out$err");
        $result = json_decode($out, true);
        $this->assertIsArray($result, $out . $err);
        return $result;
    }

    public function testTheVersionIsCargoTomlsAndTheLibrarys(): void
    {
        $this->assertMatchesRegularExpression(
            '/^version = "' . preg_quote(FFI::VERSION, '/') . '"$/m',
            file_get_contents(dirname(__DIR__, 3) . '/Cargo.toml'),
            'RedisLock\FFI::VERSION is not Cargo.toml\'s version'
        );
        $this->assertSame(FFI::VERSION, FFI::libraryVersion());
        $this->assertSame(self::$lib, FFI::libraryFile());
    }

    public function testTheBundledLibraryComesFirstByItsAbsolutePath(): void
    {
        // A stale libredislock.so.0 on the library path does not shadow it.
        $system = self::$dir . '/system';
        @mkdir($system);
        @symlink(self::otherVersion(), "$system/libredislock.so.0");
        $server = new RedisServer();
        try {
            $r = $this->probe(self::$package, ['LD_LIBRARY_PATH' => $system], [], ['lock', $server->url()]);
        } finally {
            $server->stop();
        }
        $bundled = self::$package . '/lib/libredislock.so';
        $this->assertSame(['version' => FFI::VERSION, 'file' => $bundled, 'from' => $bundled, 'fence' => $r['fence'] ?? null,
            'mapped' => [$bundled]], $r);
        $this->assertGreaterThanOrEqual(1, $r['fence']);
    }

    public function testTheErrorNamesEveryPlaceTried(): void
    {
        if (str_contains((string)shell_exec('/sbin/ldconfig -p 2>/dev/null'), 'libredislock.so.0 ')) {
            $this->markTestSkipped('a libredislock.so.0 is installed on this system (ldconfig -p)');
        }
        $r = $this->probe(self::$bare, ['LD_LIBRARY_PATH' => self::$dir . '/cwd']);
        $this->assertSame('RedisLock\LockException', $r['error'] ?? null, json_encode($r));
        $this->assertStringContainsString("cannot load libredislock; tried:\n  " . self::$bare
            . "/lib/libredislock.so: no such file\n  libredislock.so.0: dlopen found no loadable libredislock.so.0", $r['message']);
        $this->assertSame([], $r['mapped']);
    }

    public function testRedislockLibIsTheOnlyPlaceWhenSet(): void
    {
        $missing = self::$dir . '/nowhere/libredislock.so';
        $r = $this->probe(self::$package, ['REDISLOCK_LIB' => $missing]);
        $this->assertSame('RedisLock\LockException', $r['error'] ?? null, json_encode($r));
        $this->assertStringContainsString("REDISLOCK_LIB (set, so nothing else was tried):\n  $missing: no such file\n", $r['message']);
        $this->assertStringNotContainsString(self::$package . '/lib', $r['message']);

        $r = $this->probe(self::$bare, ['REDISLOCK_LIB' => self::$lib]);
        $this->assertSame(self::$lib, $r['file'] ?? null, json_encode($r));
    }

    public function testAStaleSystemLibraryIsRefusedWithBothVersions(): void
    {
        $system = self::$dir . '/stale';
        @mkdir($system);
        @copy(self::otherVersion(), "$system/libredislock.so.0");
        $r = $this->probe(self::$bare, ['LD_LIBRARY_PATH' => $system]);
        $this->assertSame('RedisLock\LockException', $r['error'] ?? null, json_encode($r));
        $this->assertStringContainsString(
            "$system/libredislock.so.0 is libredislock " . self::$other . ', but this package (RedisLock\FFI::VERSION) is '
            . FFI::VERSION,
            $r['message']
        );
    }

    public function testALibraryOfAnotherVersionFromFfiPreloadIsRefused(): void
    {
        $other = self::otherVersion();
        $header = self::$dir . '/other-version.h';
        file_put_contents($header, FFI::preloadHeader($other));
        $r = $this->probe(self::$package, [], ['ffi.enable=preload', "ffi.preload=$header"]);
        $this->assertSame('RedisLock\LockException', $r['error'] ?? null, json_encode($r));
        $this->assertStringContainsString("$other is libredislock " . self::$other . ', but this package', $r['message']);
        $this->assertStringContainsString('Regenerate the ffi.preload header', $r['message']);
    }

    /** @return array<string, array{0: string, 1: string}> */
    public static function brokenLibraries(): array
    {
        return [
            'truncated to 1 MiB' => ['truncated.so', 'truncated or corrupted: 1048576 bytes, but its ELF headers describe '],
            'another architecture (e_machine AArch64)' => ['aarch64.so', 'built for AArch64 (e_machine 183), but this machine is '],
            '32-bit' => ['elf32.so', 'built for 32-bit, this PHP is 64-bit'],
            'not ELF' => ['text.so', 'not a shared library (no ELF header'],
            'an executable' => ['exec.so', 'not a shared library (ELF type 2, not ET_DYN)'],
        ];
    }

    /** @dataProvider brokenLibraries */
    public function testABrokenLibraryIsRefusedNamingTheFileNotACrash(string $name, string $why): void
    {
        $file = self::libCopy($name, fn(string $b): string => match ($name) {
            'truncated.so' => substr($b, 0, 1 << 20),
            'aarch64.so' => substr_replace($b, pack('v', 183), 18, 2),
            'elf32.so' => substr_replace($b, "\x01", 4, 1),
            'text.so' => "this is not a library\n",
            'exec.so' => substr_replace($b, pack('v', 2), 16, 2),
        });
        $r = $this->probe(self::$package, ['REDISLOCK_LIB' => $file]);
        $this->assertSame('RedisLock\LockException', $r['error'] ?? null, json_encode($r));
        $this->assertStringContainsString("\n  $file: $why", $r['message']);
        $this->assertSame([], $r['mapped'], 'dlopen was called on it');
    }

    public function testTheTruncatedLibraryWouldCrashDlopen(): void
    {
        // The reason the loader reads the headers itself: handed to dlopen,
        // the truncated file kills PHP with SIGBUS instead of failing.
        $file = self::libCopy('truncated.so', fn(string $b): string => substr($b, 0, 1 << 20));
        [$code, $out, $err] = $this->php(['-r', 'FFI::cdef("const char *redislock_version(void);", $argv[1]);', $file]);
        $this->assertNotSame(0, $code, $out . $err);
        $this->assertNotSame(255, $code, "FFI::cdef failed cleanly on its own:\n$out$err");
    }

    public function testThePreloadHeaderCommandNamesTheInstalledLibrary(): void
    {
        $bin = self::$package . '/bin/redislock-preload-header';
        [$code, $out, $err] = $this->php([$bin]);
        $this->assertSame(0, $code, $err);
        $bundled = self::$package . '/lib/libredislock.so';
        $this->assertStringStartsWith("#define FFI_SCOPE \"redislock\"\n#define FFI_LIB \"$bundled\"\n", $out);
        $this->assertSame(
            preg_replace('/^#define FFI_LIB .*$/m', '', file_get_contents(dirname(__DIR__) . '/redislock_preload.h')),
            preg_replace('/^#define FFI_LIB .*$/m', '', $out)
        );

        // With a FILE, written there; php then loads it with ffi.preload and
        // takes a lock through the preloaded scope, the bundled library's.
        $header = self::$dir . '/written.h';
        [$code, , $err] = $this->php([$bin, $header]);
        $this->assertSame(0, $code, $err);
        $this->assertSame($out, file_get_contents($header));
        $this->assertStringContainsString("wrote $header", $err);
        $server = new RedisServer();
        try {
            $r = $this->probe(self::$bare, [], ['ffi.enable=preload', "ffi.preload=$header"], ['lock', $server->url()]);
        } finally {
            $server->stop();
        }
        $this->assertSame(['version' => FFI::VERSION, 'file' => $bundled, 'from' => null, 'fence' => $r['fence'] ?? null,
            'mapped' => [$bundled]], $r);

        // REDISLOCK_LIB, when set, is what it names; a library of another
        // version fails here instead of in php-fpm.
        [$code, $out] = $this->php([$bin], ['REDISLOCK_LIB' => self::$lib]);
        $this->assertSame(0, $code);
        $this->assertStringContainsString('#define FFI_LIB "' . self::$lib . "\"\n", $out);
        [$code, $out, $err] = $this->php([$bin], ['REDISLOCK_LIB' => self::otherVersion()]);
        $this->assertSame(1, $code, $out);
        $this->assertSame('', $out);
        $this->assertStringContainsString('is libredislock ' . self::$other . ', but this package', $err);
    }

    public function testPreloadPhpLoadsTheBundledLibraryItself(): void
    {
        // The unprivileged php-fpm master: opcache.preload alone, with no
        // ffi.preload and no REDISLOCK_LIB.
        $server = new RedisServer();
        try {
            $r = $this->probe(self::$package, [], [
                'ffi.enable=preload', 'opcache.enable_cli=1', 'opcache.preload=' . self::$package . '/preload.php',
            ], ['lock', $server->url()], 'nobody'); // as root, opcache.preload would need opcache.preload_user
        } finally {
            $server->stop();
        }
        $bundled = self::$package . '/lib/libredislock.so';
        $this->assertSame(['version' => FFI::VERSION, 'file' => $bundled, 'from' => null, 'fence' => $r['fence'] ?? null,
            'mapped' => [$bundled]], $r);
    }
}
