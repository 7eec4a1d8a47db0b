'use strict';
// The ends of clients and locks: client.close() and `await using client`
// (pending waits reject with ERR_LOCK_CLIENT_CLOSED and leave the queue,
// the connections close, held locks stay usable); lock.signal and
// lock.onLost (told when the lock is found lost, never when it is
// released); lock.forget() (the lock stays held until its TTL, released
// neither by the handle nor by the garbage collector); stats() in
// camelCase, with the snake_case names as deprecated aliases.

const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const path = require('node:path');
const { test, before, after } = require('node:test');

const { Client, LockError, LockNotOwnedError } = require('..');
const { RedisServer, keyFor, waitUntil, sleep } = require('./helper');

const PKG = path.resolve(__dirname, '..');
let server;
let client;

before(async () => {
  server = await RedisServer.start();
  client = new Client(server.url);
});

after(() => server.destroy());

const queued = async (key) => Number(await server.raw.call('LLEN', `{${key}}:queue`));

function child(code, args = []) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...args, '-e', code], { timeout: 90000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim().split('\n').pop())),
    );
  });
}

test('close() rejects the pending waits with ERR_LOCK_CLIENT_CLOSED, takes them off the queue, then resolves', async () => {
  const key = keyFor('close');
  const holder = await client.acquire(key, { ttl: 60000 });
  const closing = new Client(server.url);
  await (await closing.acquire(`${key}:before`)).release();
  const sem = await client.acquireSemaphore(`${key}:sem`, { limit: 1 });
  const controller = new AbortController();
  const waits = [
    closing.acquire(key),
    closing.acquire(key, { wait: 60000, signal: controller.signal }),
    closing.acquireSemaphore(`${key}:sem`, { limit: 1 }),
  ];
  const settled = waits.map((p) => p.then(() => 'acquired', (e) => e));
  await waitUntil('the waits to queue', async () => closing.stats().waitersNow === 3);
  let closed = false;
  const done = closing.close().then(() => {
    closed = true;
  });
  assert.equal(closing.closed, true);
  const errors = await Promise.all(settled);
  for (const e of errors) {
    assert.ok(e instanceof LockError, e);
    assert.equal(e.code, 'ERR_LOCK_CLIENT_CLOSED');
    assert.match(e.message, /the client was closed while this acquisition waited for/);
  }
  await done;
  assert.ok(closed);
  await waitUntil('the waiters to leave the queue', async () => (await queued(key)) === 0);
  assert.equal(closing.stats().waitersNow, 0);
  const stats = closing.stats();
  assert.equal(stats.waitersNow, 0);
  assert.equal(stats.acquiredAtOnce, 1, 'the figures kept from before the close');
  assert.equal(stats.releasesOk, 1);
  // Every call after it rejects the same way, before any I/O; close again does nothing more.
  for (const p of [closing.acquire(key), closing.tryAcquire(key), closing.releaseToken(key, 't'), closing.forceRelease(key), closing.doctor()]) {
    const e = await p.catch((err) => err);
    assert.equal(e.code, 'ERR_LOCK_CLIENT_CLOSED', String(e));
    assert.match(e.message, /the client was closed before this .* was made/);
  }
  await closing.close();
  await sem.release();
  await holder.release();
});

test('close() leaves the locks held and usable, releases nothing; the connections close once they are released', async () => {
  // A server of its own: no other client's connections come and go meanwhile.
  const own = await RedisServer.start();
  const connections = () => own.clients();
  const key = keyFor('held');
  const before = await connections();
  assert.equal(before, 0);
  const closing = new Client(own.url);
  const lock = await closing.acquire(key, { ttl: 60000, autoRenew: true });
  const fence = await lock.drawFence();
  assert.ok((await connections()) > before, 'connected');
  await closing.close();
  assert.deepEqual(await own.raw.call('GET', key), lock.token, 'still held');
  await lock.extend(30000);
  assert.equal(await lock.owned(), true);
  const other = new Client(own.url);
  assert.equal(await other.tryAcquire(key), null, 'still excludes others');
  await other.close();
  await lock.release();
  assert.equal(await own.raw.call('EXISTS', key), 0);
  assert.equal(lock.fence, fence);
  await waitUntil('the closed clients\' connections to close', async () => (await connections()) === 0, 60);
  own.destroy();
});

