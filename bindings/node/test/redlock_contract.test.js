'use strict';
// node-redlock's documented contract (the `redlock` package 5.0.0-beta.2:
// its README and index.d.ts), kept by its API over redislock
// (redlock_adapter.js), so that code written for node-redlock runs on
// redislock: `new Redlock(clients, settings)` with ioredis clients (the real
// ioredis of target/node-tools, never connected: the adapter reads their
// options), acquire / extend / release and their Locks, retries, using()
// with automatic extension and its AbortSignal, ExecutionError and its
// attempts' votes, ResourceLockedError, the "error" event, locks of several
// resources, a single server and a Redis Cluster, and Redlock over three
// servers and over three Clusters.
//
// Where redislock does otherwise by design (docs/node.md, "Coming from
// node-redlock"), the test checks redislock's behaviour and says so: a
// duration over 30 days is a RangeError; a failed acquisition reports one
// attempt (redislock waits once, queued), not retryCount + 1; custom scripts
// are refused.

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');

const { LockConnectionError } = require('..');
const { Redlock, Lock, ExecutionError, ResourceLockedError, defaultSettings } = require('./redlock_adapter');
const { RedisServer, keyFor, freePort, startCluster, sleep, waitUntil, nodeTool } = require('./helper');

const THIRTY_DAYS = 30 * 24 * 3600 * 1000;

let Redis;
const servers = [];
/** Each deployment: `members`, each { nodes, cluster } (one member but for Redlock). */
const deployments = {};

before(async () => {
  Redis = require(nodeTool('ioredis'));
  const plain = await Promise.all([0, 1, 2, 3].map(() => RedisServer.start()));
  servers.push(...plain);
  const clusters = [];
  for (let i = 0; i < 4; i++) clusters.push(await startCluster(servers));
  const server = (s) => ({ nodes: [s], cluster: false });
  const cluster = (nodes) => ({ nodes, cluster: true });
  deployments['one server'] = { members: [server(plain[0])] };
  deployments['a Redis Cluster'] = { members: [cluster(clusters[0])] };
  deployments['three servers'] = { members: plain.slice(1).map(server) };
  deployments['three Redis Clusters'] = { members: clusters.slice(1).map(cluster) };
});

after(() => servers.forEach((s) => s.destroy()));

/** An ioredis client of a member (a Redis, or a Cluster of its nodes), never connected. */
function ioredisOf(member) {
  if (member.cluster) {
    return new Redis.Cluster(
      member.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
      { lazyConnect: true },
    );
  }
  return new Redis({ host: '127.0.0.1', port: member.nodes[0].port, lazyConnect: true });
}

/** A Redlock over the deployment's members, as node-redlock's users make one. */
function redlockOf(d, settings) {
  return new Redlock(d.members.map(ioredisOf), settings);
}

/** The node of a member that serves `key` (a Cluster's master of its slot). */
async function nodeOf(member, key) {
  if (!member.cluster) return member.nodes[0];
  for (const n of member.nodes) {
    try {
      await n.raw.call('EXISTS', key);
      return n;
    } catch (e) {
      if (!/^MOVED /.test(e.message)) throw e;
    }
  }
  throw new Error(`no node of the Cluster serves ${key}`);
}

/** `key`'s value on each member (a string; null: no key). */
async function values(d, key) {
  return Promise.all(
    d.members.map(async (m) => (await (await nodeOf(m, key)).raw.call('GET', key))?.toString('latin1') ?? null),
  );
}

/** `key`'s PTTL on each member. */
async function pttls(d, key) {
  return Promise.all(d.members.map(async (m) => (await nodeOf(m, key)).raw.call('PTTL', key)));
}

/**
 * Wait until every member holds `value` at `key` (null: none). Acquire,
 * extend and release resolve once a majority answered, in node-redlock as
 * here: the others may come after.
 */
async function waitValue(d, key, value, what) {
  await waitUntil(what || `${key} to be ${value}`, async () => (await values(d, key)).every((v) => v === value));
}

/** The SETs and scripts the deployment's nodes ran: an acquisition's tries. */
async function lockCommands(d) {
  let n = 0;
  for (const m of d.members) {
    for (const node of m.nodes) {
      for (const [cmd, calls] of Object.entries(await node.calls())) {
        if (/^(eval|evalsha|fcall|set)$/.test(cmd)) n += calls;
      }
    }
  }
  return n;
}

