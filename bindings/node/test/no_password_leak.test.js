'use strict';
// No object of the API shows a password, however it is rendered: clients
// made with credentials in their URLs (one server, Redlock, Cluster,
// Sentinel, a percent-escaped password, a sentinel_password parameter), the
// locks, semaphores and read-write locks they take from a server that
// demands the password, their doctor reports and stats, and the errors of
// bad URLs, of a wrong password and of a server that is not there. Each is
// rendered by util.inspect (also with its hidden parts and without its
// custom inspection), console.log and console.dir, util.format, JSON.stringify,
// String(), a template literal, Object.keys/entries and structuredClone.

const assert = require('node:assert/strict');
const { Console } = require('node:console');
const { Writable } = require('node:stream');
const { test, before, after } = require('node:test');
const util = require('node:util');

const { Client, LockConnectionError, LockQuorumError, LockServerError } = require('..');
const { RedisServer, keyFor, freePort } = require('./helper');

const PASSWORD = 's3cr3t-pa55';
const ESCAPED = 'p%40ss-9x'; // the URL's spelling of the password p@ss-9x
const SECRETS = [PASSWORD, ESCAPED, decodeURIComponent(ESCAPED), 'sentinel-s3cr3t'];

let servers;
/** A URL of server `i` with the user that has PASSWORD, or `escaped` the one with p@ss-9x. */
const urlOf = (i, escaped = false) =>
  `redis://${escaped ? 'user2' : 'user'}:${escaped ? ESCAPED : PASSWORD}@127.0.0.1:${servers[i].port}/0`;

before(async () => {
  servers = await Promise.all([0, 1, 2].map(() => RedisServer.start()));
  for (const s of servers) {
    await s.raw.call('ACL', 'SETUSER', 'user', 'on', `>${PASSWORD}`, '~*', '&*', '+@all');
    await s.raw.call('ACL', 'SETUSER', 'user2', 'on', `>${decodeURIComponent(ESCAPED)}`, '~*', '&*', '+@all');
    // Only those users: the default user may not run a command.
    await s.raw.call('ACL', 'SETUSER', 'default', 'off');
  }
});

after(() => servers.forEach((s) => s.destroy()));

/** What console.log and console.dir print for `args`, with no colours. */
function printed(...calls) {
  let out = '';
  const sink = new Writable({
    write(chunk, _enc, done) {
      out += chunk;
      done();
    },
  });
  const con = new Console({ stdout: sink, stderr: sink, colorMode: false });
  for (const [method, ...args] of calls) con[method](...args);
  return out;
}

/** Every rendering of `x`, by name; a rendering that throws is its error's text. */
function renderings(x) {
  const tried = (f) => {
    try {
      return String(f());
    } catch (e) {
      return `threw ${e && e.name}: ${e && e.message}`;
    }
  };
  const deep = { showHidden: true, depth: Infinity, getters: true };
  const out = {
    inspect: tried(() => util.inspect(x)),
    'inspect, hidden': tried(() => util.inspect(x, deep)),
    'inspect, not custom': tried(() => util.inspect(x, { ...deep, customInspect: false })),
    'console.log': tried(() => printed(['log', x], ['log', '%s %o %O %j', x, x, x, x], ['error', x])),
    'console.dir': tried(() => printed(['dir', x, { showHidden: true, depth: null }])),
    'util.format': tried(() => util.format('%s %d %i %o %O %j', x, x, x, x, x, x)),
    'JSON.stringify': tried(() => JSON.stringify(x)),
    'String()': tried(() => String(x)),
    'template literal': tried(() => `${x}`),
    'Object.keys': tried(() => util.inspect(Object.keys(x))),
    'Object.entries': tried(() => util.inspect(Object.entries(x), deep)),
    structuredClone: tried(() => util.inspect(structuredClone(x), deep)),
  };
  if (x instanceof Error) {
    out.message = x.message;
    out.stack = x.stack;
  }
  return out;
}

