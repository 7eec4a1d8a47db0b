'use strict';
// make bench-node: the Node.js addon (bindings/node) beside node-redlock
// 5.0.0-beta.2 and a hand-written ioredis helper (impls.js), on a throwaway
// redis-server of its own ($REDIS_SERVER, default redis-server) on a free
// loopback port:
//
//   node bench/node/bench.js [--quick] [--rounds N] [--batch N] [--calibrate N]
//        [--handoff-batches N] [--handoff-rounds N] [--contended-rounds N]
//        [--seconds S] [--workers N] [--hold-ms MS] [--poll-ms MS]
//        [--parts uncontended,handoff,contended] [--out PATH]
//
// 1. uncontended  one process, one key per implementation, acquire + release
//    of a free lock; rounds (--rounds, 30) of one batch (--batch, 200 cycles)
//    per implementation, the order rotated every round. Per batch: the p50
//    and mean µs per cycle, and the server's side from INFO cpu and INFO
//    commandstats read before and after it (calls and usec per command per
//    cycle; commands run inside a script are counted under their own names
//    too, and a script's usec already holds theirs, so "command time" and
//    "requests" count only what clients sent: the share of each name's calls
//    that ran inside a script or MULTI comes from --calibrate cycles per
//    implementation watched with MONITOR before the timed rounds, as in
//    bench/c/cost.c). Ratios ours / theirs are taken inside each round.
// 2. hand-off  a holder and a waiter (two clients of one implementation in
//    this process) on one key: the waiter's acquire is called, the holder
//    releases after a random 5-25 ms, and the figure is the time from just
//    before the release call to the waiter's acquire resolving (one process
//    clock). Batches (--handoff-batches, 8) of --handoff-rounds (16) rounds
//    per implementation, the order rotated; median and p90 over all rounds,
//    ratios of the batch medians taken inside each batch; the loopback round
//    trip (PING p50) before each batch.
// 3. contended  --workers (8) processes (worker.js) loop acquire, GET a
//    counter, hold --hold-ms (1), SET it + 1, release, on one key for
//    --seconds (3); --contended-rounds (5) rounds of one run per
//    implementation, the order rotated. Per run: acquisitions per worker
//    (least / most, Jain's index (Σx)² / (n Σx²)), acquisitions/s, failed
//    acquires and releases by error (counted, the worker goes on), lost
//    updates, hand-off p50 between different workers, the longest wait,
//    server commands per acquisition.
//
// It prints Markdown tables (medians over rounds, and the median (min-max)
// of the ratios) and writes them with the summary and every batch's or
// run's record as one JSON document to --out (default
// bench/results/DATE/node.json, DATE-quick with --quick; rewritten: not a
// .jsonl, which bench/run.py clears from DATE/ when it starts). --quick: a
// smoke run of under a minute.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

const { KINDS, OURS, ioredis, open, sleep, ROOT } = require('./impls');

const HERE = __dirname;
const now = () => process.hrtime.bigint();
const THEIRS = KINDS.filter((k) => !OURS.includes(k));
const CONTENDED_KINDS = ['redislock', 'redislock-unfenced', 'redlock', 'helper'];

// ---------------------------------------------------------------- arguments

