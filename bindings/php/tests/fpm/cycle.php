<?php
// One lock cycle per request with the client the query names, for the
// php-fpm tests and benchmark. Query: url, client=persistent|new.
declare(strict_types=1);

$client = require __DIR__ . '/client.php';
$client->acquire('fpm-cycle-' . getmypid(), ttlMs: 10000, waitMs: 1000)->release();
echo json_encode(['pid' => getmypid()]);
