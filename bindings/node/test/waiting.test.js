'use strict';
// Waiting: hand-off instead of polling, AbortSignal, `using` with renewal
// and a stolen lock, a thousand waiters on a few connections while the
// event loop goes on, and a process that exits when nothing is pending.

const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const path = require('node:path');
const { test, before, after } = require('node:test');

const { Client, LockNotOwnedError } = require('..');
const { RedisServer, keyFor, waitUntil, sleep } = require('./helper');

let server;
let client;

before(async () => {
  server = await RedisServer.start();
  client = new Client(server.url);
});

after(() => server.destroy());

const queued = (key) => server.raw.call('LLEN', `{${key}}:queue`);

test('a waiter is handed the lock by the release, without polling', async () => {
  const key = keyFor();
  const holder = await client.acquire(key);
  const waiter = new Client(server.url);
  const pending = waiter.acquire(key, { ttl: 5000, wait: 60000 });
  await waitUntil('the waiter to queue', () => waiter.stats().waitersNow === 1);
  await holder.release();
  const lock = await pending;
  assert.deepEqual(await server.raw.call('GET', key), lock.token);
  // The release's script set the key to the waiter's token and told it so.
  const s = waiter.stats();
  assert.equal(s.acquiredHandedOver, 1);
  assert.equal(s.handoffsReceived, 1);
  assert.equal(client.stats().handoffsGiven >= 1, true);
  assert.equal(s.wait.count, 1);
  assert.equal(s.wait.buckets.length, s.wait.bounds.length + 1, 'the last bucket: beyond the last bound');
  await lock.release();
});

test('an AbortSignal ends a wait: rejects with its reason and leaves nothing queued', async () => {
  const key = keyFor();
  const holder = await client.acquire(key);
  const controller = new AbortController();
  const pending = client.acquire(key, { wait: 60000, signal: controller.signal });
  await waitUntil('the waiter to queue', async () => (await queued(key)) === 1);
  const reason = new Error('shutting down');
  controller.abort(reason);
  await assert.rejects(pending, (e) => e === reason);
  await waitUntil('the aborted waiter to leave the queue', async () => (await queued(key)) === 0);
  await holder.release();
  assert.equal(await server.raw.call('EXISTS', key), 0, 'nobody was handed the lock');
  // AbortSignal.timeout's reason is a TimeoutError DOMException.
  const again = await client.acquire(key);
  await assert.rejects(client.acquire(key, { signal: AbortSignal.timeout(50) }), { name: 'TimeoutError' });
  await again.release();
});

test('an aborted signal rejects at once, before any I/O', async () => {
  const key = keyFor();
  const before = await server.calls();
  await assert.rejects(client.acquire(key, { signal: AbortSignal.abort() }), { name: 'AbortError' });
  const after = await server.calls();
  assert.deepEqual(after.set, before.set);
  assert.equal(await server.raw.call('EXISTS', key), 0);
});

test('an abort as the lock is handed over leaves no lock held by nobody', async () => {
  const key = keyFor();
  for (let round = 0; round < 20; round++) {
    const holder = await client.acquire(key, { ttl: 30000 });
    const controller = new AbortController();
    const pending = client
      .acquire(key, { ttl: 30000, signal: controller.signal })
      .then(
        (lock) => lock,
        (e) => e,
      );
    await waitUntil('the waiter to queue', async () => (await queued(key)) === 1);
    const released = holder.release();
    controller.abort();
    await released;
    const outcome = await pending;
    if (outcome instanceof Error) {
      assert.equal(outcome.name, 'AbortError');
      await waitUntil('the lock to be free', async () => (await server.raw.call('EXISTS', key)) === 0);
    } else {
      await outcome.release();
    }
    assert.equal(await server.raw.call('EXISTS', key), 0);
    assert.equal(await queued(key), 0);
  }
});