/** Fails when any rendering of `x` shows a password. */
function assertNoPassword(what, x) {
  for (const [how, text] of Object.entries(renderings(x))) {
    for (const secret of SECRETS) {
      assert.ok(!text.includes(secret), `${what}, ${how}, shows the password ${secret}:\n${text}`);
    }
  }
}

test('the redaction itself is checked: a password in a rendering is caught', () => {
  assert.throws(() => assertNoPassword('a URL', { url: urlOf(0) }), /shows the password s3cr3t-pa55/);
  assert.throws(() => assertNoPassword('an escaped URL', [urlOf(0, true)]), /shows the password p%40ss-9x/);
});

test('a URL shown in an argument error never shows its password, however it is spelt', () => {
  const forms = [
    `redis://${PASSWORD}@127.0.0.1/0`, // user info that is only a password
    `redis://user:${PASSWORD}@127.0.0.1/0?x=1`,
    `redis:user:${PASSWORD}@127.0.0.1://`, // a "scheme" that is no scheme
    `unix:///run/r.sock?pass=${PASSWORD}&db=1`,
    `redis://user:${ESCAPED}@h/0`,
  ];
  for (const url of forms) {
    let thrown;
    try {
      new Client({ url }); // eslint-disable-line no-new
    } catch (e) {
      thrown = e;
    }
    assert.ok(thrown instanceof TypeError, `${url}: ${thrown}`);
    assertNoPassword(`the error for { url: ${url} }`, thrown);
  }
});

test('clients of every kind of URL with a password', async () => {
  const dead = await freePort();
  const urls = {
    'one server': urlOf(0),
    'one server, escaped password': urlOf(0, true),
    Redlock: servers.map((_, i) => urlOf(i, i === 1)),
    Cluster: `redis+cluster://user:${PASSWORD}@127.0.0.1:${dead},127.0.0.1:${dead + 1}`,
    'Cluster, escaped password': `redis+cluster://user2:${ESCAPED}@127.0.0.1:${dead}`,
    Sentinel: `redis+sentinel://user:${PASSWORD}@127.0.0.1:${dead}/mymaster?sentinel_password=sentinel-s3cr3t`,
    'rediss://': `rediss://user:${PASSWORD}@127.0.0.1:${dead}/0`,
  };
  for (const [what, url] of Object.entries(urls)) {
    const client = new Client(url);
    assertNoPassword(`a client of ${what}`, client);
    assertNoPassword(`the addr of a client of ${what}`, client.addr);
    assertNoPassword(`the stats of a client of ${what}`, client.stats());
  }
});

test('locks, semaphores and read-write locks taken with the password, and the stats after', async () => {
  const client = new Client(urlOf(0));
  const escaped = new Client(urlOf(0, true));
  const redlock = new Client(servers.map((_, i) => urlOf(i, i === 1)));
  const held = {
    'a lock': await client.acquire(keyFor('leak')),
    'an unfenced lock': await client.acquire(keyFor('leak'), { fenced: false }),
    'a lock of the escaped password': await escaped.acquire(keyFor('leak'), { autoRenew: true }),
    'a Redlock lock': await redlock.acquire(keyFor('leak')),
    'a semaphore': await client.acquireSemaphore(keyFor('leak'), { limit: 2, permits: 2 }),
    'a read lock': await client.acquireRead(keyFor('leak')),
    'a write lock': await escaped.acquireWrite(keyFor('leak')),
  };
  for (const [what, lock] of Object.entries(held)) assertNoPassword(`${what}, held`, lock);
  for (const [what, lock] of Object.entries(held)) {
    await lock.release();
    assertNoPassword(`${what}, released`, lock);
  }
  for (const c of [client, escaped, redlock]) assertNoPassword('the stats after use', c.stats());
  await client.using(keyFor('leak'), async (signal, lock) => {
    assertNoPassword('the lock of using', lock);
    assertNoPassword("using's signal", signal);
  });
});

