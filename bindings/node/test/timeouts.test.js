'use strict';
// The Client constructor's timeouts (`connectTimeout`, `commandTimeout`,
// `nodeTimeout`, in ms): checked before any I/O, handed to the core's
// client builder (where they win over the URL's parameters of the same
// name), and the ones that end a call to a server that does not answer. The
// core's error names the timeout that ran out and its value, which is what
// these tests read (beside lower bounds on the time taken, which the core
// guarantees).

const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const net = require('node:net');
const readline = require('node:readline');
const { test } = require('node:test');

const { Client, LockConnectionError, LockQuorumError } = require('..');
const { RedisServer, keyFor, waitUntil } = require('./helper');

const OPTIONS = ['connectTimeout', 'commandTimeout', 'nodeTimeout'];

/** A listening socket that accepts and never answers: connecting works, no reply ever comes. */
async function silent(t) {
  const held = [];
  const server = net.createServer((c) => held.push(c));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    held.forEach((c) => c.destroy());
    server.close();
  });
  return { url: `redis://127.0.0.1:${server.address().port}/0` };
}

/** The error a Promise rejects with, and how long it took (ms). */
async function failure(p) {
  const start = performance.now();
  try {
    await p;
  } catch (e) {
    return [e, performance.now() - start];
  }
  assert.fail('resolved');
}

test('bad timeouts are refused by the constructor, before any I/O', () => {
  for (const option of OPTIONS) {
    for (const bad of [0, -1, 0.5, 1.5, 3600001, Infinity, NaN]) {
      assert.throws(
        () => new Client('redis://127.0.0.1:1', { [option]: bad }),
        (e) => e instanceof RangeError && e.code === 'ERR_OUT_OF_RANGE' && e.message.includes(`${option} must be`),
        `${option}: ${bad}`,
      );
    }
    for (const bad of ['300', '300ms', true, {}, 300n]) {
      assert.throws(
        () => new Client('redis://127.0.0.1:1', { [option]: bad }),
        (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_TYPE',
        `${option}: ${String(bad)}`,
      );
    }
    // The longest and the shortest; null and undefined: the URL's, else the default.
    new Client('redis://127.0.0.1:1', { [option]: 3600000 }).close();
    new Client(['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3'], { [option]: 1 }).close();
    new Client('redis://127.0.0.1:1', { [option]: null }).close();
    new Client('redis://127.0.0.1:1', { [option]: undefined }).close();
  }
  assert.throws(() => new Client('redis://127.0.0.1:1', 300), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_TYPE');
  new Client('redis://127.0.0.1:1', null).close();
  new Client('redis://127.0.0.1:1', {}).close();
  // The URL's own value is still checked.
  assert.throws(() => new Client('redis://127.0.0.1:1?connect_timeout=soon', { commandTimeout: 300 }), TypeError);
});

test('a command timeout ends a call to a server that does not answer', async (t) => {
  const { url } = await silent(t);
  const client = new Client(url, { commandTimeout: 300 });
  const [e, took] = await failure(client.tryAcquire(keyFor('timeout')));
  assert.ok(e instanceof LockConnectionError, e);
  assert.match(e.message, /command timeout 300ms/);
  assert.ok(took >= 290, `failed after ${took} ms, before the command timeout`);
});

test('the option wins over the URL, and is longer than the default (2 s) when asked', async (t) => {
  const { url } = await silent(t);
  const client = new Client(`${url}?command_timeout=300ms`, { commandTimeout: 2600 });
  const [e, took] = await failure(client.tryAcquire(keyFor('timeout')));
  assert.ok(e instanceof LockConnectionError, e);
  assert.match(e.message, /command timeout 2\.6s/);
  assert.ok(took >= 2590, `failed after ${took} ms, before the command timeout`);
});

/**
 * A listening socket that never accepts, its queue for one connection:
 * once that is full the kernel drops the client's SYN, so connecting hangs.
 * Node accepts every connection at once, so a Python child listens.
 */
async function neverAccepting(t) {
  const child = spawn(process.env.PYTHON || 'python3', [
    '-c',
    'import socket, sys\n' +
      's = socket.socket()\n' +
      's.bind(("127.0.0.1", 0))\n' +
      's.listen(1)\n' +
      'print(s.getsockname()[1], flush=True)\n' +
      'sys.stdin.read()\n',
  ], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => child.kill());
  const [line] = await once(readline.createInterface({ input: child.stdout }), 'line');
  return Number(line);
}

test('a connect timeout ends a connect that hangs (a listening socket whose accept queue is full)', async (t) => {
  const port = await neverAccepting(t);
  const queued = [];
  t.after(() => queued.forEach((s) => s.destroy()));
  let hangs = false;
  for (let i = 0; i < 20 && !hangs; i++) {
    const s = net.createConnection({ port, host: '127.0.0.1' });
    queued.push(s);
    hangs = await new Promise((r) => {
      const timer = setTimeout(() => r(true), 500);
      s.once('connect', () => {
        clearTimeout(timer);
        r(false);
      });
      s.once('error', () => {
        clearTimeout(timer);
        r(false);
      });
    });
  }
  assert.ok(hangs, 'connecting to a listening socket with a full accept queue never hung on this system');
  const client = new Client(`redis://127.0.0.1:${port}/0`, { connectTimeout: 400 });
  const [e, took] = await failure(client.tryAcquire(keyFor('timeout')));
  assert.ok(e instanceof LockConnectionError, e);
  assert.match(e.message, /connect timeout 400ms/);
  assert.ok(took >= 390, `failed after ${took} ms, before the connect timeout`);
});

test('a node timeout ends a Redlock acquire without a majority', async (t) => {
  const live = await RedisServer.start();
  t.after(() => live.destroy());
  const a = await silent(t);
  const b = await silent(t);
  const key = keyFor('timeout');
  const client = new Client([live.url, a.url, b.url], { nodeTimeout: 2700 });
  const [e, took] = await failure(client.tryAcquire(key, { ttl: 30000 }));
  assert.ok(e instanceof LockQuorumError, e);
  assert.match(e.message, /node timeout 2\.7s/);
  assert.ok(took >= 2690, `no quorum after ${took} ms, before the node timeout: ${e.message}`);
  await waitUntil("the live node's grant taken back", async () => (await live.raw.call('EXISTS', key)) === 0);
});
