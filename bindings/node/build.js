#!/usr/bin/env node
'use strict';
// Builds the native addon redislock.node next to this file: `cargo build
// --lib --features node` of the redislock crate, whose library is the
// addon. The crate is the repository around this directory (make node), or
// the copy `npm pack` put in ./crate (npm install of the package).
//
//   node build.js            release build (what `npm install` runs)
//   node build.js --debug    debug build (quicker to compile; the tests)
//   node build.js --pack     put the crate into ./crate (npm's prepack)
//   node build.js --unpack   remove ./crate again (npm's postpack)
//
// CARGO: the cargo to run; CARGO_TARGET_DIR: where it builds (default:
// the crate's target/node, apart from the C library's target/debug);
// REDISLOCK_BUILD_PROFILE=debug: a debug build from `npm install` too.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const here = __dirname;
const packed = path.join(here, 'crate');
const cargo = process.env.CARGO || 'cargo';

function fail(message) {
  console.error(`redislock: ${message}`);
  process.exit(1);
}

function run(cmd, args, options) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...options });
  if (r.error && r.error.code === 'ENOENT') {
    fail(
      `building the native addon needs a Rust toolchain (cargo 1.88 or newer), and \`${cmd}\` ` +
        'was not found: install one from https://rustup.rs (or set CARGO), then run `npm rebuild redislock`.',
    );
  }
  if (r.error) fail(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) fail(`\`${cmd} ${args.join(' ')}\` failed (exit ${r.status ?? r.signal}); see above.`);
}

/** The crate to build: ./crate in an installed package, else the repository. */
function crateRoot() {
  const candidates = [packed, path.resolve(here, '..', '..')];
  for (const dir of candidates) {
    const manifest = path.join(dir, 'Cargo.toml');
    if (fs.existsSync(manifest) && /^\s*"bindings\/node",?$|^members = \[.*"redislock-node"/m.test(fs.readFileSync(manifest, 'utf8'))) return dir;
  }
  return fail(`no redislock crate found (looked in ${candidates.join(' and ')})`);
}

function libraryName() {
  if (process.platform === 'win32') return 'redislock_node.dll';
  if (process.platform === 'darwin') return 'libredislock_node.dylib';
  return 'libredislock_node.so';
}

function build(debug) {
  const root = crateRoot();
  const target = process.env.CARGO_TARGET_DIR || path.join(root, 'target', 'node');
  const args = ['build', '--lib', '-p', 'redislock-node'];
  if (!debug) args.push('--release');
  if (root === packed) args.push('--locked');
  run(cargo, args, { cwd: root, env: { ...process.env, CARGO_TARGET_DIR: target } });
  const lib = path.join(target, debug ? 'debug' : 'release', libraryName());
  // Copied beside and renamed into place: a process that has the old addon
  // loaded keeps its mapping.
  const tmp = path.join(here, `.redislock.node.${process.pid}`);
  fs.copyFileSync(lib, tmp);
  fs.renameSync(tmp, path.join(here, 'redislock.node'));
  console.log(`redislock: built ${path.join(here, 'redislock.node')} (${debug ? 'debug' : 'release'})`);
}

function pack() {
  const root = path.resolve(here, '..', '..');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-pack-'));
  try {
    run(cargo, ['package', '--no-verify', '--allow-dirty', '--quiet', '--target-dir', work], { cwd: root });
    const crate = fs.readdirSync(path.join(work, 'package')).find((f) => f.endsWith('.crate'));
    if (!crate) fail(`cargo package made no .crate in ${work}/package`);
    fs.rmSync(packed, { recursive: true, force: true });
    fs.mkdirSync(packed);
    run('tar', ['-xzf', path.join(work, 'package', crate), '-C', packed, '--strip-components=1']);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

const arg = process.argv[2];
if (arg === '--pack') pack();
else if (arg === '--unpack') fs.rmSync(packed, { recursive: true, force: true });
else if (arg === undefined || arg === '--debug') build(arg === '--debug' || process.env.REDISLOCK_BUILD_PROFILE === 'debug');
else fail(`unknown argument ${arg} (build.js [--debug | --pack | --unpack])`);
