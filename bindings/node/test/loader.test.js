'use strict';
// Where index.js finds the native addon: $REDISLOCK_NODE_ADDON, then the
// prebuilt addon of this platform next to index.js (the npm package of
// `make dist`), then redislock.node next to it (make node); never from the
// working directory. A truncated addon, another architecture's or another
// version's is an Error naming the file (not a crash), and the addon's
// version is package.json's. Each case runs in a child process, with a copy
// of index.js and package.json in a scratch directory.

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, after } = require('node:test');

const { ROOT } = require('./helper');

const PKG = path.join(ROOT, 'bindings/node');
const ADDON = path.join(PKG, 'redislock.node');
const VERSION = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8')).version;
const BUNDLED = `redislock.linux-${process.arch}-gnu.node`;

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-loader-'));
after(() => fs.rmSync(work, { recursive: true, force: true }));

let seq = 0;
/** A scratch package: index.js, package.json (of `version`) and `files` ({ name: bytes or a path to copy }). */
function makePackage(files, version = VERSION) {
  seq += 1;
  const dir = path.join(work, `pkg${seq}`);
  fs.mkdirSync(dir);
  fs.copyFileSync(path.join(PKG, 'index.js'), path.join(dir, 'index.js'));
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'redislock', version, main: 'index.js' }));
  for (const [name, content] of Object.entries(files)) {
    if (typeof content === 'string') fs.copyFileSync(content, path.join(dir, name));
    else fs.writeFileSync(path.join(dir, name), content);
  }
  return dir;
}

/**
 * require(dir) in a child process (from `cwd`, with `env` added, and no
 * REDISLOCK_NODE_ADDON unless given): { loaded: the redislock objects it
 * mapped } or { error: the message }, and how the child ended.
 */