function parseArgs(argv) {
  const a = {
    quick: false,
    rounds: 30,
    batch: 200,
    calibrate: 100,
    handoffBatches: 8,
    handoffRounds: 16,
    contendedRounds: 5,
    seconds: 3,
    workers: 8,
    holdMs: 1,
    pollMs: 10,
    parts: ['uncontended', 'handoff', 'contended'],
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
    else if (name === 'out') a.out = value;
    else {
      a[name] = Number(value);
      if (!Number.isFinite(a[name]) || a[name] <= 0) throw new Error(`--${m[1]} must be a positive number`);
    }
    set[name] = true;
  }
  if (a.quick) {
    const quick = { rounds: 8, calibrate: 50, handoffBatches: 3, handoffRounds: 6, contendedRounds: 1, seconds: 1.5 };
    for (const [k, v] of Object.entries(quick)) if (!set[k]) a[k] = v;
  }
  for (const p of a.parts) {
    if (!['uncontended', 'handoff', 'contended'].includes(p)) throw new Error(`unknown part ${p}`);
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
    await impl.unlock(await impl.lock(key));
    await admin.echo(`${current.marker}first`);
    for (let i = 1; i < n; i++) await impl.unlock(await impl.lock(key));
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

async function uncontended(port, args, emit) {
  const admin = await ioredis(port);
  const impls = {};
  for (const kind of KINDS) impls[kind] = await open(kind, port, { pollMs: args.pollMs });
  const keyOf = (kind) => `bench:node:cycle:${kind}`;
  for (const kind of KINDS) {
    for (let i = 0; i < 50; i++) await impls[kind].unlock(await impls[kind].lock(keyOf(kind)));
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
      const t0 = now();
      for (let i = 0; i < n; i++) {
        const t = now();
        await impl.unlock(await impl.lock(key));
        lat[i] = Number(now() - t) / 1000;
      }
      const wall = Number(now() - t0) / 1000;
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
  const FIG = ['p50_us', 'mean_us', 'server_cpu_us', 'cmd_us', 'requests', 'commands'];
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
  const rat = {};
  for (const ours of OURS) {
    for (const theirs of THEIRS) {
      rat[`${ours}/${theirs}`] = Object.fromEntries(
        ['p50_us', 'mean_us', 'server_cpu_us', 'cmd_us'].map((f) => [
          f,
          ratios(recs[ours].map((r) => r[f]), recs[theirs].map((r) => r[f])),
        ]),
      );
    }
  }
  rat['redislock/redislock-unfenced'] = Object.fromEntries(
    ['p50_us', 'mean_us', 'server_cpu_us', 'cmd_us'].map((f) => [
      f,
      ratios(recs.redislock.map((r) => r[f]), recs['redislock-unfenced'].map((r) => r[f])),
    ]),
  );
  return { rounds: args.rounds, batch: args.batch, calibrate: args.calibrate, impls: impl, ratios: rat };
}

function printUncontended(s) {
  const out = [];
  out.push(`### 1. Uncontended cycle (acquire + release of a free lock)`, '');
  out.push(`${s.rounds} rounds of ${s.batch} cycles per implementation, order rotated; medians over rounds. ` +
    `Server figures per cycle from INFO deltas around each batch (one INFO of the batch included in CPU).`, '');
  out.push('| implementation | cycle p50 | cycle mean | server CPU | command time | requests | commands | one cycle (MONITOR) |');
  out.push('|---|---|---|---|---|---|---|---|');
  for (const [kind, m] of Object.entries(s.impls)) {
    out.push(`| ${kind} | ${fmt(m.p50_us, 0, ' µs')} | ${fmt(m.mean_us, 0, ' µs')} | ${fmt(m.server_cpu_us, 1, ' µs')} ` +
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
  out.push('', 'ours / theirs, median (min-max) of the ratios inside each round (below 1: ours is faster or cheaper):', '');
  out.push('| pair | cycle p50 | cycle mean | server CPU | command time |', '|---|---|---|---|---|');
  for (const [pair, r] of Object.entries(s.ratios)) {
    out.push(`| ${pair} | ${fmtRatio(r.p50_us)} | ${fmtRatio(r.mean_us)} | ${fmtRatio(r.server_cpu_us)} | ${fmtRatio(r.cmd_us)} |`);
  }
  return out.join('\n');
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
      const samples = [];
      for (let i = 0; i < args.handoffRounds; i++) samples.push(await round(pairs[kind]));
      const s = sortedNum(samples);
      const rec = {
        bench: 'node-handoff',
        impl: kind,
        batch: b,
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
    log(`hand-off: batch ${b + 1} of ${args.handoffBatches} (RTT ${fmt(rtt)} µs): ` +
      KINDS.map((k) => `${k} ${fmt(recs[k][b].p50_us)} µs`).join(', '));
  }
  for (const kind of KINDS) {
    await pairs[kind].holder.close();
    await pairs[kind].waiter.close();
  }
  admin.disconnect();
  const impl = {};
  for (const kind of KINDS) {
    const all = sortedNum(recs[kind].flatMap((r) => r.samples_us));
    impl[kind] = {
      rounds: all.length,
      p50_us: percentile(all, 50),
      p90_us: percentile(all, 90),
      p50_rtt: median(recs[kind].map((r) => r.p50_us / r.rtt_us)),
      early: recs[kind].reduce((n, r) => n + r.early, 0),
    };
  }
  const rat = {};
  for (const ours of OURS) {
    for (const theirs of THEIRS) {
      rat[`${ours}/${theirs}`] = {
        p50_us: ratios(recs[ours].map((r) => r.p50_us), recs[theirs].map((r) => r.p50_us)),
        p90_us: ratios(recs[ours].map((r) => r.p90_us), recs[theirs].map((r) => r.p90_us)),
      };
    }
  }
  return {
    batches: args.handoffBatches,
    rounds_per_batch: args.handoffRounds,
    rtt_us: median(recs[KINDS[0]].map((r) => r.rtt_us)),
    impls: impl,
    ratios: rat,
  };
}

function printHandoff(s) {
  const out = [];
  out.push('### 2. Hand-off latency (release call -> the waiter holds the lock)', '');
  out.push(`${s.batches} batches of ${s.rounds_per_batch} rounds per implementation, order rotated; a holder ` +
    `releases 5-25 ms after a waiter (another client, same process) called acquire. Loopback RTT p50 ` +
    `${fmt(s.rtt_us)} µs (median of batches).`, '');
  out.push('| implementation | hand-off p50 | hand-off p90 | p50 in RTT | rounds | waiter early |', '|---|---|---|---|---|---|');
  for (const [kind, m] of Object.entries(s.impls)) {
    out.push(`| ${kind} | ${fmt(m.p50_us, 0, ' µs')} | ${fmt(m.p90_us, 0, ' µs')} | ${fmt(m.p50_rtt, 1)} | ${m.rounds} | ${m.early} |`);
  }
  out.push('', 'ours / theirs, median (min-max) of the ratios of the batch figures, inside each batch:', '');
  out.push('| pair | hand-off p50 | hand-off p90 |', '|---|---|---|');
  for (const [pair, r] of Object.entries(s.ratios)) out.push(`| ${pair} | ${fmtRatio(r.p50_us)} | ${fmtRatio(r.p90_us)} |`);
  return out.join('\n');
}

// ---------------------------------------------------------------- 3. contended

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
      'switch_frac', 'wait_p99_ms', 'wait_max_ms', 'cmds_per_acq']) {
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
      };
    }
  }
  return {
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
  out.push(`### 3. ${s.workers} contending processes on one key`, '');
  out.push(`${s.rounds} rounds of ${s.seconds} s per implementation, order rotated; each acquisition holds ` +
    `~${s.hold_ms} ms (GET, a ${s.hold_ms} ms timer, SET of a counter); the helper sleeps ${s.poll_ms} ms between ` +
    `attempts; node-redlock has its defaults (11 attempts 200 ± 100 ms apart). Medians over rounds; ` +
    `failed acquires, lost updates and overlaps summed.`, '');
  out.push('| implementation | acq/s | least / most per worker | Jain | failed acquires | failed releases | lost | ' +
    'hand-off p50 / p90 | wait p99 / max | cmds/acq |');
  out.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const [kind, m] of Object.entries(s.impls)) {
    out.push(`| ${kind} | ${fmt(m.acq_per_s)} | ${fmt(m.fair_min)} / ${fmt(m.fair_max)} | ${fmt(m.jain, 3)} ` +
      `| ${m.errors} of ${m.acquisitions + m.errors} | ${m.release_errors} | ${m.lost_updates}${m.overlaps ? ` (${m.overlaps} overlaps)` : ''} ` +
      `| ${fmt(m.handoff_p50_us, 0, ' µs')} / ${fmt(m.handoff_p90_us, 0, ' µs')} ` +
      `| ${fmt(m.wait_p99_ms, 0, ' ms')} / ${fmt(m.wait_max_ms, 0, ' ms')} | ${fmt(m.cmds_per_acq, 1)} |` +
      (m.hung_workers ? ` ${m.hung_workers} hung` : ''));
  }
  const errs = Object.entries(s.impls).flatMap(([kind, m]) =>
    Object.entries(m.errors_by_kind).map(([k, v]) => `- ${kind}: ${v} × ${k}`));
  if (errs.length) out.push('', 'Errors (acquire or release), summed over rounds:', '', ...errs);
  out.push('', 'ours / theirs, median (min-max) of the ratios inside each round (acq/s and Jain above 1: ours is higher; cmds/acq below 1: ours sends fewer):', '');
  out.push('| pair | acq/s | Jain | cmds/acq |', '|---|---|---|---|');
  for (const [pair, r] of Object.entries(s.ratios)) {
    out.push(`| ${pair} | ${fmtRatio(r.acq_per_s)} | ${fmtRatio(r.jain)} | ${fmtRatio(r.cmds_per_acq)} |`);
  }
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
    if (args.parts.includes('uncontended')) {
      summary.uncontended = await uncontended(server.port, args, emit);
      printed.push(printUncontended(summary.uncontended));
    }
    if (args.parts.includes('handoff')) {
      summary.handoff = await handoff(server.port, args, emit);
      printed.push(printHandoff(summary.handoff));
    }
    if (args.parts.includes('contended')) {
      summary.contended = await contended(server.port, args, emit);
      printed.push(printContended(summary.contended));
    }
  } finally {
    stopChildren();
    if (server) server.stop();
  }
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
