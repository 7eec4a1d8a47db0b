'use strict';
// The node-redlock API over redislock (redlock_adapter.js), beyond what
// redlock_contract.test.js checks of node-redlock's documented contract:
// how it maps redislock's outcomes (one attempt, its vote the deployment's
// outcome: a ResourceLockedError or redislock's own connection error), the
// order it takes several resources in and what it lets go of when one is
// held, and that acquire, extend and release reach every Redlock node, also
// those that answer after the majority. Here the clients are only what the
// adapter reads of an ioredis client (its `options`).

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');

const { LockConnectionError } = require('..');
const { Redlock, ExecutionError, ResourceLockedError } = require('./redlock_adapter');
const { RedisServer, keyFor, freePort, waitUntil } = require('./helper');

let servers;
/** What the adapter reads of an ioredis client of the server on `port`. */
const ioredisOf = (port) => ({ options: { host: '127.0.0.1', port, db: 0 } });

before(async () => {
  servers = await Promise.all([0, 1, 2].map(() => RedisServer.start()));
});

after(() => servers.forEach((s) => s.destroy()));

/** The votes against of an ExecutionError's attempts. */
async function votesAgainst(error) {
  assert.ok(error instanceof ExecutionError, String(error));
  const votes = [];
  for (const e of await Promise.allSettled(error.attempts)) {
    assert.equal(e.status, 'fulfilled');
    votes.push(...e.value.votesAgainst.values());
  }
  assert.ok(votes.length > 0);
  return votes;
}

test('individual locks are exclusive: the second acquisition fails with a ResourceLockedError vote', async () => {
  const raw = servers[0].raw;
  const redlock = new Redlock([ioredisOf(servers[0].port)], { retryCount: 2, retryDelay: 50 });
  const key = keyFor('c');
  const lock = await redlock.acquire([key], 10000);
  const e = await redlock.acquire([key], 10000).catch((err) => err);
  assert.equal(e.attempts.length, 1, 'one queued wait, not retryCount + 1 attempts');
  for (const v of await votesAgainst(e)) {
    assert.ok(v instanceof ResourceLockedError);
    assert.equal(v.message, 'The operation was applied to: 0 of the 1 requested resources.');
  }
  assert.equal(await raw.str('GET', key), lock.value);
  await lock.release();
  assert.equal(await raw.call('GET', key), null);
});

test('overlapping multi-locks are exclusive: the held values stay, the new resource stays free', async () => {
  const raw = servers[0].raw;
  const redlock = new Redlock([ioredisOf(servers[0].port)], { retryCount: 2, retryDelay: 50 });
  const [c1, c2, c3] = ['c1', 'c2', 'c3'].map((t) => keyFor(t));
  const lock = await redlock.acquire([c1, c2], 10000);
  assert.equal(await raw.str('GET', c1), lock.value);
  assert.equal(await raw.str('GET', c2), lock.value);
  // c3 sorts after c2, and c2 is held: taken in name order, c3 is never reached...
  let e = await redlock.acquire([c2, c3], 10000).catch((err) => err);
  for (const v of await votesAgainst(e)) assert.ok(v instanceof ResourceLockedError);
  assert.equal(await raw.str('GET', c1), lock.value, 'the original lock value must not be changed');
  assert.equal(await raw.str('GET', c2), lock.value);
  assert.equal(await raw.call('GET', c3), null, 'the new resource must remain unlocked');
  // ...and one taken before the held one is let go again.
  const c0 = keyFor('c0'); // sorts before c2
  e = await redlock.acquire([c0, c2], 10000).catch((err) => err);
  for (const v of await votesAgainst(e)) assert.ok(v instanceof ResourceLockedError);
  assert.equal(await raw.call('GET', c0), null, 'a resource taken on the way is released');
  await lock.release();
  for (const k of [c1, c2, c3]) assert.equal(await raw.call('GET', k), null);
});

test('locks fail when redis is unreachable: an ExecutionError whose vote is the connection error', async () => {
  const redlock = new Redlock([ioredisOf(await freePort())]);
  const e = await redlock.acquire([keyFor('b')], 10000).catch((err) => err);
  for (const v of await votesAgainst(e)) {
    assert.ok(v instanceof LockConnectionError, String(v));
    assert.match(v.message, /127\.0\.0\.1/);
  }
});

test('Redlock: fails when a majority of clients fail, and leaves their keys alone', async () => {
  const raws = servers.map((s) => s.raw);
  const redlock = new Redlock(
    servers.map((s) => ioredisOf(s.port)),
    { retryCount: 2, retryDelay: 50 },
  );
  const key = keyFor('c');
  await raws[1].call('SET', key, 'other1');
  await raws[2].call('SET', key, 'other2');
  const e = await redlock.acquire([key], 10000).catch((err) => err);
  for (const v of await votesAgainst(e)) {
    assert.ok(v instanceof ResourceLockedError);
    assert.equal(v.message, 'The operation was applied to: 0 of the 1 requested resources.');
  }
  // A grant from node 0 that came after the majority refused is taken
  // back once it arrives (the call returns at the majority's answer).
  await waitUntil('node 0 to give the key back', async () => (await raws[0].call('GET', key)) === null);
  assert.equal(await raws[1].str('GET', key), 'other1');
  assert.equal(await raws[2].str('GET', key), 'other2');
});

test('an "error" event for every vote against, as node-redlock emits them', async () => {
  const redlock = new Redlock([ioredisOf(servers[0].port)], { retryCount: 0 });
  const key = keyFor('e');
  const lock = await redlock.acquire([key], 10000);
  const seen = [];
  redlock.on('error', (err) => seen.push(err));
  await assert.rejects(redlock.acquire([key], 10000), ExecutionError);
  assert.equal(seen.length, 1);
  assert.ok(seen[0] instanceof ResourceLockedError);
  // An extended lock is a new Lock; the old one cannot be extended again.
  const extended = await lock.extend(20000);
  assert.equal(extended.value, lock.value);
  await assert.rejects(lock.extend(20000), /Cannot extend an already-expired lock/);
  await extended.release();
  await assert.rejects(extended.release(), ExecutionError);
});

test('Redlock: acquire, extend and release reach every node, also the ones after the majority', async () => {
  const raws = servers.map((s) => s.raw);
  const every = (what, f) =>
    waitUntil(what, async () => (await Promise.all(raws.map(f))).every(Boolean));
  const redlock = new Redlock(servers.map((s) => ioredisOf(s.port)));
  const key = keyFor('a');
  let lock = await redlock.acquire([key], 60000);
  await every('every node to hold the value', async (r) => (await r.str('GET', key)) === lock.value);
  lock = await lock.extend(180000);
  await every('every node to be extended', async (r) => (await r.call('PTTL', key)) > 60000);
  await lock.release();
  await every('every node to let go', async (r) => (await r.call('EXISTS', key)) === 0);
  // A minority that refuses: the release is decided by the refusal and one
  // release, and still reaches the other node.
  await raws[2].call('SET', key, 'other');
  lock = await redlock.acquire([key], 60000);
  await lock.release();
  await every('both holding nodes to let go', async (r, i) => i === 2 || (await r.call('EXISTS', key)) === 0);
  assert.equal(await raws[2].str('GET', key), 'other');
});
