<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * The one FFI instance of the package, made on first use.
 *
 * Under opcache.preload (php-fpm, where ffi.enable=preload forbids
 * FFI::cdef at run time) the declarations come from ffi.preload or
 * preload.php, and this uses FFI::scope('redislock'). Otherwise FFI::cdef
 * loads redislock.h with the first library that loads from candidates():
 * $REDISLOCK_LIB (only that, when set); else the library the Composer
 * package bundles (lib/libredislock.so beside src/); the build tree of a
 * checkout (target/release, target/debug); the system's libredislock.so.0.
 * Every path is absolute (dlopen takes a relative one from the working
 * directory). A file that is not a whole shared library for this machine
 * (truncated, another architecture) is refused before dlopen sees it: a
 * truncated one would crash the process (SIGBUS), not fail.
 *
 * Either way, the library's redislock_version() must equal VERSION: a
 * stale system libredislock.so.0 (or ffi.preload header) is refused, not
 * used.
 *
 * Also the one place where statuses become exceptions (checkStatus).
 */
final class FFI
{
    /** The package's version: Cargo.toml's, and the library's redislock_version(). */
    public const VERSION = '0.1.0';

    /** The C library's name on the system's library path (its soname). */
    public const SONAME = 'libredislock.so.0';

    /** Status values, as in include/redislock.h. */
    public const OK = 0;
    public const NOT_ACQUIRED = 1;
    public const NOT_OWNER = 2;
    public const CONNECTION = 3;
    public const INVALID_ARGUMENT = 4;
    public const WRONG_TYPE = 5;
    public const NO_QUORUM = 6;
    public const SERVER = 7;
    public const INTERNAL = 8;
    public const UNCONFIRMED = 9;

    /** ELF e_machine numbers of the architectures PHP runs on, by `uname -m`. */
    private const MACHINES = [
        'x86_64' => 62, 'amd64' => 62, 'aarch64' => 183, 'arm64' => 183, 'i386' => 3, 'i486' => 3,
        'i586' => 3, 'i686' => 3, 'ppc64le' => 21, 'ppc64' => 21, 's390x' => 22, 'riscv64' => 243,
        'loongarch64' => 258, 'armv7l' => 40, 'armv6l' => 40, 'mips64' => 8, 'mips' => 8,
    ];

    private const MACHINE_NAMES = [
        3 => 'x86 (32-bit)', 8 => 'MIPS', 20 => 'PowerPC', 21 => 'PowerPC64', 22 => 'IBM S/390', 40 => 'ARM (32-bit)',
        62 => 'x86_64', 183 => 'AArch64', 243 => 'RISC-V', 258 => 'LoongArch',
    ];

    private static ?\FFI $ffi = null;

    /** What the library was loaded from: a path, the soname, or null for the preloaded scope. */
    private static ?string $loadedFrom = null;

    public static function get(): \FFI
    {
        return self::$ffi ??= self::load();
    }

