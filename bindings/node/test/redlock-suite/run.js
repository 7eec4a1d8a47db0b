#!/usr/bin/env node
'use strict';
// node-redlock's own tests (vendor/: node-redlock 5.0.0-beta.2's
// src/single.test.ts and src/multi.test.ts, unmodified) run with ava 4
// against redislock, through adapter.js (node-redlock's API over
// redislock's Client):
//
//   node bindings/node/test/redlock-suite/run.js
//
// It needs ava 4, ioredis 4 and TypeScript in target/node-tools (make
// test-node-run installs them from the npm registry) and the addon
// (node bindings/node/build.js --debug). It
//   1. starts throwaway servers on free loopback ports (never 6379;
//      $REDIS_SERVER chooses the binary): one for the single-server tests,
//      three for the Redlock tests, and four Redis Clusters of three
//      masters (one for the single-server tests, three for the Redlock
//      tests), where upstream's docker-compose has its services;
//   2. compiles the test files (types stripped, nothing else changed) into
//      target/node-tools/redlock-suite/, beside an index.js that is the
//      adapter and an ioredis that leads their host names to those servers;
//   3. runs them twice with ava: as published, and with every
//      Number.MAX_SAFE_INTEGER read as 8639998991 (vendor/ORIGIN.md says
//      why), and checks each test's outcome against EXPECTED below.
// It prints how many of the tests pass (and ava's TAP output when one
// fails unexpectedly, or with REDLOCK_SUITE_VERBOSE=1), and exits 1 when a
// test fails that is not listed in EXPECTED, or fails otherwise than
// listed, or a listed one passes (the list is then out of date); 2 when it
// cannot run.

const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const { ROOT, RedisServer, freePort, waitUntil } = require('../helper');

const TOOLS = path.join(ROOT, 'target', 'node-tools');
const MODULES = path.join(TOOLS, 'node_modules');
const VENDOR = path.join(__dirname, 'vendor');

/** The vendored files and their git blob hashes (vendor/ORIGIN.md). */
const VENDORED = {
  'single.test.ts': '6a5990dade07d34e7c842203e1a4c1dc7f61d886',
  'multi.test.ts': '5049b3e250d1339bbe79c70493ad95059df71085',
};

/** The second run's Number.MAX_SAFE_INTEGER: durations within redislock's 30 days. */
const WITHIN_LIMIT = 8639998991;