test('`await using client` closes it at the end of the scope', { skip: typeof Symbol.asyncDispose !== 'symbol' && 'no Symbol.asyncDispose' }, async () => {
  const key = keyFor('dispose');
  const holder = await client.acquire(key, { ttl: 60000 });
  let pending;
  {
    // What `await using c = new Client(url)` runs at the end of its block.
    const c = new Client(server.url);
    pending = c.acquire(key).catch((e) => e.code);
    await waitUntil('the wait to queue', async () => (await queued(key)) === 1);
    await c[Symbol.asyncDispose]();
    assert.equal(c.closed, true);
  }
  assert.equal(await pending, 'ERR_LOCK_CLIENT_CLOSED');
  await holder.release();
});

test('lock.signal aborts and onLost is called when renewal finds the lock gone; once, with a LockNotOwnedError', async () => {
  const key = keyFor('lost');
  const lock = await client.acquire(key, { ttl: 900, autoRenew: true });
  const { signal } = lock;
  assert.equal(lock.signal, signal, 'the same signal every time');
  assert.equal(signal.aborted, false);
  const calls = [];
  lock.onLost((reason) => calls.push(['first', reason]));
  lock.onLost((reason) => calls.push(['second', reason]));
  let aborted = 0;
  signal.addEventListener('abort', () => (aborted += 1));
  await server.raw.call('SET', key, 'someone-else');
  await waitUntil('renewal to find it gone', () => signal.aborted, 60);
  assert.ok(signal.reason instanceof LockNotOwnedError);
  assert.equal(signal.reason.code, 'ERR_LOCK_NOT_OWNED');
  assert.match(signal.reason.message, /was lost/);
  await waitUntil('the callbacks', () => calls.length === 2);
  assert.deepEqual(calls.map(([which]) => which), ['first', 'second']);
  assert.equal(calls[0][1], signal.reason);
  assert.equal(lock.lost, true);
  // A callback added once lost is called at once (in a microtask).
  const late = await new Promise((resolve) => lock.onLost(resolve));
  assert.equal(late, signal.reason);
  await assert.rejects(lock.release(), LockNotOwnedError);
  await sleep(100);
  assert.equal(aborted, 1);
  assert.equal(calls.length, 2, 'told once');
  assert.deepEqual(await server.raw.call('GET', key), Buffer.from('someone-else'));
  await server.raw.call('DEL', key);
});

test('a release, an extend or a drawFence that finds the lock gone tells the signal before it rejects', async () => {
  for (const op of ['release', 'extend', 'drawFence']) {
    const key = keyFor(op);
    const lock = await client.acquire(key, { ttl: 60000 });
    const { signal } = lock;
    let told = null;
    lock.onLost((reason) => (told = reason));
    await server.raw.call('SET', key, 'someone-else');
    const e = await lock[op]().catch((err) => err);
    assert.ok(e instanceof LockNotOwnedError, `${op}: ${e}`);
    assert.equal(signal.aborted, true, `${op}: aborted by the time the call rejects`);
    assert.ok(told instanceof LockNotOwnedError, `${op}: onLost called by the time the call rejects`);
    await server.raw.call('DEL', key);
  }
});

test('a lock released (or forgotten) never aborts its signal nor calls onLost', async () => {
  const key = keyFor('released');
  const lock = await client.acquire(key, { ttl: 600, autoRenew: true });
  const { signal } = lock;
  let called = false;
  lock.onLost(() => (called = true));
  await lock.release();
  const forgotten = await client.acquire(key, { ttl: 600, autoRenew: true });
  const forgottenSignal = forgotten.signal;
  forgotten.onLost(() => (called = true));
  forgotten.forget();
  // Another owner takes the name once the forgotten lock's TTL ran out.
  const next = await client.acquire(key, { wait: 10000 });
  await sleep(700);
  assert.equal(signal.aborted, false);
  assert.equal(forgottenSignal.aborted, false);
  assert.equal(called, false);
  await next.release();
});

