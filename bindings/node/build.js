#!/usr/bin/env node
'use strict';
// Builds the native addon redislock.node next to this file: `cargo build
// --lib -p redislock-node`, the napi crate whose library is the addon. The
// crate is the repository's workspace around this directory (make node), or
// the small workspace `npm pack` put in ./crate (npm install of the
// package): the core crate redislock as `cargo package` makes it, the
// addon's crate, and the repository's Cargo.lock pruned to what they use.
//
//   node build.js            release build (what `npm install` runs)
//   node build.js --debug    debug build (quicker to compile; the tests)
//   node build.js --pack     put the crates into ./crate (npm's prepack)
//   node build.js --unpack   remove ./crate again (npm's postpack)
//
// CARGO: the cargo to run; CARGO_TARGET_DIR: where it builds (default:
// the workspace's target/node, apart from the C library's target/debug);
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

/** The workspace to build in: ./crate in an installed package, else the repository. */
function crateRoot() {
  const candidates = [
    [packed, path.join(packed, 'redislock-node', 'Cargo.toml')],
    [path.resolve(here, '..', '..'), path.join(here, 'Cargo.toml')],
  ];
  for (const [dir, member] of candidates) {
    if (fs.existsSync(path.join(dir, 'Cargo.toml')) && fs.existsSync(member)) return dir;
  }
  return fail(`no redislock workspace found (looked in ${candidates.map(([dir]) => dir).join(' and ')})`);
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

/**
 * The sections of the repository's Cargo.toml that its members inherit or
 * build with (the shared package fields, the lints, the release profile),
 * verbatim, each without the comments that lead to the next section.
 */
function workspaceSections(manifest, names) {
  const sections = new Map();
  let current = null;
  for (const line of fs.readFileSync(manifest, 'utf8').split('\n')) {
    const header = /^\[([^\]]+)\]\s*$/.exec(line);
    if (header) {
      current = [line];
      sections.set(header[1], current);
    } else if (current) {
      current.push(line);
    }
  }
  return names.map((name) => {
    const lines = sections.get(name);
    if (!lines) fail(`${manifest} has no [${name}] section`);
    while (/^\s*(#.*)?$/.test(lines[lines.length - 1])) lines.pop();
    return lines.join('\n');
  });
}

/**
 * ./crate: a workspace of two members, the core crate `redislock/` (what
 * `cargo package -p redislock` puts in the .crate, unpacked) and the
 * addon's crate `redislock-node/` (its Cargo.toml and sources, the core as
 * a path dependency), with the repository's Cargo.lock pruned to them
 * (offline: the same versions, so that the install's --locked build takes
 * exactly what the repository tests). The directories are not the
 * repository's, so that cargo never takes the repository's build of a
 * crate for this copy's.
 */
function pack() {
  const root = path.resolve(here, '..', '..');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-pack-'));
  try {
    run(cargo, ['package', '-p', 'redislock', '--no-verify', '--allow-dirty', '--quiet', '--target-dir', work], { cwd: root });
    const crate = fs.readdirSync(path.join(work, 'package')).find((f) => /^redislock-[0-9].*\.crate$/.test(f));
    if (!crate) fail(`cargo package made no redislock-<version>.crate in ${work}/package`);
    fs.rmSync(packed, { recursive: true, force: true });
    const core = path.join(packed, 'redislock');
    const node = path.join(packed, 'redislock-node');
    fs.mkdirSync(core, { recursive: true });
    run('tar', ['-xzf', path.join(work, 'package', crate), '-C', core, '--strip-components=1']);
    // The workspace's lock file rules; the original manifest is the
    // repository's (npm would leave out a *.orig file anyway).
    for (const f of ['Cargo.lock', 'Cargo.toml.orig', '.cargo_vcs_info.json']) fs.rmSync(path.join(core, f), { force: true });

    fs.mkdirSync(node);
    const from = '"../../crates/redislock"';
    const manifest = fs.readFileSync(path.join(here, 'Cargo.toml'), 'utf8');
    if (!manifest.includes(`path = ${from}`)) fail(`bindings/node/Cargo.toml has no dependency path = ${from}`);
    fs.writeFileSync(path.join(node, 'Cargo.toml'), manifest.replaceAll(`path = ${from}`, 'path = "../redislock"'));
    fs.cpSync(path.join(here, 'src'), path.join(node, 'src'), { recursive: true });

    const [pkg, lints, release] = workspaceSections(path.join(root, 'Cargo.toml'), ['workspace.package', 'workspace.lints.rust', 'profile.release']);
    fs.writeFileSync(
      path.join(packed, 'Cargo.toml'),
      [
        '# The Node.js addon\'s crate and the core crate it is built on, put here',
        '# by build.js --pack from the repository\'s workspace (its shared',
        '# package fields, lints and release profile below).',
        '[workspace]',
        'members = ["redislock", "redislock-node"]',
        'resolver = "2"',
        '',
        pkg,
        '',
        lints,
        '',
        release,
        '',
      ].join('\n'),
    );
    fs.copyFileSync(path.join(root, 'Cargo.lock'), path.join(packed, 'Cargo.lock'));
    // Resolving offline rewrites the lock file without what the two crates
    // do not use; nothing is updated. Then it must hold as it is.
    const metadata = ['metadata', '--offline', '--format-version', '1', '--manifest-path', path.join(packed, 'Cargo.toml')];
    run(cargo, metadata, { cwd: packed, stdio: ['ignore', 'ignore', 'inherit'] });
    run(cargo, [...metadata, '--locked'], { cwd: packed, stdio: ['ignore', 'ignore', 'inherit'] });
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

const arg = process.argv[2];
if (arg === '--pack') pack();
else if (arg === '--unpack') fs.rmSync(packed, { recursive: true, force: true });
else if (arg === undefined || arg === '--debug') build(arg === '--debug' || process.env.REDISLOCK_BUILD_PROFILE === 'debug');
else fail(`unknown argument ${arg} (build.js [--debug | --pack | --unpack])`);
