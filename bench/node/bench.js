'use strict';
// make bench-node: the Node.js addon (bindings/node) beside node-redlock
// 5.0.0-beta.2 and a hand-written ioredis helper (impls.js), on a throwaway
// redis-server of its own ($REDIS_SERVER, default redis-server) on a free
// loopback port:
//
//   node bench/node/bench.js [--quick] [--rounds N] [--batch N] [--calibrate N]
//        [--handoff-batches N] [--handoff-rounds N]
//        [--xhandoff-batches N] [--xhandoff-rounds N] [--c-waiter PATH]
//        [--loop-rounds N] [--loop-seconds S] [--loop-waiters N]
//        [--contended-rounds N] [--seconds S] [--workers N] [--hold-ms MS]
//        [--poll-ms MS] [--parts uncontended,handoff,xhandoff,loopdelay,contended]
//        [--out PATH]
//
// 1. uncontended  one process, one key per implementation, one attempt on a
//    free lock + release (redislock: client.tryAcquire(key, { ttl }), the
//    options a new user writes first; redislock-fenced adds fenced: true;
//    node-redlock's acquire; the helper's single SET NX PX); rounds
//    (--rounds, 30) of one batch (--batch, 200 cycles) per implementation,
//    the order rotated every round. Per batch: the p50 and mean µs per
//    cycle, the process's CPU per cycle (process.cpuUsage() around the
//    batch), and the server's side from INFO cpu and INFO commandstats read
//    before and after it (calls and usec per command per cycle; commands run
//    inside a script are counted under their own names too, and a script's
//    usec already holds theirs, so "command time" and "requests" count only
//    what clients sent: the share of each name's calls that ran inside a
//    script or MULTI comes from --calibrate cycles per implementation
//    watched with MONITOR before the timed rounds, as in bench/c/cost.c).
//    Ratios ours / theirs are taken inside each round; goals: speed >= 1.0x
//    node-redlock's and >= 0.95x the helper's, process CPU <= the helper's.
// 2. hand-off  a holder and a waiter (two clients of one implementation in
//    this process, lock() waiting: redislock's client.acquire(key, { ttl }))
//    on one key: the waiter's acquire is called, the holder releases after a
//    random 5-25 ms, and the figure is the time from just before the release
//    call to the waiter's acquire resolving (one process clock). Batches
//    (--handoff-batches, 8) of --handoff-rounds (16) rounds per
//    implementation, the order rotated; median and p90 over all rounds,
//    ratios of the batch medians taken inside each batch; the loopback round
//    trip (PING p50) before each batch, and each batch's p50 in round trips
//    (goal: <= 3).
// 3. xhandoff  hand-off between processes: this process holds (a redislock
//    Client), the waiter is another process, handoff_waiter.js (Node.js) or
//    bench/c/handoff_waiter.c (the C API; make bench-node builds it into
//    target/bench-node). The holder takes the lock, tells the waiter to wait,
//    polls LLEN of the lock's queue until it is queued, sleeps 5-25 ms,
//    stamps CLOCK_MONOTONIC and releases; the figure is the waiter's stamp
//    when its acquire returned minus the holder's. Batches
//    (--xhandoff-batches, 8) of --xhandoff-rounds (16) per waiter, rotated;
//    p50 / p90, p50 in round trips, Node.js / C inside each batch (goal: <= 1).
// 4. loopdelay  one client holds a lock, --loop-waiters (1,000) waiting
//    acquires of another client wait for it; meanwhile that client runs
//    tryAcquire / release cycles on a free key for --loop-seconds (2): the
//    synchronous time of each call and monitorEventLoopDelay's figures,
//    against the same cycles with no waits pending; then the held lock is
//    released and the chain of waiters timed (each releases as soon as it
//    holds the lock): acquisitions/s, and the hand-off p50 (one's release
//    call -> the next holds it) in round trips of the same round (a PING
//    just before). --loop-rounds (3), rotated.
// 5. contended  --workers (8) processes (worker.js) loop acquire, GET a
//    counter, hold --hold-ms (1), SET it + 1, release, on one key for
//    --seconds (3); --contended-rounds (5) rounds of one run per
//    implementation, the order rotated. Per run: acquisitions per worker
//    (least / most, Jain's index (Σx)² / (n Σx²)), acquisitions/s, failed
//    acquires and releases by error (counted, the worker goes on), lost
//    updates, hand-off p50 between different workers, the longest wait,
//    server commands and the workers' CPU per acquisition (goals:
//    acquisitions/s >= 1.0x the helper's, Jain >= 0.9, CPU <= the helper's).
//
// It prints Markdown tables (medians over rounds, and the median (min-max)
// of the ratios, and the goals of issue 53 met or not) and writes them with
// the summary and every batch's or run's record as one JSON document to
// --out (default bench/results/DATE/node.json, DATE-quick with --quick;
// rewritten: not a .jsonl, which bench/run.py clears from DATE/ when it
// starts). --quick: a smoke run of under a minute.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const readline = require('node:readline');

const { KINDS, OURS, TTL, ioredis, open, sleep, ROOT, redislock } = require('./impls');

const HERE = __dirname;
const now = () => process.hrtime.bigint();
const THEIRS = KINDS.filter((k) => !OURS.includes(k));
const CONTENDED_KINDS = ['redislock', 'redislock-fenced', 'redlock', 'helper'];

// ---------------------------------------------------------------- arguments

const PARTS = ['uncontended', 'handoff', 'xhandoff', 'loopdelay', 'contended'];

