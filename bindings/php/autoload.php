<?php
// Loads RedisLock\... classes without Composer: require this file.
// (composer.json declares the same PSR-4 mapping: RedisLock\ => src/.)
declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    $prefix = 'RedisLock\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