    private static function load(): \FFI
    {
        if (!extension_loaded('ffi')) {
            throw new LockException('redislock needs the PHP FFI extension (ext-ffi); install or enable it');
        }
        try {
            $ffi = \FFI::scope('redislock');
            self::checkVersion($ffi, null);
            self::$loadedFrom = null;
            return $ffi;
        } catch (\FFI\Exception) {
            // Not preloaded: load it ourselves below.
        }
        $header = file_get_contents(__DIR__ . '/../redislock.h');
        $tried = [];
        foreach (self::candidates() as $lib) {
            $problem = self::problem($lib);
            if ($problem !== null) {
                $tried[] = "$lib: $problem";
                continue;
            }
            try {
                $ffi = \FFI::cdef($header, $lib);
            } catch (\FFI\Exception $e) {
                if (str_contains($e->getMessage(), 'ffi.enable')) {
                    throw new LockException(
                        'redislock cannot call FFI here: under ffi.enable=preload (the php-fpm default) only '
                        . 'preloaded code may. Set opcache.preload=' . dirname(__DIR__) . '/preload.php '
                        . '(and, for a master running as root, opcache.preload_user and ffi.preload with the '
                        . 'header vendor/bin/redislock-preload-header prints): see docs/frameworks.md, php-fpm',
                        0,
                        $e
                    );
                }
                $tried[] = "$lib: " . (str_starts_with($e->getMessage(), 'Failed loading')
                    ? (str_contains($lib, '/')
                        ? 'dlopen failed (a library it needs is missing, or its glibc is too old)'
                        : 'dlopen found no loadable ' . $lib . ' on the library path (ldconfig -p, LD_LIBRARY_PATH)')
                    : $e->getMessage());
                continue;
            }
            self::checkVersion($ffi, $lib);
            self::$loadedFrom = $lib;
            if (PHP_SAPI === 'fpm-fcgi' && $ffi->redislock_first_time('php-fpm FFI::cdef', 17)) {
                error_log(
                    'redislock: this php-fpm worker loads the FFI declarations in every request '
                    . '(FFI::cdef, about 0.6 ms each): preload them with opcache.preload=' . dirname(__DIR__)
                    . '/preload.php (see docs/frameworks.md, php-fpm). Said once per worker.'
                );
            }
            return $ffi;
        }
        $env = getenv('REDISLOCK_LIB');
        if (is_string($env) && $env !== '') {
            throw new LockException(
                "cannot load libredislock from REDISLOCK_LIB (set, so nothing else was tried):\n  "
                . implode("\n  ", $tried) . "\nPoint REDISLOCK_LIB at a libredislock.so " . self::VERSION
                . ' for this machine, or unset it'
            );
        }
        throw new LockException(
            "cannot load libredislock; tried:\n  " . implode("\n  ", $tried)
            . "\nReinstall the package (its lib/libredislock.so), install the system library (make install, "
            . 'the libredislock0 .deb), or point REDISLOCK_LIB at libredislock.so (in a checkout: cargo build --release)'
        );
    }

    /**
     * Refuse a library of another version than the package's: the stale
     * system library or ffi.preload header that would otherwise be used.
     */
    private static function checkVersion(\FFI $ffi, ?string $lib): void
    {
        $version = (string)$ffi->redislock_version();
        if ($version !== self::VERSION) {
            $file = $lib !== null && str_contains($lib, '/')
                ? (realpath($lib) ?: $lib)
                : ($lib === null ? self::preloadedFile() : self::mappedFile()) ?? $lib ?? 'the library of ffi.preload';
            throw new LockException(
                "redislock: $file is libredislock $version, but this package (RedisLock\\FFI::VERSION) is "
                . self::VERSION . ': a stale library shadows the right one. '
                . ($lib === null
                    ? 'Regenerate the ffi.preload header (vendor/bin/redislock-preload-header) and restart php-fpm'
                    : 'Install the matching library, or point REDISLOCK_LIB at it')
            );
        }
    }

    /**
     * Where the library is looked for, in order: $REDISLOCK_LIB alone when
     * set; else the bundled lib/libredislock.so (in a checkout, only when
     * there), the build tree of a checkout, the soname on the system's
     * library path.
     *
     * @return list<string>
     */
    public static function candidates(): array
    {
        $env = getenv('REDISLOCK_LIB');
        if (is_string($env) && $env !== '') {
            return [$env];
        }
        $bundled = dirname(__DIR__) . '/lib/libredislock.so';
        $root = dirname(__DIR__, 3);
        $checkout = is_file("$root/Cargo.toml") && is_file("$root/include/redislock.h");
        // bindings/php in a checkout has no lib/ (the release tarball does): not worth naming there.
        $found = $checkout && !is_file($bundled) ? [] : [$bundled];
        if ($checkout) {
            foreach (['target/release', 'target/debug'] as $dir) {
                if (is_file("$root/$dir/libredislock.so")) {
                    $found[] = "$root/$dir/libredislock.so";
                }
            }
        }
        $found[] = self::SONAME;
        return $found;
    }

