'use strict';
// A server that lies never talks the library into a grant (issue 51).
//
// tests/fake/fake_redis.py --all serves, on one port per kind, a fake Redis
// that answers the commands deciding a grant (SET ... NX ... GET and the
// acquire scripts) with a broken reply of that kind. For every kind, all at
// once and each with a client of its own (command_timeout=1s,
// connect_timeout=1s): a tryAcquire, then an acquire that waits 300 ms.
// Each must not crash the process, never resolve a held lock, reject with
// the expected error (LockConnectionError for every kind but error_reply,
// LockServerError there; a plain "not acquired" only where the server's
// reply did say "held", as EXPECTED says) and settle within
// command_timeout + connect_timeout + wait + 1.5 s; all kinds together grow
// the RSS by less than 64 MB.
//
// The fake server uses no real server: the Valkey pass of make test
// (REDIS_SERVER=...valkey-server) would only repeat these tests, so they
// are skipped there.

const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { test, before, after } = require('node:test');

const { Client, LockConnectionError, LockServerError, LockTimeoutError } = require('..');
const { ROOT } = require('./helper');

const FAKE = path.join(ROOT, 'tests', 'fake', 'fake_redis.py');
const COMMAND_TIMEOUT = 1000;
const CONNECT_TIMEOUT = 1000;
const WAIT = 300;
const SLACK = 1500;
const RSS_GROWTH = 64 * 1024 * 1024;
const SKIP = (process.env.REDIS_SERVER || '').includes('valkey')
  ? 'the fake server uses no real server: not repeated on Valkey'
  : false;

// What each call may end in, per kind: [tryAcquire, acquire({ wait })].
// connection (LockConnectionError), server (LockServerError), not_acquired
// (tryAcquire resolved null: the lock is held), timeout (the wait ran out:
// LockTimeoutError). "granted" is never right.
const CONNECTION = [['connection'], ['connection']];
const EXPECTED = {
  negative_bulk: CONNECTION,
  negative_array: CONNECTION,
  // The first reply on a connection is a true "held"; the nil sent 5 ms
  // after it must never be read as the next command's reply. Found at once
  // (when both were read together) it is a protocol error.
  reply_twice: [['not_acquired', 'connection'], ['timeout', 'connection']],
  // A frame before any command is a protocol error; the replies after it
  // say "held".
  unsolicited: [['connection'], ['timeout', 'connection']],
  dribble: CONNECTION,
  silent: CONNECTION,
  random_bytes: CONNECTION,
  truncated: CONNECTION,
  huge_bulk: CONNECTION,
  huge_array: CONNECTION,
  deep_nesting: CONNECTION,
  resp3: CONNECTION,
  int_overflow: CONNECTION,
  int_for_array: CONNECTION,
  array_for_int: CONNECTION,
  wrong_string: CONNECTION,
  trailing_garbage: CONNECTION,
  error_reply: [['server'], ['server']],
  bulk_too_long: CONNECTION,
  close_at_once: CONNECTION,
  empty_array: CONNECTION,
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function url(port) {
  return `redis://127.0.0.1:${port}/0?command_timeout=${COMMAND_TIMEOUT}ms&connect_timeout=${CONNECT_TIMEOUT}ms`;
}

function outcome(e) {
  if (e instanceof LockConnectionError) return 'connection';
  if (e instanceof LockServerError) return 'server';
  if (e instanceof LockTimeoutError) return 'timeout';
  return e && e.constructor ? e.constructor.name : String(e);
}

/** [{ call, out, message, elapsed, wait }] for a tryAcquire, then a waiting acquire. */
async function runKind(kind, port) {
  const client = new Client(url(port));
  const calls = [];
  for (const [n, wait] of [0, WAIT].entries()) {
    const name = `k:${kind}:${n}`;
    const t = performance.now();
    let out;
    let message = '';
    try {
      const lock = wait === 0 ? await client.tryAcquire(name, { ttl: 10000 }) : await client.acquire(name, { ttl: 10000, wait });
      out = lock === null ? 'not_acquired' : 'granted';
      if (lock !== null) await lock.release().catch(() => {});
    } catch (e) {
      out = outcome(e);
      message = e && e.message;
    }
    const elapsed = performance.now() - t;
    calls.push({ call: wait === 0 ? 'tryAcquire' : `acquire({ wait: ${WAIT} })`, out, message, elapsed, wait });
    await sleep(50); // a leftover frame is there when the next call is sent
  }
  return calls;
}

let fake;
let results;
let rssGrowth;

before(async () => {
  if (SKIP) return;
  // --lifetime: it exits by itself then, which ends any call still hung on it.
  fake = spawn('python3', [FAKE, '--all', '--lifetime', '60'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ports = {};
  for await (const line of readline.createInterface({ input: fake.stdout })) {
    if (line.trim() === 'ready') break;
    const [kind, port] = line.split(' ');
    ports[kind] = Number(port);
  }
  const before = process.memoryUsage().rss;
  const kinds = Object.keys(ports);
  const got = await Promise.all(kinds.map((k) => runKind(k, ports[k])));
  results = Object.fromEntries(kinds.map((k, i) => [k, got[i]]));
  rssGrowth = process.memoryUsage().rss - before;
});

after(() => {
  if (fake && fake.exitCode === null) fake.kill('SIGKILL');
});

test('every kind the fake server has is in the table', { skip: SKIP }, () => {
  const listed = execFileSync('python3', [FAKE, '--list'], { encoding: 'utf8' }).split(/\s+/).filter(Boolean);
  assert.deepEqual(listed, Object.keys(EXPECTED), 'fake_redis.py --list and EXPECTED differ: give each new kind its expected outcome');
});

for (const kind of Object.keys(EXPECTED)) {
  test(`a broken reply is never a grant: ${kind}`, { skip: SKIP }, () => {
    const calls = results[kind];
    assert.ok(calls, `${kind} did not finish`);
    const failures = [];
    for (const { call, out, message, elapsed, wait } of calls) {
      const allowed = EXPECTED[kind][wait === 0 ? 0 : 1];
      if (out === 'granted') failures.push(`${kind} ${call}: GRANTED a lock the server never gave`);
      else if (!allowed.includes(out)) failures.push(`${kind} ${call}: ${out} (expected ${allowed.join(' or ')}): ${message}`);
      const bound = COMMAND_TIMEOUT + CONNECT_TIMEOUT + wait + SLACK;
      if (elapsed > bound) failures.push(`${kind} ${call}: took ${elapsed.toFixed(0)} ms (bound ${bound} ms)`);
    }
    assert.equal(failures.length, 0, failures.join('; '));
  });
}

test('no unbounded memory', { skip: SKIP }, () => {
  assert.ok(rssGrowth < RSS_GROWTH, `RSS grew by ${(rssGrowth / 1048576).toFixed(0)} MB over every kind (bound 64 MB)`);
});