// The tests that fail by design, by run, file and title (each runs as
// "instance - ..." against one server or three, and as "cluster - ..."
// against Redis Cluster): why each fails, and whether a failure is the one
// meant (`failed(outcome, line)`: ava's message for it, and the source line
// of the failing check). A test that fails otherwise is an unexpected
// failure. docs/node.md lists them too.
const TTL_LIMIT = {
  why:
    'asks for a lock of 900,719,925,474,099 ms (about 28,500 years): redislock refuses a TTL over 30 days ' +
    '(a RangeError, which the test rethrows), as a likely unit mistake',
  failed: (o) => o.message === 'Test finished without running any assertions',
};
const ATTEMPTS = {
  why:
    "counts node-redlock's retries (ExecutionError.attempts.length === 11): redislock waits once, queued " +
    '(handed the lock on release, or retrying over Redlock), for retryCount x retryDelay ms, so attempts ' +
    'has one entry',
  failed: (o) => o.message === 'A failed acquisition must have the configured number of retries.',
};
// A test that may pass or fail: it reads every node right after acquire,
// extend and release resolve, which they do once a majority answered (in
// node-redlock too). redislock sends a node's command from a worker thread
// when it has no idle connection to it (the first command, a Cluster): on
// a busy machine that can be later than the test's read of that node.
// Only a failure of one of those reads is this one; test/redlock_adapter.test.js
// checks that every node does get each command.
const MAJORITY = {
  why:
    'reads all three nodes as soon as acquire, extend and release resolve at a majority; redislock may ' +
    "send a node's command from a worker thread (a Cluster, a first command), after that read on a busy machine",
  mayPass: true,
  failed: (o, line) =>
    ['The lock value was incorrect.', 'The lock expiration was off by more than 200ms'].includes(o.message) ||
    /^\s*t\.is\(await redis[ABC]\.get\("\{redlock\}[ab]"\), null\);$/.test(line),
};
const EXPECTED = {
  published: {
    'single.test.js': {
      'acquires, extends, and releases a single lock': TTL_LIMIT,
      'acquires, extends, and releases a multi-resource lock': TTL_LIMIT,
      'locks fail when redis is unreachable': TTL_LIMIT,
      'individual locks are exclusive': TTL_LIMIT,
      'overlapping multi-locks are exclusive': TTL_LIMIT,
    },
    'multi.test.js': {
      'acquires, extends, and releases a single lock': TTL_LIMIT,
      'succeeds when a minority of clients fail': TTL_LIMIT,
      'fails when a majority of clients fail': TTL_LIMIT,
    },
  },
  'within the 30-day limit': {
    'single.test.js': {
      'locks fail when redis is unreachable': ATTEMPTS,
      'individual locks are exclusive': ATTEMPTS,
      'overlapping multi-locks are exclusive': ATTEMPTS,
    },
    'multi.test.js': {
      'acquires, extends, and releases a single lock': MAJORITY,
      // Its acquire and extend need both nodes that can agree; its release
      // is decided once two nodes answered, one of them the refusing one.
      'succeeds when a minority of clients fail': MAJORITY,
      'fails when a majority of clients fail': ATTEMPTS,
    },
  },
};
// What ava may report beside the tests: the errors a test rethrew after it
// ended (node-redlock's tests rethrow what is not an ExecutionError without
// awaiting it), one for each test that fails so, and of this kind only.
const STRAYS = {
  published: /^RangeError: ttl must be a whole number of milliseconds from 1 to 2592000000 \(30 days/,
  'within the 30-day limit': null,
};
// Tests that race the clock by their own design, as they do against
// node-redlock: a pause of the machine longer than their window at the
// wrong moment fails them. They are run and checked like the others; a
// failure says so, to tell it from a fault of redislock.
const TIMING = {
  'acquires, extends, and releases a single lock': 'reads PTTL within 99 ms of acquire and 97 ms of extend',
  'acquires, extends, and releases a multi-resource lock': 'reads PTTL within 99 ms of acquire and 97 ms of extend',
  'succeeds when a minority of clients fail': 'reads PTTL within 99 ms of acquire and 97 ms of extend',
  'the `using` helper acquires, extends, and releases locks':
    'a 500 ms lock renewed every third of it while the test sleeps 700 ms',
  'the `using` helper is exclusive': 'a 500 ms lock renewed every third of it while the test sleeps 700 ms',
};
const TIMING_NOTE = 'a test with a timing window of its own';
/** How many times in all a run that only TIMING tests failed is run. */
const TIMING_TRIES = 3;
/** How many tests each file has (9 and 3 checks, each against a server and a Cluster). */
const COUNTS = { 'single.test.js': 18, 'multi.test.js': 6 };

function cannotRun(message) {
  console.error(`redlock-suite: ${message}`);
  process.exit(2);
}

/** A file's git blob hash, as `git hash-object` computes it. */
function blobHash(file) {
  const body = fs.readFileSync(file);
  return crypto.createHash('sha1').update(`blob ${body.length}\0`).update(body).digest('hex');
}

/** A server on a free port, put in `owned` (to be stopped) as soon as it runs. */
async function startServer(owned, args) {
  const s = await RedisServer.start(args);
  owned.push(s);
  return s;
}

/** A Redis Cluster of `masters` masters, the slots shared out between them. */
async function startCluster(owned, masters = 3) {
  const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '3000'];
  const nodes = await Promise.all(Array.from({ length: masters }, () => startServer(owned, args)));
  await Promise.all(
    nodes.map((n, i) =>
      n.raw.call('CLUSTER', 'ADDSLOTSRANGE', Math.floor((i * 16384) / masters), Math.floor(((i + 1) * 16384) / masters) - 1),
    ),
  );
  for (const n of nodes.slice(1)) await nodes[0].raw.call('CLUSTER', 'MEET', '127.0.0.1', n.port);
  for (const n of nodes) {
    await waitUntil(`cluster node ${n.port} to see the whole cluster`, async () => {
      const info = await n.raw.str('CLUSTER', 'INFO');
      return /^cluster_state:ok/m.test(info) && new RegExp(`^cluster_known_nodes:${masters}\\b`, 'm').test(info);
    });
  }
  return nodes;
}

