<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * The one FFI instance of the package, made on first use.
 *
 * Under opcache.preload (php-fpm, where ffi.enable=preload forbids
 * FFI::cdef at run time) preload.php has loaded the declarations once and
 * this uses FFI::scope('redislock'). Otherwise FFI::cdef loads
 * bindings/php/redislock.h with the first library that loads from:
 * $REDISLOCK_LIB, then the build tree (target/release, target/debug),
 * then the system's library path (libredislock.so.0).
 *
 * Also the one place where statuses become exceptions (checkStatus).
 */
final class FFI
{
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

    private static ?\FFI $ffi = null;

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
            return \FFI::scope('redislock');
        } catch (\FFI\Exception) {
            // Not preloaded: load it ourselves below.
        }
        $header = file_get_contents(__DIR__ . '/../redislock.h');
        $tried = [];
        foreach (self::candidates() as $lib) {
            try {
                $ffi = \FFI::cdef($header, $lib);
                if (PHP_SAPI === 'fpm-fcgi' && $ffi->redislock_first_time('php-fpm FFI::cdef', 17)) {
                    error_log(
                        'redislock: this php-fpm worker loads the FFI declarations in every request '
                        . '(FFI::cdef, about 0.6 ms each): preload them with opcache.preload=' . dirname(__DIR__)
                        . '/preload.php (see docs/frameworks.md, php-fpm). Said once per worker.'
                    );
                }
                return $ffi;
            } catch (\FFI\Exception $e) {
                $tried[] = "$lib: " . $e->getMessage();
                if (str_contains($e->getMessage(), 'ffi.enable')) {
                    throw new LockException(
                        'redislock cannot call FFI here: under ffi.enable=preload (the php-fpm default) only '
                        . 'preloaded code may. Set opcache.preload=' . dirname(__DIR__) . '/preload.php '
                        . '(and, for a master running as root, opcache.preload_user and ffi.preload): '
                        . 'see docs/frameworks.md, php-fpm',
                        0,
                        $e
                    );
                }
            }
        }
        throw new LockException(
            "cannot load libredislock; tried:\n  " . implode("\n  ", $tried)
            . "\nBuild it (cargo build --release, or make install) or point REDISLOCK_LIB at libredislock.so"
        );
    }

    /** @return list<string> where the library is looked for, in order */
    public static function candidates(): array
    {
        $env = getenv('REDISLOCK_LIB');
        if (is_string($env) && $env !== '') {
            return [$env];
        }
        $root = dirname(__DIR__, 3);
        $found = [];
        foreach (['target/release', 'target/debug'] as $dir) {
            if (is_file("$root/$dir/libredislock.so")) {
                $found[] = "$root/$dir/libredislock.so";
            }
        }
        $found[] = 'libredislock.so.0';
        return $found;
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
