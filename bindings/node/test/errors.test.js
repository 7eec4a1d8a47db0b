'use strict';
// Every LockError has a string `code` to switch on, the same for each
// failure whichever copy of the package made it (two copies of the package
// in one process, as npm installs them for two dependents: `instanceof`
// cannot cross them, `code` does), and a `cause` where the layer below
// reported one (ECONNREFUSED, the server's error text...).

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, before, after } = require('node:test');

const redislock = require('..');
const { Client, LockError, LockTimeoutError, LockNotOwnedError, LockUnconfirmedError, LockConnectionError, LockServerError, LockQuorumError } =
  redislock;
const { RedisServer, keyFor, freePort, waitUntil } = require('./helper');

const PKG = path.resolve(__dirname, '..');
let server;
let client;
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-errors-'));

before(async () => {
  server = await RedisServer.start();
  client = new Client(server.url);
});

after(() => {
  server.destroy();
  fs.rmSync(work, { recursive: true, force: true });
});

/** The error a Promise rejects with (an assertion error if it resolves). */
async function failure(p) {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new assert.AssertionError({ message: 'resolved; a rejection was expected' });
}

test('each class has its code, an own enumerable property; a subclass of the user keeps its parent\'s', () => {
  const codes = {
    LockError: 'ERR_LOCK_INTERNAL',
    LockTimeoutError: 'ERR_LOCK_TIMEOUT',
    LockNotOwnedError: 'ERR_LOCK_NOT_OWNED',
    LockUnconfirmedError: 'ERR_LOCK_UNCONFIRMED',
    LockWrongTypeError: 'ERR_LOCK_WRONG_TYPE',
    LockQuorumError: 'ERR_LOCK_NO_QUORUM',
    LockConnectionError: 'ERR_LOCK_CONNECTION',
    LockServerError: 'ERR_LOCK_SERVER',
  };
  for (const [name, code] of Object.entries(codes)) {
    const e = new redislock[name]('x');
    assert.equal(e.code, code, name);
    assert.equal(e.name, name);
    assert.ok(Object.keys(e).includes('code'), `${name}: code is enumerable (util.inspect and JSON show it)`);
  }
  const cause = new Error('below');
  const given = new LockTimeoutError('x', { cause, code: 'ERR_LOCK_NOT_ACQUIRED' });
  assert.equal(given.code, 'ERR_LOCK_NOT_ACQUIRED');
  assert.equal(given.cause, cause);
  class MyTimeout extends LockTimeoutError {}
  assert.equal(new MyTimeout('x').code, 'ERR_LOCK_TIMEOUT');
  assert.equal(new MyTimeout('x').name, 'MyTimeout');
});

test('the codes of real failures: not acquired, timeout, not owned, wrong type, closed', async () => {
  const key = keyFor();
  const held = await client.acquire(key, { ttl: 30000 });
  const once = await failure(client.acquire(key, { wait: 0 }));
  assert.ok(once instanceof LockTimeoutError);
  assert.equal(once.code, 'ERR_LOCK_NOT_ACQUIRED', 'one attempt (wait: 0)');
  const waited = await failure(client.acquire(key, { wait: 50 }));
  assert.ok(waited instanceof LockTimeoutError);
  assert.equal(waited.code, 'ERR_LOCK_TIMEOUT', 'a wait that ran out');
  const sem = keyFor('sem');
  const permit = await client.acquireSemaphore(sem, { limit: 1 });
  assert.equal((await failure(client.acquireSemaphore(sem, { limit: 1, wait: 0 }))).code, 'ERR_LOCK_NOT_ACQUIRED');
  assert.equal((await failure(client.acquireSemaphore(sem, { limit: 1, wait: 50 }))).code, 'ERR_LOCK_TIMEOUT');
  await permit.release();
  await server.raw.call('SET', key, 'someone-else');
  const notOwned = await failure(held.release());
  assert.ok(notOwned instanceof LockNotOwnedError);
  assert.equal(notOwned.code, 'ERR_LOCK_NOT_OWNED');
  assert.equal(notOwned.cause, undefined, 'no cause: nothing below failed');
  assert.equal((await failure(held.release())).code, 'ERR_LOCK_NOT_OWNED', 'released already');
  const list = keyFor('list');
  await server.raw.call('RPUSH', list, 'a');
  assert.equal((await failure(client.acquire(list, { wait: 0 }))).code, 'ERR_LOCK_WRONG_TYPE');
  const closing = new Client(server.url);
  await closing.close();
  const closed = await failure(closing.acquire(keyFor()));
  assert.ok(closed instanceof LockError);
  assert.equal(closed.code, 'ERR_LOCK_CLIENT_CLOSED');
  await server.raw.call('DEL', key);
});

test('a server that is not there: LockConnectionError, its cause ECONNREFUSED with the address', async () => {
  const port = await freePort();
  const dead = new Client(`redis://127.0.0.1:${port}/0?connect_timeout=500ms`);
  const e = await failure(dead.acquire('k', { wait: 0 }));
  assert.ok(e instanceof LockConnectionError, e);
  assert.equal(e.code, 'ERR_LOCK_CONNECTION');
  assert.ok(e.cause instanceof Error, 'a cause');
  assert.equal(e.cause.code, 'ECONNREFUSED');
  assert.equal(e.cause.address, `127.0.0.1:${port}`);
  assert.match(e.cause.message, /connection refused/);
});

