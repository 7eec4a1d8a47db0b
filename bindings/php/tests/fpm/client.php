<?php
// The client of a php-fpm test request, as its query says: url, and
// client=persistent (the default, Client::persistent) or new (new Client).
declare(strict_types=1);

require_once __DIR__ . '/../../autoload.php';

return ($_GET['client'] ?? 'persistent') === 'persistent'
    ? RedisLock\Client::persistent($_GET['url'])
    : new RedisLock\Client($_GET['url']);
