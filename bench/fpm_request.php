<?php
// One php-fpm request of `make bench` (bench/fpm.php): one lock cycle, with
// the client the query names, on this worker's own key (uncontended):
//   impl=redislock           RedisLock\Client::persistent, acquire + release
//   impl=predis              the predis helper, a new connection per request
//   impl=predis-persistent   the same with 'persistent' => true
//   impl=phpredis-pconnect   the phpredis helper over pconnect()
// Query: impl, host, port.
declare(strict_types=1);

require_once __DIR__ . '/redis_tool.php';

$impl = $_GET['impl'];
$host = $_GET['host'];
$port = (int)$_GET['port'];
$key = 'bench:fpm:' . getmypid();
if ($impl === 'redislock') {
    require_once dirname(__DIR__) . '/bindings/php/autoload.php';
    RedisLock\Client::persistent("redis://$host:$port/0")->acquire($key, ttlMs: 10000, waitMs: 0)->release();
    echo 'ok';
    return;
}
if ($impl === 'phpredis-pconnect') {
    $c = new Redis();
    $c->pconnect($host, $port);
} else {
    require_once '/usr/share/php/Predis/Autoloader.php';
    Predis\Autoloader::register();
    $c = new Predis\Client(['scheme' => 'tcp', 'host' => $host, 'port' => $port,
        'persistent' => $impl === 'predis-persistent']);
}
$token = new_token();
if (!try_get_lock($c, $key, $token, 10000) || !release_lock($c, $key, $token)) {
    http_response_code(500);
    echo 'lock cycle failed';
    return;
}
echo 'ok';