test('using renews while fn runs and releases after', async () => {
  const key = keyFor();
  const value = await client.using(key, { ttl: 600 }, async (signal, lock) => {
    // Renewal extends at about a third of the TTL: wait for two of them
    // (PEXPIRE, the EXTEND script, or SET … IFEQ where the server has it).
    const extends_ = (c) => (c.pexpire || 0) + (c.evalsha || 0) + (c.set || 0);
    const start = extends_(await server.calls());
    await waitUntil('two renewals', async () => extends_(await server.calls()) - start >= 2);
    assert.deepEqual(await server.raw.call('GET', key), lock.token);
    assert.equal(signal.aborted, false);
    return 42;
  });
  assert.equal(value, 42);
  assert.equal(await server.raw.call('EXISTS', key), 0);
});

test('using with a stolen lock aborts the signal and rejects with LockNotOwnedError', async () => {
  const key = keyFor();
  let seen;
  const run = client.using(key, { ttl: 900 }, async (signal) => {
    await server.raw.call('SET', key, 'thief', 'PX', 60000);
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    seen = signal.reason;
    return 'finished';
  });
  await assert.rejects(run, LockNotOwnedError);
  assert.ok(seen instanceof LockNotOwnedError, seen);
  assert.equal(await server.raw.str('GET', key), 'thief', 'the thief keeps its lock');
  await server.raw.call('DEL', key);
});

test('using: a signal aborted just after the acquisition reaches fn', async () => {
  const key = keyFor();
  const shutdown = new AbortController();
  // Abort in the gap between the acquisition's end (it stops listening)
  // and fn's start.
  const remove = shutdown.signal.removeEventListener.bind(shutdown.signal);
  shutdown.signal.removeEventListener = (...args) => {
    remove(...args);
    shutdown.abort(new Error('shutdown'));
  };
  let seen;
  const value = await client.using(key, { signal: shutdown.signal }, async (signal) => {
    seen = signal.reason;
    return signal.aborted;
  });
  assert.equal(value, true, 'fn started with its signal aborted');
  assert.equal(seen.message, 'shutdown');
  assert.equal(await server.raw.call('EXISTS', key), 0, 'released after fn');
});

test('using releases when fn throws, and rethrows fn\'s error', async () => {
  const key = keyFor();
  const boom = new Error('boom');
  await assert.rejects(
    client.using(key, async () => {
      throw boom;
    }),
    (e) => e === boom,
  );
  assert.equal(await server.raw.call('EXISTS', key), 0);
});

test('1,000 waiters share the client\'s connections while a timer keeps ticking', async () => {
  const key = keyFor();
  const holder = await new Client(server.url).acquire(key, { ttl: 60000 });
  const many = new Client(server.url);
  const baseline = await server.clients();
  let ticks = 0;
  const timer = setInterval(() => {
    ticks += 1;
  }, 5);
  try {
    let order = 0;
    const served = [];
    const waiters = Array.from({ length: 1000 }, () =>
      many.acquire(key, { ttl: 60000, wait: 300000 }).then(async (lock) => {
        served.push(lock.token.toString());
        order += 1;
        await lock.release();
      }),
    );
    await waitUntil('1,000 waiters queued', async () => (await queued(key)) === 1000, 120);
    const used = (await server.clients()) - baseline;
    assert.ok(used >= 1 && used <= 4, `the waiting client uses ${used} connections`);
    const ticked = ticks;
    await waitUntil('the timer to tick while they wait', () => ticks >= ticked + 20);
    // The queue's entries are `<id>:<nonce>:<ttl>:<token>`: served in that order.
    const queue = (await server.raw.call('LRANGE', `{${key}}:queue`, 0, -1)).map((e) => e.toString().split(':').slice(3).join(':'));
    await holder.release();
    await Promise.all(waiters);
    assert.equal(order, 1000);
    assert.equal(new Set(served).size, 1000);
    assert.deepEqual(served, queue, 'handed over in the order they queued');
    assert.equal(await server.raw.call('EXISTS', key), 0);
  } finally {
    clearInterval(timer);
  }
});

