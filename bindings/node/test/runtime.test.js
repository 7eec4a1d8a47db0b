'use strict';
// Which machinery runs the calls. On Node.js itself the addon drives its
// work from the event loop (libuv, looked up in the running node). Where
// the runtime has no real libuv (Bun exports every uv_* function as a stub
// that aborts the process, and its napi_get_uv_event_loop succeeds; Deno
// exports a few), index.js tells the addon before the first call, and the
// calls run on the addon's tokio thread instead: eventLoop() says 'tokio'.
// Each case runs in a child process made to look like that runtime before
// it requires the package, and checks that the calls work there: a
// hand-off, a wait that runs out, an aborted wait, a lost lock's signal,
// close(), and a process that exits by itself when idle.

const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const path = require('node:path');
const { test, before, after } = require('node:test');

const { eventLoop } = require('..');
const { RedisServer, keyFor } = require('./helper');

const PKG = path.resolve(__dirname, '..');
let server;

before(async () => {
  server = await RedisServer.start();
});

after(() => server.destroy());

/** Run `code` in a child node (with `env` added); its stdout's last line, parsed. */
function child(code, env = {}, args = []) {
  const childEnv = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...args, '-e', code], { env: childEnv, timeout: 60000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stderr}`));
      try {
        resolve(JSON.parse(stdout.trim().split('\n').pop()));
      } catch {
        reject(new Error(`no JSON from the child: ${stdout}\n${stderr}`));
      }
    });
  });
}

/**
 * What the child does once `disguise` ran (before the package is required):
 * every kind of call, on one server, and what eventLoop() said before the
 * first call and after the last. It ends with nothing pending, so the
 * process exits by itself only if nothing keeps it alive.
 */
function workload(disguise) {
  return `
    ${disguise}
    const redislock = require(${JSON.stringify(PKG)});
    const { Client, LockTimeoutError } = redislock;
    const url = ${JSON.stringify(server.url)};
    const key = ${JSON.stringify(keyFor('rt'))};
    (async () => {
      const out = { before: redislock.eventLoop() };
      const client = new Client(url);
      const other = new Client(url);
      const holder = await client.acquire(key, { ttl: 30000 });
      const fence = await holder.drawFence();
      // A waiter in the same process is handed the lock by the release.
      const waiting = other.acquire(key, { wait: 30000, fenced: true });
      while (other.stats().waitersNow === 0) await new Promise((r) => setTimeout(r, 5));
      await holder.release();
      const next = await waiting;
      out.handedOver = other.stats().acquiredHandedOver === 1 && next.fence > fence;
      // A wait that runs out, and one an AbortSignal ends.
      out.timeout = await other.acquire(key, { wait: 50 }).then(() => 'acquired', (e) => e instanceof LockTimeoutError && e.code);
      const controller = new AbortController();
      const aborted = client.acquire(key, { signal: controller.signal }).catch((e) => e);
      setTimeout(() => controller.abort(new Error('stop')), 50);
      out.aborted = (await aborted).message;
      // A lock taken over: its signal aborts, onLost is called.
      const lost = new Promise((resolve) => next.onLost((reason) => resolve(reason.code)));
      const { signal } = next;
      await next.extend(1000);
      out.stolen = await client.forceRelease(key);
      out.extendAfterSteal = await next.extend(1000).then(() => 'extended', (e) => e.code);
      out.lost = await lost;
      out.signal = signal.aborted && signal.reason.code;
      // close() ends a pending wait.
      const blocker = await client.acquire(key, { ttl: 30000 });
      const pending = other.acquire(key).catch((e) => e.code);
      while (other.stats().waitersNow === 0) await new Promise((r) => setTimeout(r, 5));
      await other.close();
      out.closed = await pending;
      await blocker.release();
      out.after = redislock.eventLoop();
      console.log(JSON.stringify(out));
    })();
  `;
}

const EXPECTED = {
  handedOver: true,
  timeout: 'ERR_LOCK_TIMEOUT',
  aborted: 'stop',
  stolen: true,
  extendAfterSteal: 'ERR_LOCK_NOT_OWNED',
  lost: 'ERR_LOCK_NOT_OWNED',
  signal: 'ERR_LOCK_NOT_OWNED',
  closed: 'ERR_LOCK_CLIENT_CLOSED',
};

test('on Node.js the calls run on its event loop (libuv)', async () => {
  assert.equal(eventLoop(), 'libuv', 'this test process');
  const out = await child(workload(''), { REDISLOCK_NODE_EVENT_LOOP: undefined });
  assert.deepEqual(out, { before: 'libuv', after: 'libuv', ...EXPECTED });
});

const disguises = {
  'Bun (a Bun global)': "globalThis.Bun = { version: '1.2.0' };",
  'Bun (process.versions.bun)': "Object.defineProperty(process.versions, 'bun', { value: '1.2.0', enumerable: true });",
  'Deno (a Deno global)': "globalThis.Deno = { version: { deno: '2.1.0' } };",
  'another runtime (process.release.name)': "Object.defineProperty(process, 'release', { value: { name: 'other' } });",
  'a runtime with no libuv version': "Object.defineProperty(process.versions, 'uv', { value: undefined });",
};

for (const [what, disguise] of Object.entries(disguises)) {
  test(`on ${what} the calls run on the addon's thread, and all work`, async () => {
    const out = await child(workload(disguise), { REDISLOCK_NODE_EVENT_LOOP: undefined });
    assert.deepEqual(out, { before: 'tokio', after: 'tokio', ...EXPECTED });
  });
}

