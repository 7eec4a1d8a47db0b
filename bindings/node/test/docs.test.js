'use strict';
// docs/node.md's examples run as written: each `js` block in a process of
// its own, inside an async function, against a throwaway server (its
// redis://127.0.0.1:6379/0 is that server's URL), with `client`, `url` and
// stand-ins for what the examples leave to the reader (writeReport, step,
// store...); the server is emptied between blocks. Each `ts` block is
// type-checked the same way (tsc, strict, with @types/node).

const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, before, after } = require('node:test');

const { ROOT, RedisServer, nodeTool } = require('./helper');

const PKG = path.resolve(__dirname, '..');
const DOC = path.join(ROOT, 'docs', 'node.md');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-docs-'));
fs.mkdirSync(path.join(work, 'node_modules'));
fs.symlinkSync(PKG, path.join(work, 'node_modules', 'redislock'), 'dir');
let server;

before(async () => {
  server = await RedisServer.start();
});

after(() => {
  server?.destroy();
  fs.rmSync(work, { recursive: true, force: true });
});

/** The fenced blocks of `lang` in the document: { line, code }, dedented as in a list item.
 * The words after the language (tests/docs/examples.py's markers: `fragment`, `no-run: ...`)
 * are that runner's: this test runs every js block with its own prelude and type-checks every
 * ts block. */
function blocks(lang) {
  const lines = fs.readFileSync(DOC, 'utf8').split('\n');
  const found = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)(?:\s.*)?$/.exec(lines[i]);
    if (!open) continue;
    const indent = open[1].length;
    const start = i;
    const body = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i].slice(indent));
    if (open[2] === lang) found.push({ line: start + 1, code: body.join('\n') });
  }
  return found;
}

/** What every js block may use: the client and the reader's own functions. */
const PRELUDE = `
  const { Client } = require('redislock');
  const url = process.env.URL;
  const client = new Client(url);
  const shutdown = new AbortController();
  const writeReport = async ({ fence }) => {
    if (!Number.isSafeInteger(fence)) throw new Error('writeReport: no fence');
    return fence;
  };
  let work = 3;
  const moreWork = () => work-- > 0;
  const step = async (signal) => {
    signal?.throwIfAborted();
    await new Promise((r) => setTimeout(r, 5));
  };
  const log = { warn: (m) => console.error(m) };
  const batches = [1, 2, 3];
  const reindex = async (batch, { signal }) => signal.throwIfAborted();
  const store = { write: async () => {} };
`;

const jsBlocks = blocks('js');

test('the document has the examples this test runs', () => {
  assert.ok(jsBlocks.length >= 7, `${jsBlocks.length} js blocks`);
  assert.ok(blocks('ts').length >= 2);
});

for (const { line, code } of jsBlocks) {
  test(`docs/node.md:${line}: the js example runs`, async () => {
    await server.raw.call('FLUSHALL');
    const source = code.replaceAll('redis://127.0.0.1:6379/0', server.url);
    const file = path.join(work, `block-${line}.js`);
    fs.writeFileSync(file, `${PRELUDE}\n(async () => {\n${source}\n})().then(() => console.log('ran'), (e) => { console.error(e); process.exitCode = 1; });\n`);
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, [file], { cwd: work, env: { ...process.env, URL: server.url }, timeout: 60000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`docs/node.md:${line}: ${err.message}\n${stderr}`)) : resolve(stdout),
      );
    });
    assert.equal(out.trim().split('\n').pop(), 'ran');
  });
}

test('docs/node.md: the ts examples type-check', async () => {
  const typeRoots = path.dirname(nodeTool('@types/node'));
  const files = [];
  for (const { line, code } of blocks('ts')) {
    const name = `block-${line}.mts`;
    // Each block is a module of its own; what it leaves to the reader is declared.
    const declared = [];
    if (!/^import .* from 'redislock';$/m.test(code)) declared.push("import { Client } from 'redislock';");
    if (!/\bclient\s*=/.test(code)) declared.push('declare const client: Client;');
    if (!/\burl\s*=/.test(code)) declared.push('declare const url: string;');
    if (!/\bstore\s*=/.test(code)) declared.push('declare const store: { write(name: string, body: string, fence: number): Promise<void> };');
    fs.writeFileSync(path.join(work, name), `${declared.join('\n')}\n${code}\nexport {};\n`);
    files.push(name);
  }
  fs.writeFileSync(
    path.join(work, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: 'es2022',
        module: 'node16',
        moduleResolution: 'node16',
        lib: ['es2022', 'esnext.disposable'],
        types: ['node'],
        typeRoots: [typeRoots],
      },
      files,
    }),
  );
  await new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(nodeTool('typescript'), 'bin', 'tsc'), '-p', work], { cwd: work, timeout: 120000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`tsc: ${stdout}${stderr}`)) : resolve(),
    );
  });
});
