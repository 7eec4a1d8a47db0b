'use strict';
// The locks that bench.js and worker.js measure, behind one shape (measures
// nothing itself): open(kind, port, opts) gives { lock(key), tryLock(key),
// unlock(handle), close() }: lock() waits until the lock is held (the
// hand-off and contended figures); tryLock() makes one attempt and resolves
// the handle or null (the uncontended cycle, where the key is always free).
//
//   redislock           the Node.js addon (bindings/node) with the options a
//                       new user writes first: tryLock is
//                       client.tryAcquire(key, { ttl }) (one attempt: a Lock
//                       or null), lock is client.acquire(key, { ttl }) (waits
//                       as long as it takes); the binding's default fencing
//                       (the number drawn on first use, by lock.drawFence(),
//                       not in the acquisition)
//   redislock-fenced    the same with { fenced: true }: the fencing number is
//                       drawn in the acquisition's script
//   redlock             node-redlock 5.0.0-beta.2 over one ioredis connection,
//                       default settings (retryCount 10, retryDelay 200 ms,
//                       retryJitter 100 ms): redlock.acquire([key], ttl),
//                       lock.release(); an acquire rejects with its
//                       ExecutionError when the retries run out. tryLock is
//                       the same acquire (on a free key it succeeds at once)
//   helper              a hand-written ioredis helper: SET key token NX PX ttl,
//                       retried after a fixed sleep (--poll-ms) while the lock
//                       is held (tryLock: one SET, null when it was held);
//                       release by EVALSHA of a compare-and-delete script
//                       (EVAL on NOSCRIPT); a fresh 16-byte token per
//                       acquisition (32 hex characters, as long as the others')
//
// ioredis and redlock come from target/bench-node (`make bench-node` installs
// them there from bench/node/package.json; BENCH_NODE_DIR names another
// directory), never from the source tree.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');

const ROOT = path.resolve(__dirname, '..', '..');
const DEPS = path.resolve(ROOT, process.env.BENCH_NODE_DIR || path.join('target', 'bench-node'));

function requireDep(name) {
  const manifest = path.join(DEPS, 'package.json');
  if (!fs.existsSync(path.join(DEPS, 'node_modules', name))) {
    throw new Error(
      `bench/node: ${name} is not installed in ${DEPS}: run \`make bench-node\` ` +
        `(or: mkdir -p ${DEPS} && cp bench/node/package.json ${DEPS}/ && npm install --prefix ${DEPS})`,
    );
  }
  return createRequire(manifest)(name);
}

const Redis = requireDep('ioredis');
const redlockModule = requireDep('redlock');
const Redlock = redlockModule.default || redlockModule;
const redislock = require(path.join(ROOT, 'bindings', 'node'));

const KINDS = ['redislock', 'redislock-fenced', 'redlock', 'helper'];
const OURS = ['redislock', 'redislock-fenced'];
const TTL = 10000;
const RELEASE_LUA =
  "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
const RELEASE_SHA = crypto.createHash('sha1').update(RELEASE_LUA).digest('hex');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** An ioredis connection to the bench's server, connected. */
async function ioredis(port) {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  return r;
}

/** The lock `kind` on the server at 127.0.0.1:`port`. `pollMs`: the helper's sleep. */
async function open(kind, port, { pollMs = 10 } = {}) {
  const url = `redis://127.0.0.1:${port}`;
  if (kind === 'redislock' || kind === 'redislock-fenced') {
    const client = new redislock.Client(url);
    // What a new user writes first: { ttl } and nothing else.
    const opts = kind === 'redislock' ? { ttl: TTL } : { ttl: TTL, fenced: true };
    return {
      kind,
      lock: (key) => client.acquire(key, opts),
      tryLock: (key) => client.tryAcquire(key, opts),
      unlock: (lock) => lock.release(),
      close: async () => {},
    };
  }
  if (kind === 'redlock') {
    const r = await ioredis(port);
    const redlock = new Redlock([r]);
    return {
      kind,
      lock: (key) => redlock.acquire([key], TTL),
      tryLock: (key) => redlock.acquire([key], TTL),
      unlock: (lock) => lock.release(),
      close: () => r.quit(),
    };
  }
  if (kind === 'helper') {
    const r = await ioredis(port);
    return {
      kind,
      async lock(key) {
        const token = crypto.randomBytes(16).toString('hex');
        for (;;) {
          if ((await r.set(key, token, 'NX', 'PX', TTL)) === 'OK') return { key, token };
          await sleep(pollMs);
        }
      },
      async tryLock(key) {
        const token = crypto.randomBytes(16).toString('hex');
        return (await r.set(key, token, 'NX', 'PX', TTL)) === 'OK' ? { key, token } : null;
      },
      async unlock({ key, token }) {
        let n;
        try {
          n = await r.evalsha(RELEASE_SHA, 1, key, token);
        } catch (e) {
          if (!String(e.message).startsWith('NOSCRIPT')) throw e;
          n = await r.eval(RELEASE_LUA, 1, key, token);
        }
        if (n !== 1) throw new Error('helper: the lock was no longer ours at release');
      },
      close: () => r.quit(),
    };
  }
  throw new Error(`unknown implementation ${kind} (have ${KINDS.join(', ')})`);
}

module.exports = { KINDS, OURS, TTL, Redis, ioredis, open, sleep, ROOT, redislock };