test('a server that never answers: the cause is ETIMEDOUT', async () => {
  // A listening socket that accepts and says nothing.
  const net = require('node:net');
  const silent = net.createServer(() => {});
  await new Promise((r) => silent.listen(0, '127.0.0.1', r));
  try {
    const port = silent.address().port;
    const mute = new Client(`redis://127.0.0.1:${port}/0?connect_timeout=300ms&command_timeout=300ms`);
    const e = await failure(mute.acquire('k', { wait: 0 }));
    assert.ok(e instanceof LockConnectionError, e);
    assert.equal(e.cause?.code, 'ETIMEDOUT', `cause: ${e.cause?.message}`);
    assert.equal(e.cause.address, `127.0.0.1:${port}`);
  } finally {
    silent.close();
  }
});

test('a server that refuses: LockServerError, its cause a ReplyError (with the server\'s code: NOAUTH)', async () => {
  const locked = await RedisServer.start();
  // The harness's own connection stays authenticated.
  await locked.raw.call('CONFIG', 'SET', 'requirepass', 'sekret');
  try {
    const e = await failure(new Client(locked.url).acquire('k', { wait: 0 }));
    assert.ok(e instanceof LockServerError, e);
    assert.equal(e.code, 'ERR_LOCK_SERVER');
    assert.equal(e.cause.name, 'ReplyError');
    assert.equal(e.cause.code, 'NOAUTH');
    assert.equal(e.cause.address, `127.0.0.1:${locked.port}`);
    const wrong = await failure(new Client(`redis://:not-it@127.0.0.1:${locked.port}/0`).acquire('k', { wait: 0 }));
    assert.ok(wrong instanceof LockServerError, wrong);
    assert.equal(wrong.cause.name, 'ReplyError');
    assert.match(wrong.cause.message, /authentication failed/i);
    assert.ok(!JSON.stringify({ m: wrong.message, c: wrong.cause.message }).includes('not-it'), 'no password in the messages');
  } finally {
    locked.destroy();
  }
});

test('Redlock with most servers gone: LockQuorumError, its cause the nodes\' outcomes', async () => {
  const nodes = await Promise.all([0, 1, 2].map(() => RedisServer.start()));
  try {
    nodes[1].stop();
    nodes[2].stop();
    const e = await failure(new Client(nodes.map((s) => `${s.url}?connect_timeout=300ms`)).acquire(keyFor('q'), { wait: 0 }));
    assert.ok(e instanceof LockQuorumError, e);
    assert.equal(e.code, 'ERR_LOCK_NO_QUORUM');
    assert.ok(e.cause instanceof Error);
    assert.match(e.cause.message, new RegExp(String(nodes[1].port)));
  } finally {
    nodes.forEach((s) => s.destroy());
  }
});

test('bad arguments keep Node\'s own classes and codes', async () => {
  assert.equal((await failure(client.acquire(42))).code, 'ERR_INVALID_ARG_TYPE');
  assert.equal((await failure(client.acquire('k', { ttl: 0 }))).code, 'ERR_OUT_OF_RANGE');
  assert.equal((await failure(client.acquire(''))).code, 'ERR_INVALID_ARG_VALUE');
});

test('two copies of the package: instanceof does not cross them, code does', async () => {
  // A second copy, as npm installs one under another dependent: its own
  // index.js, package.json and addon, from another directory.
  const copy = path.join(work, 'node_modules', 'redislock');
  fs.mkdirSync(copy, { recursive: true });
  for (const f of ['index.js', 'package.json', 'redislock.node']) fs.copyFileSync(path.join(PKG, f), path.join(copy, f));
  const other = require(copy);
  assert.notEqual(other.LockError, LockError, 'two copies: two classes');
  const key = keyFor('copies');
  const held = await client.acquire(key, { ttl: 30000 });
  const theirs = new other.Client(server.url);
  const timeout = await failure(theirs.acquire(key, { wait: 50 }));
  assert.ok(!(timeout instanceof LockTimeoutError), "this copy's class does not see the other copy's error");
  assert.ok(timeout instanceof other.LockTimeoutError);
  assert.equal(timeout.code, 'ERR_LOCK_TIMEOUT');
  assert.equal(timeout.name, 'LockTimeoutError');
  // Both copies exclude each other on one server, and hand over.
  const waiting = theirs.acquire(key, { wait: 30000 });
  await waitUntil('the other copy to queue', () => theirs.stats().waitersNow === 1);
  await held.release();
  const got = await waiting;
  const notOwned = await failure(client.acquire(key, { wait: 0 }));
  assert.equal(notOwned.code, 'ERR_LOCK_NOT_ACQUIRED');
  await server.raw.call('SET', key, 'someone-else');
  const lost = await failure(got.release());
  assert.ok(!(lost instanceof LockNotOwnedError));
  assert.equal(lost.code, new LockNotOwnedError('x').code);
  await server.raw.call('DEL', key);
  await theirs.close();
  assert.ok(LockUnconfirmedError.prototype instanceof LockNotOwnedError);
});