    /**
     * Why $lib cannot be handed to dlopen (missing, not a shared library,
     * truncated, for another machine), or null when it can. A bare name
     * (the soname) is left to dlopen's search.
     */
    public static function problem(string $lib): ?string
    {
        if (!str_contains($lib, '/')) {
            return null;
        }
        if (!is_file($lib)) {
            return file_exists($lib) ? 'not a regular file' : 'no such file';
        }
        $f = @fopen($lib, 'rb');
        if ($f === false) {
            return 'cannot be read (permissions?)';
        }
        try {
            $size = fstat($f)['size'];
            $h = (string)fread($f, 64);
            if (strlen($h) < 52 || substr($h, 0, 4) !== "\x7fELF") {
                return "not a shared library (no ELF header; $size bytes)";
            }
            $class = ord($h[4]);
            $wide = $class === 2;
            if ($class !== (PHP_INT_SIZE === 8 ? 2 : 1)) {
                return 'built for ' . ($wide ? '64' : '32') . '-bit, this PHP is ' . (PHP_INT_SIZE * 8) . '-bit';
            }
            $little = ord($h[5]) === 1;
            if ($little !== (pack('S', 1) === "\x01\x00")) {
                return 'built for a ' . ($little ? 'little' : 'big') . '-endian machine, not this one';
            }
            $u16 = fn(string $s, int $at): int => unpack($little ? 'v' : 'n', substr($s, $at, 2))[1];
            $u32 = fn(string $s, int $at): int => unpack($little ? 'V' : 'N', substr($s, $at, 4))[1];
            $word = fn(string $s, int $at): int => $wide ? unpack($little ? 'P' : 'J', substr($s, $at, 8))[1] : $u32($s, $at);
            if ($u16($h, 16) !== 3) {
                return 'not a shared library (ELF type ' . $u16($h, 16) . ', not ET_DYN)';
            }
            $machine = $u16($h, 18);
            $want = self::MACHINES[php_uname('m')] ?? null;
            if ($want !== null && $machine !== $want) {
                return 'built for ' . (self::MACHINE_NAMES[$machine] ?? "ELF machine $machine") . ' (e_machine '
                    . $machine . '), but this machine is ' . php_uname('m');
            }
            [$phoff, $shoff] = $wide ? [$word($h, 32), $word($h, 40)] : [$word($h, 28), $word($h, 32)];
            $at = $wide ? 54 : 42;
            [$phentsize, $phnum, $shentsize, $shnum] = [$u16($h, $at), $u16($h, $at + 2), $u16($h, $at + 4), $u16($h, $at + 6)];
            $need = max($phoff + $phnum * $phentsize, $shoff + $shnum * $shentsize);
            if ($phnum > 0 && $phoff + $phnum * $phentsize <= $size && $phentsize >= ($wide ? 56 : 32)) {
                fseek($f, $phoff);
                $ph = (string)fread($f, $phnum * $phentsize);
                for ($i = 0; $i < $phnum; $i++) {
                    $p = substr($ph, $i * $phentsize, $phentsize);
                    // PT_LOAD (1) and PT_DYNAMIC (2): the bytes dlopen maps and reads.
                    if (in_array($u32($p, 0), [1, 2], true)) {
                        $need = max($need, $wide ? $word($p, 8) + $word($p, 32) : $word($p, 4) + $word($p, 16));
                    }
                }
            } elseif ($phnum === 0) {
                return 'not a shared library (no program headers)';
            }
            if ($need < 0) {
                return 'corrupted: its ELF headers describe offsets beyond any file';
            }
            if ($size < $need) {
                return "truncated or corrupted: $size bytes, but its ELF headers describe $need";
            }
            return null;
        } finally {
            fclose($f);
        }
    }

    /**
     * What the library was loaded from: the path or the soname given to
     * dlopen, or null when the declarations came preloaded (FFI::scope).
     */
    public static function loadedFrom(): ?string
    {
        self::get();
        return self::$loadedFrom;
    }