test('an idle client does not keep the process alive; a pending wait does until it ends', async () => {
  const script = `
    const { Client } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const c = new Client(${JSON.stringify(server.url)});
    c.using(${JSON.stringify(keyFor())}, { ttl: 1000 }, async () => 'ok').then((v) => console.log(v));
    const k = ${JSON.stringify(keyFor())};
    c.acquire(k).then(async (l) => {
      setTimeout(() => l.release(), 300);
      const waited = await new Client(${JSON.stringify(server.url)}).acquire(k, { wait: 60000 });
      console.log('handed');
      await waited.release();
    });
  `;
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { timeout: 60000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
  assert.deepEqual(out.trim().split('\n').sort(), ['handed', 'ok']);
});

test('a waiter whose wait is long but whose holder\'s TTL runs out gets the lock', async () => {
  const key = keyFor();
  await server.raw.call('SET', key, 'gone-holder', 'PX', 300);
  const lock = await client.acquire(key, { wait: 60000 });
  assert.deepEqual(await server.raw.call('GET', key), lock.token);
  await lock.release();
  await sleep(0);
});

test('the waiters\' subscriber killed by the server: they queue again on a new one and are handed the lock', async () => {
  const key = keyFor();
  const holder = await client.acquire(key, { ttl: 60000 });
  const subscribers = async () => String(await server.raw.call('CLIENT', 'LIST', 'TYPE', 'pubsub')).split('\n').filter(Boolean).length;
  const others = await subscribers();
  const waiter = new Client(server.url);
  const got = [];
  const pending = Array.from({ length: 3 }, () =>
    waiter.acquire(key, { ttl: 60000, wait: 120000 }).then(async (lock) => {
      got.push(lock.token.toString());
      await lock.release();
    }),
  );
  await waitUntil('the waiters to queue', async () => (await queued(key)) === 3);
  assert.equal(await subscribers(), others + 1, 'one subscriber for the three');
  // Every subscriber (the other clients' too, which have no waiters now).
  await server.raw.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
  // The event loop reads the subscriber: it sees the connection end, and
  // the waiters queue again under a new one.
  await waitUntil('a new subscriber', async () => (await subscribers()) === 1, 60);
  await holder.release();
  await Promise.all(pending);
  assert.equal(new Set(got).size, 3);
  assert.equal(await server.raw.call('EXISTS', key), 0);
});

test('a client collected after its waiters\' subscriber was watched closes every socket it opened', async () => {
  // In a child: the sockets of the process (/proc/self/fd) before the
  // client, while it waited (its commands' connection, its subscriber and
  // the event loop's copy of the subscriber's descriptor), and once it is
  // collected.
  const key = keyFor();
  const holder = await client.acquire(key, { ttl: 60000 });
  const code = `
    const fs = require('node:fs');
    const { Client } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const sockets = () => fs.readdirSync('/proc/self/fd').filter((fd) => {
      try { return fs.readlinkSync('/proc/self/fd/' + fd).startsWith('socket:'); } catch { return false; }
    }).length;
    (async () => {
      const before = sockets();
      let waited;
      await (async () => {
        const c = new Client(${JSON.stringify(server.url)});
        const controller = new AbortController();
        const p = c.acquire(${JSON.stringify(key)}, { wait: 60000, signal: controller.signal }).catch((e) => e);
        for (let i = 0; i < 3000 && c.stats().waitersNow === 0; i++) await new Promise((r) => setTimeout(r, 10));
        waited = sockets() - before;
        controller.abort();
        await p;
      })();
      for (let i = 0; i < 1500 && sockets() > before; i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 20));
      }
      console.log(JSON.stringify({ waited, left: sockets() - before }));
    })();
  `;
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', '-e', code], { timeout: 90000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
  const { waited, left } = JSON.parse(out);
  assert.ok(waited >= 3, `while it waited: ${waited} sockets (commands, subscriber, the loop's copy)`);
  assert.equal(left, 0, 'every socket closed once the client was collected');
  await holder.release();
});
