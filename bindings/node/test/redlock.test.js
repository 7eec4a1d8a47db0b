'use strict';
// Redlock: a Client of an array of URLs takes the lock on a majority of
// independent servers, and fails with LockQuorumError when most are gone.
// Calls return once a majority answered: the tests wait for the others.

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');

const { Client, LockQuorumError, LockTimeoutError } = require('..');
const { RedisServer, keyFor, waitUntil } = require('./helper');

let servers;

before(async () => {
  servers = await Promise.all([0, 1, 2].map(() => RedisServer.start()));
});

after(() => servers.forEach((s) => s.destroy()));

const holders = (key, token) =>
  Promise.all(servers.map(async (s) => (s.raw ? s.raw.call('GET', key) : null))).then(
    (values) => values.filter((v) => v && v.equals(token)).length,
  );

test('a lock over three servers: held on every one, released on every one', async () => {
  const client = new Client(servers.map((s) => s.url));
  const key = keyFor('redlock');
  const lock = await client.acquire(key, { ttl: 10000 });
  assert.ok((await holders(key, lock.token)) >= 2);
  await waitUntil('every node to hold the token', async () => (await holders(key, lock.token)) === 3);
  assert.equal(typeof lock.fence, 'number');
  assert.equal(await client.tryAcquire(key), null);
  await assert.rejects(new Client(servers.map((s) => s.url)).acquire(key, { wait: 100 }), LockTimeoutError);
  await lock.extend(20000);
  await lock.release();
  await waitUntil('every node to let go', async () => (await holders(key, lock.token)) === 0);
  const next = await client.acquire(key);
  assert.ok(next.fence > lock.fence);
  await next.release();
});

test('contending clients exclude each other over Redlock', async () => {
  const key = keyFor('contended');
  let inside = 0;
  let most = 0;
  let done = 0;
  const clients = [0, 1, 2, 3].map(() => new Client(servers.map((s) => s.url)));
  await Promise.all(
    clients.map(async (c) => {
      for (let i = 0; i < 5; i++) {
        await c.using(key, { ttl: 10000, wait: 60000 }, async () => {
          inside += 1;
          most = Math.max(most, inside);
          await new Promise((r) => setTimeout(r, 2));
          inside -= 1;
          done += 1;
        });
      }
    }),
  );
  assert.equal(done, 20);
  assert.equal(most, 1);
});

test('with two of three servers gone, acquire rejects with LockQuorumError', async () => {
  const urls = servers.map((s) => `${s.url}?connect_timeout=300ms`);
  servers[1].stop();
  servers[2].stop();
  const client = new Client(urls);
  const e = await client.acquire(keyFor('quorum'), { wait: 0 }).catch((err) => err);
  assert.ok(e instanceof LockQuorumError, e);
});
