'use strict';
// make demo: a Node.js worker (the addon in bindings/node, built by
// `node bindings/node/build.js`). Once, then until the deadline: take the
// lock, increment the counter non-atomically (GET, then SET, on a
// connection of its own), release. Prints "fence value acquired_ns
// release_ns" per acquisition: the counter as read, CLOCK_MONOTONIC
// (process.hrtime) after the acquisition and before the release. With
// LIMIT, a permit of the semaphore `demo:pool` of LIMIT instead, counted
// with INCR `demo:pool:done`, held 1 ms, the value reported as 0.
//
//   node worker.js REDIS_PORT SECONDS [LIMIT]

const net = require('node:net');
const path = require('node:path');

// make dist-check: the installed package (NODE_PATH) instead.
const { Client } = require(
  process.env.REDISLOCK_DEMO_INSTALLED ? 'redislock' : path.join(__dirname, '..', '..', 'bindings', 'node'),
);

/**
 * The counter's connection: one command at a time, in RESP, with no client
 * library (the demo installs nothing from npm). Answers are integers, bulk
 * strings (null when absent) or simple strings.
 */
function connect(port) {
  const socket = net.connect(port, '127.0.0.1');
  let buf = Buffer.alloc(0);
  let pending = null;
  socket.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    const end = buf.indexOf('\r\n');
    if (end < 0 || pending === null) return;
    const head = buf.subarray(0, end).toString();
    let value;
    let used = end + 2;
    if (head[0] === '$') {
      const n = Number(head.slice(1));
      if (n >= 0) {
        if (buf.length < used + n + 2) return;
        value = buf.subarray(used, used + n).toString();
        used += n + 2;
      } else value = null;
    } else if (head[0] === '-') value = new Error(head.slice(1));
    else value = head[0] === ':' ? Number(head.slice(1)) : head.slice(1);
    buf = buf.subarray(used);
    const { resolve, reject } = pending;
    pending = null;
    if (value instanceof Error) reject(value);
    else resolve(value);
  });
  const ready = new Promise((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return {
    async call(...args) {
      await ready;
      return new Promise((resolve, reject) => {
        pending = { resolve, reject };
        socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`);
      });
    },
    close: () => socket.end(),
  };
}

async function main() {
  const [port, seconds, limitArg] = process.argv.slice(2);
  const limit = limitArg ? Number(limitArg) : 0;
  const client = new Client(`redis://127.0.0.1:${port}`);
  const raw = connect(Number(port));
  const now = () => process.hrtime.bigint();
  const finish = now() + BigInt(Math.round(Number(seconds) * 1e9));
  // A TTL and a wait no pause of a busy machine comes near.
  const opts = { ttl: 30000, wait: 30000 };
  const out = [];
  for (;;) {
    const lock = limit ? await client.acquireSemaphore('demo:pool', { ...opts, limit }) : await client.acquire('demo:lock', opts);
    let line;
    try {
      const acquired = now();
      let value = 0;
      if (limit) {
        await raw.call('INCR', 'demo:pool:done');
        await new Promise((resolve) => setTimeout(resolve, 1));
      } else {
        value = Number((await raw.call('GET', 'demo:counter')) || 0);
        await raw.call('SET', 'demo:counter', value + 1);
      }
      line = `${await lock.drawFence()} ${value} ${acquired} ${now()}`;
    } finally {
      await lock.release();
    }
    out.push(line);
    if (now() >= finish) break;
  }
  raw.close();
  process.stdout.write(out.join('\n') + '\n');
}

main().catch((e) => {
  process.stderr.write(`node worker: ${(e && e.stack) || e}\n`);
  process.exit(1);
});