function parseArgs(argv) {
  const a = {
    quick: false,
    rounds: 30,
    batch: 200,
    calibrate: 100,
    handoffBatches: 8,
    handoffRounds: 16,
    xhandoffBatches: 8,
    xhandoffRounds: 16,
    loopRounds: 3,
    loopSeconds: 2,
    loopWaiters: 1000,
    contendedRounds: 5,
    seconds: 3,
    workers: 8,
    holdMs: 1,
    pollMs: 10,
    parts: PARTS,
    cWaiter: null,
    out: null,
  };
  const set = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') {
      a.quick = true;
      continue;
    }
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unexpected argument ${arg}`);
    const name = m[1].replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(name in a) || name === 'quick') throw new Error(`unknown option --${m[1]}`);
    const value = m[2] !== undefined ? m[2] : argv[++i];
    if (value === undefined) throw new Error(`--${m[1]} needs a value`);
    if (name === 'parts') a.parts = value.split(',').filter(Boolean);
    else if (name === 'out' || name === 'cWaiter') a[name] = value;
    else {
      a[name] = Number(value);
      if (!Number.isFinite(a[name]) || a[name] <= 0) throw new Error(`--${m[1]} must be a positive number`);
    }
    set[name] = true;
  }
  if (a.quick) {
    const quick = {
      rounds: 8, calibrate: 50, handoffBatches: 3, handoffRounds: 6, xhandoffBatches: 3, xhandoffRounds: 6,
      loopRounds: 1, loopSeconds: 1, contendedRounds: 1, seconds: 1.5,
    };
    for (const [k, v] of Object.entries(quick)) if (!set[k]) a[k] = v;
  }
  for (const p of a.parts) {
    if (!PARTS.includes(p)) throw new Error(`unknown part ${p} (have ${PARTS.join(', ')})`);
  }
  return a;
}

// ---------------------------------------------------------------- statistics

/** Nearest-rank percentile of an already sorted array. */
function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const k = Math.max(0, Math.min(sorted.length - 1, Math.round((p / 100) * sorted.length + 0.5) - 1));
  return sorted[k];
}

function median(values) {
  const v = values.filter((x) => x !== null && x !== undefined && Number.isFinite(x)).sort((x, y) => x - y);
  if (v.length === 0) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

const sortedNum = (a) => [...a].sort((x, y) => x - y);

/** [median, min, max] of the ratios a[i] / b[i] where both exist. */
function ratios(a, b) {
  const r = [];
  for (let i = 0; i < a.length; i++) if (a[i] != null && b[i]) r.push(a[i] / b[i]);
  return r.length ? { median: median(r), min: Math.min(...r), max: Math.max(...r), n: r.length } : null;
}

function fmt(v, digits = 0, unit = '') {
  return v === null || v === undefined || !Number.isFinite(v) ? '-' : `${v.toFixed(digits)}${unit}`;
}

function fmtRatio(r) {
  return r ? `${r.median.toFixed(2)} (${r.min.toFixed(2)}-${r.max.toFixed(2)})` : '-';
}

/**
 * A goal of issue 53: `r` (a ratios() result: its median counts, or a plain
 * number) against `target`. `counted` false: printed for information only.
 */
function goal(figure, r, op, target, { counted = true, unit = '' } = {}) {
  const v = r && typeof r === 'object' ? r.median : r;
  const met = v === null || v === undefined || !Number.isFinite(v) ? null : op === '<=' ? v <= target : v >= target;
  return { figure, value: r && typeof r === 'object' ? r : v, op, target, unit, met, counted };
}

function printGoals(goals) {
  const out = ['Goals (issue 53; a ratio is the median of the ratios inside each round or batch, min-max beside it):', ''];
  for (const g of goals) {
    const v = g.value && typeof g.value === 'object' ? fmtRatio(g.value) : fmt(g.value, 2, g.unit);
    const mark = g.met === null ? 'no figure' : g.met ? 'met' : 'NOT met';
    out.push(`- ${g.figure}: ${v}, goal ${g.op === '<=' ? '≤' : '≥'} ${g.target}${g.unit}: ` +
      (g.counted ? `**${mark}**` : `${mark} (for information)`));
  }
  return out;
}

/** The round's order: KINDS rotated by the round, reversed every other round. */
function order(kinds, round) {
  const k = round % kinds.length;
  const o = kinds.slice(k).concat(kinds.slice(0, k));
  return round % 2 ? o.reverse() : o;
}

function log(msg) {
  process.stderr.write(`${msg}\n`);
}

// ---------------------------------------------------------------- the server

const children = new Set(); // every process this bench started, by pid

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function pingOnce(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let buf = '';
    const done = (ok) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(1000, () => done(false));
    sock.on('error', () => done(false));
    sock.on('connect', () => sock.write('*1\r\n$4\r\nPING\r\n'));
    sock.on('data', (d) => {
      buf += d;
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
  });
}

async function startServer() {
  let bin = process.env.REDIS_SERVER || 'redis-server';
  if (bin.includes('/') && !path.isAbsolute(bin)) bin = path.join(ROOT, bin);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redislock-bench-node-'));
  for (let attempt = 0; attempt < 20; attempt++) {
    let port = await freePort();
    if (port === 6379) continue;
    const proc = spawn(
      bin,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
        '--dir', dir, '--logfile', 'server.log', '--daemonize', 'no'],
      { stdio: 'ignore' },
    );
    const failed = new Promise((resolve) => {
      proc.on('error', (e) => resolve(e));
      proc.on('exit', () => resolve('exited'));
    });
    children.add(proc);
    const deadline = Date.now() + 10000;
    let state = null;
    failed.then((s) => (state = s));
    while (Date.now() < deadline && state === null) {
      if (await pingOnce(port)) {
        return {
          port,
          bin,
          stop() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
            children.delete(proc);
            fs.rmSync(dir, { recursive: true, force: true });
          },
        };
      }
      await sleep(20);
    }
    children.delete(proc);
    if (state && state.code === 'ENOENT') {
      throw new Error(`${bin} not found: apt-get install redis-server (make deps does), or set REDIS_SERVER`);
    }
    if (state === null) {
      proc.kill('SIGKILL');
      throw new Error(`${bin} on port ${port} did not answer`);
    }
    port = 0; // the port was taken meanwhile: another one
  }
  throw new Error(`could not start ${bin} on a free port`);
}

// ---------------------------------------------------------------- INFO

function parseInfo(text) {
  const out = { cpu: 0, commands: 0, cmd: {}, fields: {} };
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i < 0 || line.startsWith('#')) continue;
    const k = line.slice(0, i);
    const v = line.slice(i + 1);
    if (k.startsWith('cmdstat_')) {
      const calls = /(?:^|,)calls=(\d+)/.exec(v);
      const usec = /(?:^|,)usec=(\d+)/.exec(v);
      out.cmd[k.slice(8)] = { calls: Number(calls[1]), usec: Number(usec[1]) };
    } else {
      out.fields[k] = v;
    }
  }
  out.cpu = (Number(out.fields.used_cpu_sys) + Number(out.fields.used_cpu_user)) * 1e6; // µs
  out.commands = Number(out.fields.total_commands_processed);
  return out;
}

async function snapshot(admin) {
  return parseInfo(await admin.call('INFO', 'cpu', 'stats', 'commandstats'));
}

async function rttUs(admin, n = 20) {
  const lat = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    await admin.ping();
    lat.push(Number(now() - t) / 1000);
  }
  return median(lat);
}

// ---------------------------------------------------------------- 1. uncontended

/**
 * MONITOR over `n` cycles of each implementation, between ECHO markers:
 * per command name, the share of its calls run inside a script (source
 * "lua") or queued in a MULTI; and the first cycle as it was sent.
 */
async function calibrate(port, admin, impls, n) {
  const base = await ioredis(port);
  const monitor = await base.monitor();
  const result = {};
  let current = null;
  monitor.on('monitor', (time, args, source) => {
    const name = String(args[0]).toLowerCase();
    if (name === 'echo' && current && String(args[1]).startsWith(current.marker)) {
      const what = String(args[1]).slice(current.marker.length);
      if (what === 'begin') current.capturing = true;
      else if (what === 'first') current.firstEnd = current.events.length;
      else if (what === 'end') current.resolve();
      return;
    }
    if (!current || !current.capturing || name === 'info' || name === 'ping') return;
    current.events.push({ name, source });
  });
  for (const kind of KINDS) {
    const impl = impls[kind];
    const key = `bench:node:cycle:${kind}`;
    const done = new Promise((resolve) => {
      current = { marker: `bench-node:${kind}:`, events: [], capturing: false, firstEnd: 0, resolve };
    });
    await admin.echo(`${current.marker}begin`);
    await cycle(impl, key);
    await admin.echo(`${current.marker}first`);
    for (let i = 1; i < n; i++) await cycle(impl, key);
    await admin.echo(`${current.marker}end`);
    await done;
    const { events, firstEnd } = current;
    const inMulti = {};
    const counts = {}; // name -> { outer, inner }
    const marked = events.map((e) => {
      let inner = e.source === 'lua';
      if (!inner && e.name === 'multi') inMulti[e.source] = true;
      else if (!inner && (e.name === 'exec' || e.name === 'discard')) inMulti[e.source] = false;
      else if (!inner && inMulti[e.source]) inner = true;
      const c = (counts[e.name] = counts[e.name] || { outer: 0, inner: 0 });
      c[inner ? 'inner' : 'outer'] += 1;
      return { name: e.name, inner };
    });
    // One cycle: each request, the commands it ran inside in parentheses.
    const parts = [];
    for (const e of marked.slice(0, firstEnd)) {
      if (!e.inner || parts.length === 0) parts.push({ name: e.name.toUpperCase(), inner: [] });
      else parts[parts.length - 1].inner.push(e.name.toUpperCase());
    }
    const share = {};
    const perCycle = {};
    for (const [name, c] of Object.entries(counts)) {
      share[name] = c.inner / (c.inner + c.outer);
      perCycle[name] = { sent: c.outer / n, inside: c.inner / n };
    }
    result[kind] = {
      cycles: n,
      inner_share: share,
      per_cycle: perCycle,
      one_cycle: parts.map((p) => (p.inner.length ? `${p.name}(${p.inner.join(' ')})` : p.name)).join(' '),
    };
  }
  current = null;
  await monitor.disconnect();
  base.disconnect();
  return result;
}

/** One uncontended cycle: one attempt on a free key (never null there), release. */
async function cycle(impl, key) {
  const h = await impl.tryLock(key);
  if (h === null) throw new Error(`${impl.kind}: the free key ${key} was found held`);
  await impl.unlock(h);
}

async function uncontended(port, args, emit) {
  const admin = await ioredis(port);
  const impls = {};
  for (const kind of KINDS) impls[kind] = await open(kind, port, { pollMs: args.pollMs });
  const keyOf = (kind) => `bench:node:cycle:${kind}`;
  for (const kind of KINDS) {
    for (let i = 0; i < 50; i++) await cycle(impls[kind], keyOf(kind));
  }
  log(`uncontended: MONITOR over ${args.calibrate} cycles per implementation (never timed)`);
  const calib = await calibrate(port, admin, impls, args.calibrate);
  for (const kind of KINDS) log(`  ${kind}: ${calib[kind].one_cycle}`);

  const recs = {};
  for (const kind of KINDS) recs[kind] = [];
  for (let round = 0; round < args.rounds; round++) {
    for (const kind of order(KINDS, round)) {
      const impl = impls[kind];
      const key = keyOf(kind);
      const n = args.batch;
      const lat = new Array(n);
      const s0 = await snapshot(admin);
      const c0 = process.cpuUsage();
      const t0 = now();
      for (let i = 0; i < n; i++) {
        const t = now();
        await cycle(impl, key);
        lat[i] = Number(now() - t) / 1000;
      }
      const wall = Number(now() - t0) / 1000;
      const c1 = process.cpuUsage(c0);
      const s1 = await snapshot(admin);
      const perCommand = {};
      let cmdUs = 0;
      let requests = 0;
      let commands = 0;
      for (const [name, v] of Object.entries(s1.cmd)) {
        if (name === 'info') continue;
        const before = s0.cmd[name] || { calls: 0, usec: 0 };
        const calls = v.calls - before.calls;
        const usec = v.usec - before.usec;
        if (calls === 0) continue;
        const sent = 1 - (calib[kind].inner_share[name] || 0);
        perCommand[name] = { calls: calls / n, usec: usec / n };
        commands += calls / n;
        requests += (calls * sent) / n;
        cmdUs += (usec * sent) / n;
      }
      const rec = {
        bench: 'node-uncontended',
        impl: kind,
        round,
        cycles: n,
        p50_us: percentile(sortedNum(lat), 50),
        mean_us: wall / n,
        cpu_us: (c1.user + c1.system) / n,
        server_cpu_us: (s1.cpu - s0.cpu) / n,
        cmd_us: cmdUs,
        requests,
        commands,
        per_command: perCommand,
      };
      recs[kind].push(rec);
      emit(rec);
    }
    if ((round + 1) % 10 === 0 || round + 1 === args.rounds) {
      log(`uncontended: round ${round + 1} of ${args.rounds}: ` +
        KINDS.map((k) => `${k} ${fmt(recs[k][round].p50_us)} µs`).join(', '));
    }
  }
  for (const kind of KINDS) await impls[kind].close();
  admin.disconnect();

  // Summary: medians over rounds, ratios inside each round.
  const FIG = ['p50_us', 'mean_us', 'cpu_us', 'server_cpu_us', 'cmd_us', 'requests', 'commands'];
  const impl = {};
  for (const kind of KINDS) {
    const m = {};
    for (const f of FIG) m[f] = median(recs[kind].map((r) => r[f]));
    const names = new Set(recs[kind].flatMap((r) => Object.keys(r.per_command)));
    m.per_command = {};
    for (const name of [...names].sort()) {
      m.per_command[name] = {
        calls: median(recs[kind].map((r) => (r.per_command[name] || { calls: 0 }).calls)),
        usec: median(recs[kind].map((r) => (r.per_command[name] || { usec: 0 }).usec)),
      };
    }
    m.one_cycle = calib[kind].one_cycle;
    m.inner_share = calib[kind].inner_share;
    impl[kind] = m;
  }
  // ours / theirs of each figure, and the speed (theirs' mean time per
  // cycle over ours: above 1 = ours faster), inside each round.
  const pairRatios = (ours, theirs) => {
    const r = Object.fromEntries(
      ['p50_us', 'mean_us', 'cpu_us', 'server_cpu_us', 'cmd_us'].map((f) => [
        f,
        ratios(recs[ours].map((x) => x[f]), recs[theirs].map((x) => x[f])),
      ]),
    );
    r.speed = ratios(recs[theirs].map((x) => x.mean_us), recs[ours].map((x) => x.mean_us));
    return r;
  };
  const rat = {};
  for (const ours of OURS) for (const theirs of THEIRS) rat[`${ours}/${theirs}`] = pairRatios(ours, theirs);
  rat['redislock/redislock-fenced'] = pairRatios('redislock', 'redislock-fenced');
  // Issue 53's goals for the default (tryAcquire with { ttl } only); the
  // fenced variant's figures beside them, for information.
  const goals = [];
  for (const ours of OURS) {
    const o = { counted: ours === 'redislock' };
    goals.push(
      goal(`${ours}: cycle speed / node-redlock's`, rat[`${ours}/redlock`].speed, '>=', 1.0, o),
      goal(`${ours}: cycle speed / the helper's`, rat[`${ours}/helper`].speed, '>=', 0.95, o),
      goal(`${ours}: process CPU per cycle / the helper's`, rat[`${ours}/helper`].cpu_us, '<=', 1.0, o),
    );
  }
  return { rounds: args.rounds, batch: args.batch, calibrate: args.calibrate, impls: impl, ratios: rat, goals };
}