/** The test files of one run, compiled into `dir` beside the adapter and the tests' ioredis. */
function prepare(dir, run, ts) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'node_modules', 'ioredis'), { recursive: true });
  for (const [name, hash] of Object.entries(VENDORED)) {
    const file = path.join(VENDOR, name);
    if (blobHash(file) !== hash) cannotRun(`${file} is not the file vendor/ORIGIN.md names (blob ${hash})`);
    let source = fs.readFileSync(file, 'utf8');
    if (run !== 'published') {
      const parts = source.split('Number.MAX_SAFE_INTEGER');
      if (parts.length < 2) cannotRun(`${name} no longer says Number.MAX_SAFE_INTEGER: update run.js`);
      source = parts.join(String(WITHIN_LIMIT));
    }
    const { outputText } = ts.transpileModule(source, {
      fileName: name,
      compilerOptions: { module: ts.ModuleKind.ES2020, target: ts.ScriptTarget.ES2020 },
    });
    fs.writeFileSync(path.join(dir, name.replace(/\.ts$/, '.js')), outputText);
  }
  const write = (name, text) => fs.writeFileSync(path.join(dir, name), text);
  // node-redlock's index.js, as the tests import it: the adapter.
  const adapter = JSON.stringify(pathToFileURL(path.join(__dirname, 'adapter.js')).href);
  write(
    'index.js',
    `import adapter from ${adapter};\nexport default adapter.Redlock;\n` +
      'export const { Lock, ExecutionError, ResourceLockedError } = adapter;\n',
  );
  write(
    'package.json',
    JSON.stringify({ private: true, type: 'module', ava: { files: ['*.test.js'], timeout: '2m' } }, null, 2),
  );
  write('node_modules/ioredis/package.json', JSON.stringify({ name: 'ioredis', main: 'index.js' }));
  write('node_modules/ioredis/index.js', `module.exports = require(${JSON.stringify(path.join(__dirname, 'ioredis.js'))});\n`);
}

/** Run ava in `dir`: its TAP output, each test's outcome, and what else it reported failing. */
function ava(dir, hosts) {
  const cli = path.join(MODULES, 'ava', 'entrypoints', 'cli.mjs');
  const env = {
    ...process.env,
    REDLOCK_SUITE_IOREDIS: path.join(MODULES, 'ioredis'),
    REDLOCK_SUITE_HOSTS: JSON.stringify(hosts),
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, '--tap', '--serial', '--concurrency', '1'], { cwd: dir, env });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', () => resolve({ out, ...parseTap(out) }));
  });
}

/**
 * ava's TAP report: `tests[file][title]` is { passed, message, line } (the
 * first failure's message and line), `strays` the titles of the other
 * failures it reports (errors thrown outside a test, a file that crashed).
 */
