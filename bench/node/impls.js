'use strict';
// The locks that bench.js and worker.js measure, behind one shape (measures
// nothing itself): open(kind, port, opts) gives { lock(key), unlock(handle),
// close() }, lock() waiting until the lock is held.
//
//   redislock           the Node.js addon (bindings/node), client.acquire(key,
//                       { ttl }): the default, fenced (the fencing number is
//                       drawn in the acquisition); waits as long as it takes
//   redislock-unfenced  the same with { fenced: false }
//   redlock             node-redlock 5.0.0-beta.2 over one ioredis connection,
//                       default settings (retryCount 10, retryDelay 200 ms,
//                       retryJitter 100 ms): redlock.acquire([key], ttl),
//                       lock.release(); an acquire rejects with its
//                       ExecutionError when the retries run out
//   helper              a hand-written ioredis helper: SET key token NX PX ttl,
//                       retried after a fixed sleep (--poll-ms) while the lock
//                       is held; release by EVALSHA of a compare-and-delete
//                       script (EVAL on NOSCRIPT); a fresh 16-byte token per
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

const KINDS = ['redislock', 'redislock-unfenced', 'redlock', 'helper'];
const OURS = ['redislock', 'redislock-unfenced'];
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
  if (kind === 'redislock' || kind === 'redislock-unfenced') {
    const client = new redislock.Client(url);
    const opts = { ttl: TTL, fenced: kind === 'redislock' };
    return {
      kind,
      lock: (key) => client.acquire(key, opts),
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

module.exports = { KINDS, OURS, TTL, Redis, ioredis, open, sleep, ROOT };