function printUncontended(s) {
  const out = [];
  out.push(`### 1. Uncontended cycle (acquire + release of a free lock)`, '');
  out.push(`${s.rounds} rounds of ${s.batch} cycles per implementation, order rotated; medians over rounds. ` +
    `One attempt per cycle: redislock \`client.tryAcquire(key, { ttl })\` (redislock-fenced adds \`fenced: true\`), ` +
    `node-redlock \`acquire\`, the helper one SET NX PX; then release. Process CPU: process.cpuUsage() ` +
    `(user + system, every thread) around each batch, per cycle. ` +
    `Server figures per cycle from INFO deltas around each batch (one INFO of the batch included in CPU).`, '');
  out.push('| implementation | cycle p50 | cycle mean | process CPU | server CPU | command time | requests | commands | one cycle (MONITOR) |');
  out.push('|---|---|---|---|---|---|---|---|---|');
  for (const [kind, m] of Object.entries(s.impls)) {
    out.push(`| ${kind} | ${fmt(m.p50_us, 0, ' µs')} | ${fmt(m.mean_us, 0, ' µs')} | ${fmt(m.cpu_us, 1, ' µs')} | ${fmt(m.server_cpu_us, 1, ' µs')} ` +
      `| ${fmt(m.cmd_us, 2, ' µs')} | ${fmt(m.requests, 2)} | ${fmt(m.commands, 2)} | \`${m.one_cycle}\` |`);
  }
  out.push('', 'INFO commandstats per cycle, calls / usec (medians over rounds; a script\'s usec includes the commands it ran, which are also counted under their own names):', '');
  out.push('| implementation | per command |', '|---|---|');
  for (const [kind, m] of Object.entries(s.impls)) {
    const cells = Object.entries(m.per_command).map(
      ([name, v]) => `${name} ${fmt(v.calls, 2)} / ${fmt(v.usec, 2)} µs`,
    );
    out.push(`| ${kind} | ${cells.join('; ')} |`);
  }
  out.push('', 'ours / theirs, median (min-max) of the ratios inside each round (below 1: ours is faster or cheaper; ' +
    'speed is theirs / ours of the mean time per cycle, above 1: ours is faster):', '');
  out.push('| pair | speed | cycle p50 | cycle mean | process CPU | server CPU | command time |', '|---|---|---|---|---|---|---|');
  for (const [pair, r] of Object.entries(s.ratios)) {
    out.push(`| ${pair} | ${fmtRatio(r.speed)} | ${fmtRatio(r.p50_us)} | ${fmtRatio(r.mean_us)} | ${fmtRatio(r.cpu_us)} ` +
      `| ${fmtRatio(r.server_cpu_us)} | ${fmtRatio(r.cmd_us)} |`);
  }
  out.push('', ...printGoals(s.goals));
  return out.join('\n');
}

/**
 * One batch of hand-off rounds of `kind` (`round()` gives one round's µs):
 * its record (p50, p90, the rounds where the waiter came early), pushed to
 * recs[kind] and passed to `emit`.
 */
/** The batches' records of one implementation, summed up: every round's p50 and p90, the batch p50s in round trips. */
function handoffSummary(recs) {
  const all = sortedNum(recs.flatMap((r) => r.samples_us));
  return {
    rounds: all.length,
    p50_us: percentile(all, 50),
    p90_us: percentile(all, 90),
    p50_rtt: median(recs.map((r) => r.p50_us / r.rtt_us)),
    p50_rtt_range: ratios(recs.map((r) => r.p50_us), recs.map((r) => r.rtt_us)),
    p50_rtt_by_batch: recs.map((r) => r.p50_us / r.rtt_us),
    early: recs.reduce((n, r) => n + r.early, 0),
  };
}

