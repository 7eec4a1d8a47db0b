'use strict';
// The lock across processes and threads: Python and PHP holders of the
// same key (one wire protocol), worker_threads, child_process.fork, and a
// handle collected while held.

const assert = require('node:assert/strict');
const { spawn, fork, execFile } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { Worker } = require('node:worker_threads');
const { test, before, after } = require('node:test');

const { Client } = require('..');
const { ROOT, RedisServer, keyFor, waitUntil } = require('./helper');

const PYTHON = process.env.PYTHON || path.join(ROOT, 'target/venv-test/bin/python');
const HOLDERS = {
  python: [PYTHON, path.join(ROOT, 'tests/holders/holder.py')],
  php: ['php', path.join(ROOT, 'tests/holders/holder.php')],
};
const LIB = process.env.REDISLOCK_LIB || path.join(ROOT, 'target/debug/libredislock.so');
const ADDON = path.resolve(__dirname, '..');

let server;
let client;

before(async () => {
  server = await RedisServer.start();
  client = new Client(server.url);
});

after(() => server.destroy());

/** Start a holder of `key` in `lang`: its stdin, its lines, and its token. */
async function hold(lang, key) {
  const [cmd, ...args] = HOLDERS[lang];
  const proc = spawn(cmd, [...args, server.url, key], { env: { ...process.env, REDISLOCK_LIB: LIB }, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  assert.ok(!first.done, `the ${lang} holder printed nothing`);
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  return { proc, lines, exited, token: Buffer.from(first.value.trim(), 'hex') };
}

function tryFrom(lang, key) {
  const [cmd, ...args] = HOLDERS[lang];
  return new Promise((resolve, reject) => {
    execFile(cmd, [...args, server.url, `try:${key}`], { env: { ...process.env, REDISLOCK_LIB: LIB } }, (err, out) =>
      err ? reject(err) : resolve(out.trim()),
    );
  });
}

for (const lang of ['python', 'php']) {
  test(`a ${lang} holder excludes Node and hands the lock to a Node waiter on release`, async () => {
    const key = keyFor(lang);
    const h = await hold(lang, key);
    assert.deepEqual(await server.raw.call('GET', key), h.token);
    assert.equal(await client.tryAcquire(key), null);
    const waiter = new Client(server.url);
    const pending = waiter.acquire(key, { ttl: 5000, wait: 60000 });
    await waitUntil('the Node waiter to queue', () => waiter.stats().waitersNow === 1);
    h.proc.stdin.end('release\n');
    const lock = await pending;
    assert.equal((await h.lines.next()).done, false);
    assert.equal((await h.lines.next()).value, 'released');
    assert.equal(await h.exited, 0);
    assert.equal(waiter.stats().acquiredHandedOver, 1, `the ${lang} release handed the lock over`);
    assert.deepEqual(await server.raw.call('GET', key), lock.token);
    await lock.release();
  });

  test(`a Node holder excludes ${lang}`, async () => {
    const key = keyFor(lang);
    const lock = await client.acquire(key);
    assert.equal(await tryFrom(lang, key), 'held');
    await lock.release();
    assert.equal(await tryFrom(lang, key), 'free');
  });
}

/** Run `code` in a worker thread with `data`; resolves with its messages once it exits. */
function inWorker(code, data) {
  const worker = new Worker(`const { parentPort, workerData } = require('node:worker_threads');\n${code}`, { eval: true, workerData: data });
  const messages = [];
  worker.on('message', (m) => messages.push(m));
  const done = new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) => (code === 0 ? resolve(messages) : reject(new Error(`worker exit ${code}`))));
  });
  return { worker, messages, done };
}

