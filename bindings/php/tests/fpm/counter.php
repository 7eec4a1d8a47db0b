<?php
// One request of the php-fpm tests and benchmark: take the lock, do a
// non-atomic increment of a counter file (read, pause, write), release.
// Query: url, key, file, client=persistent|new, pause_us.
declare(strict_types=1);

$client = require __DIR__ . '/client.php';
$lock = $client->acquire($_GET['key'] ?? 'fpm-counter', ttlMs: 10000, waitMs: 10000);
$file = $_GET['file'];
$n = (int)file_get_contents($file);
usleep((int)($_GET['pause_us'] ?? 0));
file_put_contents($file, (string)($n + 1));
$fence = $lock->fence();
$lock->release();
echo json_encode(['pid' => getmypid(), 'n' => $n + 1, 'fence' => $fence]);
