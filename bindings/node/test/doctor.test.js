'use strict';
// client.doctor(): the core's checks, seen from Node.js (the checks
// themselves are tested in the Rust suite, tests/doctor.rs).

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');

const { Client, LockConnectionError, LockQuorumError } = require('..');
const { RedisServer, freePort } = require('./helper');

const CHECKS_OK = ['server', 'eviction', 'scripting', 'time', 'pubsub', 'clients', 'latency', 'lock-cycle'];

let server;

before(async () => {
  server = await RedisServer.start();
});

after(() => server.destroy());

/** The one finding of `check`, which must have `severity`. */
function one(report, check, severity) {
  const found = report.findings.filter((f) => f.check === check);
  assert.equal(found.length, 1, `one ${check} finding expected in:\n${report.text}`);
  assert.equal(found[0].severity, severity, `${check} in:\n${report.text}`);
  return found[0];
}

test('a default server is safe, with every check', async () => {
  const report = await new Client(server.url).doctor();
  assert.deepEqual(Object.keys(report).sort(), ['findings', 'safe', 'target', 'text', 'worst']);
  assert.equal(report.target, `127.0.0.1:${server.port}`);
  assert.equal(report.safe, true);
  assert.equal(report.worst, 'warning');
  for (const check of CHECKS_OK) one(report, check, 'ok');
  // The harness runs servers without persistence.
  const p = one(report, 'persistence', 'warning');
  assert.match(p.message, /persistence is off/);
  assert.match(p.fix, /appendonly yes/);
  for (const f of report.findings) {
    assert.deepEqual(Object.keys(f).sort(), ['check', 'fix', 'message', 'server', 'severity']);
    assert.ok(['ok', 'warning', 'unsafe'].includes(f.severity));
    for (const v of Object.values(f)) assert.equal(typeof v, 'string');
  }
  assert.ok(report.text.startsWith(`redislock doctor: ${report.target}\n`), report.text);
  assert.equal(report.text.split('\n').pop(), 'verdict: safe for locks, 1 warning');
  assert.deepEqual(await server.raw.call('KEYS', '*'), [], 'nothing is left on the server');
});

test('an eviction policy that can evict a lock is unsafe', async () => {
  // As `--maxmemory 100mb --maxmemory-policy allkeys-lru` on the command line.
  await server.raw.call('CONFIG', 'SET', 'maxmemory', '100mb');
  await server.raw.call('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru');
  try {
    const report = await new Client(server.url).doctor();
    assert.equal(report.safe, false);
    assert.equal(report.worst, 'unsafe');
    const e = one(report, 'eviction', 'unsafe');
    assert.match(e.message, /allkeys-lru/);
    assert.match(e.fix, /noeviction/);
    assert.match(report.text, /UNSAFE {2}eviction/);
    assert.match(report.text.split('\n').pop(), /^verdict: UNSAFE: 1 finding makes locks unsafe/);
  } finally {
    await server.raw.call('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    await server.raw.call('CONFIG', 'SET', 'maxmemory', '0');
  }
});

test('an unreachable server rejects with LockConnectionError', async () => {
  const url = `redis://127.0.0.1:${await freePort()}/0`;
  await assert.rejects(new Client(url).doctor(), (e) => {
    assert.ok(e instanceof LockConnectionError, String(e));
    assert.match(e.message, /127\.0\.0\.1/);
    return true;
  });
});

test('Redlock: a node down is a warning, a majority down rejects with LockQuorumError', async () => {
  const other = await RedisServer.start();
  try {
    const dead = `redis://127.0.0.1:${await freePort()}/0`;
    const report = await new Client([server.url, other.url, dead]).doctor();
    one(report, 'reach', 'warning');
    assert.match(one(report, 'redlock', 'ok').message, /^3 nodes, a majority of 2 needed/);
    one(report, 'lock-cycle', 'ok');
    assert.equal(report.safe, true);
    await assert.rejects(new Client([server.url, dead, dead]).doctor(), LockQuorumError);
  } finally {
    other.destroy();
  }
});

test('several at once on one client', async () => {
  const client = new Client(server.url);
  const reports = await Promise.all([client.doctor(), client.doctor(), client.doctor()]);
  for (const r of reports) one(r, 'lock-cycle', 'ok');
});
