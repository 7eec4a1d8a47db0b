'use strict';
// `npm pack` of bindings/node gives a package that `npm install` builds
// from source (cargo), with nothing from the repository around it.

const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, after } = require('node:test');

const { ROOT, RedisServer, keyFor } = require('./helper');

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-npm-'));
let server;

after(() => {
  server?.destroy();
  fs.rmSync(work, { recursive: true, force: true });
});

test('npm pack, then npm install of the tarball builds the addon from source', { timeout: 900000 }, async () => {
  const npm = (args, cwd, env = {}) =>
    execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd,
      env: { ...process.env, ...env },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
  const tarball = npm(['pack', '--pack-destination', work], path.join(ROOT, 'bindings/node')).trim().split('\n').pop();
  const listing = execFileSync('tar', ['-tzf', path.join(work, tarball)], { encoding: 'utf8' }).split('\n');
  for (const f of ['package/index.js', 'package/index.mjs', 'package/index.d.ts', 'package/index.d.mts', 'package/build.js', 'package/crate/Cargo.toml', 'package/crate/Cargo.lock',
    'package/crate/redislock/Cargo.toml', 'package/crate/redislock/src/lib.rs', 'package/crate/redislock/build.rs', 'package/crate/redislock/README.md',
    'package/crate/redislock-node/Cargo.toml', 'package/crate/redislock-node/src/lib.rs', 'package/crate/redislock-node/src/evloop.rs']) {
    assert.ok(listing.includes(f), `${f} is in the package`);
  }
  assert.ok(!listing.some((f) => f.endsWith('.node')), 'no prebuilt addon in the package');
  assert.ok(!listing.some((f) => f.includes('/test/')), 'no tests in the package');
  assert.ok(!fs.existsSync(path.join(ROOT, 'bindings/node/crate')), 'postpack removed the copy of the crate');

  const app = path.join(work, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  // A debug build in the suite's own cargo target, where `cargo build`
  // (make test-rust) compiled the dependencies already: only the packed
  // crates and napi are compiled (about 25 s instead of 140 s). The packed
  // crates lie at other paths than the repository's (redislock/,
  // redislock-node/), so cargo builds them apart from the repository's and
  // never takes one for the other; the addon it leaves in target/debug
  // (libredislock_node.so) is loaded by no suite.
  npm(['install', path.join(work, tarball)], app, {
    REDISLOCK_BUILD_PROFILE: 'debug',
    CARGO_TARGET_DIR: path.join(ROOT, 'target'),
  });
  assert.ok(fs.existsSync(path.join(app, 'node_modules/redislock/redislock.node')));

  server = await RedisServer.start();
  const script = `
    const { Client } = require('redislock');
    (async () => {
      const lock = await new Client(${JSON.stringify(server.url)}).acquire(${JSON.stringify(keyFor('npm'))});
      console.log(typeof (await lock.drawFence()));
      await lock.release();
    })();
  `;
  assert.equal(execFileSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8' }).trim(), 'number');
});
