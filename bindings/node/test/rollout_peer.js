'use strict';
// The other side of rollout.test.js: a process on node-redlock itself (the
// `redlock` package over ioredis, as installed in target/node-tools), as a
// service not yet switched to redislock runs it. rollout.test.js forks it
// and drives it over the IPC channel, one request at a time:
//
//   { id, op, ...args }  ->  { id, ok: true, value } | { id, ok: false, error }
//
// ops: open { ports, cluster, settings }: a Redlock over one ioredis client
// per port (or one ioredis Cluster of those nodes); acquire { resources,
// duration, settings }: a Lock, kept under a number; release { lock };
// extend { lock, duration }: the new Lock's number; using { resources,
// duration, settings }: starts redlock.using and answers once the routine
// runs; finish { using }: ends that routine, answers with how using settled
// and the routine's signal; get { key }: the key's value, read through the
// peer's own ioredis; quit.
//
// A failure is sent as { name, message, votes }: the names and messages of
// the votes against in an ExecutionError's attempts.

const path = require('node:path');

const MODULES = process.env.ROLLOUT_NODE_MODULES;
const Redis = require(path.join(MODULES, 'ioredis'));
const { default: Redlock } = require(path.join(MODULES, 'redlock'));

let redlock = null;
let reader = null;
let clients = [];
const locks = new Map();
const usings = new Map();
let seq = 0;

/** What a Lock is made of, to send (its Promise-valued attempts counted). */
function describe(lock) {
  return { value: lock.value, resources: lock.resources, expiration: lock.expiration, attempts: lock.attempts.length };
}

async function serialize(e) {
  const out = { name: e?.name ?? typeof e, message: e?.message ?? String(e), votes: [] };
  if (Array.isArray(e?.attempts)) {
    for (const stats of await Promise.allSettled(e.attempts)) {
      if (stats.status !== 'fulfilled') continue;
      for (const v of stats.value.votesAgainst.values()) out.votes.push({ name: v.name, message: v.message });
    }
  }
  return out;
}

const ops = {
  async open({ ports, cluster, settings }) {
    const options = { host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => null };
    if (cluster) {
      clients = [new Redis.Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), { redisOptions: options })];
    } else {
      clients = ports.map((port) => new Redis({ ...options, port }));
    }
    for (const c of clients) c.on('error', () => {});
    reader = clients[0];
    redlock = new Redlock(clients, settings);
    redlock.on('error', () => {});
    return { clients: clients.length };
  },
  async acquire({ resources, duration, settings }) {
    const lock = await redlock.acquire(resources, duration, settings);
    locks.set(++seq, lock);
    return { lock: seq, ...describe(lock) };
  },
  async release({ lock }) {
    await locks.get(lock).release();
    return {};
  },
  async extend({ lock, duration }) {
    const extended = await locks.get(lock).extend(duration);
    locks.set(++seq, extended);
    return { lock: seq, ...describe(extended) };
  },
  async using({ resources, duration, settings }) {
    const id = ++seq;
    const entry = {};
    const entered = new Promise((resolve) => {
      entry.done = redlock
        .using(resources, duration, settings, async (signal) => {
          entry.signal = signal;
          const value = await reader.get(resources[0]);
          resolve(value);
          await new Promise((end) => (entry.end = end));
          return 'routine done';
        })
        .then(
          (value) => ({ ok: true, value }),
          async (e) => ({ ok: false, error: await serialize(e) }),
        );
      // A using that fails before its routine runs answers too.
      entry.done.then((r) => resolve({ failed: r }));
    });
    usings.set(id, entry);
    const value = await entered;
    if (value && typeof value === 'object' && value.failed) return { using: id, entered: false, settled: value.failed };
    return { using: id, entered: true, value };
  },
  async finish({ using }) {
    const entry = usings.get(using);
    entry.end();
    const settled = await entry.done;
    return { settled, aborted: entry.signal.aborted, signalError: entry.signal.error ? await serialize(entry.signal.error) : null };
  },
  async get({ key }) {
    return reader.get(key);
  },
  async quit() {
    await Promise.allSettled(clients.map((c) => c.quit()));
    setImmediate(() => process.disconnect());
    return {};
  },
};

process.on('message', async ({ id, op, ...args }) => {
  try {
    process.send({ id, ok: true, value: await ops[op](args) });
  } catch (e) {
    process.send({ id, ok: false, error: await serialize(e) });
  }
});
process.send({ ready: true, versions: { redlock: require(path.join(MODULES, 'redlock', 'package.json')).version, ioredis: require(path.join(MODULES, 'ioredis', 'package.json')).version } });
