'use strict';
// One contending process of bench.js's fairness figure (measures nothing
// alone): node worker.js KIND PORT KEY COUNTER_KEY POLL_MS HOLD_MS
//
// Connects, warms up on a key of its own, prints "ready", then reads
// "START END" (process.hrtime.bigint() nanoseconds: CLOCK_MONOTONIC, one
// clock for every process of the machine) from stdin. From START it loops
// until END: acquire KEY (waiting), GET the counter, hold HOLD_MS (a timer),
// SET the counter + 1 (non-atomic: a second holder would lose an update),
// release. A rejected acquire or release is counted by its error's name and
// message, and the loop goes on. Prints one JSON line: the stamps (µs from
// START) of every acquire call, acquisition and release call, the errors,
// and the process CPU (user + system, every thread) from START to END.

const { open, ioredis, sleep } = require('./impls');

const [kind, portArg, key, counterKey, pollArg, holdArg] = process.argv.slice(2);
const port = Number(portArg);
const holdMs = Number(holdArg);
const now = () => process.hrtime.bigint();

function errorKind(e) {
  const message = String(e && e.message).slice(0, 100);
  return `${(e && e.name) || 'Error'}: ${message}`;
}

async function main() {
  const lock = await open(kind, port, { pollMs: Number(pollArg) });
  const r = await ioredis(port);
  const warm = `bench:node:warm:${process.pid}`;
  for (let i = 0; i < 3; i++) await lock.unlock(await lock.lock(warm));
  process.stdout.write('ready\n');

  const line = await new Promise((resolve) => {
    let buf = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf.split('\n')[0]);
    });
  });
  const [start, end] = line.trim().split(/\s+/).map(BigInt);
  const us = (t) => Number(t - start) / 1000;
  const wait = Number(start - now()) / 1e6;
  if (wait > 0) await sleep(wait);
  while (now() < start); // the last fraction of a millisecond

  const out = { call: [], acq: [], rel: [], errors: {}, release_errors: {}, total: 0, cpu_us: 0 };
  const cpu0 = process.cpuUsage();
  const count = (map, e) => {
    const k = errorKind(e);
    map[k] = (map[k] || 0) + 1;
  };
  while (now() < end) {
    const tCall = now();
    let h;
    try {
      h = await lock.lock(key);
    } catch (e) {
      count(out.errors, e);
      continue;
    }
    const tAcq = now();
    const v = Number(await r.get(counterKey)) || 0;
    await sleep(holdMs);
    await r.set(counterKey, String(v + 1));
    out.total += 1;
    const tRel = now();
    out.call.push(us(tCall));
    out.acq.push(us(tAcq));
    out.rel.push(us(tRel));
    try {
      await lock.unlock(h);
    } catch (e) {
      count(out.release_errors, e);
    }
  }
  const cpu = process.cpuUsage(cpu0);
  out.cpu_us = cpu.user + cpu.system;
  await lock.close();
  await r.quit();
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
}

main().catch((e) => {
  process.stderr.write(`worker ${kind}: ${(e && e.stack) || e}\n`);
  process.exit(1);
});