test('worker threads take the lock in turn, and hand it to the main thread', async () => {
  const key = keyFor('workers');
  await server.raw.call('SET', `${key}:counter`, 0);
  const code = `
    const { Client } = require(workerData.addon);
    (async () => {
      const c = new Client(workerData.url);
      for (let i = 0; i < 20; i++) {
        await c.using(workerData.key, { ttl: 10000 }, async () => {
          // A read, a pause and a write: loses updates unless excluded.
          const raw = workerData.raw;
          const v = Number(await raw(['GET', workerData.key + ':counter']));
          await new Promise((r) => setImmediate(r));
          await raw(['SET', workerData.key + ':counter', String(v + 1)]);
        });
      }
      parentPort.postMessage('done');
    })().catch((e) => { console.error(e); process.exit(1); });
  `;
  // The workers reach the counter through a RESP helper of their own.
  const rawHelper = `
    const net = require('node:net');
    const sock = net.createConnection({ host: '127.0.0.1', port: workerData.port });
    sock.unref();
    const waiting = [];
    let buf = '';
    sock.on('data', (d) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\\r\\n')) >= 0) {
        let line = buf.slice(0, i);
        if (line[0] === '$' && line !== '$-1') {
          const n = Number(line.slice(1));
          if (buf.length < i + 2 + n + 2) return;
          line = buf.slice(i + 2, i + 2 + n);
          buf = buf.slice(i + 2 + n + 2);
        } else {
          buf = buf.slice(i + 2);
          line = line.slice(1);
        }
        waiting.shift()(line);
      }
    });
    workerData.raw = (args) => new Promise((resolve) => {
      waiting.push(resolve);
      sock.write('*' + args.length + '\\r\\n' + args.map((a) => '$' + Buffer.byteLength(a) + '\\r\\n' + a + '\\r\\n').join(''));
    });
  `;
  const data = { addon: ADDON, url: server.url, key, port: server.port };
  const workers = [0, 1, 2].map(() => inWorker(rawHelper + code, data));
  await Promise.all(workers.map((w) => w.done));
  assert.equal(await server.raw.str('GET', `${key}:counter`), '60');

  // A worker's release hands the lock to a waiter on the main thread.
  const holder = inWorker(
    `const { Client } = require(workerData.addon);
     (async () => {
       const lock = await new Client(workerData.url).acquire(workerData.key);
       parentPort.postMessage('held');
       await new Promise((r) => parentPort.once('message', r));
       await lock.release();
     })();`,
    data,
  );
  await waitUntil('the worker to hold the lock', () => holder.messages.includes('held'));
  const main = new Client(server.url);
  const pending = main.acquire(key, { wait: 60000 });
  await waitUntil('the main thread to queue', () => main.stats().waitersNow === 1);
  holder.worker.postMessage('release');
  const lock = await pending;
  await holder.done;
  assert.equal(main.stats().acquiredHandedOver, 1);
  await lock.release();
});

test('a worker terminated while holding and while waiting leaves nothing held', async () => {
  const key = keyFor('terminated');
  const data = { addon: ADDON, url: server.url, key };
  const w = inWorker(
    `const { Client } = require(workerData.addon);
     (async () => {
       const c = new Client(workerData.url);
       const lock = await c.acquire(workerData.key, { ttl: 60000 });
       parentPort.postMessage('held');
       c.acquire(workerData.key + ':other', { wait: 60000 });
       setInterval(() => {}, 1000);
     })();`,
    data,
  );
  const blocker = await client.acquire(`${key}:other`, { ttl: 60000 });
  await waitUntil('the worker to hold the lock', () => w.messages.includes('held'));
  await waitUntil('the worker to wait', async () => (await server.raw.call('LLEN', `{${key}:other}:queue`)) === 1);
  await w.worker.terminate();
  await assert.rejects(w.done);
  // The worker's handle is collected with its thread: released in the background.
  await waitUntil('the terminated worker\'s lock to be released', async () => (await server.raw.call('EXISTS', key)) === 0);
  // Its pending wait still ends in the core; a lock handed to it is released.
  await blocker.release();
  await waitUntil('the lock the worker waited for to be free', async () => (await server.raw.call('EXISTS', `${key}:other`)) === 0);
  const lock = await client.acquire(key, { wait: 10000 });
  await lock.release();
});

test('a child from child_process.fork opens its own connections and shares the lock', async () => {
  const key = keyFor('fork');
  const lock = await client.acquire(key, { fenced: true });
  const child = fork(path.join(__dirname, 'fork_child.js'), [server.url, key]);
  const messages = [];
  child.on('message', (m) => messages.push(m));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await waitUntil('the child to start', () => messages.includes('ready'));
  child.send('try');
  await waitUntil('the child to try', () => messages.length === 2);
  assert.equal(messages[1], 'true', 'the child saw the lock held');
  child.send('take');
  await waitUntil('the child to queue', async () => (await server.raw.call('LLEN', `{${key}}:queue`)) === 1);
  await lock.release();
  await waitUntil('the child to take it', () => messages.length === 3);
  assert.match(messages[2], /^took \d+$/);
  assert.ok(Number(messages[2].slice(5)) > lock.fence);
  assert.equal(await exited, 0);
});

test('a handle collected while held is released in the background', async () => {
  const key = keyFor('gc');
  // The child waits, collecting garbage, until its client counts the
  // release: done by the collector, not by the process's exit.
  const code = `
    const { Client } = require(${JSON.stringify(ADDON)});
    const c = new Client(${JSON.stringify(server.url)});
    (async () => {
      await (async () => { await c.acquire(${JSON.stringify(key)}, { ttl: 60000 }); })();
      for (let i = 0; i < 1500 && c.stats().releasesOk === 0; i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 20));
      }
      console.log(c.stats().releasesOk);
    })();
  `;
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', '-e', code], { timeout: 60000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
  assert.equal(out.trim(), '1', 'released while the process ran');
  assert.equal(await server.raw.call('EXISTS', key), 0);
});