/** The votes against in an ExecutionError's attempts (each a Promise of ExecutionStats). */
async function votesAgainst(error) {
  assert.ok(error instanceof ExecutionError, String(error));
  assert.ok(Array.isArray(error.attempts) && error.attempts.length > 0, 'attempts');
  const votes = [];
  for (const stats of await Promise.all(error.attempts)) {
    assert.ok(stats.votesAgainst instanceof Map);
    votes.push(...stats.votesAgainst.values());
  }
  assert.ok(votes.length > 0, 'at least one vote against');
  return votes;
}

/** A failure to take a held resource: an ExecutionError whose votes against are all ResourceLockedErrors. */
async function lockedOut(error) {
  for (const v of await votesAgainst(error)) assert.ok(v instanceof ResourceLockedError, String(v));
  return true;
}

/** Resource names of one hash tag (a Cluster takes several resources of one slot in one lock). */
function tagged(...suffixes) {
  const tag = keyFor('t');
  return suffixes.map((s) => `{${tag}}${s}`);
}

/** `promise` must reject as lockedOut says. */
async function rejectsLockedOut(promise) {
  const e = await promise.then(
    (v) => assert.fail(`resolved (${v && v.value}) where the resource is held`),
    (err) => err,
  );
  return lockedOut(e);
}

/** A Promise with a flag that turns true once it settled. */
function watch(promise) {
  const w = { settled: false };
  w.promise = promise.finally(() => (w.settled = true));
  return w;
}

test('new Redlock(clients, settings): at least one client; settings over the defaults; clients kept as a Set', () => {
  assert.throws(() => new Redlock([]), /at least one redis client/);
  const a = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true });
  const b = new Redis({ host: '127.0.0.1', port: 2, lazyConnect: true });
  const redlock = new Redlock([a, b, a], { retryCount: 3, retryJitter: 7 });
  assert.deepEqual(redlock.settings, { ...defaultSettings, retryCount: 3, retryJitter: 7 });
  assert.deepEqual(defaultSettings, {
    driftFactor: 0.01,
    retryCount: 10,
    retryDelay: 200,
    retryJitter: 100,
    automaticExtensionThreshold: 500,
  });
  assert.ok(redlock.clients instanceof Set);
  assert.deepEqual([...redlock.clients], [a, b]);
  // A difference by design: redislock runs its own scripts.
  assert.throws(() => new Redlock([a], {}, { acquireScript: 'return 0' }), TypeError);
});

