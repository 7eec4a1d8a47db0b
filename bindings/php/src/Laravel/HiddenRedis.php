<?php
declare(strict_types=1);

namespace RedisLock\Laravel;

use Illuminate\Contracts\Redis\Factory;

/**
 * Laravel's Redis factory (the RedisManager) as RedisLockStore keeps it:
 * out of sight of var_dump(), print_r() and var_export(), which would show
 * the whole configuration it holds, passwords included. Every call goes
 * to the factory; RedisLockStore::getRedis() gives the factory itself.
 *
 * @internal
 */
final class HiddenRedis implements Factory
{
    /** @var \Closure(): Factory var_export() shows no closure's variables */
    private readonly \Closure $factory;

    public function __construct(Factory $factory)
    {
        $this->factory = static fn (): Factory => $factory;
    }

    public function factory(): Factory
    {
        return ($this->factory)();
    }

    /**
     * @param string|null $name
     * @return \Illuminate\Redis\Connections\Connection
     */
    public function connection($name = null)
    {
        return ($this->factory)()->connection($name);
    }

    /** @param array<mixed> $arguments */
    public function __call(string $method, array $arguments): mixed
    {
        return ($this->factory)()->$method(...$arguments);
    }

    /** @return array{factory: class-string} */
    public function __debugInfo(): array
    {
        return ['factory' => get_class(($this->factory)())];
    }

    /** @throws \LogicException always: the factory holds the configuration, passwords included */
    public function __serialize(): array
    {
        throw new \LogicException("Laravel's Redis factory cannot be serialized");
    }

    /** @throws \LogicException always */
    public function __unserialize(array $data): void
    {
        throw new \LogicException("Laravel's Redis factory cannot be unserialized");
    }
}
