'use strict';
// Every operation of the Node.js API against a throwaway redis-server: the
// key holds the token and nothing else, fences grow, errors are the
// documented classes, and bad arguments are refused before any I/O.

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');

const redislock = require('..');
const { Client, Lock, LockError, LockTimeoutError, LockNotOwnedError, LockWrongTypeError, LockConnectionError } = redislock;
const { RedisServer, keyFor, waitUntil, freePort } = require('./helper');

let server;
let client;

before(async () => {
  server = await RedisServer.start();
  client = new Client(server.url);
});

after(() => server.destroy());

test('acquire sets the key to the token with the TTL; release deletes it', async () => {
  const key = keyFor();
  const lock = await client.acquire(key, { ttl: 20000 });
  assert.ok(lock instanceof Lock);
  assert.ok(Buffer.isBuffer(lock.token));
  assert.equal(lock.name, key);
  assert.deepEqual(await server.raw.call('GET', key), lock.token);
  const pttl = await server.raw.call('PTTL', key);
  assert.ok(pttl > 10000 && pttl <= 20000, `PTTL ${pttl}`);
  assert.equal(lock.lost, false);
  assert.equal(await lock.owned(), true);
  await lock.release();
  assert.equal(await server.raw.call('EXISTS', key), 0);
  assert.equal(await lock.owned(), false);
});

test('names may be Buffers with any bytes, tokens are 128 random bits', async () => {
  const key = Buffer.from([0xff, 0x00, 0xfe, 0x41]);
  const a = await client.acquire(key, { ttl: 5000 });
  assert.deepEqual(await server.raw.call('GET', key), a.token);
  assert.equal(a.token.length, 32);
  await a.release();
  const b = await client.acquire(key, { ttl: 5000 });
  assert.notDeepEqual(a.token, b.token);
  await b.release();
});

test('fences are numbers that grow with each owner, also through a hand-off', async () => {
  const key = keyFor();
  // The default: drawn on first use.
  const first = await client.acquire(key);
  const firstFence = await first.drawFence();
  assert.ok(Number.isSafeInteger(firstFence));
  assert.equal(first.fence, firstFence, 'the getter has it once drawn');
  assert.equal(await first.drawFence(), firstFence, 'drawn once');
  const other = new Client(server.url);
  const waiting = other.acquire(key, { wait: 30000, fenced: true });
  await waitUntil('the waiter to queue', async () => (await server.raw.call('LLEN', `{${key}}:queue`)) === 1);
  await first.release();
  const second = await waiting;
  assert.ok(second.fence > firstFence, `${second.fence} > ${firstFence}`);
  await second.release();
  const third = await client.acquire(key);
  assert.ok((await third.drawFence()) > second.fence);
  await third.release();
});

test('a fence read after the release is the one drawn while held, never a silent null', async () => {
  const key = keyFor();
  // Drawn in the acquisition: the same number before and after.
  const fenced = await client.acquire(key, { fenced: true });
  const drawn = fenced.fence;
  assert.ok(Number.isSafeInteger(drawn));
  await fenced.release();
  assert.equal(fenced.fence, drawn);
  assert.equal(await fenced.drawFence(), drawn);
  // Drawn on first use, then released: the same.
  const lazy = await client.acquire(key);
  const lazyFence = await lazy.drawFence();
  assert.ok(lazyFence > drawn);
  await lazy.release();
  assert.equal(lazy.fence, lazyFence);
  // Also when the release found the lock gone.
  const taken = await client.acquire(key, { ttl: 5000, fenced: true });
  const takenFence = taken.fence;
  await server.raw.call('SET', key, 'someone-else');
  await assert.rejects(taken.release(), LockNotOwnedError);
  assert.equal(taken.fence, takenFence);
  await server.raw.call('DEL', key);
  // The shared kinds always draw one.
  for (const shared of [
    await client.acquireSemaphore(keyFor(), { limit: 2 }),
    await client.acquireRead(keyFor()),
    await client.acquireWrite(keyFor()),
  ]) {
    const f = shared.fence;
    assert.ok(Number.isSafeInteger(f));
    await shared.release();
    assert.equal(shared.fence, f);
  }
});

