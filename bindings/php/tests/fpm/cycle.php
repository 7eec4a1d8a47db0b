<?php
// One lock cycle per request with the client the query names, for the
// php-fpm tests and benchmark. Query: url, client=persistent|new.
declare(strict_types=1);

require_once __DIR__ . '/../../autoload.php';

$url = $_GET['url'];
$client = ($_GET['client'] ?? 'persistent') === 'persistent'
    ? RedisLock\Client::persistent($url)
    : new RedisLock\Client($url);
$client->acquire('fpm-cycle-' . getmypid(), ttlMs: 10000, waitMs: 1000)->release();
echo json_encode(['pid' => getmypid()]);