    /** The library's version: its redislock_version(). */
    public static function libraryVersion(): string
    {
        return (string)self::get()->redislock_version();
    }

    /**
     * The library in use: its absolute path (from /proc/self/maps, or the
     * path it was loaded from), or the soname when neither tells.
     */
    public static function libraryFile(): string
    {
        self::get();
        if (self::$loadedFrom !== null && str_contains(self::$loadedFrom, '/')) {
            return realpath(self::$loadedFrom) ?: self::$loadedFrom;
        }
        return (self::$loadedFrom === null ? self::preloadedFile() : self::mappedFile()) ?? self::$loadedFrom ?? self::SONAME;
    }

    /**
     * The library of the preloaded scope: FFI_LIB of the ffi.preload header
     * that declares FFI_SCOPE "redislock" (its absolute path; for a bare
     * name, the file mapped), else the libredislock file mapped (what
     * preload.php loaded).
     */
    private static function preloadedFile(): ?string
    {
        foreach (explode(PATH_SEPARATOR, (string)ini_get('ffi.preload')) as $pattern) {
            foreach ($pattern === '' ? [] : (glob($pattern) ?: []) as $header) {
                $text = (string)@file_get_contents($header, false, null, 0, 4096);
                if (preg_match('/^#define FFI_SCOPE "redislock"$/m', $text)
                    && preg_match('/^#define FFI_LIB "(.*)"$/m', $text, $m)) {
                    return str_contains($m[1], '/') ? (realpath($m[1]) ?: $m[1]) : (self::mappedFile() ?? $m[1]);
                }
            }
        }
        return self::mappedFile();
    }

    /** The libredislock file mapped into this process (/proc/self/maps), if any. */
    private static function mappedFile(): ?string
    {
        $maps = @file_get_contents('/proc/self/maps');
        if (is_string($maps) && preg_match('~ (/\S*/libredislock[^/\s]*\.so[^/\s]*)$~m', $maps, $m)) {
            return $m[1];
        }
        return null;
    }

    /**
     * The declarations file for ffi.preload (redislock_preload.h) with
     * FFI_LIB naming $lib.
     */
    public static function preloadHeader(string $lib): string
    {
        if (preg_match('/["\\\\\n\r]/', $lib)) {
            throw new InvalidArgument("cannot name $lib in a C header (it has a quote, backslash or newline)");
        }
        $count = 0;
        $text = preg_replace(
            '/^#define FFI_LIB ".*"$/m',
            '#define FFI_LIB "' . $lib . '"',
            (string)file_get_contents(dirname(__DIR__) . '/redislock_preload.h'),
            1,
            $count
        );
        if ($count !== 1) {
            throw new LockException('redislock_preload.h has no #define FFI_LIB line');
        }
        return $text;
    }

    /** The message of this thread's last failure. */
    public static function lastError(): string
    {
        $ffi = self::get();
        $n = $ffi->redislock_last_error(null, 0);
        if ($n === 0) {
            return '';
        }
        $buf = $ffi->new('char[' . ($n + 1) . ']');
        $ffi->redislock_last_error($buf, $n + 1);
        return \FFI::string($buf, $n);
    }

    /**
     * Turn a status into the package's exception, with the native message.
     *
     * @throws LockException|InvalidArgument
     */
    public static function checkStatus(int $status): void
    {
        if ($status === self::OK) {
            return;
        }
        $msg = self::lastError();
        throw match ($status) {
            self::NOT_ACQUIRED => new LockTimeout($msg, $status),
            self::NOT_OWNER => new LockNotOwned($msg, $status),
            self::CONNECTION => new ConnectionException($msg, $status),
            self::INVALID_ARGUMENT => new InvalidArgument($msg, $status),
            self::WRONG_TYPE => new WrongType($msg, $status),
            self::NO_QUORUM => new NoQuorum($msg, $status),
            self::SERVER => new ServerException($msg, $status),
            self::UNCONFIRMED => new Unconfirmed($msg, $status),
            default => new LockException($msg !== '' ? $msg : "redislock status $status", $status),
        };
    }
}