test('a fence not drawn reads undefined (never a made-up number, never a throw); drawFence draws it or rejects', async () => {
  const key = keyFor();
  const lock = await client.acquire(key);
  for (let i = 0; i < 2; i++) assert.equal(lock.fence, undefined, 'held, and no number was drawn: reading it draws nothing');
  assert.equal(await server.raw.call('GET', key).then(String), lock.token.toString(), 'the key holds the token alone');
  await lock.release();
  assert.equal(lock.fence, undefined);
  await assert.rejects(lock.drawFence(), (e) => e instanceof LockNotOwnedError && /was released before its fence was drawn/.test(e.message));
  assert.match(require('node:util').inspect(lock), /fence=none held=false/);
  // fenced: false is the same (the number is drawn on first use).
  const explicit = await client.acquire(key, { fenced: false });
  assert.equal(explicit.fence, undefined);
  const drawn = await explicit.drawFence();
  assert.ok(Number.isSafeInteger(drawn));
  assert.equal(explicit.fence, drawn, 'once drawn, the getter has it');
  await explicit.release();
  // A release that found the lock taken over.
  const taken = await client.acquire(key, { ttl: 5000 });
  await server.raw.call('SET', key, 'someone-else');
  await assert.rejects(taken.release(), LockNotOwnedError);
  assert.equal(taken.fence, undefined);
  // Taken over while held: drawing it finds it gone.
  await server.raw.call('DEL', key);
  const gone = await client.acquire(key, { ttl: 5000 });
  await server.raw.call('SET', key, 'someone-else');
  await assert.rejects(gone.drawFence(), LockNotOwnedError);
  assert.equal(gone.fence, undefined);
  await assert.rejects(gone.release(), LockNotOwnedError);
  // Found lost by an extend, not released yet.
  await server.raw.call('DEL', key);
  const lost = await client.acquire(key, { ttl: 5000 });
  await server.raw.call('SET', key, 'someone-else');
  await assert.rejects(lost.extend(5000), LockNotOwnedError);
  assert.equal(lost.lost, true);
  assert.equal(lost.fence, undefined);
  await assert.rejects(lost.drawFence(), LockNotOwnedError);
  await server.raw.call('DEL', key);
});

test("a caller's token: the key holds it, and several names can share it", async () => {
  const key = keyFor();
  const lock = await client.acquire(key, { token: 'request-7f3a', fenced: false });
  assert.deepEqual(lock.token, Buffer.from('request-7f3a'));
  assert.equal(await server.raw.str('GET', key), 'request-7f3a');
  assert.equal(await client.tryAcquire(key, { token: 'request-7f3a' }), null, 'a token does not re-enter');
  const other = await client.acquire(key + ':2', { token: lock.token });
  assert.equal(await server.raw.str('GET', key + ':2'), 'request-7f3a');
  await lock.extend(9000);
  assert.ok((await server.raw.call('PTTL', key)) <= 9000);
  await lock.release();
  assert.equal(await server.raw.call('EXISTS', key), 0);
  assert.equal(await client.releaseToken(key + ':2', 'request-7f3a'), true);
  await assert.rejects(other.release(), LockNotOwnedError);
  const bytes = Buffer.from([0x00, 0xff, 0x10]);
  const binary = await client.acquire(key, { token: new Uint8Array(bytes) });
  assert.deepEqual(await server.raw.call('GET', key), bytes);
  assert.deepEqual(binary.token, bytes);
  await binary.release();
  const permit = await client.acquireSemaphore(key, { limit: 3, token: 'permit-1' });
  assert.deepEqual(permit.token, Buffer.from('permit-1'));
  await permit.release();
});

test('tryAcquire gives null while another owner holds the lock', async () => {
  const key = keyFor();
  const lock = await client.acquire(key);
  assert.equal(await client.tryAcquire(key), null);
  assert.equal(await new Client(server.url).tryAcquire(key, { ttl: 1000 }), null);
  assert.equal(await new Client(server.url).tryAcquire(key, { wait: 20 }), null);
  await lock.release();
  const mine = await client.tryAcquire(key);
  assert.ok(mine instanceof Lock);
  await mine.release();
});

test('extend sets the remaining TTL; the default is the acquisition TTL', async () => {
  const key = keyFor();
  const lock = await client.acquire(key, { ttl: 3000 });
  await lock.extend(60000);
  assert.ok((await server.raw.call('PTTL', key)) > 30000);
  await lock.extend();
  assert.ok((await server.raw.call('PTTL', key)) <= 3000);
  await lock.release();
});