function load(dir, { cwd = work, env = {} } = {}) {
  const script = `
    const fs = require('node:fs');
    const path = require('node:path');
    try {
      require(${JSON.stringify(dir)});
      const maps = fs.readFileSync('/proc/self/maps', 'utf8').split('\\n').map((l) => l.split(/\\s+/).slice(5).join(' '));
      console.log(JSON.stringify({ loaded: [...new Set(maps.filter((f) => /redislock/.test(path.basename(f))))] }));
    } catch (e) {
      console.log(JSON.stringify({ error: e.message }));
    }
  `;
  const childEnv = { ...process.env, ...env };
  if (!('REDISLOCK_NODE_ADDON' in env)) delete childEnv.REDISLOCK_NODE_ADDON;
  const r = spawnSync(process.execPath, ['-e', script], { cwd, env: childEnv, encoding: 'utf8' });
  assert.equal(r.signal, null, `the child was killed by ${r.signal} (stderr: ${r.stderr})`);
  assert.equal(r.status, 0, `the child exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

/** The first `n` bytes of the addon. */
const truncated = (n) => fs.readFileSync(ADDON).subarray(0, n);

/** The addon with its ELF e_machine (offset 18) set to `machine`. */
function otherArchitecture(machine) {
  const bytes = fs.readFileSync(ADDON);
  bytes.writeUInt16LE(machine, 18);
  return bytes;
}

test('the addon the suite loads reports the version of package.json', () => {
  const addon = require(ADDON);
  assert.equal(typeof addon.version, 'function', 'the addon exports version()');
  assert.equal(addon.version(), VERSION);
});

test('the prebuilt addon next to index.js comes before redislock.node', () => {
  const dir = makePackage({ [BUNDLED]: ADDON, 'redislock.node': truncated(4096) });
  assert.deepEqual(load(dir), { loaded: [path.join(dir, BUNDLED)] });
});

test('without the prebuilt addon, redislock.node next to index.js', () => {
  const dir = makePackage({ 'redislock.node': ADDON });
  assert.deepEqual(load(dir), { loaded: [path.join(dir, 'redislock.node')] });
});

test('the places are absolute: an addon in the working directory is never loaded', () => {
  const dir = makePackage({ 'redislock.node': ADDON });
  const cwd = makePackage({ [BUNDLED]: truncated(4096), 'redislock.node': truncated(4096) });
  assert.deepEqual(load(dir, { cwd }), { loaded: [path.join(dir, 'redislock.node')] });
});

test('$REDISLOCK_NODE_ADDON comes first (a relative path from the working directory), and alone', () => {
  const elsewhere = makePackage({ 'redislock-mine.node': ADDON });
  const dir = makePackage({ [BUNDLED]: truncated(4096), 'redislock.node': truncated(4096) });
  assert.deepEqual(load(dir, { cwd: elsewhere, env: { REDISLOCK_NODE_ADDON: 'redislock-mine.node' } }), { loaded: [path.join(elsewhere, 'redislock-mine.node')] });
  // Set but missing: an error naming it, not a fallback to the package's own.
  const good = makePackage({ [BUNDLED]: ADDON });
  const missing = path.join(work, 'missing.node');
  const { error } = load(good, { env: { REDISLOCK_NODE_ADDON: missing } });
  assert.match(error, /no native addon found/);
  assert.ok(error.includes(`${missing} ($REDISLOCK_NODE_ADDON): no such file`), error);
  assert.ok(!error.includes(BUNDLED), error);
});

test('no addon anywhere: the error names every place tried', () => {
  const dir = makePackage({});
  const { error } = load(dir);
  assert.ok(error.includes(`${path.join(dir, BUNDLED)} (the prebuilt addon for linux-${process.arch}-gnu): no such file`), error);
  assert.ok(error.includes(`${path.join(dir, 'redislock.node')} (built from source): no such file`), error);
  assert.match(error, /make node/);
});

test('a truncated addon is an Error naming the file, not a crash (dlopen would die of SIGBUS)', () => {
  const size = fs.statSync(ADDON).size;
  for (const n of [0, 10, 100, 5000, Math.floor(size / 2), size - 10]) {
    const dir = makePackage({ [BUNDLED]: truncated(n) });
    const file = path.join(dir, BUNDLED);
    const { error, loaded } = load(dir);
    assert.equal(loaded, undefined, `${n} bytes loaded`);
    assert.ok(error.startsWith(`redislock: cannot load the native addon ${file}`), error);
    assert.match(error, n < 16 ? /not an ELF file/ : /truncated/);
  }
});

test('another architecture is an Error naming the file and the architecture', () => {
  const dir = makePackage({ [BUNDLED]: otherArchitecture(183) });
  const { error } = load(dir);
  assert.ok(error.startsWith(`redislock: cannot load the native addon ${path.join(dir, BUNDLED)}`), error);
  assert.match(error, /another architecture \(ELF machine 183, arm64; this process is x64/);
});

test("what only dlopen finds (a missing dependency, no addon at all): its error, naming the file", () => {
  // A dependency that no system has: dlerror() names only the dependency.
  const bytes = fs.readFileSync(ADDON);
  const at = bytes.indexOf('\0libm.so.6\0');
  assert.ok(at > 0, 'the addon needs libm.so.6');
  bytes.write('libq', at + 1);
  let dir = makePackage({ [BUNDLED]: bytes });
  let { error } = load(dir);
  assert.ok(error.startsWith(`redislock: cannot load the native addon ${path.join(dir, BUNDLED)}`), error);
  assert.match(error, /\(the prebuilt addon for linux-\w+-gnu\): libq\.so\.6: cannot open shared object file/);
  // A shared object that is no Node.js addon.
  const libc = fs.readFileSync('/proc/self/maps', 'utf8').match(/\S*\/libc\.so\.6$/m)[0];
  dir = makePackage({ [BUNDLED]: libc });
  ({ error } = load(dir));
  assert.ok(error.startsWith(`redislock: cannot load the native addon ${path.join(dir, BUNDLED)}`), error);
  assert.match(error, /did not self-register/);
});

test('an addon of another version is refused, naming both versions', () => {
  const dir = makePackage({ [BUNDLED]: ADDON }, '9.9.9');
  const { error } = load(dir);
  assert.ok(error.startsWith(`redislock: cannot load the native addon ${path.join(dir, BUNDLED)}`), error);
  assert.ok(error.includes(`it is version ${VERSION}, and this package (${dir}) is 9.9.9`), error);
});