function parseTap(out) {
  const tests = {};
  const strays = [];
  // "ok 3 - single › instance - locks automatically expire", "not ok 4 - ...",
  // each failure followed by a YAML block with its message.
  const blocks = out.split(/^(?=(?:not )?ok \d+ - )/m);
  for (const block of blocks) {
    const head = block.match(/^(ok|not ok) \d+ - (.*?)(?: # .*)?$/m);
    if (!head) continue;
    const passed = head[1] === 'ok';
    const m = head[2].match(/^(\S+) › (.*)$/);
    if (!m) {
      if (!passed) strays.push(head[2]);
      continue;
    }
    const yaml = block.match(/^ {4}message: (?:[>|]-?\n)?((?:.|\n)*?)\n {4}\S/m);
    const message = yaml ? yaml[1].replace(/\s*\n\s*/g, ' ').trim() : '(no message: see the TAP output)';
    // "at: 'file://multi.test.js:91:15'": where the failing check is.
    const at = block.match(/^ {4}at: '?file:\/\/[^:]+:(\d+):/m);
    tests[`${m[1]}.test.js`] ??= {};
    tests[`${m[1]}.test.js`][m[2]] = { passed, message, line: at ? Number(at[1]) : 0 };
  }
  return { tests, strays };
}

async function main() {
  for (const m of ['ava', 'ioredis', 'typescript']) {
    if (!fs.existsSync(path.join(MODULES, m, 'package.json'))) {
      cannotRun(`no ${m} in ${MODULES}: make test-node-run installs it (npm install --prefix target/node-tools ...)`);
    }
  }
  const ts = require(path.join(MODULES, 'typescript'));
  const versions = ['ava', 'ioredis'].map((m) => `${m} ${require(path.join(MODULES, m, 'package.json')).version}`);

  const servers = [];
  try {
    const [single, a, b, c] = await Promise.all([0, 1, 2, 3].map(() => startServer(servers)));
    const [singleCluster, clusterA, clusterB, clusterC] = await Promise.all([0, 1, 2, 3].map(() => startCluster(servers)));
    const info = await single.raw.str('INFO', 'server');
    const field = (name) => info.match(new RegExp(`^${name}:(.*)$`, 'm'))?.[1]?.trim();
    const server = `${field('server_name') || 'redis'} ${field('valkey_version') || field('redis_version')}`;
    // Where upstream's docker-compose services are, and the "unreachable" test's server.
    const hosts = {
      'redis-single-instance': single.port,
      'redis-multi-instance-a': a.port,
      'redis-multi-instance-b': b.port,
      'redis-multi-instance-c': c.port,
      'redis-single-cluster-1': singleCluster[0].port,
      'redis-multi-cluster-a-1': clusterA[0].port,
      'redis-multi-cluster-b-1': clusterB[0].port,
      'redis-multi-cluster-c-1': clusterC[0].port,
      '127.0.0.1:6379': await freePort(),
    };
    console.log(
      `redlock-suite: node-redlock 5.0.0-beta.2's tests against redislock (${versions.join(', ')}, ` +
        `${server}, node ${process.version})`,
    );

    const bad = [];
    for (const [run, expected] of Object.entries(EXPECTED)) {
      const dir = path.join(TOOLS, 'redlock-suite', run === 'published' ? 'published' : 'within-limit');
      prepare(dir, run, ts);
      // A run whose only unexpected failures are tests with a timing window
      // of their own (TIMING) is run again, up to TIMING_TRIES times in all:
      // a pause of the machine does not come back each time, a fault does.
      for (let attempt = 1; ; attempt += 1) {
        // Each run starts from empty servers, as upstream's before hooks assume.
        await Promise.all(servers.map((s) => s.raw.call('FLUSHALL')));
        const { out, tests, strays } = await ava(dir, hosts);
        const runBad = [];
        let passed = 0;
        let total = 0;
        const listed = [];
        for (const [file, count] of Object.entries(COUNTS)) {
          const mine = tests[file] || {};
          if (Object.keys(mine).length !== count) {
            runBad.push(`${run}: ${file}: ${Object.keys(mine).length} tests reported, ${count} expected`);
          }
          const source = fs.readFileSync(path.join(dir, file), 'utf8').split('\n');
          for (const [title, outcome] of Object.entries(mine)) {
            total += 1;
            const expect = expected[file]?.[title.replace(/^(instance|cluster) - /, '')];
            if (outcome.passed && expect && !expect.mayPass) {
              runBad.push(`${run}: listed as failing but passes (update EXPECTED and docs/node.md): ${file} › ${title}`);
            } else if (outcome.passed) {
              passed += 1;
            } else if (expect && expect.failed(outcome, source[outcome.line - 1] || '')) {
              listed.push({ test: `${file} › ${title}`, why: expect.why });
            } else {
              const racy = TIMING[title.replace(/^(instance|cluster) - /, '')];
              runBad.push(
                `${run}: unexpected failure: ${file} › ${title}: ${outcome.message}` +
                  (racy ? ` (${TIMING_NOTE}: ${racy})` : ''),
              );
            }
          }
        }
        const rethrown = listed.filter((l) => l.why === TTL_LIMIT.why).length;
        const strayOk = strays.filter((t) => STRAYS[run]?.test(t));
        if (strayOk.length !== strays.length || (STRAYS[run] && strays.length !== rethrown)) {
          runBad.push(`${run}: ${strays.length} errors reported outside tests (${rethrown} expected):\n  ${strays.join('\n  ')}`);
        }
        console.log(`redlock-suite: ${run}: ${passed} of ${total} tests pass; ${listed.length} fail as docs/node.md lists:`);
        for (const why of new Set(listed.map((l) => l.why))) {
          const titles = listed.filter((l) => l.why === why).map((l) => l.test);
          console.log(`  ${titles.length}: ${why}:\n    ${titles.join('\n    ')}`);
        }
        const timingOnly = runBad.length > 0 && runBad.every((b) => b.includes(TIMING_NOTE));
        if (timingOnly && attempt < TIMING_TRIES) {
          console.log(`redlock-suite: ${run}: only tests with a timing window of their own failed; again (${attempt + 1} of ${TIMING_TRIES}):`);
          console.log(`  ${runBad.join('\n  ')}`);
          continue;
        }
        if (runBad.length > 0 || process.env.REDLOCK_SUITE_VERBOSE) {
          console.log(out);
          bad.push(...runBad);
        }
        break;
      }
    }
    if (bad.length > 0) {
      console.log(bad.join('\n'));
      process.exitCode = 1;
    } else {
      console.log('redlock-suite: ok');
    }
  } finally {
    for (const s of servers) s.destroy();
  }
}

main().catch((e) => cannotRun(e.stack || String(e)));