test('a wait that runs out rejects with LockTimeoutError', async () => {
  const key = keyFor();
  const lock = await client.acquire(key);
  const e = await client.acquire(key, { wait: 50 }).catch((err) => err);
  assert.ok(e instanceof LockTimeoutError, e);
  assert.ok(e instanceof LockError);
  assert.equal(e.name, 'LockTimeoutError');
  assert.match(e.message, /held by another owner/);
  assert.equal(await server.raw.call('LLEN', `{${key}}:queue`), 0, 'the waiter left the queue');
  await lock.release();
});

test('release and extend of a lock taken over reject with LockNotOwnedError and leave the key alone', async () => {
  const key = keyFor();
  const lock = await client.acquire(key, { ttl: 5000 });
  await server.raw.call('SET', key, 'someone-else');
  await assert.rejects(lock.extend(5000), LockNotOwnedError);
  assert.equal(lock.lost, true);
  await assert.rejects(lock.release(), LockNotOwnedError);
  assert.equal(lock.lost, true, 'still lost after the release');
  assert.equal(await server.raw.str('GET', key), 'someone-else');
  await assert.rejects(lock.release(), /already released/);
  assert.equal(lock.lost, true);
  // Found gone by the release itself, with no extend before it.
  const other = await client.acquire(key + ':2', { ttl: 5000 });
  await server.raw.call('SET', key + ':2', 'someone-else');
  assert.equal(other.lost, false);
  await assert.rejects(other.release(), LockNotOwnedError);
  assert.equal(other.lost, true);
  // A release that released: not lost.
  const mine = await client.acquire(key + ':3');
  await mine.release();
  assert.equal(mine.lost, false);
  await server.raw.call('DEL', key, key + ':2');
});

test('a key of another type rejects with LockWrongTypeError and is left untouched', async () => {
  const key = keyFor();
  await server.raw.call('RPUSH', key, 'a', 'b');
  await assert.rejects(client.acquire(key, { wait: 0 }), LockWrongTypeError);
  await assert.rejects(client.acquire(key, { wait: 200 }), LockWrongTypeError);
  assert.equal(await server.raw.call('LLEN', key), 2);
});

test('a dead server rejects with LockConnectionError', async () => {
  const dead = new Client(`redis://127.0.0.1:${await freePort()}/0?connect_timeout=200ms`);
  const e = await dead.acquire('k', { wait: 0 }).catch((err) => err);
  assert.ok(e instanceof LockConnectionError, e);
  assert.match(e.message, /127\.0\.0\.1/);
});

test('releaseToken releases for a holder in another process', async () => {
  const key = keyFor();
  const lock = await client.acquire(key);
  assert.equal(await client.releaseToken(key, Buffer.from('not-the-token')), false);
  assert.equal(await client.releaseToken(key, lock.token), true);
  assert.equal(await server.raw.call('EXISTS', key), 0);
});

test('forceRelease hands a crashed holder\'s lock to the waiter at once, fences keep growing', async () => {
  const key = keyFor();
  const crashed = await client.acquire(key, { ttl: 600000, fenced: true });
  const before = client.stats().acquiredHandedOver;
  const waiting = client.acquire(key, { ttl: 30000, wait: 60000, fenced: true });
  await waitUntil('the waiter to queue', async () => (await server.raw.call('LLEN', `{${key}}:queue`)) === 1);
  assert.equal(await client.forceRelease(key), true);
  const next = await waiting;
  assert.equal(client.stats().acquiredHandedOver - before, 1, 'handed over, not found free by a retry');
  assert.ok(next.fence > crashed.fence, 'fences stay monotonic');
  await assert.rejects(crashed.release(), LockNotOwnedError);
  await next.release();
  assert.equal(await client.forceRelease(key), false, 'nobody holds it');
  await server.raw.call('RPUSH', key, 'x');
  await assert.rejects(client.forceRelease(key), LockWrongTypeError);
  assert.deepEqual(await server.raw.call('LRANGE', key, '0', '-1'), [Buffer.from('x')]);
  await assert.rejects(client.forceRelease(''), TypeError);
});

test('await using releases at the end of the scope', { skip: typeof Symbol.asyncDispose !== 'symbol' }, async () => {
  const key = keyFor();
  const lock = await client.acquire(key);
  await lock[Symbol.asyncDispose]();
  assert.equal(await server.raw.call('EXISTS', key), 0);
  await lock[Symbol.asyncDispose]();
});