async function handoffBatch(bench, kind, batch, rounds, rtt, round, recs, emit) {
  const samples = [];
  for (let i = 0; i < rounds; i++) samples.push(await round());
  const s = sortedNum(samples);
  const rec = {
    bench,
    impl: kind,
    batch,
    rounds: samples.length,
    rtt_us: rtt,
    p50_us: percentile(s, 50),
    p90_us: percentile(s, 90),
    early: samples.filter((x) => x < 0).length,
    samples_us: samples.map((x) => Math.round(x * 10) / 10),
  };
  recs[kind].push(rec);
  emit(rec);
}

// ---------------------------------------------------------------- 2. hand-off

async function handoff(port, args, emit) {
  const admin = await ioredis(port);
  const pairs = {};
  for (const kind of KINDS) {
    pairs[kind] = {
      holder: await open(kind, port, { pollMs: args.pollMs }),
      waiter: await open(kind, port, { pollMs: args.pollMs }),
      key: `bench:node:handoff:${kind}`,
    };
  }
  const round = async ({ holder, waiter, key }) => {
    const h = await holder.lock(key);
    let t1 = null;
    const pending = waiter.lock(key).then((l) => {
      t1 = now();
      return l;
    });
    await sleep(5 + Math.random() * 20);
    const t0 = now();
    await holder.unlock(h);
    const l = await pending;
    await waiter.unlock(l);
    return Number(t1 - t0) / 1000;
  };
  for (const kind of KINDS) for (let i = 0; i < 2; i++) await round(pairs[kind]); // warm-up
  const recs = {};
  for (const kind of KINDS) recs[kind] = [];
  for (let b = 0; b < args.handoffBatches; b++) {
    const rtt = await rttUs(admin);
    for (const kind of order(KINDS, b)) {
      await handoffBatch('node-handoff', kind, b, args.handoffRounds, rtt, () => round(pairs[kind]), recs, emit);
    }
    log(`hand-off: batch ${b + 1} of ${args.handoffBatches} (RTT ${fmt(rtt)} µs): ` +
      KINDS.map((k) => `${k} ${fmt(recs[k][b].p50_us)} µs = ${fmt(recs[k][b].p50_us / rtt, 1)} RTT`).join(', '));
  }
  for (const kind of KINDS) {
    await pairs[kind].holder.close();
    await pairs[kind].waiter.close();
  }
  admin.disconnect();
  const impl = {};
  for (const kind of KINDS) impl[kind] = handoffSummary(recs[kind]);
  const rat = {};
  for (const ours of OURS) {
    for (const theirs of THEIRS) {
      rat[`${ours}/${theirs}`] = {
        p50_us: ratios(recs[ours].map((r) => r.p50_us), recs[theirs].map((r) => r.p50_us)),
        p90_us: ratios(recs[ours].map((r) => r.p90_us), recs[theirs].map((r) => r.p90_us)),
      };
    }
  }
  const goals = OURS.map((ours) =>
    goal(`${ours}: hand-off p50 in loopback round trips (each batch's p50 over its RTT)`, impl[ours].p50_rtt_range,
      '<=', 3, { counted: ours === 'redislock', unit: ' round trips' }));
  return {
    batches: args.handoffBatches,
    rounds_per_batch: args.handoffRounds,
    rtt_us: median(recs[KINDS[0]].map((r) => r.rtt_us)),
    rtt_by_batch_us: recs[KINDS[0]].map((r) => r.rtt_us),
    impls: impl,
    ratios: rat,
    goals,
  };
}

function printHandoff(s) {
  const out = [];
  out.push('### 2. Hand-off latency (release call -> the waiter holds the lock)', '');
  out.push(`${s.batches} batches of ${s.rounds_per_batch} rounds per implementation, order rotated; a holder ` +
    `releases 5-25 ms after a waiter (another client, same process) called acquire. Loopback RTT p50 ` +
    `${fmt(s.rtt_us)} µs (median of batches).`, '');
  out.push('| implementation | hand-off p50 | hand-off p90 | p50 in RTT, median (min-max) of the batches | per batch | rounds | waiter early |',
    '|---|---|---|---|---|---|---|');
  for (const [kind, m] of Object.entries(s.impls)) {
    out.push(`| ${kind} | ${fmt(m.p50_us, 0, ' µs')} | ${fmt(m.p90_us, 0, ' µs')} | ${fmtRatio(m.p50_rtt_range)} ` +
      `| ${m.p50_rtt_by_batch.map((x) => fmt(x, 1)).join(' ')} | ${m.rounds} | ${m.early} |`);
  }
  out.push('', `Loopback RTT per batch: ${s.rtt_by_batch_us.map((x) => fmt(x)).join(' ')} µs.`);
  out.push('', 'ours / theirs, median (min-max) of the ratios of the batch figures, inside each batch:', '');
  out.push('| pair | hand-off p50 | hand-off p90 |', '|---|---|---|');
  for (const [pair, r] of Object.entries(s.ratios)) out.push(`| ${pair} | ${fmtRatio(r.p50_us)} | ${fmtRatio(r.p90_us)} |`);
  out.push('', ...printGoals(s.goals));
  return out.join('\n');
}

// ---------------------------------------------------------------- 3. hand-off between processes

const XKINDS = ['node', 'c'];

/** The C waiter that `make bench-node` builds (bench/c/handoff_waiter.c). */
function cWaiterPath(args) {
  if (args.cWaiter) return path.resolve(args.cWaiter);
  const deps = path.resolve(ROOT, process.env.BENCH_NODE_DIR || path.join('target', 'bench-node'));
  return path.join(deps, 'handoff_waiter');
}

