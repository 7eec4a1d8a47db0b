<?php
// A request that ends while it holds a lock, in the way `how` says:
// exception (uncaught), exit, fatal (memory limit), renew (an auto-renewed
// lock, then the memory limit), return (the script just ends). The lock
// must be free once the response is out. Query: url, key, how,
// client=persistent|new.
declare(strict_types=1);

$client = require __DIR__ . '/client.php';
$how = $_GET['how'];
$GLOBALS['lock'] = $client->acquire($_GET['key'], ttlMs: 60000, waitMs: 0, autoRenew: $how === 'renew');
echo 'held ', getmypid(), "\n";
switch ($how) {
    case 'exception':
        throw new RuntimeException('the request failed while holding a lock');
    case 'exit':
        exit(3);
    case 'fatal':
    case 'renew':
        ini_set('memory_limit', '8M');
        $blob = str_repeat('x', 64 * 1024 * 1024);
        break;
    case 'return':
        break;
}
echo "not reached for $how\n";
