'use strict';
// The package as an application receives it, through package.json's
// "exports": `import` gets index.mjs (the same objects as require gives:
// one index.js, no second copy of the classes), `require` gets index.js;
// nothing else is reachable but package.json. Its declarations resolve for
// both (tsc with module node16: an .mts and a .cts file), need no
// @types/node (a program with only the es2022 lib, and one with the DOM's),
// and examples/node/example.ts, compiled, runs against a server.

const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, before, after } = require('node:test');

const { ROOT, RedisServer, keyFor, nodeTool } = require('./helper');

const PKG = path.resolve(__dirname, '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-module-'));
let server;

before(async () => {
  server = await RedisServer.start();
});

after(() => {
  server?.destroy();
  fs.rmSync(work, { recursive: true, force: true });
});

/** A scratch application whose node_modules/redislock is this package (a link, as npm link makes). */
function app(name, files) {
  const dir = path.join(work, name);
  fs.mkdirSync(path.join(dir, 'node_modules'), { recursive: true });
  fs.symlinkSync(PKG, path.join(dir, 'node_modules', 'redislock'), 'dir');
  for (const [file, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, file), text);
  return dir;
}

function run(cmd, args, cwd) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: 120000, encoding: 'utf8' }, (err, stdout, stderr) =>
      err ? reject(new Error(`${cmd} ${args.join(' ')} (in ${cwd}): ${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout),
    );
  });
}

const lastJson = (out) => JSON.parse(out.trim().split('\n').pop());

test('import gets index.mjs, require gets index.js: the same objects, every export in both', async () => {
  const key = keyFor('esm');
  const dir = app('runtime', {
    'esm.mjs': `
      import redislock, { Client, LockError, LockTimeoutError, eventLoop } from 'redislock';
      import * as namespace from 'redislock';
      import { createRequire } from 'node:module';
      const require = createRequire(import.meta.url);
      const cjs = require('redislock');
      const names = Object.keys(namespace).filter((n) => n !== 'default').sort();
      const client = new Client(${JSON.stringify(server.url)});
      const lock = await client.acquire(${JSON.stringify(key)}, { fenced: true });
      const again = await client.acquire(${JSON.stringify(key)}, { wait: 0 }).catch((e) => e);
      await lock.release();
      await client.close();
      console.log(JSON.stringify({
        sameClasses: Client === cjs.Client && LockError === cjs.LockError && redislock === cjs,
        names,
        cjsNames: Object.keys(cjs).sort(),
        fence: typeof lock.fence,
        caught: again instanceof LockTimeoutError && again instanceof cjs.LockTimeoutError && again.code,
        loop: eventLoop(),
      }));
    `,
    'cjs.cjs': `
      const redislock = require('redislock');
      let deep;
      try {
        require('redislock/index.js');
        deep = 'reachable';
      } catch (e) {
        deep = e.code;
      }
      console.log(JSON.stringify({
        client: typeof redislock.Client,
        version: require('redislock/package.json').version,
        deep,
        resolved: require.resolve('redislock'),
      }));
    `,
  });
  const esm = lastJson(await run(process.execPath, ['esm.mjs'], dir));
  assert.equal(esm.sameClasses, true, 'one copy of index.js behind both');
  assert.deepEqual(esm.names, esm.cjsNames, 'index.mjs re-exports every export of index.js');
  assert.equal(esm.fence, 'number');
  assert.equal(esm.caught, 'ERR_LOCK_NOT_ACQUIRED');
  assert.equal(esm.loop, 'libuv');
  const cjs = lastJson(await run(process.execPath, ['cjs.cjs'], dir));
  assert.deepEqual(cjs, {
    client: 'function',
    version: JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8')).version,
    deep: 'ERR_PACKAGE_PATH_NOT_EXPORTED',
    resolved: path.join(PKG, 'index.js'),
  });
});

test('the package ships what its exports map names', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
  const targets = [];
  const walk = (v) => (typeof v === 'string' ? targets.push(v) : Object.values(v).forEach(walk));
  walk(pkg.exports);
  for (const t of targets) {
    assert.ok(fs.existsSync(path.join(PKG, t)), `${t} exists`);
    assert.ok(t === './package.json' || pkg.files.includes(t.slice(2)), `${t} is in "files"`);
  }
  assert.ok(pkg.files.includes('index.d.ts') && pkg.exports['.'].require.types === './index.d.ts');
});

/** tsc of `dir` (its tsconfig.json); its output, or the error with it. */
async function tsc(dir) {
  const bin = path.join(nodeTool('typescript'), 'bin', 'tsc');
  return run(process.execPath, [bin, '-p', dir], dir);
}

const STRICT = {
  strict: true,
  noEmit: true,
  target: 'es2022',
  module: 'node16',
  moduleResolution: 'node16',
  skipLibCheck: false,
  noUnusedLocals: true,
};

// Both module kinds in one program: an .mts resolves `import` (index.d.mts),
// a .cts `require` (index.d.ts); a type only one of them declared fails.
const ESM_USE = `
  import redislock, { Client, eventLoop, type FencedLock, type Lock, type LockErrorCode } from 'redislock';
  export async function esm(url: string): Promise<number> {
    await using client = new Client(url);
    const loop: 'libuv' | 'tokio' = eventLoop();
    const lock: FencedLock = await client.acquire('k', { fenced: true });
    const plain: Lock = await redislock.Client.prototype.acquire.call(client, 'j');
    const undrawn: number | undefined = plain.fence;
    const code: LockErrorCode = new redislock.LockError('x').code;
    void [loop, undrawn, code];
    return lock.fence;
  }
`;
const CJS_USE = `
  import redislock = require('redislock');
  export async function cjs(url: string): Promise<string> {
    const client = new redislock.Client(url);
    const lock = await client.tryAcquireWrite('k');
    const stats: redislock.ClientStats = client.stats();
    await client.close();
    return \`\${lock?.token.length} \${stats.acquiredLocks} \${redislock.eventLoop()}\`;
  }
`;

test('the declarations resolve for import and for require (module node16), with @types/node', async () => {
  const typeRoots = path.dirname(nodeTool('@types/node'));
  const dir = app('types-node', {
    'tsconfig.json': JSON.stringify({
      compilerOptions: { ...STRICT, lib: ['es2022', 'esnext.disposable'], types: ['node'], typeRoots: [typeRoots] },
      files: ['esm.mts', 'cjs.cts', 'node.cts'],
    }),
    'esm.mts': ESM_USE,
    'cjs.cts': CJS_USE,
    // With Node's types, a token is a Buffer and a signal Node's AbortSignal.
    'node.cts': `
      import { Client } from 'redislock';
      export async function node(client: Client): Promise<string> {
        const lock = await client.acquire('k');
        lock.signal.throwIfAborted();
        return lock.token.toString('hex');
      }
    `,
  });
  await tsc(dir);
});

test('the declarations need no @types/node: es2022 alone, and with the DOM', async () => {
  const use = `
    import { Client, type Lock } from 'redislock';
    export async function plain(client: Client): Promise<number> {
      const lock: Lock = await client.acquire('k', { signal: null });
      const bytes: Uint8Array = lock.token;
      lock.onLost((reason) => void reason.code);
      if (lock.signal.aborted) return -1;
      lock.forget();
      return bytes.length + (lock.fence ?? (await lock.drawFence()));
    }
  `;
  const bare = app('types-bare', {
    'tsconfig.json': JSON.stringify({ compilerOptions: { ...STRICT, lib: ['es2022'], types: [] }, files: ['use.cts'] }),
    'use.cts': use,
  });
  await tsc(bare);
  const dom = app('types-dom', {
    'tsconfig.json': JSON.stringify({ compilerOptions: { ...STRICT, lib: ['es2022', 'dom'], types: [] }, files: ['use.cts', 'dom.cts'] }),
    'use.cts': use,
    // The DOM's AbortSignal is the one taken and given.
    'dom.cts': `
      import { Client } from 'redislock';
      export async function dom(client: Client): Promise<AbortSignal> {
        const lock = await client.acquire('k', { signal: AbortSignal.timeout(10) });
        return lock.signal;
      }
    `,
  });
  await tsc(dom);
});

test('examples/node/example.ts, compiled, runs against a server', { timeout: 300000 }, async () => {
  const typeRoots = path.dirname(nodeTool('@types/node'));
  const dir = app('example', {
    'tsconfig.json': JSON.stringify({
      compilerOptions: {
        strict: true,
        target: 'es2022',
        module: 'node16',
        moduleResolution: 'node16',
        lib: ['es2022', 'esnext.disposable'],
        types: ['node'],
        typeRoots: [typeRoots],
        outDir: 'out',
        rootDir: '.',
      },
      files: ['example.ts'],
    }),
  });
  fs.copyFileSync(path.join(ROOT, 'examples/node/example.ts'), path.join(dir, 'example.ts'));
  await tsc(dir);
  const out = await run(process.execPath, [path.join(dir, 'out', 'example.js'), server.url], dir);
  for (const line of [
    /^client: 127\.0\.0\.1:\d+ calls run on libuv$/m,
    /^cache rebuilt: true$/m,
    /^orders exported in steps: 5$/m,
    /^handed-off job released: true$/m,
    /^prices readable now: true$/m,
    /^reindexed batches: 3$/m,
    /^upload released by token: true$/m,
    /^reports: nightly, invoices$/m,
    /^acquired \d+ times, waited p99 [\d.]+ ms, 0 held now$/m,
  ]) {
    assert.match(out, line);
  }
});
