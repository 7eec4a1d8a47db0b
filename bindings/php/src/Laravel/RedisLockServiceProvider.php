<?php
declare(strict_types=1);

namespace RedisLock\Laravel;

use Illuminate\Support\ServiceProvider;
use RedisLock\Client;

/**
 * Registers the cache driver 'redislock': Laravel's Redis cache store
 * with redislock's locks. In config/cache.php:
 *
 *   'redis' => [
 *       'driver' => 'redislock',
 *       'connection' => 'cache',
 *       'lock_connection' => 'default',
 *       // 'lock_url' => env('REDISLOCK_URL'), // optional: a URL instead of lock_connection's config
 *   ],
 *
 * The keys are those of the 'redis' driver. The locks go to the server of
 * lock_connection, through a per-process shared Client (Client::persistent),
 * so that a php-fpm worker reuses its connections.
 */
class RedisLockServiceProvider extends ServiceProvider
{
    public function boot(): void
    {
        $this->app['cache']->extend('redislock', function ($app, array $config) {
            return $app['cache']->repository(RedisLockServiceProvider::createStore($app, $config), $config);
        });
    }

    /**
     * The store for a config/cache.php store entry.
     *
     * @param \Illuminate\Contracts\Container\Container $app
     * @param array<string, mixed>                      $config
     */
    public static function createStore($app, array $config): RedisLockStore
    {
        $connection = $config['connection'] ?? 'default';
        $store = new RedisLockStore(
            $app['redis'],
            $config['prefix'] ?? $app['config']['cache.prefix'],
            $connection,
            $app['config']['cache.serializable_classes'] ?? null, // Laravel 13; ignored before
        );
        $store->setLockConnection($config['lock_connection'] ?? $connection);
        $url = ($config['lock_url'] ?? '') ?: null;
        $store->setLockClient(static function (string $name) use ($app, $url): Client {
            return Client::persistent($url ?? ConnectionUrl::fromConfig($app['config']['database.redis'] ?? [], $name));
        });
        return $store;
    }
}
