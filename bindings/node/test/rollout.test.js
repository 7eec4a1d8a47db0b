'use strict';
// A rolling migration from node-redlock: for a while a service still on
// node-redlock (the `redlock` package 5.0.0-beta.2 over ioredis, the real
// ones, installed in target/node-tools by `make test-node`) and a service
// already on redislock take the same resource names. They must exclude each
// other, both ways, on one server, on three servers (Redlock, both sides
// with a quorum of two) and on a Redis Cluster. node-redlock runs in a
// process of its own (rollout_peer.js), as the old service does; this
// process is the new one, on redislock's Client (what docs/node.md's
// "Coming from node-redlock" maps node-redlock's calls to) and on the
// node-redlock API over it (redlock_adapter.js).
//
// Nothing here is timed: an acquisition that must wait is seen trying
// (the servers' command counts) and still waiting while the other holds the
// name, and a lock that must expire is waited for on the servers.

const assert = require('node:assert/strict');
const { fork } = require('node:child_process');
const path = require('node:path');
const { test, before, after } = require('node:test');

const { Client, LockNotOwnedError, LockTimeoutError } = require('..');
const { Redlock: Adapter, ExecutionError } = require('./redlock_adapter');
const { RedisServer, keyFor, startCluster, waitUntil, nodeTool, nodeToolVersion } = require('./helper');

/** The node-redlock process: `await peer.call(op, args)`; a failure rejects with its { name, message, votes }. */
class Peer {
  static async start() {
    const modules = path.dirname(nodeTool('redlock'));
    nodeTool('ioredis');
    const child = fork(path.join(__dirname, 'rollout_peer.js'), [], {
      env: { ...process.env, ROLLOUT_NODE_MODULES: modules },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const peer = new Peer(child);
    peer.versions = await new Promise((resolve, reject) => {
      child.once('message', (m) => resolve(m.versions));
      child.once('exit', (code) => reject(new Error(`the node-redlock process exited (${code}) before it was ready`)));
    });
    child.on('message', (m) => peer.answer(m));
    child.on('exit', (code) => {
      for (const p of peer.pending.values()) p.reject(new Error(`the node-redlock process exited (${code})`));
    });
    return peer;
  }

  constructor(child) {
    this.child = child;
    this.pending = new Map();
    this.seq = 0;
  }

  call(op, args = {}) {
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, op, ...args });
    });
  }

  answer({ id, ok, value, error }) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (ok) p.resolve(value);
    else p.reject(Object.assign(new Error(`node-redlock: ${error.name}: ${error.message}`), { peer: error }));
  }

  stop() {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

/** node-redlock's failure: an ExecutionError whose votes against are ResourceLockedErrors. */
function lockedOut(e) {
  assert.ok(e.peer, String(e));
  assert.equal(e.peer.name, 'ExecutionError', e.message);
  assert.ok(e.peer.votes.length > 0, 'votes against');
  for (const v of e.peer.votes) assert.equal(v.name, 'ResourceLockedError', v.message);
  return true;
}

/** The adapter's failure to take a held name: an ExecutionError whose votes against are ResourceLockedErrors. */
async function adapterLockedOut(e) {
  assert.ok(e instanceof ExecutionError, String(e));
  for (const stats of await Promise.all(e.attempts)) {
    for (const v of stats.votesAgainst.values()) assert.equal(v.name, 'ResourceLockedError', v.message);
  }
  return true;
}

/** `promise` (the adapter's acquisition) must reject as adapterLockedOut says. */
async function adapterRejects(promise) {
  const e = await promise.then(
    (v) => assert.fail(`resolved (${v && v.value}) where the name is held`),
    (err) => err,
  );
  return adapterLockedOut(e);
}

const servers = [];
const deployments = [];
let peers = [];

before(async () => {
  // First what the test needs from npm: its absence fails every test here.
  const Redis = require(nodeTool('ioredis'));
  nodeTool('redlock');
  const [one, a, b, c] = await Promise.all([0, 1, 2, 3].map(() => RedisServer.start()));
  servers.push(one, a, b, c);
  const cluster = await startCluster(servers);
  const lazy = (port) => new Redis({ host: '127.0.0.1', port, lazyConnect: true });
  deployments.push(
    { name: 'one server', nodes: [one], url: one.url, cluster: false },
    { name: 'three servers (Redlock)', nodes: [a, b, c], url: [a.url, b.url, c.url], cluster: false },
    {
      name: 'a Redis Cluster',
      nodes: cluster,
      url: `redis+cluster://${cluster.map((n) => `127.0.0.1:${n.port}`).join(',')}`,
      cluster: true,
    },
  );
  peers = await Promise.all(deployments.map(() => Peer.start()));
  for (const [i, d] of deployments.entries()) {
    d.peer = peers[i];
    // node-redlock's defaults but fewer retries (a refused release or extend
    // is retried too): the tests that retry say how.
    const settings = { retryCount: 3, retryDelay: 100, retryJitter: 50 };
    await d.peer.call('open', { ports: d.nodes.map((n) => n.port), cluster: d.cluster, settings });
    d.client = new Client(d.url);
    d.adapter = new Adapter(
      d.cluster
        ? [new Redis.Cluster(d.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })), { lazyConnect: true })]
        : d.nodes.map((n) => lazy(n.port)),
    );
  }
  const v = peers[0].versions;
  console.log(
    `# rollout: node-redlock ${v.redlock} over ioredis ${v.ioredis} (in ${path.dirname(nodeTool('redlock'))}), ` +
      `installed: redlock ${nodeToolVersion('redlock')}`,
  );
});

