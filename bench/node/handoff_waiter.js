'use strict';
// The Node.js waiter of bench.js's hand-off between processes (measures
// nothing alone; bench/c/handoff_waiter.c is the same in C):
//
//   node handoff_waiter.js PORT KEY TTL_MS WAIT_MS
//
// Makes a redislock Client (bindings/node) of 127.0.0.1:PORT, warms up on a
// key of its own (waiting acquires and releases), prints "ready", then for
// every line "wait" read from stdin calls client.acquire(KEY, { ttl: TTL_MS,
// wait: WAIT_MS }), stamps process.hrtime.bigint() (CLOCK_MONOTONIC, ns) as
// soon as the Promise resolves, releases the lock and prints the stamp (or
// "error MESSAGE"). "quit" or the end of stdin ends it.

const path = require('node:path');
const readline = require('node:readline');

const redislock = require(path.resolve(__dirname, '..', '..', 'bindings', 'node'));

const [portArg, key, ttlArg, waitArg] = process.argv.slice(2);
const ttl = Number(ttlArg);
const wait = Number(waitArg);
if (!portArg || !key || !(ttl > 0) || !(wait > 0)) {
  process.stderr.write('usage: node handoff_waiter.js PORT KEY TTL_MS WAIT_MS\n');
  process.exit(2);
}

async function main() {
  const client = new redislock.Client(`redis://127.0.0.1:${portArg}`);
  const warm = `bench:node:xwarm:${process.pid}`;
  for (let i = 0; i < 20; i++) await (await client.acquire(warm, { ttl, wait })).release();
  process.stdout.write('ready\n');

  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const cmd = line.trim();
    if (cmd === 'quit') break;
    if (cmd !== 'wait') continue;
    let out;
    try {
      const lock = await client.acquire(key, { ttl, wait });
      const got = process.hrtime.bigint();
      await lock.release();
      out = String(got);
    } catch (e) {
      out = `error ${String((e && e.message) || e).replace(/\s+/g, ' ').slice(0, 200)}`;
    }
    process.stdout.write(`${out}\n`);
  }
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`handoff_waiter.js: ${(e && e.stack) || e}\n`);
  process.exit(1);
});
