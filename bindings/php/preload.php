<?php
// opcache.preload script (php-fpm): loads redislock's FFI declarations once
// per server start, so that requests use FFI::scope('redislock') where
// ffi.enable=preload (the default) forbids FFI::cdef. php.ini:
//
//   opcache.enable=1
//   opcache.preload=/path/to/bindings/php/preload.php
//   opcache.preload_user=www-data
//   ffi.enable=preload
//
// The library comes from $REDISLOCK_LIB, the build tree, or the system path
// (libredislock.so.0), as for FFI::cdef.
declare(strict_types=1);

require __DIR__ . '/autoload.php';

(static function (): void {
    $header = file_get_contents(__DIR__ . '/redislock_preload.h');
    $errors = [];
    foreach (RedisLock\FFI::candidates() as $lib) {
        $text = preg_replace('/^#define FFI_LIB ".*"$/m', '#define FFI_LIB "' . $lib . '"', $header);
        $file = sys_get_temp_dir() . '/redislock-preload-' . md5($text) . '.h';
        if (!is_file($file)) {
            file_put_contents($file, $text);
        }
        try {
            if (FFI::load($file) !== null) {
                break;
            }
            $errors[] = "$lib: FFI::load failed";
        } catch (FFI\Exception $e) {
            $errors[] = "$lib: " . $e->getMessage();
        }
    }
    if (count($errors) === count(RedisLock\FFI::candidates())) {
        error_log("redislock preload: cannot load libredislock:\n  " . implode("\n  ", $errors));
    }
    // Preload the package's classes as well (declared once per server start).
    foreach (new RecursiveIteratorIterator(new RecursiveDirectoryIterator(__DIR__ . '/src')) as $f) {
        if ($f->isFile() && $f->getExtension() === 'php') {
            require_once $f->getPathname();
        }
    }
})();
