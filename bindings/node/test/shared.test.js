'use strict';
// Counting semaphores and read-write locks: the same handles as the lock,
// N holders, waiters served in arrival order by hand-off.

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');

const { Client, Lock, LockTimeoutError } = require('..');
const { RedisServer, keyFor, waitUntil } = require('./helper');

let server;
let client;

before(async () => {
  server = await RedisServer.start();
  client = new Client(server.url);
});

after(() => server.destroy());

test('a semaphore admits `limit` permits and hands a released one to the first waiter', async () => {
  const key = keyFor('sem');
  const a = await client.acquireSemaphore(key, { limit: 2 });
  const b = await client.acquireSemaphore(key, { limit: 2, ttl: 10000 });
  assert.ok(a instanceof Lock && b instanceof Lock);
  assert.ok(b.fence > a.fence);
  assert.equal(await client.acquire(key, { wait: 0 }).then((l) => l.release().then(() => 'free')), 'free', 'the lock of the same name is another thing');
  assert.equal(await client.acquireSemaphore(key, { limit: 2, tryAcquire: true }), null);
  await assert.rejects(client.acquireSemaphore(key, { limit: 2, wait: 20 }), LockTimeoutError);
  const waiter = new Client(server.url);
  const big = waiter.acquireSemaphore(key, { limit: 2, permits: 2, wait: 60000 });
  await waitUntil('the waiter to queue', () => waiter.stats().waitersNow === 1);
  const later = client.acquireSemaphore(key, { limit: 2, wait: 60000 });
  await a.release();
  // One permit is free, but the first waiter needs two: no barging.
  await assert.rejects(client.acquireSemaphore(key, { limit: 2, wait: 0 }), LockTimeoutError);
  await b.release();
  const both = await big;
  assert.equal(waiter.stats().acquiredHandedOver, 1);
  await both.release();
  await (await later).release();
  await waitUntil('nothing left of the semaphore', async () => (await server.raw.call('KEYS', `*${key}*`)).length === 0);
});

test('a read-write lock: readers together, a writer alone, a queued writer stops new readers', async () => {
  const key = keyFor('rw');
  const r1 = await client.acquireRead(key);
  const r2 = await client.acquireRead(key);
  const writers = new Client(server.url);
  const w = writers.acquireWrite(key, { wait: 60000 });
  await waitUntil('the writer to queue', () => writers.stats().waitersNow === 1);
  assert.equal(await client.acquireRead(key, { tryAcquire: true }), null, 'a queued writer stops new readers');
  await r1.release();
  await r2.release();
  const writer = await w;
  assert.equal(await client.acquireRead(key, { tryAcquire: true }), null);
  assert.equal(await client.acquireWrite(key, { tryAcquire: true }), null);
  await writer.extend(5000);
  await writer.release();
  const r3 = await client.acquireRead(key, { wait: 0 });
  await r3.release();
});

test('bad semaphore arguments reject with RangeError or TypeError before any I/O', async () => {
  const key = keyFor('bad');
  for (const [opts, Class] of [
    [undefined, TypeError],
    [{}, TypeError],
    [{ limit: '2' }, TypeError],
    [{ limit: 0 }, RangeError],
    [{ limit: 1.5 }, RangeError],
    [{ limit: 1000001 }, RangeError],
    [{ limit: 2, permits: 3 }, RangeError],
    [{ limit: 2, permits: 0 }, RangeError],
    [{ limit: 2, ttl: -1 }, RangeError],
    [{ limit: 2, tryAcquire: 1 }, TypeError],
  ]) {
    await assert.rejects(client.acquireSemaphore(key, opts), Class, JSON.stringify(opts));
  }
  await assert.rejects(client.acquireRead(key, { ttl: 0 }), RangeError);
  await assert.rejects(client.acquireWrite(7), TypeError);
  assert.equal((await server.raw.call('KEYS', `*${key}*`)).length, 0);
});