for (const where of ['one server', 'a Redis Cluster']) {
  const dep = () => deployments[where];

  test(`${where}: acquire returns a Lock (resources, value, expiration, attempts); the value is on the server with the duration as TTL`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('a');
    const start = Date.now();
    const lock = await redlock.acquire([key], 20000);
    const end = Date.now();
    assert.ok(lock instanceof Lock);
    assert.equal(lock.redlock, redlock);
    assert.deepEqual(lock.resources, [key]);
    assert.equal(typeof lock.value, 'string');
    assert.ok(lock.value.length > 0);
    assert.deepEqual(await values(d, key), [lock.value]);
    const [pttl] = await pttls(d, key);
    assert.ok(pttl > 0 && pttl <= 20000, `PTTL ${pttl}`);
    // The end of validity by this process's clock: start + duration - drift (1% + 2 ms).
    assert.ok(lock.expiration >= start + 20000 - 202, `expiration ${lock.expiration - start} ms after the start`);
    assert.ok(lock.expiration <= end + 20000 - 200, `expiration ${lock.expiration - end} ms after the end`);
    assert.ok(lock.attempts.length > 0);
    for (const stats of await Promise.all(lock.attempts)) {
      assert.equal(stats.membershipSize, 1);
      assert.equal(stats.quorumSize, 1);
      assert.equal(stats.votesFor.size, 1);
      assert.equal(stats.votesAgainst.size, 0);
    }
    const other = await redlock.acquire([tagged('b')[0]], 20000);
    assert.notEqual(other.value, lock.value, 'each lock has a value of its own');
    await Promise.all([lock.release(), other.release()]);
  });

  test(`${where}: extend returns a new Lock with the same value and sets the TTL to the new duration; the old Lock cannot be extended again`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('e');
    const lock = await redlock.acquire([key], 10000);
    const extended = await lock.extend(60000);
    assert.ok(extended instanceof Lock);
    assert.notEqual(extended, lock);
    assert.equal(extended.value, lock.value);
    assert.deepEqual(extended.resources, [key]);
    assert.deepEqual(await values(d, key), [lock.value]);
    let [pttl] = await pttls(d, key);
    assert.ok(pttl > 10000 && pttl <= 60000, `PTTL ${pttl} after extend(60000)`);
    await assert.rejects(lock.extend(60000), ExecutionError, 'the Lock that was extended');
    // redlock.extend(lock, duration): the same; the TTL is set, not added to.
    const again = await redlock.extend(extended, 30000);
    assert.equal(again.value, lock.value);
    [pttl] = await pttls(d, key);
    assert.ok(pttl > 0 && pttl <= 30000, `PTTL ${pttl} after extend(30000)`);
    assert.ok(again.expiration > Date.now());
    await again.release();
    assert.deepEqual(await values(d, key), [null]);
  });

  test(`${where}: release deletes the value; a second release fails with an ExecutionError; redlock.release(lock) is the same`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('r');
    const lock = await redlock.acquire([key], 10000);
    const result = await lock.release();
    assert.ok(Array.isArray(result.attempts) && result.attempts.length > 0);
    for (const stats of await Promise.all(result.attempts)) assert.equal(stats.votesAgainst.size, 0);
    assert.deepEqual(await values(d, key), [null]);
    await rejectsLockedOut(lock.release());
    const second = await redlock.acquire([key], 10000);
    assert.notEqual(second.value, lock.value);
    await redlock.release(second);
    assert.deepEqual(await values(d, key), [null]);
  });

  test(`${where}: a duration must be a whole number of milliseconds; nothing is written otherwise`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('f');
    await assert.rejects(redlock.acquire([key], 1000.5), { message: 'Duration must be an integer value in milliseconds.' });
    assert.deepEqual(await values(d, key), [null]);
    const lock = await redlock.acquire([key], 10000);
    await assert.rejects(lock.extend(20000.25), { message: 'Duration must be an integer value in milliseconds.' });
    const [pttl] = await pttls(d, key);
    assert.ok(pttl > 0 && pttl <= 10000, `PTTL ${pttl}: not extended`);
    await lock.release();
  });

  test(`${where}: (by design) a duration over 30 days is a RangeError, where node-redlock takes any; 30 days is taken`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('ttl');
    // node-redlock's own tests ask for Math.floor(Number.MAX_SAFE_INTEGER / 10) ms.
    for (const duration of [THIRTY_DAYS + 1, Math.floor(Number.MAX_SAFE_INTEGER / 10)]) {
      await assert.rejects(redlock.acquire([key], duration), (e) => {
        assert.ok(e instanceof RangeError, String(e));
        assert.match(e.message, /30 days/);
        return true;
      });
      assert.deepEqual(await values(d, key), [null]);
    }
    const lock = await redlock.acquire([key], THIRTY_DAYS);
    let [pttl] = await pttls(d, key);
    assert.ok(pttl > THIRTY_DAYS - 600000 && pttl <= THIRTY_DAYS, `PTTL ${pttl}`);
    const shorter = await lock.extend(10000);
    await assert.rejects(shorter.extend(3 * Math.floor(Number.MAX_SAFE_INTEGER / 10)), RangeError);
    assert.deepEqual(await values(d, key), [lock.value]);
    [pttl] = await pttls(d, key);
    assert.ok(pttl > 0 && pttl <= 10000, `PTTL ${pttl}: the refused extend changed nothing`);
    await shorter.release();
  });

  test(`${where}: a lock of several resources puts one value on each; extend and release act on all of them`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [k1, k2] = tagged('m1', 'm2');
    const lock = await redlock.acquire([k1, k2], 10000);
    assert.deepEqual(lock.resources, [k1, k2]);
    assert.deepEqual(await values(d, k1), [lock.value]);
    assert.deepEqual(await values(d, k2), [lock.value]);
    const extended = await lock.extend(60000);
    for (const k of [k1, k2]) {
      const [pttl] = await pttls(d, k);
      assert.ok(pttl > 10000 && pttl <= 60000, `${k}: PTTL ${pttl}`);
    }
    await extended.release();
    assert.deepEqual(await values(d, k1), [null]);
    assert.deepEqual(await values(d, k2), [null]);
  });

  test(`${where}: a held resource cannot be acquired: an ExecutionError with ResourceLockedError votes, an "error" event, the holder untouched`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('x');
    const lock = await redlock.acquire([key], 10000);
    const events = [];
    const other = redlockOf(d, { retryCount: 0 });
    other.on('error', (e) => events.push(e));
    const e = await other.acquire([key], 10000).catch((err) => err);
    await lockedOut(e);
    assert.equal(e.message, 'The operation was unable to achieve a quorum during its retry window.');
    assert.ok(events.length > 0 && events.every((v) => v instanceof ResourceLockedError), 'an "error" event per vote against');
    for (const stats of await Promise.all(e.attempts)) {
      assert.equal(stats.membershipSize, 1);
      assert.equal(stats.quorumSize, 1);
      assert.equal(stats.votesFor.size, 0);
    }
    assert.deepEqual(await values(d, key), [lock.value]);
    const [pttl] = await pttls(d, key);
    assert.ok(pttl > 0 && pttl <= 10000, `PTTL ${pttl}`);
    // By design: retries are one wait in redislock, so one attempt is reported, not retryCount + 1.
    const retried = await redlock.acquire([key], 10000, { retryCount: 2, retryDelay: 50 }).catch((err) => err);
    await lockedOut(retried);
    assert.equal(retried.attempts.length, 1);
    await lock.release();
    assert.deepEqual(await values(d, key), [null]);
  });

  test(`${where}: overlapping locks of several resources are exclusive, and a failed one leaves every resource as it was`, async () => {
    const d = dep();
    const redlock = redlockOf(d, { retryCount: 0 });
    const [c0, c1, c2, c3] = tagged('c0', 'c1', 'c2', 'c3');
    const lock = await redlock.acquire([c1, c2], 10000);
    for (const resources of [
      [c2, c3],
      [c0, c2],
      [c3, c0, c1],
    ]) {
      await rejectsLockedOut(redlock.acquire(resources, 10000));
      assert.deepEqual(await values(d, c1), [lock.value], 'the holder keeps c1');
      assert.deepEqual(await values(d, c2), [lock.value], 'the holder keeps c2');
      assert.deepEqual(await values(d, c0), [null], 'c0 stays free');
      assert.deepEqual(await values(d, c3), [null], 'c3 stays free');
    }
    const free = await redlock.acquire([c0, c3], 10000);
    await Promise.all([lock.release(), free.release()]);
    for (const k of [c0, c1, c2, c3]) assert.deepEqual(await values(d, k), [null]);
  });

  test(`${where}: an acquisition retrying gets the resource when the holder releases it (retryCount and retryDelay; -1: unlimited); a window that runs out fails`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('w');
    for (const settings of [
      { retryCount: 600, retryDelay: 100 },
      { retryCount: -1, retryDelay: 100 },
    ]) {
      const holder = await redlock.acquire([key], 60000);
      const tried = await lockCommands(d);
      const waiting = watch(redlock.acquire([key], 10000, settings));
      await waitUntil('the acquisition to try the resource', async () => (await lockCommands(d)) > tried);
      assert.deepEqual(await values(d, key), [holder.value], 'the holder keeps the resource');
      assert.equal(waiting.settled, false, `${JSON.stringify(settings)}: taken while held`);
      await holder.release();
      const lock = await waiting.promise;
      assert.notEqual(lock.value, holder.value);
      assert.deepEqual(await values(d, key), [lock.value]);
      await lock.release();
    }
    const holder = await redlock.acquire([key], 60000);
    await rejectsLockedOut(redlock.acquire([key], 10000, { retryCount: 2, retryDelay: 100 }));
    await holder.release();
  });

  test(`${where}: a lock expires after its duration, and the resource can be acquired again`, async () => {
    const d = dep();
    const redlock = redlockOf(d, { retryCount: 0 });
    const [key] = tagged('d');
    const lock = await redlock.acquire([key], 200);
    assert.deepEqual(await values(d, key), [lock.value]);
    await waitValue(d, key, null, 'the 200 ms lock to expire');
    const next = await redlock.acquire([key], 10000);
    assert.notEqual(next.value, lock.value);
    // The expired Lock can no longer release or extend what is now another's.
    await assert.rejects(lock.release(), ExecutionError);
    await assert.rejects(redlock.extend(lock, 10000), ExecutionError);
    assert.deepEqual(await values(d, key), [next.value]);
    await next.release();
  });

  test(`${where}: using runs the routine with the lock held, extends it automatically, releases it after and resolves with the routine's value`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('u');
    const duration = 2000;
    const result = await redlock.using([key], duration, { automaticExtensionThreshold: 500 }, async (signal) => {
      const start = Date.now();
      assert.equal(signal.aborted, false);
      const [value] = await values(d, key);
      assert.equal(typeof value, 'string', 'the lock is held while the routine runs');
      // Outlive the duration, an extension seen on the server meanwhile.
      const node = await nodeOf(d.members[0], key);
      let low = await node.raw.call('PTTL', key);
      let extensions = 0;
      await waitUntil('the lock to be extended and to outlive its duration', async () => {
        const pttl = await node.raw.call('PTTL', key);
        if (pttl > low) extensions += 1;
        low = pttl;
        return extensions > 0 && Date.now() - start > duration + 500;
      });
      assert.deepEqual(await values(d, key), [value], 'the same lock, extended');
      assert.equal(signal.aborted, false, 'the signal must not be aborted');
      assert.equal(signal.error, undefined, 'the signal must not have an error');
      return `done ${value}`;
    });
    assert.match(result, /^done /);
    assert.deepEqual(await values(d, key), [null], 'released after the routine');
    // The settings argument is optional.
    assert.equal(await redlock.using([key], 1000, async (signal) => (signal.aborted ? 'aborted' : 'ran')), 'ran');
    assert.deepEqual(await values(d, key), [null]);
  });

  test(`${where}: using rejects with the routine's error and releases the lock`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('ue');
    const boom = new Error('routine failed');
    await assert.rejects(
      redlock.using([key], 5000, async () => {
        assert.equal(typeof (await values(d, key))[0], 'string');
        throw boom;
      }),
      (e) => e === boom,
    );
    assert.deepEqual(await values(d, key), [null]);
  });

  test(`${where}: using is exclusive: two routines on one resource never run at once`, async () => {
    const d = dep();
    const redlock = redlockOf(d, { retryCount: -1 });
    const [key] = tagged('ux');
    let inside = 0;
    let most = 0;
    const routine = async () => {
      inside += 1;
      most = Math.max(most, inside);
      const [value] = await values(d, key);
      await sleep(300);
      assert.deepEqual(await values(d, key), [value]);
      inside -= 1;
      return value;
    };
    const [v1, v2] = await Promise.all([redlock.using([key], 5000, routine), redlock.using([key], 5000, routine)]);
    assert.equal(most, 1, 'both routines ran at once');
    assert.equal(typeof v1, 'string');
    assert.notEqual(v1, v2, 'two locks, one after the other');
    assert.deepEqual(await values(d, key), [null]);
  });

  test(`${where}: a lock lost while using runs aborts the signal, signal.error is an ExecutionError, and using rejects`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('ul');
    const node = async () => nodeOf(d.members[0], key);
    let seen;
    await assert.rejects(
      redlock.using([key], 1500, async (signal) => {
        // Another owner takes the key over (as an expiry and another's acquisition would).
        await (await node()).raw.call('SET', key, 'another owner', 'PX', 60000);
        await waitUntil('the signal to abort', () => signal.aborted);
        seen = signal.error;
        return 'finished unprotected';
      }),
      ExecutionError,
    );
    assert.ok(seen instanceof ExecutionError, String(seen));
    await lockedOut(seen);
    assert.deepEqual(await values(d, key), ['another owner'], "the other owner's value stays");
    await (await node()).raw.call('DEL', key);
  });
}