after(async () => {
  await Promise.allSettled(peers.map((p) => p.call('quit')));
  peers.forEach((p) => p.stop());
  servers.forEach((s) => s.destroy());
});

/** The nodes that hold `key`: every Redlock node, the one Cluster master of its slot, the one server. */
async function holders(d, key) {
  if (!d.cluster) return d.nodes;
  for (const n of d.nodes) {
    try {
      await n.raw.call('GET', key);
      return [n];
    } catch (e) {
      if (!/^MOVED /.test(e.message)) throw e;
    }
  }
  throw new Error(`no node of the Cluster serves ${key}`);
}

/** `key`'s value on each of its nodes, as strings (null: none). */
async function values(d, key) {
  return Promise.all((await holders(d, key)).map(async (n) => (await n.raw.call('GET', key))?.toString('latin1') ?? null));
}

/** Wait until every node of `key` holds `value` (a string, or a token Buffer; null: no key). */
async function waitValue(d, key, value, what) {
  const want = Buffer.isBuffer(value) ? value.toString('latin1') : value;
  await waitUntil(what, async () => (await values(d, key)).every((v) => v === want));
}

/** Every node of `key` holds `value` now. */
async function assertValue(d, key, value, message) {
  const want = Buffer.isBuffer(value) ? value.toString('latin1') : value;
  for (const v of await values(d, key)) assert.equal(v, want, message);
}

/** The scripts and SETs the deployment's nodes ran (both libraries lock with these). */
async function lockCommands(d) {
  let n = 0;
  for (const node of d.nodes) {
    for (const [cmd, calls] of Object.entries(await node.calls())) {
      if (/^(eval|evalsha|evalsha_ro|eval_ro|fcall|set)$/.test(cmd)) n += calls;
    }
  }
  return n;
}

/** A Promise's state, as a flag that turns true once it settled. */
function watch(promise) {
  const w = { settled: false };
  w.promise = promise.finally(() => (w.settled = true));
  return w;
}

const NAMES = ['one server', 'three servers (Redlock)', 'a Redis Cluster'];