test('doctor reports of a server and of Redlock', async () => {
  const reports = {
    'one server': await new Client(urlOf(0)).doctor(),
    'one server, escaped password': await new Client(urlOf(0, true)).doctor(),
    Redlock: await new Client(servers.map((_, i) => urlOf(i, i === 1))).doctor(),
  };
  for (const [what, report] of Object.entries(reports)) {
    assert.equal(report.safe, true, report.text);
    assertNoPassword(`the doctor report of ${what}`, report);
    for (const finding of report.findings) assertNoPassword(`a doctor finding of ${what}`, finding);
  }
});

test('errors: bad URLs, a wrong password, a server that is not there', async () => {
  const dead = await freePort();
  const caught = {};
  const thrown = (what, f) => {
    try {
      f();
    } catch (e) {
      caught[what] = e;
      return;
    }
    assert.fail(`${what} did not throw`);
  };
  thrown('a port out of range', () => new Client(`redis://user:${PASSWORD}@127.0.0.1:99999/0`));
  thrown('a bad option', () => new Client(`redis://user:${PASSWORD}@127.0.0.1:${dead}/0?connect_timeout=soon`));
  thrown('an unknown scheme', () => new Client(`http://user:${PASSWORD}@127.0.0.1:${dead}/0`));
  thrown('an escaped password, bad db', () => new Client(`redis://user2:${ESCAPED}@127.0.0.1:${dead}/x`));
  thrown('a URL in an object', () => new Client({ url: urlOf(0) }));
  thrown('a Redlock array with a number', () => new Client([urlOf(0), urlOf(1, true), 42]));
  thrown('a Redlock array with a bad URL', () => new Client([urlOf(0), `redis://user:${PASSWORD}@127.0.0.1:99999/0`]));
  thrown('a sentinel_password and a bad port', () => new Client(`redis+sentinel://127.0.0.1:99999/m?sentinel_password=sentinel-s3cr3t`));

  const wrong = new Client(`redis://user:${PASSWORD}-not@127.0.0.1:${servers[0].port}/0`);
  caught['a wrong password'] = await wrong.acquire('k', { wait: 0 }).catch((e) => e);
  assert.ok(caught['a wrong password'] instanceof LockServerError, String(caught['a wrong password']));

  const unreachable = (url) => new Client(`${url}?connect_timeout=200ms`);
  const deadUrl = `redis://user:${PASSWORD}@127.0.0.1:${dead}/0`;
  caught['acquire of an unreachable server'] = await unreachable(deadUrl).acquire('k', { wait: 0 }).catch((e) => e);
  caught['tryAcquire of an unreachable server, escaped password'] = await unreachable(
    `redis://user2:${ESCAPED}@127.0.0.1:${dead}/0`,
  )
    .tryAcquire('k')
    .catch((e) => e);
  caught['releaseToken of an unreachable server'] = await unreachable(deadUrl).releaseToken('k', 'token').catch((e) => e);
  caught['doctor of an unreachable server'] = await unreachable(deadUrl).doctor().catch((e) => e);
  const deadRedlock = [deadUrl, `redis://user2:${ESCAPED}@127.0.0.1:${dead}/1`, `redis://user:${PASSWORD}@127.0.0.1:${dead}/2`];
  caught['acquire of an unreachable Redlock'] = await new Client(deadRedlock.map((u) => `${u}?connect_timeout=200ms`))
    .acquire('k', { wait: 0 })
    .catch((e) => e);
  assert.ok(caught['acquire of an unreachable server'] instanceof LockConnectionError);
  assert.ok(caught['doctor of an unreachable server'] instanceof LockConnectionError);
  assert.ok(caught['acquire of an unreachable Redlock'] instanceof LockQuorumError, String(caught['acquire of an unreachable Redlock']));

  for (const [what, e] of Object.entries(caught)) {
    assert.ok(e instanceof Error, `${what}: ${e}`);
    assertNoPassword(`the error of ${what}`, e);
  }
  // The errors still say where: the address, without the password.
  assert.match(caught['acquire of an unreachable server'].message, new RegExp(`127\\.0\\.0\\.1:${dead}`));
});