test('onLost takes a function: TypeError otherwise', async () => {
  const lock = await client.acquire(keyFor());
  assert.throws(() => lock.onLost('no'), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_TYPE');
  await lock.release();
});

test('forget(): the lock stays held until its TTL; release and extend then reject; the token still releases it', async () => {
  const key = keyFor('forget');
  const own = new Client(server.url);
  const lock = await own.acquire(key, { ttl: 60000, autoRenew: true });
  assert.equal(own.stats().heldNow, 1);
  lock.forget();
  lock.forget(); // nothing more
  assert.deepEqual(await server.raw.call('GET', key), lock.token, 'still held');
  assert.equal(own.stats().heldNow, 0, 'no longer counted as held by this client');
  const released = await lock.release().catch((e) => e);
  assert.ok(released instanceof LockNotOwnedError);
  assert.match(released.message, /forgotten/);
  await assert.rejects(lock.extend(1000), LockNotOwnedError);
  assert.equal(await lock.owned(), false);
  assert.deepEqual(await server.raw.call('GET', key), lock.token, 'still held after those calls');
  assert.equal(await client.releaseToken(key, lock.token), true);
});

test('a forgotten handle is not released by the garbage collector, and not renewed: the TTL ends it', async () => {
  // In a child with --expose-gc: two locks dropped, one forgotten first.
  // The child collects until the other's release is counted (the
  // collector ran the finalizers), and for 800 ms more (past the first
  // renewal the forgotten lock would have had), then reports its counts.
  const forgotten = keyFor('forgotten');
  const dropped = keyFor('dropped');
  const code = `
    const { Client } = require(${JSON.stringify(PKG)});
    const c = new Client(${JSON.stringify(server.url)});
    (async () => {
      const token = await (async () => {
        const f = await c.acquire(${JSON.stringify(forgotten)}, { ttl: 3000, autoRenew: true });
        f.onLost(() => f.name); // a listener that holds the lock
        void f.signal;
        f.forget();
        await c.acquire(${JSON.stringify(dropped)}, { ttl: 60000 });
        return f.token.toString();
      })();
      for (let i = 0; i < 1500 && c.stats().releasesOk === 0; i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 20));
      }
      for (let i = 0; i < 40; i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 20));
      }
      const { releasesOk, renewalsOk } = c.stats();
      console.log(JSON.stringify({ token, releasesOk, renewalsOk }));
    })();
  `;
  const out = await child(code, ['--expose-gc']);
  assert.equal(out.releasesOk, 1, 'the dropped lock was released by the collector, the forgotten one not');
  assert.equal(out.renewalsOk, 0, 'the forgotten lock was not renewed');
  assert.equal(await server.raw.call('EXISTS', dropped), 0);
  // The forgotten lock may have run out already if the collector was slow:
  // then its key is gone by expiry, never deleted by a release.
  const value = await server.raw.call('GET', forgotten);
  if (value !== null) assert.equal(String(value), out.token);
  await waitUntil('the forgotten lock to expire by its TTL (not renewed)', async () => (await server.raw.call('EXISTS', forgotten)) === 0, 10);
});

test('a lock whose signal and onLost are in use is still collected and released when dropped', async () => {
  const key = keyFor('collected');
  const code = `
    const { Client } = require(${JSON.stringify(PKG)});
    const c = new Client(${JSON.stringify(server.url)});
    (async () => {
      await (async () => {
        const l = await c.acquire(${JSON.stringify(key)}, { ttl: 60000, autoRenew: true });
        l.onLost(() => console.log('lost', l.name));
        void l.signal;
      })();
      for (let i = 0; i < 1500 && c.stats().releasesOk === 0; i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 20));
      }
      console.log(JSON.stringify(c.stats().releasesOk));
    })();
  `;
  assert.equal(await child(code, ['--expose-gc']), 1);
  assert.equal(await server.raw.call('EXISTS', key), 0);
});

test('a lock whose signal is still referenced is not collected: its work stays protected', async () => {
  const key = keyFor('kept-by-signal');
  // Two locks dropped, the signal of one kept: the collector releases the
  // other (its release counted), and not the one under the kept signal,
  // until that signal is let go too.
  const code = `
    const { Client } = require(${JSON.stringify(PKG)});
    const c = new Client(${JSON.stringify(server.url)});
    const collect = async (until) => {
      for (let i = 0; i < 1500 && !until(); i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    (async () => {
      let signal = await (async () => {
        const kept = await c.acquire(${JSON.stringify(key)}, { ttl: 60000 });
        await c.acquire(${JSON.stringify(key + ':other')}, { ttl: 60000 });
        return kept.signal;
      })();
      await collect(() => c.stats().releasesOk > 0);
      for (let i = 0; i < 20; i++) { global.gc(); await new Promise((r) => setTimeout(r, 20)); }
      const whileKept = c.stats().releasesOk;
      signal.throwIfAborted();
      signal = null;
      await collect(() => c.stats().releasesOk > 1);
      console.log(JSON.stringify({ whileKept, after: c.stats().releasesOk }));
    })();
  `;
  assert.deepEqual(await child(code, ['--expose-gc']), { whileKept: 1, after: 2 });
  assert.equal(await server.raw.call('EXISTS', key), 0);
});

test('a held lock with its signal and onLost keeps no process alive (the event loop path)', async () => {
  const key = keyFor('alive');
  const code = `
    const { Client, eventLoop } = require(${JSON.stringify(PKG)});
    const c = new Client(${JSON.stringify(server.url)});
    c.acquire(${JSON.stringify(key)}, { ttl: 60000, autoRenew: true }).then((l) => {
      l.onLost(() => {});
      void l.signal;
      globalThis.kept = l;
      console.log(JSON.stringify(eventLoop()));
    });
  `;
  assert.equal(await child(code), 'libuv');
  await server.raw.call('DEL', key);
});

test('using keeps the process alive while fn runs, even when fn waits on nothing that does', async () => {
  const key = keyFor('using-alive');
  const code = `
    const { Client } = require(${JSON.stringify(PKG)});
    new Client(${JSON.stringify(server.url)})
      .using(${JSON.stringify(key)}, { ttl: 60000 }, () => new Promise((r) => setTimeout(r, 300).unref()).then(() => 'fn ran'))
      .then((v) => console.log(JSON.stringify(v)));
  `;
  assert.equal(await child(code), 'fn ran');
  assert.equal(await server.raw.call('EXISTS', key), 0);
});

test('stats(): camelCase counters; the snake_case names are non-enumerable aliases that warn once', async () => {
  const key = keyFor('stats');
  const c = new Client(server.url);
  await (await c.acquire(key)).release();
  const s = c.stats();
  const keys = Object.keys(s);
  assert.ok(keys.includes('acquiredAtOnce') && keys.includes('heldNow') && keys.includes('reconnects'), keys.join());
  assert.ok(!keys.some((k) => k.includes('_')), `no snake_case among the enumerable keys: ${keys}`);
  assert.equal(keys.length, 25, '23 counters and gauges, wait and held');
  assert.equal(s.acquiredAtOnce, 1);
  assert.equal(s.releasesOk, 1);
  assert.equal(s.wait.count, 1);
  assert.ok(!JSON.stringify(s).includes('_'), 'JSON has the camelCase names only');
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    assert.equal(s.acquired_at_once, 1);
    assert.equal(s.releases_ok, 1);
    assert.equal(c.stats().held_now, 0);
    await sleep(50);
  } finally {
    process.off('warning', onWarning);
  }
  assert.equal(warnings.length, 1, 'one DeprecationWarning in the process');
  assert.equal(warnings[0].name, 'DeprecationWarning');
  assert.equal(warnings[0].code, 'REDISLOCK_STATS_SNAKE_CASE');
  assert.match(warnings[0].message, /acquiredAtOnce/);
  await c.close();
});