test('bad arguments: the constructor throws TypeError; methods reject with TypeError or RangeError before any I/O', async () => {
  for (const url of ['', 'http://127.0.0.1:1', 'redis://127.0.0.1:99999', 'not a url', 'redis://127.0.0.1:1?connect_timeout=soon']) {
    assert.throws(() => new Client(url), TypeError, url);
  }
  for (const urls of [undefined, null, 42, [], [1], {}]) {
    assert.throws(() => new Client(urls), TypeError, String(urls));
  }
  // A client of a server that is not there: a bad argument that reached the
  // network would be a LockConnectionError instead.
  const nowhere = new Client(`redis://127.0.0.1:${await freePort()}/0`);
  const cases = [
    [() => nowhere.acquire(), TypeError],
    [() => nowhere.acquire(42), TypeError],
    [() => nowhere.acquire(''), TypeError],
    [() => nowhere.acquire('x'.repeat(70000)), TypeError],
    [() => nowhere.acquire('k', 'soon'), TypeError],
    [() => nowhere.acquire('k', { ttl: '30s' }), TypeError],
    [() => nowhere.acquire('k', { ttl: 0 }), RangeError],
    [() => nowhere.acquire('k', { ttl: -5 }), RangeError],
    [() => nowhere.acquire('k', { ttl: 1.5 }), RangeError],
    [() => nowhere.acquire('k', { ttl: NaN }), RangeError],
    [() => nowhere.acquire('k', { ttl: Infinity }), RangeError],
    [() => nowhere.acquire('k', { ttl: 31 * 24 * 3600 * 1000 }), RangeError],
    [() => nowhere.acquire('k', { wait: NaN }), RangeError],
    [() => nowhere.acquire('k', { wait: '1s' }), TypeError],
    [() => nowhere.acquire('k', { signal: {} }), TypeError],
    [() => nowhere.acquire('k', { autoRenew: 'yes' }), TypeError],
    [() => nowhere.acquire('k', { token: '' }), TypeError],
    [() => nowhere.acquire('k', { token: 42 }), TypeError],
    [() => nowhere.acquire('k', { token: 'x'.repeat(70000) }), TypeError],
    [() => nowhere.tryAcquire(null), TypeError],
    [() => nowhere.using('k'), TypeError],
    [() => nowhere.using('k', { ttl: 0 }, async () => {}), RangeError],
    [() => nowhere.releaseToken('k'), TypeError],
    [() => nowhere.releaseToken('k', ''), TypeError],
  ];
  for (const [call, Class] of cases) {
    let pending;
    assert.doesNotThrow(() => {
      pending = call();
    }, `${call}: a Promise-returning method never throws`);
    assert.ok(pending instanceof Promise);
    const e = await pending.then(
      () => assert.fail(`${call} resolved`),
      (err) => err,
    );
    assert.ok(e instanceof Class, `${call}: ${e}`);
    assert.match(e.code, /^ERR_(INVALID_ARG_(TYPE|VALUE)|OUT_OF_RANGE)$/, `${call}: ${e.code}`);
  }
  // The 30-day limit says why, and what to do instead.
  for (const ttl of [31 * 24 * 3600 * 1000, Math.floor(Number.MAX_SAFE_INTEGER / 10)]) {
    await assert.rejects(nowhere.acquire('k', { ttl }), (e) => {
      assert.ok(e instanceof RangeError);
      assert.match(e.message, /from 1 to 2592000000 \(30 days: a longer one is most likely a unit mistake; .*autoRenew or extend\), got \d+$/);
      return true;
    });
  }
  const lock = await client.acquire(keyFor());
  await assert.rejects(lock.extend(0), RangeError);
  await assert.rejects(lock.extend(31 * 24 * 3600 * 1000), /30 days/);
  await assert.rejects(lock.extend('1s'), TypeError);
  assert.equal(lock.lost, false);
  await lock.release();
  assert.throws(() => new Lock(), TypeError);
});

test('errors are exported with their hierarchy', () => {
  const names = ['LockTimeoutError', 'LockNotOwnedError', 'LockWrongTypeError', 'LockQuorumError', 'LockConnectionError', 'LockServerError'];
  for (const name of names) {
    assert.ok(redislock[name].prototype instanceof LockError, name);
    assert.equal(new redislock[name]('x').name, name);
  }
  assert.ok(redislock.LockUnconfirmedError.prototype instanceof LockNotOwnedError);
  assert.ok(LockError.prototype instanceof Error);
});
