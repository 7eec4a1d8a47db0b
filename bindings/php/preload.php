<?php
// opcache.preload script for php-fpm. Under ffi.enable=preload (the
// default) php-fpm allows FFI calls only from preloaded code: this compiles
// the package's classes once per server start, and loads redislock's FFI
// declarations unless ffi.preload already did. php.ini, as the php-fpm
// section of docs/frameworks.md says:
//
//   opcache.enable=1
//   opcache.preload=/path/to/vendor/redislock/redislock/preload.php
//   ffi.enable=preload
//   ; a master running as root also needs these two:
//   opcache.preload_user=www-data
//   ffi.preload=/etc/php/8.2/fpm/redislock.h
//
// (With opcache.preload_user, PHP runs this script as that user in a child
// of the master, where FFI::load is refused: the declarations must then come
// from ffi.preload, a header that `vendor/bin/redislock-preload-header`
// prints.) The library is the one RedisLock\FFI::candidates() finds first:
// $REDISLOCK_LIB, the package's lib/libredislock.so, the build tree, the
// system's libredislock.so.0. Its version is checked at the first use in
// each request (RedisLock\FFI::get), as without preloading.
declare(strict_types=1);

require __DIR__ . '/autoload.php';

(static function (): void {
    try {
        FFI::scope('redislock');
        $loaded = true; // ffi.preload loaded the declarations
    } catch (FFI\Exception) {
        $loaded = false;
    }
    $errors = [];
    if (!$loaded) {
        foreach (RedisLock\FFI::candidates() as $lib) {
            $problem = RedisLock\FFI::problem($lib);
            if ($problem !== null) {
                $errors[] = "$lib: $problem";
                continue;
            }
            $text = RedisLock\FFI::preloadHeader($lib);
            $file = sys_get_temp_dir() . '/redislock-preload-' . md5($text) . '.h';
            if (!is_file($file)) {
                file_put_contents($file, $text);
            }
            try {
                if (FFI::load($file) !== null) {
                    $loaded = true;
                    break;
                }
                $errors[] = "$lib: FFI::load failed";
            } catch (FFI\Exception $e) {
                $errors[] = "$lib: " . $e->getMessage();
                if (str_contains($e->getMessage(), 'preload_user')) {
                    break;
                }
            }
        }
    }
    if (!$loaded) {
        $hint = str_contains(implode(' ', $errors), 'preload_user')
            ? 'with opcache.preload_user (a master running as root), set ffi.preload to the header '
                . 'vendor/bin/redislock-preload-header prints'
            : 'reinstall the package (its lib/libredislock.so), install libredislock, or point REDISLOCK_LIB at it';
        error_log("redislock preload: the FFI declarations are not loaded ($hint; see docs/frameworks.md, php-fpm):\n  "
            . implode("\n  ", $errors));
    }
    // The package's classes, compiled once per server start: under
    // ffi.enable=preload only preloaded code may call FFI. The framework
    // adapters (src/Laravel, src/Symfony) call FFI only through these, and
    // are left to the application's autoloader with their frameworks.
    foreach (['/src/*.php', '/src/Compat/*.php'] as $pattern) {
        foreach (glob(__DIR__ . $pattern) as $file) {
            require_once $file;
        }
    }
})();
