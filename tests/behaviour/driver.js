'use strict';
// The behaviour table's scenarios in Node.js (tests/behaviour/run.py runs
// it and says what each line means; driver.py is the reference).

const path = require('node:path');
const readline = require('node:readline');
const { setTimeout: sleep } = require('node:timers/promises');
const { Client, LockError, LockNotOwnedError } = require(path.join(__dirname, '../../bindings/node'));

const URL = process.env.BEHAVIOUR_URL;
const input = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function write(line) {
  // stdout is a pipe: written synchronously on Linux, nothing to flush.
  process.stdout.write(`${line}\n`);
}

async function ask(question) {
  write(`? ${question}`);
  const { value } = await input.next();
  return (value ?? '').trim();
}

async function pttl(key) {
  return Number(await ask(`pttl ${key}`));
}

/** The library's classes from its base down to e's, or e's class. */
function chain(e) {
  if (!(e instanceof LockError)) return e?.constructor?.name ?? String(e);
  const names = [];
  for (let p = Object.getPrototypeOf(e); p; p = Object.getPrototypeOf(p)) {
    names.push(p.constructor.name);
    if (p.constructor === LockError) break;
  }
  return names.reverse().join(' ⊃ ');
}

function say(id, value) {
  write(`${id}\t${value}`);
}

function now() {
  return performance.now() / 1000;
}

async function gone(key) {
  const deadline = now() + 10;
  while ((await pttl(key)) !== -2) {
    if (now() > deadline) throw new Error(`${key} still there after 10 s`);
    await sleep(50);
  }
}

const scenarios = [];
function scenario(id, fn) {
  scenarios.push([id, fn]);
}

scenario('ttl-default', async (client) => {
  const lock = await client.acquire('behaviour:ttl-default');
  const left = await pttl('behaviour:ttl-default');
  await lock.release();
  return `${Math.ceil(left / 1000)} s`;
});

scenario('ttl-unit', async (client) => {
  const lock = await client.acquire('behaviour:ttl-unit', { ttl: 2000 });
  const left = await pttl('behaviour:ttl-unit');
  await lock.release();
  return left > 1000 && left <= 2000 ? 'ms' : `PTTL ${left}`;
});

scenario('wait-default', async (client) => {
  await client.acquire('behaviour:wait-default', { ttl: 1000 });
  const started = now();
  const lock = await client.acquire('behaviour:wait-default');
  const waited = now() - started;
  await lock.release();
  return waited >= 0.5 ? 'waits' : `Lock after ${waited.toFixed(1)} s`;
});

scenario('try-held', async (client) => {
  const holder = await client.acquire('behaviour:try-held');
  const got = await client.tryAcquire('behaviour:try-held');
  await holder.release();
  return got;
});

scenario('wait-timeout', async (client) => {
  const holder = await client.acquire('behaviour:wait-timeout');
  try {
    await client.acquire('behaviour:wait-timeout', { wait: 200 });
    return 'acquired';
  } finally {
    await holder.release();
  }
});

scenario('release-expired', async (client) => {
  const lock = await client.acquire('behaviour:release-expired', { ttl: 200 });
  await gone('behaviour:release-expired');
  const other = await client.tryAcquire('behaviour:release-expired');
  try {
    await lock.release();
    return 'released';
  } finally {
    await other?.release();
  }
});

scenario('unconfirmed', async () => {
  const cut = new Client(process.env.BEHAVIOUR_CUTTER);
  const lock = await cut.acquire('behaviour:unconfirmed', { token: 'behaviour-unconfirmed' });
  await ask('arm behaviour-unconfirmed');
  try {
    await lock.release();
  } catch (e) {
    if (e instanceof LockNotOwnedError) return chain(e);
    if (e instanceof LockError) return `not caught as not-owned: ${chain(e)}`;
    throw e;
  }
  return 'released';
});

// The guide's read of the fence: `await lock.drawFence()` (lock.fence is
// undefined until a number was drawn).
scenario('fence-first', async (client) => {
  const lock = await client.acquire('behaviour:fence-first');
  const fence = await lock.drawFence();
  await lock.release();
  return Math.abs(fence - Date.now() * 1000) < 60e6 ? 'server µs' : fence;
});

scenario('fence-after-release', async (client) => {
  const lock = await client.acquire('behaviour:fence-after-release');
  await lock.release();
  return lock.drawFence();
});

scenario('fence-read-after-release', async (client) => {
  const lock = await client.acquire('behaviour:fence-read-after-release');
  const fence = await lock.drawFence();
  await lock.release();
  const again = await lock.drawFence();
  return again === fence ? 'same' : again;
});

scenario('token-after-release', async (client) => {
  const lock = await client.acquire('behaviour:token-after-release');
  const token = lock.token;
  await lock.release();
  return token.equals(lock.token) ? 'same' : lock.token;
});

scenario('name', async (client) => {
  const lock = await client.acquire('behaviour:name');
  const { name } = lock;
  await lock.release();
  return typeof name === 'object' ? name.constructor.name : typeof name;
});

scenario('scoped-renews', async (client) => {
  const left = await client.using('behaviour:scoped-renews', { ttl: 300 }, async () => {
    await sleep(900);
    return pttl('behaviour:scoped-renews');
  });
  return left > 0 ? 'renewed' : `PTTL ${left} at the end of the work`;
});

async function silent(open) {
  const started = now();
  try {
    await open().tryAcquire('behaviour:timeout');
    return 'acquired';
  } catch (e) {
    const took = now() - started;
    return took < 1.9 ? chain(e) : `after ${took.toFixed(1)} s: ${chain(e)}`;
  }
}

scenario('timeout-option', () =>
  silent(() => new Client(process.env.BEHAVIOUR_SILENT, { connectTimeout: 300, commandTimeout: 300 })),
);

scenario('timeout-url', () =>
  silent(() => new Client(`${process.env.BEHAVIOUR_SILENT}?connect_timeout=300ms&command_timeout=300ms`)),
);

scenario('timeout-both', () =>
  silent(
    () =>
      new Client(`${process.env.BEHAVIOUR_SILENT}?connect_timeout=5s&command_timeout=5s`, {
        connectTimeout: 300,
        commandTimeout: 300,
      }),
  ),
);

scenario('bad-ttl', async (client) => {
  try {
    await client.acquire('behaviour:bad-ttl', { ttl: 0 });
  } catch (e) {
    return e.constructor.name;
  }
  return 'acquired';
});

scenario('wrong-type', async (client) => {
  await client.tryAcquire('behaviour:wrong-type');
  return 'acquired';
});

scenario('no-server', async () => {
  await new Client(process.env.BEHAVIOUR_DEAD).tryAcquire('behaviour:no-server');
  return 'acquired';
});

(async () => {
  for (const [id, fn] of scenarios) {
    let value;
    try {
      value = String(await fn(new Client(URL)));
    } catch (e) {
      value = chain(e);
    }
    say(id, value);
  }
  process.exit(0);
})();