test('locks fail when the server is unreachable: an ExecutionError whose vote is the connection error', async () => {
  const port = await freePort();
  const redlock = new Redlock([new Redis({ host: '127.0.0.1', port, lazyConnect: true })], { retryCount: 0 });
  const events = [];
  redlock.on('error', (e) => events.push(e));
  const e = await redlock.acquire([keyFor('b')], 10000).catch((err) => err);
  for (const v of await votesAgainst(e)) {
    assert.ok(v instanceof LockConnectionError, String(v));
    assert.match(v.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
  }
  assert.ok(events.length > 0 && events.every((v) => v instanceof LockConnectionError));
});

for (const where of ['three servers', 'three Redis Clusters']) {
  const dep = () => deployments[where];

  test(`${where} (Redlock): acquire, extend and release reach every member; a quorum of 2 of 3`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('q');
    const lock = await redlock.acquire([key], 20000);
    await waitValue(d, key, lock.value, 'every member to hold the value');
    for (const stats of await Promise.all(lock.attempts)) {
      assert.equal(stats.membershipSize, 3);
      assert.equal(stats.quorumSize, 2);
    }
    const extended = await lock.extend(60000);
    await waitUntil('every member to be extended', async () => (await pttls(d, key)).every((p) => p > 20000));
    await extended.release();
    await waitValue(d, key, null, 'every member to let go');
  });

  test(`${where} (Redlock): a minority holding another value: acquire, extend and release succeed and leave the minority alone`, async () => {
    const d = dep();
    const redlock = redlockOf(d);
    const [key] = tagged('min');
    await (await nodeOf(d.members[2], key)).raw.call('SET', key, 'other');
    const lock = await redlock.acquire([key], 20000);
    await waitUntil('the two free members to hold the value', async () => {
      const v = await values(d, key);
      return v[0] === lock.value && v[1] === lock.value;
    });
    assert.equal((await values(d, key))[2], 'other');
    assert.equal((await pttls(d, key))[2], -1, "the minority's key keeps no TTL");
    const extended = await lock.extend(60000);
    await waitUntil('the two members to be extended', async () => {
      const p = await pttls(d, key);
      return p[0] > 20000 && p[1] > 20000;
    });
    assert.equal((await values(d, key))[2], 'other');
    assert.equal((await pttls(d, key))[2], -1);
    await extended.release();
    await waitUntil('the two members to let go', async () => {
      const v = await values(d, key);
      return v[0] === null && v[1] === null;
    });
    assert.equal((await values(d, key))[2], 'other');
    await (await nodeOf(d.members[2], key)).raw.call('DEL', key);
  });

  test(`${where} (Redlock): a majority holding other values: an ExecutionError of ResourceLockedError votes; their values stay, the free member is let go`, async () => {
    const d = dep();
    const redlock = redlockOf(d, { retryCount: 2, retryDelay: 50 });
    const [key] = tagged('maj');
    await (await nodeOf(d.members[1], key)).raw.call('SET', key, 'other1');
    await (await nodeOf(d.members[2], key)).raw.call('SET', key, 'other2');
    const e = await redlock.acquire([key], 20000).catch((err) => err);
    await lockedOut(e);
    for (const stats of await Promise.all(e.attempts)) {
      assert.equal(stats.membershipSize, 3);
      assert.equal(stats.quorumSize, 2);
    }
    await waitUntil('the free member to be let go', async () => (await values(d, key))[0] === null);
    assert.deepEqual((await values(d, key)).slice(1), ['other1', 'other2']);
    for (const i of [1, 2]) await (await nodeOf(d.members[i], key)).raw.call('DEL', key);
  });

  test(`${where} (Redlock): one member unreachable: locks still work; two unreachable: an ExecutionError`, async () => {
    const d = dep();
    const dead = async () => new Redis({ host: '127.0.0.1', port: await freePort(), lazyConnect: true });
    const [a, b] = d.members.map(ioredisOf);
    const redlock = new Redlock([a, b, await dead()]);
    const [key] = tagged('down');
    const lock = await redlock.acquire([key], 20000);
    await waitUntil('both live members to hold the value', async () => {
      const v = await values(d, key);
      return v[0] === lock.value && v[1] === lock.value;
    });
    const extended = await lock.extend(30000);
    await extended.release();
    await waitUntil('both live members to let go', async () => (await values(d, key)).every((v) => v === null));
    const minority = new Redlock([a, await dead(), await dead()], { retryCount: 0 });
    await assert.rejects(minority.acquire([key], 20000), ExecutionError);
    await waitUntil('the live member to be let go', async () => (await values(d, key))[0] === null);
  });
}