for (const [i, where] of NAMES.entries()) {
  const dep = () => deployments[i];

  test(`${where}: node-redlock holds a name: redislock cannot take it, trying once or waiting, until node-redlock releases it`, async () => {
    const d = dep();
    const key = keyFor('held-by-redlock');
    const held = await d.peer.call('acquire', { resources: [key], duration: 60000 });
    await waitValue(d, key, held.value, "node-redlock's value on every node");

    assert.equal(await d.client.tryAcquire(key, { ttl: 10000 }), null, 'tryAcquire of a name node-redlock holds');
    await assert.rejects(d.client.acquire(key, { ttl: 10000, wait: 300 }), LockTimeoutError);
    await adapterRejects(d.adapter.acquire([key], 10000, { retryCount: 0 }));
    await adapterRejects(d.adapter.acquire([key], 10000, { retryCount: 2, retryDelay: 100 }));
    await assertValue(d, key, held.value, "node-redlock's lock is untouched");

    // A waiting acquisition: seen trying, and still waiting, while node-redlock holds the name...
    const tried = await lockCommands(d);
    const waiting = watch(d.client.acquire(key, { ttl: 10000, wait: 60000 }));
    await waitUntil('redislock to try the name', async () => (await lockCommands(d)) > tried);
    await assertValue(d, key, held.value, "node-redlock's lock is untouched by the waiter");
    assert.equal(waiting.settled, false, 'redislock took a name node-redlock holds');
    // ...takes it once node-redlock lets go.
    await d.peer.call('release', { lock: held.lock });
    const released = Date.now();
    const lock = await waiting.promise;
    console.log(`# rollout: ${where}: redislock took the name ${Date.now() - released} ms after node-redlock released it`);
    await waitValue(d, key, lock.token, "redislock's token on every node");
    await assert.rejects(d.peer.call('acquire', { resources: [key], duration: 10000, settings: { retryCount: 0 } }), lockedOut);
    await lock.release();

    // The adapter too: it takes the name once node-redlock lets go.
    const again = await d.peer.call('acquire', { resources: [key], duration: 60000 });
    const adapterWaiting = watch(d.adapter.acquire([key], 10000, { retryCount: -1 }));
    const tried2 = await lockCommands(d);
    await waitUntil('the adapter to try the name', async () => (await lockCommands(d)) > tried2);
    assert.equal(adapterWaiting.settled, false, 'the adapter took a name node-redlock holds');
    await d.peer.call('release', { lock: again.lock });
    const adapterLock = await adapterWaiting.promise;
    await waitValue(d, key, adapterLock.value, "the adapter's value on every node");
    await adapterLock.release();
    await waitValue(d, key, null, 'the name to be free');
  });

  test(`${where}: redislock holds a name: node-redlock cannot take it, trying once or retrying, until redislock releases it`, async () => {
    const d = dep();
    const key = keyFor('held-by-redislock');
    const lock = await d.client.acquire(key, { ttl: 60000 });
    await waitValue(d, key, lock.token, "redislock's token on every node");

    await assert.rejects(d.peer.call('acquire', { resources: [key], duration: 10000, settings: { retryCount: 0 } }), lockedOut);
    await assert.rejects(
      d.peer.call('acquire', { resources: [key], duration: 10000, settings: { retryCount: 3, retryDelay: 50 } }),
      lockedOut,
    );
    await assertValue(d, key, lock.token, "redislock's lock is untouched");
    assert.equal(await lock.owned(), true);

    // node-redlock retrying: seen trying, and still without the name, while redislock holds it...
    const tried = await lockCommands(d);
    const retrying = d.peer.call('acquire', { resources: [key], duration: 10000, settings: { retryCount: -1, retryDelay: 50 } });
    const watched = watch(retrying);
    await waitUntil('node-redlock to try the name', async () => (await lockCommands(d)) > tried);
    await assertValue(d, key, lock.token, "redislock's lock is untouched by node-redlock's retries");
    assert.equal(watched.settled, false, 'node-redlock took a name redislock holds');
    // ...gets it once redislock lets go.
    await lock.release();
    const got = await watched.promise;
    await waitValue(d, key, got.value, "node-redlock's value on every node");
    assert.equal(await d.client.tryAcquire(key, { ttl: 10000 }), null);
    await d.peer.call('release', { lock: got.lock });

    // The adapter holding: the same.
    const adapterLock = await d.adapter.acquire([key], 60000);
    await waitValue(d, key, adapterLock.value, "the adapter's value on every node");
    await assert.rejects(d.peer.call('acquire', { resources: [key], duration: 10000, settings: { retryCount: 0 } }), lockedOut);
    await adapterLock.release();
    const after = await d.peer.call('acquire', { resources: [key], duration: 10000, settings: { retryCount: 0 } });
    await d.peer.call('release', { lock: after.lock });
    await waitValue(d, key, null, 'the name to be free');
  });

  test(`${where}: neither releases nor extends a lock the other holds (a handle whose key expired or was deleted)`, async () => {
    const d = dep();
    const key = keyFor('stale');

    // redislock's handle outlived by its lock; node-redlock now holds the name.
    const stale = await d.client.acquire(key, { ttl: 300 });
    await waitValue(d, key, null, "redislock's 300 ms lock to expire");
    const theirs = await d.peer.call('acquire', { resources: [key], duration: 20000 });
    await waitValue(d, key, theirs.value, "node-redlock's value on every node");
    await assert.rejects(stale.extend(600000), LockNotOwnedError);
    await assert.rejects(stale.release(), LockNotOwnedError);
    await assertValue(d, key, theirs.value, "node-redlock's lock survives redislock's stale release and extend");
    for (const n of await holders(d, key)) {
      const pttl = await n.raw.call('PTTL', key);
      assert.ok(pttl > 0 && pttl <= 20000, `node-redlock's TTL unchanged by redislock's extend (PTTL ${pttl})`);
    }
    await d.peer.call('release', { lock: theirs.lock });
    const staleAdapter = await d.adapter.acquire([key], 300);
    await waitValue(d, key, null, "the adapter's 300 ms lock to expire");
    const theirs2 = await d.peer.call('acquire', { resources: [key], duration: 20000 });
    await assert.rejects(staleAdapter.extend(600000), ExecutionError);
    await assert.rejects(staleAdapter.release(), ExecutionError);
    await assertValue(d, key, theirs2.value, "node-redlock's lock survives the adapter's stale release and extend");
    await d.peer.call('release', { lock: theirs2.lock });

    // node-redlock's handles whose keys are gone, redislock now holding the
    // name: one expired (node-redlock refuses to extend it by its own clock,
    // and its release reaches the servers), one whose key was deleted while
    // node-redlock still counts it valid (its extend reaches the servers).
    const expired = await d.peer.call('acquire', { resources: [key], duration: 300 });
    await waitValue(d, key, null, "node-redlock's 300 ms lock to expire");
    const mine = await d.client.acquire(key, { ttl: 20000 });
    await waitValue(d, key, mine.token, "redislock's token on every node");
    await assert.rejects(d.peer.call('extend', { lock: expired.lock, duration: 600000 }), (e) => e.peer?.name === 'ExecutionError');
    await assert.rejects(d.peer.call('release', { lock: expired.lock }), lockedOut);
    await assertValue(d, key, mine.token, "redislock's lock survives node-redlock's stale release and extend");
    await mine.release();
    const deleted = await d.peer.call('acquire', { resources: [key], duration: 60000 });
    await waitValue(d, key, deleted.value, "node-redlock's value on every node");
    for (const n of await holders(d, key)) await n.raw.call('DEL', key);
    const mine2 = await d.client.acquire(key, { ttl: 20000 });
    await waitValue(d, key, mine2.token, "redislock's token on every node");
    await assert.rejects(d.peer.call('extend', { lock: deleted.lock, duration: 600000 }), lockedOut);
    await assert.rejects(d.peer.call('release', { lock: deleted.lock }), lockedOut);
    await assertValue(d, key, mine2.token, "redislock's lock survives node-redlock's release and extend");
    for (const n of await holders(d, key)) {
      const pttl = await n.raw.call('PTTL', key);
      assert.ok(pttl > 0 && pttl <= 20000, `redislock's TTL unchanged by node-redlock's extend (PTTL ${pttl})`);
    }
    assert.equal(await mine2.owned(), true);
    await mine2.release();
    await waitValue(d, key, null, 'the name to be free');
  });

  test(`${where}: several resources: node-redlock's all-or-nothing and redislock's locks on the same names exclude each other`, async () => {
    const d = dep();
    // One hash tag, so that node-redlock can take them in one script on a Cluster.
    const tag = keyFor('multi');
    const [r1, r2, r3] = ['1', '2', '3'].map((s) => `{${tag}}:${s}`);

    const theirs = await d.peer.call('acquire', { resources: [r1, r2], duration: 60000 });
    await waitValue(d, r2, theirs.value, "node-redlock's value on every node");
    assert.equal(await d.client.tryAcquire(r2, { ttl: 10000 }), null);
    await adapterRejects(d.adapter.acquire([r2, r3], 10000, { retryCount: 0 }));
    await assertValue(d, r3, null, 'a resource the adapter could not have with the others stays free');
    await d.peer.call('release', { lock: theirs.lock });

    const mine = await d.client.acquire(r2, { ttl: 60000 });
    await waitValue(d, r2, mine.token, "redislock's token on every node");
    await assert.rejects(d.peer.call('acquire', { resources: [r1, r2], duration: 10000, settings: { retryCount: 0 } }), lockedOut);
    await assertValue(d, r1, null, "node-redlock takes none of the resources when one is redislock's");
    await mine.release();
    const both = await d.peer.call('acquire', { resources: [r1, r2], duration: 10000, settings: { retryCount: 0 } });
    await d.peer.call('release', { lock: both.lock });
    await waitValue(d, r1, null, 'the names to be free');
  });

  test(`${where}: a lock kept by using() stays exclusive across its extensions, either side renewing`, async () => {
    const d = dep();
    const key = keyFor('using');
    /** Wait until a node's PTTL of `key` was seen to go up: an extension happened. */
    const extended = async (what) => {
      const [n] = await holders(d, key);
      let low = await n.raw.call('PTTL', key);
      await waitUntil(what, async () => {
        const pttl = await n.raw.call('PTTL', key);
        if (pttl > low) return true;
        low = Math.min(low, pttl);
        return false;
      });
    };

    // node-redlock's using (extends within automaticExtensionThreshold of the end).
    const theirs = await d.peer.call('using', { resources: [key], duration: 1500, settings: { automaticExtensionThreshold: 1000 } });
    assert.equal(theirs.entered, true, JSON.stringify(theirs));
    await extended("node-redlock's using to extend its lock");
    assert.equal(await d.client.tryAcquire(key, { ttl: 10000 }), null, "redislock took a lock node-redlock's using extended");
    await adapterRejects(d.adapter.acquire([key], 10000, { retryCount: 0 }));
    const done = await d.peer.call('finish', { using: theirs.using });
    assert.deepEqual(done.settled, { ok: true, value: 'routine done' });
    assert.equal(done.aborted, false);
    await waitValue(d, key, null, "node-redlock's using to release");

    // redislock's using (renews every third of the TTL).
    let finish;
    const routineDone = new Promise((r) => (finish = r));
    let entered;
    const inside = new Promise((r) => (entered = r));
    const mine = d.client.using(key, { ttl: 1500 }, async (signal, lock) => {
      entered(lock);
      await routineDone;
      return signal.aborted;
    });
    const lock = await inside;
    await waitValue(d, key, lock.token, "redislock's token on every node");
    await extended("redislock's using to renew its lock");
    await assert.rejects(d.peer.call('acquire', { resources: [key], duration: 10000, settings: { retryCount: 0 } }), lockedOut);
    const peerUsing = await d.peer.call('using', { resources: [key], duration: 2000, settings: { retryCount: 0 } });
    assert.equal(peerUsing.entered, false, "node-redlock's using ran its routine under redislock's lock");
    assert.ok(lockedOut(Object.assign(new Error(), { peer: peerUsing.settled.error })));
    finish();
    assert.equal(await mine, false, "redislock's using kept its lock");
    await waitValue(d, key, null, "redislock's using to release");
  });
}
