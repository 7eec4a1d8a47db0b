// Calls the declarations must refuse: each line below `@ts-expect-error`
// has to be a type error, so tsc fails here when bindings/node/index.d.ts
// becomes looser than index.js (which throws TypeError or RangeError for
// these at run time). Nothing here is meant to run.

import {
  Client,
  Lock,
  LockError,
  LockNotOwnedError,
  LockTimeoutError,
  LockUnconfirmedError,
  type AcquireOptions,
  type FencedLock,
} from 'redislock';

export async function misuse(client: Client, lock: Lock): Promise<void> {
  // @ts-expect-error ttl is a number of milliseconds, not a string
  await client.acquire('reports', { ttl: '30000' });
  // @ts-expect-error the name is required
  await client.acquire();
  // @ts-expect-error a name is a string or bytes
  await client.tryAcquire(42);
  // @ts-expect-error no such option (the wait is `wait`, in ms)
  await client.acquire('reports', { timeout: 10_000 });
  // @ts-expect-error signal is an AbortSignal, not its controller
  await client.acquire('reports', { signal: new AbortController() });
  // @ts-expect-error autoRenew is a boolean
  await client.acquire('reports', { autoRenew: 1 });
  // @ts-expect-error fence is a property, not a function
  lock.fence();
  // @ts-expect-error lost is a property, not a function
  if (lock.lost()) return;
  // @ts-expect-error token is a Buffer, not a string
  const token: string = lock.token;
  // @ts-expect-error the fence is a number, never a string
  const fence: string = lock.fence;
  // @ts-expect-error a lock not fenced in the acquisition may have no number yet: undefined
  const undrawn: number = lock.fence;
  // @ts-expect-error acquired without fenced: true, it is a Lock, not a FencedLock
  const unfenced: FencedLock = await client.acquire('reports', { fenced: false });
  // @ts-expect-error signal is the lock's, read-only
  lock.signal = new AbortController().signal;
  // @ts-expect-error onLost takes a function
  lock.onLost('lost');
  // @ts-expect-error forget returns nothing to wait for
  await lock.forget().then(() => 1);
  // @ts-expect-error close resolves nothing
  const closedWith: number = await client.close();
  // @ts-expect-error closed is read-only
  client.closed = true;
  // @ts-expect-error tryAcquireSemaphore may give null
  const permit: Lock = await client.tryAcquireSemaphore('slots', { limit: 2 });
  // @ts-expect-error tryAcquireSemaphore needs the limit
  await client.tryAcquireSemaphore('slots', { ttl: 1000 });
  // @ts-expect-error tryAcquireWrite may give null
  const writeSide: Lock = await client.tryAcquireWrite('prices');
  // @ts-expect-error drawFence is a Promise of the number
  const drawn: number = lock.drawFence();
  // @ts-expect-error read-only
  lock.fence = 1;
  // @ts-expect-error extend takes milliseconds
  await lock.extend('30s');
  // @ts-expect-error tryAcquire may give null
  const held: Lock = await client.tryAcquire('reports');
  // @ts-expect-error using needs fn
  await client.using('reports', { ttl: 1000 });
  // @ts-expect-error fn's first argument is the AbortSignal, not the lock
  await client.using('reports', async (lock: Lock) => lock.fence);
  // @ts-expect-error using's value is fn's: a number here
  const s: string = await client.using('reports', async () => 42);
  // @ts-expect-error releaseToken's Promise is of a boolean
  const released: string = await client.releaseToken('reports', lock.token);
  // @ts-expect-error a Lock comes from acquire
  new Lock();
  // @ts-expect-error the URL is a string or an array of strings
  new Client({ host: '127.0.0.1' });
  // @ts-expect-error addr is read-only
  client.addr = 'redis://elsewhere';
  // @ts-expect-error a Lock is made by the library, not an object of the same shape
  const fake: Lock = {
    name: 'reports',
    token: lock.token,
    fence: 1,
    lost: false,
    extend: lock.extend,
    release: lock.release,
    owned: lock.owned,
    [Symbol.asyncDispose]: lock[Symbol.asyncDispose],
  };
  // @ts-expect-error a LockNotOwnedError is not a LockTimeoutError
  const timeout: LockTimeoutError = new LockNotOwnedError('x');
  // @ts-expect-error the counters are camelCase (the snake_case aliases are read-only and deprecated)
  void client.stats().acquiredAtonce;
  // @ts-expect-error a deprecated snake_case alias is read-only
  client.stats().acquired_at_once = 0;
  // @ts-expect-error a semaphore needs its limit
  await client.acquireSemaphore('slots', { permits: 1 });
  // @ts-expect-error tryAcquire: true may give null
  const slot: Lock = await client.acquireSemaphore('slots', { limit: 2, tryAcquire: true });
  const maybe: boolean = Math.random() < 0.5;
  // @ts-expect-error tryAcquire given as a boolean may give null
  const readSide: Lock = await client.acquireRead('prices', { tryAcquire: maybe });
  // @ts-expect-error a read-write lock has no limit
  await client.acquireRead('prices', { limit: 2 });
  const opts: AcquireOptions = {
    // @ts-expect-error wait is a number of milliseconds
    wait: '10s',
    // @ts-expect-error a token is a string or bytes
    token: 42,
  };
  // @ts-expect-error no such error code
  if (new LockError('x').code === 'ERR_LOCK_TIMEDOUT') return;
  // @ts-expect-error a LockTimeoutError's code is one of its two
  if (new LockTimeoutError('x').code === 'ERR_LOCK_NOT_OWNED') return;
  void [token, fence, drawn, held, s, released, fake, timeout, opts, slot, readSide, undrawn, unfenced, closedWith, permit, writeSide];
}

// The error tree: an unconfirmed release is a LockNotOwnedError, every one a LockError and an Error.
export const tree: [LockError, LockNotOwnedError, Error] = [
  new LockUnconfirmedError('x'),
  new LockUnconfirmedError('x'),
  new LockNotOwnedError('x'),
];