/** Start one waiter process (handoff_waiter.js or the C one) and wait for its "ready". */
async function startWaiter(kind, port, key, args) {
  const rest = [String(port), key, String(TTL), String(XWAIT_MS)];
  let cmd;
  let argv;
  if (kind === 'node') {
    cmd = process.execPath;
    argv = [path.join(HERE, 'handoff_waiter.js'), ...rest];
  } else {
    cmd = cWaiterPath(args);
    argv = rest;
    if (!fs.existsSync(cmd)) {
      throw new Error(`the C waiter ${cmd} is missing: \`make bench-node\` builds it from bench/c/handoff_waiter.c ` +
        '(or pass --c-waiter PATH, or leave xhandoff out of --parts)');
    }
  }
  const p = spawn(cmd, argv, { stdio: ['pipe', 'pipe', 'inherit'] });
  children.add(p);
  p.on('exit', () => children.delete(p));
  p.on('error', () => {});
  const next = lineReader(p.stdout);
  let l;
  try {
    l = await next(60000);
  } catch (e) {
    l = `nothing (${e.message})`;
  }
  if (l !== 'ready') throw new Error(`hand-off between processes: the ${kind} waiter failed to start (said ${JSON.stringify(l)})`);
  return {
    kind,
    p,
    next,
    async stop() {
      if (p.exitCode === null && p.signalCode === null) {
        const exited = new Promise((resolve) => p.once('exit', resolve));
        p.stdin.end('quit\n');
        const timer = setTimeout(() => p.kill('SIGKILL'), 5000); // only our own waiter, by its handle
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

/** The waiter queue of the lock `name` (the protocol's `{NAME}:queue`, or `NAME:queue` for a hash-tagged name). */
function queueKey(name) {
  return /\{[^}]+\}/.test(name) ? `${name}:queue` : `{${name}}:queue`;
}

/** Poll LLEN of `qkey` until it reaches `n` (every `everyMs`), or throw after `timeoutMs`. */
async function waitQueued(admin, qkey, n, timeoutMs, everyMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const len = await admin.llen(qkey);
    if (len >= n) return len;
    if (Date.now() > deadline) {
      throw new Error(`${what}: ${qkey} holds ${len} waiters after ${timeoutMs} ms, not ${n} ` +
        '(has the protocol\'s queue key changed?)');
    }
    await sleep(everyMs);
  }
}

const XWAIT_MS = 30000;

async function xhandoff(port, args, emit) {
  const admin = await ioredis(port);
  const holder = new redislock.Client(`redis://127.0.0.1:${port}`);
  const keyOf = (kind) => `bench:node:xhandoff:${kind}`;
  const waiters = {};
  try {
    for (const kind of XKINDS) waiters[kind] = await startWaiter(kind, port, keyOf(kind), args);
    for (let i = 0; i < 3; i++) await (await holder.acquire('bench:node:xhandoff:warm', { ttl: TTL })).release();
    const round = async (kind) => {
      const key = keyOf(kind);
      const w = waiters[kind];
      const h = await holder.acquire(key, { ttl: TTL });
      w.p.stdin.write('wait\n');
      await waitQueued(admin, queueKey(key), 1, 10000, 1, `hand-off between processes (${kind} waiter)`);
      await sleep(5 + Math.random() * 20);
      const t0 = now();
      await h.release();
      const l = await w.next(XWAIT_MS + 10000);
      if (l === null || !/^\d+$/.test(l)) throw new Error(`the ${kind} waiter said ${JSON.stringify(l)}`);
      return Number(BigInt(l) - t0) / 1000;
    };
    for (const kind of XKINDS) for (let i = 0; i < 2; i++) await round(kind); // warm-up
    const recs = {};
    for (const kind of XKINDS) recs[kind] = [];
    for (let b = 0; b < args.xhandoffBatches; b++) {
      const rtt = await rttUs(admin);
      for (const kind of order(XKINDS, b)) {
        await handoffBatch('node-xhandoff', kind, b, args.xhandoffRounds, rtt, () => round(kind), recs, emit);
      }
      log(`hand-off between processes: batch ${b + 1} of ${args.xhandoffBatches} (RTT ${fmt(rtt)} µs): ` +
        XKINDS.map((k) => `${k} waiter ${fmt(recs[k][b].p50_us)} µs = ${fmt(recs[k][b].p50_us / rtt, 1)} RTT`).join(', '));
    }
    const impl = {};
    for (const kind of XKINDS) impl[kind] = handoffSummary(recs[kind]);
    const rat = {
      'node/c': {
        p50_us: ratios(recs.node.map((r) => r.p50_us), recs.c.map((r) => r.p50_us)),
        p90_us: ratios(recs.node.map((r) => r.p90_us), recs.c.map((r) => r.p90_us)),
      },
    };
    return {
      batches: args.xhandoffBatches,
      rounds_per_batch: args.xhandoffRounds,
      rtt_us: median(recs.node.map((r) => r.rtt_us)),
      rtt_by_batch_us: recs.node.map((r) => r.rtt_us),
      c_waiter: path.relative(ROOT, cWaiterPath(args)),
      impls: impl,
      ratios: rat,
      goals: [goal('hand-off p50 to a Node.js waiter / to a C waiter (inside each batch)', rat['node/c'].p50_us, '<=', 1.0)],
    };
  } finally {
    for (const w of Object.values(waiters)) await w.stop();
    admin.disconnect();
  }
}

function printXhandoff(s) {
  const out = [];
  out.push('### 3. Hand-off between processes: a Node.js waiter against a C waiter', '');
  out.push(`The holder is this process (a redislock Client, \`acquire(key, { ttl })\`); the waiter is another ` +
    `process: \`bench/node/handoff_waiter.js\` (\`client.acquire(key, { ttl, wait })\`) or \`${s.c_waiter}\` ` +
    `(bench/c/handoff_waiter.c, \`redislock_acquire\` with a wait, the release library). Per round the holder takes the lock, ` +
    `tells the waiter to wait, polls LLEN of the lock's queue until the waiter is queued, sleeps 5-25 ms, ` +
    `stamps CLOCK_MONOTONIC and releases; the figure is the waiter's CLOCK_MONOTONIC stamp when its acquire returned ` +
    `minus the holder's. ${s.batches} batches of ${s.rounds_per_batch} rounds per waiter, order rotated. ` +
    `Loopback RTT p50 ${fmt(s.rtt_us)} µs (median of batches; per batch ${s.rtt_by_batch_us.map((x) => fmt(x)).join(' ')}).`, '');
  out.push('| waiter | hand-off p50 | hand-off p90 | p50 in RTT, median (min-max) of the batches | rounds | waiter early |',
    '|---|---|---|---|---|---|');
  for (const [kind, m] of Object.entries(s.impls)) {
    out.push(`| ${kind} | ${fmt(m.p50_us, 0, ' µs')} | ${fmt(m.p90_us, 0, ' µs')} | ${fmtRatio(m.p50_rtt_range)} ` +
      `| ${m.rounds} | ${m.early} |`);
  }
  out.push('', 'Node.js / C, median (min-max) of the ratios of the batch figures, inside each batch (below 1: the Node.js waiter is quicker):', '');
  out.push('| pair | hand-off p50 | hand-off p90 |', '|---|---|---|');
  for (const [pair, r] of Object.entries(s.ratios)) out.push(`| ${pair} | ${fmtRatio(r.p50_us)} | ${fmtRatio(r.p90_us)} |`);
  out.push('', ...printGoals(s.goals));
  return out.join('\n');
}

// ---------------------------------------------------------------- 4. event loop while waits are pending

const CALL_GOAL_US = 10; // "a call blocks the event loop for at most a few µs"

/**
 * `seconds` of cycles try(key) / release(handle) on the free `key`: the
 * synchronous time of each call (from just before it to its return of the
 * Promise), the event loop's delay meanwhile (monitorEventLoopDelay,
 * resolution 1 ms), process CPU per cycle.
 */
async function loopPhase(tryLock, unlock, key, seconds) {
  const acq = [];
  const rel = [];
  const h = monitorEventLoopDelay({ resolution: 1 });
  const c0 = process.cpuUsage();
  const t0 = now();
  const end = t0 + BigInt(Math.round(seconds * 1e9));
  h.enable();
  while (now() < end) {
    let t = now();
    const p = tryLock(key);
    acq.push(Number(now() - t) / 1000);
    const lock = await p;
    if (lock === null) throw new Error(`event loop: the free key ${key} was found held`);
    t = now();
    const q = unlock(lock);
    rel.push(Number(now() - t) / 1000);
    await q;
  }
  h.disable();
  const wall = Number(now() - t0) / 1000;
  const c1 = process.cpuUsage(c0);
  const a = sortedNum(acq);
  const r = sortedNum(rel);
  const us = (ns) => ns / 1000;
  return {
    cycles: acq.length,
    cycle_mean_us: wall / acq.length,
    cpu_us: (c1.user + c1.system) / acq.length,
    acquire_call_us: { p50: percentile(a, 50), p99: percentile(a, 99), max: a[a.length - 1] },
    release_call_us: { p50: percentile(r, 50), p99: percentile(r, 99), max: r[r.length - 1] },
    loop_delay_us: {
      p50: us(h.percentile(50)),
      p99: us(h.percentile(99)),
      max: us(h.max),
      mean: us(h.mean),
      count: h.count,
    },
  };
}

/** The time of an empty measurement (two clock reads), the floor of the call figures. */
function clockFloorUs() {
  const v = [];
  for (let i = 0; i < 10000; i++) {
    const t = now();
    v.push(Number(now() - t) / 1000);
  }
  return percentile(sortedNum(v), 50);
}

async function loopdelay(port, args, emit) {
  const url = `redis://127.0.0.1:${port}`;
  const admin = await ioredis(port);
  const holder = new redislock.Client(url);
  const waiting = new redislock.Client(url);
  const heldKey = 'bench:node:loop:held';
  const freeKey = 'bench:node:loop:free';
  const n = args.loopWaiters;
  const ours = [(key) => waiting.tryAcquire(key, { ttl: TTL }), (lock) => lock.release()];
  // The reference: the same figures of the hand-written ioredis helper
  // (SET NX PX, EVALSHA), whose calls also write to the socket inside.
  const helper = await open('helper', port);
  const helperKey = 'bench:node:loop:helper';
  const theirs = [(key) => helper.tryLock(key), (h) => helper.unlock(h)];
  for (let i = 0; i < 200; i++) {
    await ours[1](await ours[0](freeKey)); // warm-up
    await theirs[1](await theirs[0](helperKey));
  }
  const floor = clockFloorUs();
  const recs = [];
  try {
    for (let round = 0; round < args.loopRounds; round++) {
      const rec = { bench: 'node-loopdelay', round, waiters: n, seconds: args.loopSeconds, clock_floor_us: floor };
      const baseline = async () => {
        rec.baseline = await loopPhase(...ours, freeKey, args.loopSeconds);
      };
      const reference = async () => {
        rec.helper = await loopPhase(...theirs, helperKey, args.loopSeconds / 2); // a reference: half the window
      };
      const pending = async () => {
        const h = await holder.acquire(heldKey, { ttl: 60000 });
        let got = 0;
        const errors = {};
        const count = (what) => (e) => {
          const k = `${what} ${(e && e.name) || 'Error'}: ${String(e && e.message).slice(0, 100)}`;
          errors[k] = (errors[k] || 0) + 1;
        };
        const tq = now();
        const all = [];
        // In the order the waiters get the lock: when each got it, and
        // when it called release right after.
        const gotAt = [];
        const releasedAt = [];
        for (let i = 0; i < n; i++) {
          all.push(waiting.acquire(heldKey, { ttl: TTL, wait: 60000 }).then(
            (l) => {
              got += 1;
              gotAt.push(now());
              releasedAt.push(now());
              return l.release().catch(count('release:'));
            },
            count('acquire:'),
          ));
        }
        await waitQueued(admin, queueKey(heldKey), n, 60000, 10, 'event loop');
        rec.queued_ms = Number(now() - tq) / 1e6;
        rec.pending = await loopPhase(...ours, freeKey, args.loopSeconds);
        rec.still_queued = await admin.llen(queueKey(heldKey));
        rec.waiters_now = waiting.stats().waitersNow;
        rec.chain_rtt_us = await rttUs(admin);
        const t0 = now();
        await h.release();
        await Promise.all(all);
        rec.chain_ms = Number(now() - t0) / 1e6;
        const hand = [];
        for (let k = 1; k < gotAt.length; k++) hand.push(Number(gotAt[k] - releasedAt[k - 1]) / 1000);
        const sortedHand = sortedNum(hand);
        rec.chain_handoff_p50_us = percentile(sortedHand, 50);
        rec.chain_handoff_p90_us = percentile(sortedHand, 90);
        rec.chain_acq_per_s = got / (rec.chain_ms / 1000);
        rec.chain_got = got;
        rec.chain_errors = errors;
      };
      for (const phase of order([baseline, pending, reference], round)) await phase();
      recs.push(rec);
      emit(rec);
      log(`event loop: round ${round + 1} of ${args.loopRounds}: tryAcquire() call p99 ` +
        `${fmt(rec.baseline.acquire_call_us.p99, 1)} µs idle, ${fmt(rec.pending.acquire_call_us.p99, 1)} µs with ${n} waits; ` +
        `loop delay p99 ${fmt(rec.baseline.loop_delay_us.p99)} / ${fmt(rec.pending.loop_delay_us.p99)} µs; ` +
        `chain ${fmt(rec.chain_ms)} ms (${fmt(rec.chain_acq_per_s)} acq/s, hand-off p50 ${fmt(rec.chain_handoff_p50_us)} µs = ` +
        `${fmt(rec.chain_handoff_p50_us / rec.chain_rtt_us, 1)} RTT)`);
    }
  } finally {
    admin.disconnect();
    await helper.close();
  }
  const phase = (name) => {
    const ps = recs.map((r) => r[name]);
    const fig = (sel) => ({
      p50: median(ps.map((p) => sel(p).p50)),
      p99: median(ps.map((p) => sel(p).p99)),
      max: Math.max(...ps.map((p) => sel(p).max)),
    });
    return {
      cycles: median(ps.map((p) => p.cycles)),
      cycle_mean_us: median(ps.map((p) => p.cycle_mean_us)),
      cpu_us: median(ps.map((p) => p.cpu_us)),
      acquire_call_us: fig((p) => p.acquire_call_us),
      release_call_us: fig((p) => p.release_call_us),
      loop_delay_us: fig((p) => p.loop_delay_us),
    };
  };
  const within = (sel) => ratios(recs.map((r) => sel(r.pending)), recs.map((r) => sel(r.baseline)));
  const s = {
    rounds: args.loopRounds,
    seconds: args.loopSeconds,
    waiters: n,
    clock_floor_us: floor,
    baseline: phase('baseline'),
    pending: phase('pending'),
    helper: phase('helper'),
    ratios: {
      'pending/baseline': {
        acquire_call_p99: within((p) => p.acquire_call_us.p99),
        release_call_p99: within((p) => p.release_call_us.p99),
        loop_delay_p99: within((p) => p.loop_delay_us.p99),
        cycle_mean: within((p) => p.cycle_mean_us),
        cpu: within((p) => p.cpu_us),
      },
      'pending/helper': {
        acquire_call_p99: ratios(recs.map((r) => r.pending.acquire_call_us.p99), recs.map((r) => r.helper.acquire_call_us.p99)),
        release_call_p99: ratios(recs.map((r) => r.pending.release_call_us.p99), recs.map((r) => r.helper.release_call_us.p99)),
        loop_delay_p99: ratios(recs.map((r) => r.pending.loop_delay_us.p99), recs.map((r) => r.helper.loop_delay_us.p99)),
        cycle_mean: ratios(recs.map((r) => r.pending.cycle_mean_us), recs.map((r) => r.helper.cycle_mean_us)),
        cpu: ratios(recs.map((r) => r.pending.cpu_us), recs.map((r) => r.helper.cpu_us)),
      },
    },
    queued_ms: median(recs.map((r) => r.queued_ms)),
    still_queued: Math.min(...recs.map((r) => r.still_queued)),
    chain_ms: median(recs.map((r) => r.chain_ms)),
    chain_acq_per_s: median(recs.map((r) => r.chain_acq_per_s)),
    chain_acq_per_s_range: {
      min: Math.min(...recs.map((r) => r.chain_acq_per_s)),
      max: Math.max(...recs.map((r) => r.chain_acq_per_s)),
    },
    chain_handoff_p50_us: median(recs.map((r) => r.chain_handoff_p50_us)),
    chain_handoff_p90_us: median(recs.map((r) => r.chain_handoff_p90_us)),
    chain_rtt_us: median(recs.map((r) => r.chain_rtt_us)),
    chain_handoff_p50_rtt: ratios(recs.map((r) => r.chain_handoff_p50_us), recs.map((r) => r.chain_rtt_us)),
    chain_got: recs.reduce((a, r) => a + r.chain_got, 0),
    chain_failed: recs.reduce((a, r) => a + Object.values(r.chain_errors).reduce((x, y) => x + y, 0), 0),
    chain_errors: Object.assign({}, ...recs.map((r) => r.chain_errors)),
  };
  const worst = Math.max(s.pending.acquire_call_us.p99, s.pending.release_call_us.p99);
  s.goals = [goal(`a call blocks the event loop for at most a few µs (taken as ${CALL_GOAL_US} µs): the larger p99 of ` +
    `the tryAcquire() and release() calls with ${n} waits pending, median over rounds`, worst, '<=', CALL_GOAL_US, { unit: ' µs' }),
  goal(`hand-off within one process down the chain of ${n} waiters (each releases as soon as it holds the lock; ` +
    'its release call -> the next holds it): p50 in loopback round trips of the same round', s.chain_handoff_p50_rtt,
    '<=', 3, { counted: false, unit: ' round trips' })];
  return s;
}

function printLoopdelay(s) {
  const out = [];
  out.push(`### 4. The event loop while ${s.waiters.toLocaleString('en')} waits are pending`, '');
  out.push(`One client holds a lock; ${s.waiters.toLocaleString('en')} \`acquire(key, { ttl, wait: 60000 })\` calls of another ` +
    `client wait for it (all queued on the server: LLEN of the queue). Meanwhile, for ${s.seconds} s, that waiting client ` +
    `runs \`tryAcquire(key, { ttl })\` / \`release()\` cycles on a free key; the same cycles with no waits pending are ` +
    `the baseline, and the helper's cycles (ioredis SET NX PX, EVALSHA: calls that also write to the socket before they ` +
    `return) the reference (for half as long), in the same round (${s.rounds} round(s), the order rotated). ` +
    `"call": the synchronous time of the call, ` +
    `from just before it to its return of the Promise (two clock reads alone take ${fmt(s.clock_floor_us, 2)} µs). ` +
    `"loop delay": perf_hooks.monitorEventLoopDelay({ resolution: 1 }) over the same cycles; it records the interval ` +
    `between its 1 ms timer's callbacks, so an idle loop reads about 1,000 µs plus the timer's own lateness. ` +
    `Medians over rounds (max: the largest of the rounds); µs.`, '');
  out.push('| phase | cycles | cycle mean | process CPU/cycle | try call p50 / p99 / max | release call p50 / p99 / max ' +
    '| loop delay p50 / p99 / max |', '|---|---|---|---|---|---|---|');
  const three = (f, d = 1) => `${fmt(f.p50, d)} / ${fmt(f.p99, d)} / ${fmt(f.max, d)}`;
  const rows = [
    ['redislock, no waits', s.baseline],
    [`redislock, ${s.waiters.toLocaleString('en')} waits pending`, s.pending],
    ['helper (ioredis), no waits', s.helper],
  ];
  for (const [name, p] of rows) {
    out.push(`| ${name} | ${fmt(p.cycles)} | ${fmt(p.cycle_mean_us, 1)} | ${fmt(p.cpu_us, 1)} | ${three(p.acquire_call_us)} ` +
      `| ${three(p.release_call_us)} | ${three(p.loop_delay_us, 0)} |`);
  }
  out.push('', 'Median (min-max) of the ratios inside each round (for the helper: its SET and EVALSHA calls in the call columns):', '');
  out.push('| pair | try call p99 | release call p99 | loop delay p99 | cycle mean | process CPU/cycle |', '|---|---|---|---|---|---|');
  for (const [pair, r] of [['redislock with waits / without', s.ratios['pending/baseline']],
    ['redislock with waits / helper without', s.ratios['pending/helper']]]) {
    out.push(`| ${pair} | ${fmtRatio(r.acquire_call_p99)} | ${fmtRatio(r.release_call_p99)} | ${fmtRatio(r.loop_delay_p99)} ` +
      `| ${fmtRatio(r.cycle_mean)} | ${fmtRatio(r.cpu)} |`);
  }
  out.push('', `Then the held lock is released and the ${s.waiters.toLocaleString('en')} waiters each get and release it in turn:`, '');
  out.push('| waiters | all queued after | still queued at the end of the window | chain | acquisitions/s (min-max) ' +
    '| hand-off p50 / p90 | p50 in RTT (min-max) | RTT | got | failed |',
    '|---|---|---|---|---|---|---|---|---|---|');
  out.push(`| ${s.waiters} | ${fmt(s.queued_ms)} ms | ${s.still_queued} | ${fmt(s.chain_ms)} ms ` +
    `| ${fmt(s.chain_acq_per_s)} (${fmt(s.chain_acq_per_s_range.min)}-${fmt(s.chain_acq_per_s_range.max)}) ` +
    `| ${fmt(s.chain_handoff_p50_us)} / ${fmt(s.chain_handoff_p90_us)} µs | ${fmtRatio(s.chain_handoff_p50_rtt)} ` +
    `| ${fmt(s.chain_rtt_us)} µs | ${s.chain_got} of ${s.waiters * s.rounds} | ${s.chain_failed} |`);
  const errs = Object.entries(s.chain_errors).map(([k, v]) => `- ${v} × ${k}`);
  if (errs.length) out.push('', 'Errors of the waiters:', '', ...errs);
  out.push('', ...printGoals(s.goals));
  return out.join('\n');
}

// ---------------------------------------------------------------- 5. contended

function lineReader(stream) {
  const rl = readline.createInterface({ input: stream });
  const lines = [];
  let waiting = null;
  let closed = false;
  rl.on('line', (l) => {
    if (waiting) {
      const w = waiting;
      waiting = null;
      w(l);
    } else lines.push(l);
  });
  rl.on('close', () => {
    closed = true;
    if (waiting) waiting(null);
  });
  return (timeoutMs) =>
    new Promise((resolve, reject) => {
      if (lines.length) return resolve(lines.shift());
      if (closed) return resolve(null);
      const timer = setTimeout(() => {
        waiting = null;
        reject(new Error('timed out'));
      }, timeoutMs);
      waiting = (l) => {
        clearTimeout(timer);
        resolve(l);
      };
    });
}

async function sleepUntil(t) {
  const left = Number(t - now()) / 1e6;
  if (left > 0) await sleep(left);
}

async function contendedRun(kind, port, args, round, admin) {
  const key = 'bench:node:contended';
  const counterKey = 'bench:node:counter';
  await admin.del(key, counterKey);
  const procs = [];
  for (let i = 0; i < args.workers; i++) {
    const p = spawn(process.execPath,
      [path.join(HERE, 'worker.js'), kind, String(port), key, counterKey, String(args.pollMs), String(args.holdMs)],
      { stdio: ['pipe', 'pipe', 'inherit'] });
    children.add(p);
    p.on('exit', () => children.delete(p));
    procs.push({ p, next: lineReader(p.stdout) });
  }
  for (const { next } of procs) {
    const l = await next(60000);
    if (l !== 'ready') throw new Error(`contended ${kind}: a worker failed to start (said ${JSON.stringify(l)})`);
  }
  const start = now() + 300000000n;
  const end = start + BigInt(Math.round(args.seconds * 1e9));
  for (const { p } of procs) p.stdin.write(`${start} ${end}\n`);
  await sleepUntil(start);
  const s0 = await snapshot(admin);
  await sleepUntil(end);
  const s1 = await snapshot(admin);
  const results = [];
  for (const { p, next } of procs) {
    let l = null;
    try {
      l = await next(60000);
    } catch (e) {
      p.kill('SIGKILL'); // only our own worker, by its handle
    }
    results.push(l ? JSON.parse(l) : { call: [], acq: [], rel: [], errors: {}, release_errors: {}, total: 0, hung: true });
  }
  const windowUs = args.seconds * 1e6;
  const counts = results.map((w) => w.acq.filter((a) => a <= windowUs).length);
  const acquisitions = counts.reduce((a, b) => a + b, 0);
  const sumSq = counts.reduce((a, b) => a + b * b, 0);
  const totalAll = results.reduce((a, w) => a + w.total, 0);
  const counter = Number(await admin.get(counterKey)) || 0;
  const merge = (field) => {
    const m = {};
    for (const w of results) for (const [k, v] of Object.entries(w[field])) m[k] = (m[k] || 0) + v;
    return m;
  };
  const errors = merge('errors');
  const releaseErrors = merge('release_errors');
  const events = results
    .flatMap((w, i) => w.acq.map((a, j) => [a, w.rel[j], i]))
    .sort((x, y) => x[0] - y[0]);
  const handoffs = [];
  let overlaps = 0;
  for (let k = 1; k < events.length; k++) {
    if (events[k][0] < events[k - 1][1]) overlaps += 1;
    if (events[k][2] !== events[k - 1][2]) handoffs.push(events[k][0] - events[k - 1][1]);
  }
  const hs = sortedNum(handoffs);
  const waits = sortedNum(results.flatMap((w) => w.call.map((c, j) => (w.acq[j] - c) / 1000)));
  const errorCount = Object.values(errors).reduce((a, b) => a + b, 0);
  return {
    bench: 'node-contended',
    impl: kind,
    round,
    workers: args.workers,
    seconds: args.seconds,
    hold_ms: args.holdMs,
    acquisitions,
    acq_per_s: acquisitions / args.seconds,
    per_worker: counts,
    fair_min: Math.min(...counts),
    fair_max: Math.max(...counts),
    jain: acquisitions ? (acquisitions * acquisitions) / (counts.length * sumSq) : 0,
    errors: errorCount,
    errors_by_kind: errors,
    release_errors: Object.values(releaseErrors).reduce((a, b) => a + b, 0),
    release_errors_by_kind: releaseErrors,
    lost_updates: totalAll - counter,
    overlaps,
    handoff_p50_us: percentile(hs, 50),
    handoff_p90_us: percentile(hs, 90),
    switch_frac: handoffs.length / Math.max(1, events.length - 1),
    wait_p99_ms: percentile(waits, 99),
    wait_max_ms: waits.length ? waits[waits.length - 1] : null,
    cmds_per_acq: (s1.commands - s0.commands - 1) / Math.max(1, acquisitions),
    cpu_per_acq_us: results.reduce((a, w) => a + (w.cpu_us || 0), 0) / Math.max(1, acquisitions),
    hung_workers: results.filter((w) => w.hung).length,
  };
}

async function contended(port, args, emit) {
  const admin = await ioredis(port);
  const recs = {};
  for (const kind of CONTENDED_KINDS) recs[kind] = [];
  for (let round = 0; round < args.contendedRounds; round++) {
    for (const kind of order(CONTENDED_KINDS, round)) {
      const rec = await contendedRun(kind, port, args, round, admin);
      recs[kind].push(rec);
      emit(rec);
      log(`contended: round ${round + 1} ${kind}: ${fmt(rec.acq_per_s)} acq/s, per worker ${rec.fair_min}-${rec.fair_max} ` +
        `(Jain ${fmt(rec.jain, 3)}), ${rec.errors} failed acquires, lost ${rec.lost_updates}`);
    }
  }
  admin.disconnect();
  const impl = {};
  for (const kind of CONTENDED_KINDS) {
    const rs = recs[kind];
    const m = {};
    for (const f of ['acq_per_s', 'fair_min', 'fair_max', 'jain', 'handoff_p50_us', 'handoff_p90_us',
      'switch_frac', 'wait_p99_ms', 'wait_max_ms', 'cmds_per_acq', 'cpu_per_acq_us']) {
      m[f] = median(rs.map((r) => r[f]));
    }
    m.errors = rs.reduce((a, r) => a + r.errors, 0);
    m.release_errors = rs.reduce((a, r) => a + r.release_errors, 0);
    m.acquisitions = rs.reduce((a, r) => a + r.acquisitions, 0);
    m.errors_by_kind = {};
    for (const r of rs) {
      for (const [k, v] of Object.entries({ ...r.errors_by_kind, ...r.release_errors_by_kind })) {
        m.errors_by_kind[k] = (m.errors_by_kind[k] || 0) + v;
      }
    }
    m.lost_updates = rs.reduce((a, r) => a + r.lost_updates, 0);
    m.overlaps = rs.reduce((a, r) => a + r.overlaps, 0);
    m.hung_workers = rs.reduce((a, r) => a + r.hung_workers, 0);
    impl[kind] = m;
  }
  const rat = {};
  for (const ours of OURS) {
    for (const theirs of THEIRS) {
      rat[`${ours}/${theirs}`] = {
        acq_per_s: ratios(recs[ours].map((r) => r.acq_per_s), recs[theirs].map((r) => r.acq_per_s)),
        jain: ratios(recs[ours].map((r) => r.jain), recs[theirs].map((r) => r.jain)),
        cmds_per_acq: ratios(recs[ours].map((r) => r.cmds_per_acq), recs[theirs].map((r) => r.cmds_per_acq)),
        cpu_per_acq_us: ratios(recs[ours].map((r) => r.cpu_per_acq_us), recs[theirs].map((r) => r.cpu_per_acq_us)),
      };
    }
  }
  // Issue 53's goals for the default; the fenced variant for information.
  const goals = OURS.flatMap((ours) => {
    const o = { counted: ours === 'redislock' };
    return [
      goal(`${ours}: acquisitions/s / the helper's`, rat[`${ours}/helper`].acq_per_s, '>=', 1.0, o),
      goal(`${ours}: Jain's index`, impl[ours].jain, '>=', 0.9, o),
      goal(`${ours}: the workers' CPU per acquisition / the helper's`, rat[`${ours}/helper`].cpu_per_acq_us, '<=', 1.0, o),
    ];
  });
  return {
    goals,
    rounds: args.contendedRounds,
    workers: args.workers,
    seconds: args.seconds,
    hold_ms: args.holdMs,
    poll_ms: args.pollMs,
    impls: impl,
    ratios: rat,
  };
}

function printContended(s) {
  const out = [];
  out.push(`### 5. ${s.workers} contending processes on one key`, '');
  out.push(`${s.rounds} rounds of ${s.seconds} s per implementation, order rotated; each acquisition holds ` +
    `~${s.hold_ms} ms (GET, a ${s.hold_ms} ms timer, SET of a counter); the helper sleeps ${s.poll_ms} ms between ` +
    `attempts; node-redlock has its defaults (11 attempts 200 ± 100 ms apart). Medians over rounds; ` +
    `failed acquires, lost updates and overlaps summed.`, '');
  out.push('| implementation | acq/s | least / most per worker | Jain | failed acquires | failed releases | lost | ' +
    'hand-off p50 / p90 | wait p99 / max | cmds/acq | CPU/acq |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const [kind, m] of Object.entries(s.impls)) {
    out.push(`| ${kind} | ${fmt(m.acq_per_s)} | ${fmt(m.fair_min)} / ${fmt(m.fair_max)} | ${fmt(m.jain, 3)} ` +
      `| ${m.errors} of ${m.acquisitions + m.errors} | ${m.release_errors} | ${m.lost_updates}${m.overlaps ? ` (${m.overlaps} overlaps)` : ''} ` +
      `| ${fmt(m.handoff_p50_us, 0, ' µs')} / ${fmt(m.handoff_p90_us, 0, ' µs')} ` +
      `| ${fmt(m.wait_p99_ms, 0, ' ms')} / ${fmt(m.wait_max_ms, 0, ' ms')} | ${fmt(m.cmds_per_acq, 1)} ` +
      `| ${fmt(m.cpu_per_acq_us, 0, ' µs')} |` +
      (m.hung_workers ? ` ${m.hung_workers} hung` : ''));
  }
  const errs = Object.entries(s.impls).flatMap(([kind, m]) =>
    Object.entries(m.errors_by_kind).map(([k, v]) => `- ${kind}: ${v} × ${k}`));
  if (errs.length) out.push('', 'Errors (acquire or release), summed over rounds:', '', ...errs);
  out.push('', 'ours / theirs, median (min-max) of the ratios inside each round (acq/s and Jain above 1: ours is higher; cmds/acq below 1: ours sends fewer):', '');
  out.push('| pair | acq/s | Jain | cmds/acq | CPU/acq |', '|---|---|---|---|---|');
  for (const [pair, r] of Object.entries(s.ratios)) {
    out.push(`| ${pair} | ${fmtRatio(r.acq_per_s)} | ${fmtRatio(r.jain)} | ${fmtRatio(r.cmds_per_acq)} | ${fmtRatio(r.cpu_per_acq_us)} |`);
  }
  out.push('', ...printGoals(s.goals));
  return out.join('\n');
}

// ---------------------------------------------------------------- main

function defaultOut(quick) {
  const d = new Date();
  const day = `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
  return path.join(HERE, '..', 'results', day + (quick ? '-quick' : ''), 'node.json');
}

function stopChildren() {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const out = path.resolve(args.out || defaultOut(args.quick));
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const records = [];
  const emit = (rec) => records.push(rec);
  const started = Date.now();
  let server = null;
  const onSignal = (sig) => {
    stopChildren();
    if (server) server.stop();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('exit', stopChildren);
  const summary = { quick: args.quick, node: process.version, date: new Date().toISOString() };
  const printed = [];
  try {
    server = await startServer();
    const admin = await ioredis(server.port);
    const info = parseInfo(await admin.call('INFO', 'server'));
    admin.disconnect();
    const family = info.fields.server_name === 'valkey' ? 'valkey' : 'redis';
    summary.server = `${family} ${info.fields[`${family}_version`] || info.fields.redis_version}`;
    log(`bench-node: ${summary.server} (${server.bin}) on 127.0.0.1:${server.port}, node ${process.version}`);
    const run = {
      uncontended: [uncontended, printUncontended],
      handoff: [handoff, printHandoff],
      xhandoff: [xhandoff, printXhandoff],
      loopdelay: [loopdelay, printLoopdelay],
      contended: [contended, printContended],
    };
    summary.part_seconds = {};
    for (const part of PARTS) {
      if (!args.parts.includes(part)) continue;
      const t = Date.now();
      summary[part] = await run[part][0](server.port, args, emit);
      printed.push(run[part][1](summary[part]));
      summary.part_seconds[part] = Math.round((Date.now() - t) / 100) / 10;
      log(`${part}: ${summary.part_seconds[part]} s`);
    }
  } finally {
    stopChildren();
    if (server) server.stop();
  }
  summary.goals = ['uncontended', 'handoff', 'xhandoff', 'loopdelay', 'contended']
    .flatMap((part) => (summary[part] ? summary[part].goals.map((g) => ({ part, ...g })) : []));
  summary.seconds = Math.round((Date.now() - started) / 1000);
  const report =
    `## Node.js: redislock, node-redlock 5.0.0-beta.2, ioredis helper (${summary.server}, node ${process.version})\n\n` +
    printed.join('\n\n') +
    '\n';
  // The summary indented, each record on a line of its own.
  fs.writeFileSync(
    out,
    `{"summary": ${JSON.stringify(summary, null, 1)},\n"report": ${JSON.stringify(report)},\n` +
      `"records": [\n${records.map((r) => JSON.stringify(r)).join(',\n')}\n]}\n`,
  );
  process.stdout.write(`\n${report}\nbench-node took ${summary.seconds} s; written to ${path.relative(process.cwd(), out)}\n`);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench-node: ${(e && e.stack) || e}\n`);
    process.exit(1);
  },
);