test('REDISLOCK_NODE_EVENT_LOOP=tokio keeps the calls off the event loop; auto is the default', async () => {
  assert.deepEqual(await child(workload(''), { REDISLOCK_NODE_EVENT_LOOP: 'tokio' }), { before: 'tokio', after: 'tokio', ...EXPECTED });
  const auto = await child(`console.log(JSON.stringify(require(${JSON.stringify(PKG)}).eventLoop()))`, { REDISLOCK_NODE_EVENT_LOOP: 'auto' });
  assert.equal(auto, 'libuv');
});

test('REDISLOCK_NODE_EVENT_LOOP with another value: require throws, naming it', async () => {
  const code = `
    try { require(${JSON.stringify(PKG)}); console.log(JSON.stringify('loaded')); }
    catch (e) { console.log(JSON.stringify(e.message)); }
  `;
  assert.match(await child(code, { REDISLOCK_NODE_EVENT_LOOP: 'uv' }), /REDISLOCK_NODE_EVENT_LOOP must be auto or tokio, got "uv"/);
});

test('the addon loaded without index.js never uses libuv: its calls run on its thread', async () => {
  // What a program that requires the .node file itself gets, on any runtime.
  const code = `
    const addon = require(${JSON.stringify(path.join(PKG, 'redislock.node'))});
    const before = addon.eventLoop();
    const client = new addon.NativeClient(${JSON.stringify(server.url)});
    client.releaseToken(Buffer.from(${JSON.stringify(keyFor('raw'))}), Buffer.from('t')).then((r) => {
      console.log(JSON.stringify({ before, released: r, after: addon.eventLoop() }));
    });
  `;
  assert.deepEqual(await child(code), { before: 'tokio', released: false, after: 'tokio' });
});

test('on the tokio path an idle client, a held lock and its signal keep no process alive; a wait does until it ends', async () => {
  const key = keyFor('idle');
  const code = `
    globalThis.Bun = {};
    const { Client, eventLoop } = require(${JSON.stringify(PKG)});
    const c = new Client(${JSON.stringify(server.url)});
    c.acquire(${JSON.stringify(key)}, { ttl: 60000, autoRenew: true }).then(async (held) => {
      held.onLost(() => {});
      void held.signal;
      setTimeout(() => held.release(), 300);
      const waited = await new Client(${JSON.stringify(server.url)}).acquire(${JSON.stringify(key)}, { wait: 60000 });
      await waited.release();
      const kept = await c.acquire(${JSON.stringify(key + ':kept')}, { ttl: 60000, autoRenew: true });
      void kept.signal;
      globalThis.kept = kept;
      console.log(JSON.stringify(eventLoop()));
    });
  `;
  assert.equal(await child(code), 'tokio');
});
