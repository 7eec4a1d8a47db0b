<?php
// One php-fpm-like "request" as a fresh CLI process: connect, lock, unlock, exit.
//   php fresh_lock.php predis | phpredis | redis-tool-ffi | none   (none = PHP start-up only)
// fresh_process.py runs redis-tool-ffi twice: with FFI::cdef (the header is
// parsed and the library loaded per process) and with ffi.preload.
// Exit code 0 only when the lock was taken and released.
$client = $argv[1] ?? 'predis';
if ($client === 'none') exit(0);
require __DIR__ . '/redis_tool.php';
$c = connect_client($client);
$key = 'bench:fresh';
$tok = new_token();
if (!try_get_lock($c, $key, $tok, 10000)) exit(2);
if (!release_lock($c, $key, $tok)) exit(3);
exit(0);
