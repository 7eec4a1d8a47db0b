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

test('tryAcquireSemaphore, tryAcquireRead and tryAcquireWrite: the Lock, or null while taken; a wait of their own', async () => {
  const sem = keyFor('trysem');
  const first = await client.tryAcquireSemaphore(sem, { limit: 2, permits: 2 });
  assert.ok(first instanceof Lock);
  assert.ok(Number.isSafeInteger(first.fence), 'fenced in the acquisition');
  assert.equal(await client.tryAcquireSemaphore(sem, { limit: 2 }), null);
  // tryAcquire: false in the options does not make it wait or reject.
  assert.equal(await client.tryAcquireSemaphore(sem, { limit: 2, tryAcquire: false }), null);
  const waited = client.tryAcquireSemaphore(sem, { limit: 2, wait: 60000 });
  const other = new Client(server.url);
  assert.equal(await other.tryAcquireSemaphore(sem, { limit: 2, wait: 30 }), null, 'a wait that runs out resolves null');
  await first.release();
  const second = await waited;
  assert.ok(second instanceof Lock, 'handed the permit within its wait');
  await second.release();

  const rw = keyFor('tryrw');
  const reader = await client.tryAcquireRead(rw);
  assert.ok(reader instanceof Lock && Number.isSafeInteger(reader.fence));
  const alsoReader = await client.tryAcquireRead(rw, { ttl: 5000 });
  assert.ok(alsoReader instanceof Lock, 'readers share it');
  assert.equal(await client.tryAcquireWrite(rw), null, 'a reader holds it');
  await reader.release();
  await alsoReader.release();
  const writer = await client.tryAcquireWrite(rw, null);
  assert.ok(writer instanceof Lock);
  assert.equal(await client.tryAcquireRead(rw), null, 'a writer holds it');
  assert.equal(await client.tryAcquireWrite(rw, { wait: 20 }), null);
  await writer.release();
  assert.equal(await server.raw.call('EXISTS', rw), 0);
});

test('the tryAcquire methods reject bad arguments before any I/O, never throw', async () => {
  const key = keyFor('trybad');
  await assert.rejects(client.tryAcquireSemaphore(key), TypeError);
  await assert.rejects(client.tryAcquireSemaphore(key, { limit: 0 }), RangeError);
  await assert.rejects(client.tryAcquireRead(key, 'fast'), TypeError);
  await assert.rejects(client.tryAcquireWrite(key, { ttl: 0 }), RangeError);
  await assert.rejects(client.tryAcquireWrite(42), TypeError);
  assert.equal((await server.raw.call('KEYS', `*${key}*`)).length, 0);
});
