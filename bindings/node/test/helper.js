'use strict';
// The Node.js tests' harness: throwaway redis-servers on free loopback
// ports (never 6379; $REDIS_SERVER chooses the binary, as for every suite
// of the project: Valkey in `make test-valkey`), a small RESP connection to
// look at the server, and waiting for events with generous deadlines.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..', '..');

function serverBin() {
  const name = process.env.REDIS_SERVER || 'redis-server';
  return name.includes('/') ? path.resolve(ROOT, name) : name;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => (port === 6379 ? freePort().then(resolve, reject) : resolve(port)));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Wait until `check()` (sync or async) is truthy; fail after `seconds`. */
async function waitUntil(what, check, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${seconds} s waiting for ${what}`);
    await sleep(10);
  }
}

/** A RESP2 connection: `await raw.call('GET', key)`. Errors reject. */
class Raw {
  constructor(port) {
    this.port = port;
    this.queue = [];
    this.buf = Buffer.alloc(0);
  }

  async connect() {
    this.sock = net.createConnection({ host: '127.0.0.1', port: this.port });
    this.sock.unref();
    await new Promise((resolve, reject) => {
      this.sock.once('connect', resolve);
      this.sock.once('error', reject);
    });
    this.sock.on('error', (e) => this.queue.splice(0).forEach((p) => p.reject(e)));
    this.sock.on('data', (d) => this.onData(d));
    await this.call('CLIENT', 'SETNAME', 'test-raw');
    return this;
  }

  call(...args) {
    const parts = [`*${args.length}\r\n`];
    for (const a of args) {
      const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
      parts.push(`$${b.length}\r\n`, b, '\r\n');
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ resolve, reject });
      this.sock.write(Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p)))));
    });
  }

  /** A string reply as a string (bulk replies come as Buffers). */
  async str(...args) {
    const r = await this.call(...args);
    return Buffer.isBuffer(r) ? r.toString() : r;
  }

  onData(d) {
    this.buf = Buffer.concat([this.buf, d]);
    for (;;) {
      const parsed = parse(this.buf, 0);
      if (!parsed) return;
      this.buf = this.buf.subarray(parsed.end);
      const p = this.queue.shift();
      if (parsed.value instanceof Error) p.reject(parsed.value);
      else p.resolve(parsed.value);
    }
  }

  close() {
    this.sock?.destroy();
  }
}

function parse(buf, at) {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return null;
  const line = buf.toString('latin1', at + 1, eol);
  const next = eol + 2;
  switch (String.fromCharCode(buf[at])) {
    case '+':
      return { value: line, end: next };
    case '-':
      return { value: new Error(line), end: next };
    case ':':
      return { value: Number(line), end: next };
    case '$': {
      const n = Number(line);
      if (n < 0) return { value: null, end: next };
      if (buf.length < next + n + 2) return null;
      return { value: buf.subarray(next, next + n), end: next + n + 2 };
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return { value: null, end: next };
      const items = [];
      let pos = next;
      for (let i = 0; i < n; i++) {
        const item = parse(buf, pos);
        if (!item) return null;
        items.push(item.value);
        pos = item.end;
      }
      return { value: items, end: pos };
    }
    default:
      throw new Error(`unexpected RESP byte ${buf[at]}`);
  }
}

/** One redis-server process. */
class RedisServer {
  /** A server on a free port, with `args` after the harness's own (`--cluster-enabled yes`...). */
  static async start(args = []) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-node-'));
    for (let attempt = 0; attempt < 20; attempt++) {
      const s = new RedisServer(dir, await freePort(), args);
      if (await s.launch()) return s;
    }
    throw new Error(`could not start ${serverBin()} on a free port (see ${dir}/redis.log)`);
  }

  constructor(dir, port, args = []) {
    this.dir = dir;
    this.port = port;
    this.args = args;
  }

  get url() {
    return `redis://127.0.0.1:${this.port}/0`;
  }

  async launch() {
    this.proc = spawn(
      serverBin(),
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, '--logfile', 'redis.log', ...this.args],
      { stdio: 'ignore' },
    );
    let exited = false;
    this.proc.once('exit', () => {
      exited = true;
    });
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline && !exited) {
      try {
        this.raw = await new Raw(this.port).connect();
        if ((await this.raw.call('PING')) === 'PONG') return true;
      } catch {
        await sleep(20);
      }
    }
    this.stop();
    return false;
  }

  /** The number of connections from clients other than the test's own. */
  async clients() {
    const list = (await this.raw.str('CLIENT', 'LIST')).trim().split('\n');
    return list.filter((l) => !/ name=test-raw /.test(` ${l} `)).length;
  }

  /** `INFO commandstats` as { command: calls }. */
  async calls() {
    const info = await this.raw.str('INFO', 'commandstats');
    const out = {};
    for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
    return out;
  }

  stop() {
    this.raw?.close();
    this.raw = null;
    if (this.proc && this.proc.exitCode === null) this.proc.kill('SIGKILL');
  }

  destroy() {
    this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A Redis Cluster of `masters` masters on free ports, the slots shared out
 * between them; `nodes` is the servers (each to be destroyed), to which
 * every node is pushed as soon as it runs.
 */
async function startCluster(nodes, masters = 3) {
  const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '3000'];
  const mine = await Promise.all(
    Array.from({ length: masters }, async () => {
      const s = await RedisServer.start(args);
      nodes.push(s);
      return s;
    }),
  );
  await Promise.all(
    mine.map((n, i) =>
      n.raw.call('CLUSTER', 'ADDSLOTSRANGE', Math.floor((i * 16384) / masters), Math.floor(((i + 1) * 16384) / masters) - 1),
    ),
  );
  for (const n of mine.slice(1)) await mine[0].raw.call('CLUSTER', 'MEET', '127.0.0.1', n.port);
  for (const n of mine) {
    await waitUntil(`cluster node ${n.port} to see the whole cluster`, async () => {
      const info = await n.raw.str('CLUSTER', 'INFO');
      return /^cluster_state:ok/m.test(info) && new RegExp(`^cluster_known_nodes:${masters}\\b`, 'm').test(info);
    });
  }
  return mine;
}

/** Where the npm packages of tests/node-tools are installed (make test-node: npm ci). */
const NODE_TOOLS = process.env.REDISLOCK_NODE_TOOLS
  ? path.resolve(process.env.REDISLOCK_NODE_TOOLS)
  : path.join(ROOT, 'target', 'node-tools', 'node_modules');

/**
 * An npm package of tests/node-tools (node-redlock, ioredis): its path, or
 * an Error that says how to install it (a test that needs it fails, never
 * skips).
 */
function nodeTool(name) {
  const dir = path.join(NODE_TOOLS, name);
  if (!fs.existsSync(path.join(dir, 'package.json'))) {
    throw new Error(
      `no ${name} in ${NODE_TOOLS}: install the Node.js test packages with \`make test-node\` ` +
        '(npm ci of tests/node-tools/package-lock.json into target/node-tools)',
    );
  }
  return dir;
}

/** The version of an installed npm package of tests/node-tools. */
function nodeToolVersion(name) {
  return JSON.parse(fs.readFileSync(path.join(nodeTool(name), 'package.json'), 'utf8')).version.replace(/^v/, '');
}

let keySeq = 0;
/** A key no other test uses. */
function keyFor(tag = 'k') {
  keySeq += 1;
  return `node:${process.pid}:${tag}:${keySeq}`;
}

module.exports = { ROOT, RedisServer, Raw, sleep, waitUntil, keyFor, freePort, startCluster, nodeTool, nodeToolVersion };
