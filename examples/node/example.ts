// A report service's locking, written against the declarations of the
// Node.js binding (bindings/node/index.d.ts). `make test-node` type-checks
// it (tsc -p examples/node/tsconfig.json); compiled, it runs against a
// server (one URL) or a Redlock deployment (several URLs):
//
//   node example.js redis://127.0.0.1:6379/0
//   node example.js redis://10.0.0.1:6379 redis://10.0.0.2:6379 redis://10.0.0.3:6379

import {
  Client,
  DEFAULT_TTL,
  Lock,
  LockConnectionError,
  LockError,
  LockNotOwnedError,
  LockQuorumError,
  LockServerError,
  LockTimeoutError,
  LockUnconfirmedError,
  LockWrongTypeError,
  type AcquireOptions,
  type ClientStats,
  type DoctorFinding,
  type DoctorReport,
  type Histogram,
  type LockName,
} from 'redislock';

/**
 * Where the reports go. It refuses a write whose fence is not above the
 * last one it took: a holder that was paused past its TTL, and whose lock
 * another process took meanwhile, cannot overwrite the newer report.
 */
class ReportStore {
  #lastFence = 0;
  readonly reports = new Map<string, string>();

  async write(name: string, body: string, fence: number): Promise<void> {
    if (fence <= this.#lastFence) throw new Error(`${name}: stale writer (fence ${fence} <= ${this.#lastFence})`);
    this.#lastFence = fence;
    this.reports.set(name, body);
  }
}

/** One line about a held lock, for the logs. */
function describeLock(lock: Lock): string {
  const name: LockName = lock.name;
  const shown = typeof name === 'string' ? name : Buffer.from(name).toString('hex');
  return `${shown} token=${lock.token.toString()} lost=${lock.lost}`;
}

/** What to tell the operator about a failed call. */
function explain(e: unknown): string {
  // The most specific classes first: LockUnconfirmedError is a LockNotOwnedError.
  if (e instanceof LockTimeoutError) return `busy: ${e.message}`;
  if (e instanceof LockUnconfirmedError) return `release not confirmed (it expires by its TTL): ${e.message}`;
  if (e instanceof LockNotOwnedError) return `lost the lock; the work was unprotected: ${e.message}`;
  if (e instanceof LockWrongTypeError) return `the key is not a lock, pick another name: ${e.message}`;
  if (e instanceof LockQuorumError) return `too few Redlock nodes answered: ${e.message}`;
  if (e instanceof LockConnectionError) return `Redis unreachable: ${e.message}`;
  if (e instanceof LockServerError) return `Redis refused: ${e.message}`;
  if (e instanceof LockError) return `${e.name}: ${e.message}`;
  if (e instanceof RangeError || e instanceof TypeError) return `bug in the caller: ${e.message}`;
  if (e instanceof DOMException && e.name === 'TimeoutError') return 'gave up waiting (AbortSignal.timeout)';
  return String(e);
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });

/** The nightly report: wait at most 5 s for the lock, then write under its fence. */
async function nightly(client: Client, store: ReportStore): Promise<void> {
  const opts: AcquireOptions = { ttl: 10_000, signal: AbortSignal.timeout(5_000), autoRenew: true };
  const lock = await client.acquire('reports:nightly', opts);
  try {
    console.log('nightly:', describeLock(lock));
    await store.write('nightly', `built at ${new Date().toISOString()}`, await lock.drawFence());
  } finally {
    await lock.release();
  }
}

/** A cache rebuild that one process is enough for: skip it when another runs it. */
async function rebuildCache(client: Client): Promise<boolean> {
  const lock = await client.tryAcquire('cache:rebuild', { ttl: DEFAULT_TTL });
  if (lock === null) {
    console.log('cache: another process is rebuilding it');
    return false;
  }
  try {
    await lock.extend(2 * DEFAULT_TTL); // a long rebuild: more time
    return await lock.owned();
  } finally {
    await lock.release();
  }
}

/** An export in steps that stops as soon as the lock is lost or the service shuts down. */
async function exportOrders(client: Client, shutdown: AbortSignal): Promise<number> {
  return client.using('orders:export', { ttl: 3_000, signal: shutdown }, async (signal, lock) => {
    let done = 0;
    for (let step = 0; step < 5; step++) {
      signal.throwIfAborted();
      await sleep(20, signal);
      done++;
    }
    console.log('export:', describeLock(lock));
    return done;
  });
}

/** An invoice run released at the end of its scope, however it ends. */
async function invoices(client: Client, store: ReportStore): Promise<void> {
  await using lock = await client.acquire('invoices', { wait: 1_000, fenced: true });
  await store.write('invoices', 'sent', lock.fence);
}

/** A job started here and finished by another process, which has only the name and the token. */
async function handOff(client: Client): Promise<boolean> {
  const lock = await client.acquire(Buffer.from('job:42'), { ttl: 60_000, fenced: false });
  const token = lock.token.toString(); // sent to the other process with the job
  return client.releaseToken('job:42', token); // what the other process runs
}

/** At most two exports run at once across the fleet; a big one takes both slots. */
async function throttledExport(client: Client, big: boolean): Promise<number | null> {
  const slot = await client.acquireSemaphore('exports:slots', { limit: 2, permits: big ? 2 : 1, tryAcquire: true });
  if (slot === null) return null; // every slot busy: try again later
  try {
    return slot.fence;
  } finally {
    await slot.release();
  }
}

/** Readers of the price table share it; the nightly update takes it alone. */
async function prices(client: Client): Promise<void> {
  const reader = await client.acquireRead('prices', { wait: 1_000 });
  await reader.release();
  await using writer = await client.acquireWrite('prices', { wait: 5_000, ttl: 60_000 });
  await writer.extend();
}

async function main(): Promise<void> {
  const urls = process.argv.slice(2);
  if (urls.length === 0) {
    console.error('usage: node example.js REDIS_URL [REDIS_URL...]');
    process.exitCode = 2;
    return;
  }
  const client = new Client(urls.length === 1 ? urls[0] : urls); // several URLs: Redlock
  console.log('client:', client.addr);

  const store = new ReportStore();
  const shutdown = new AbortController();
  process.once('SIGTERM', () => shutdown.abort(new Error('SIGTERM')));

  try {
    // At start: what in the servers' setup makes a lock unsafe or slow.
    const report: DoctorReport = await client.doctor();
    console.log(report.text);
    const unsafe: DoctorFinding[] = report.findings.filter((f) => f.severity === 'unsafe');
    if (!report.safe) console.error(`${unsafe.length} finding(s) make locks unsafe on ${report.target}`);
    await nightly(client, store);
    console.log('cache rebuilt:', await rebuildCache(client));
    console.log('orders exported in steps:', await exportOrders(client, shutdown.signal));
    await invoices(client, store);
    console.log('handed-off job released:', await handOff(client));
    console.log('export slot fence:', await throttledExport(client, false));
    await prices(client);
    console.log('reports:', [...store.reports.keys()].join(', '));
    const stats: ClientStats = client.stats();
    const wait: Histogram = stats.wait;
    console.log(`acquired ${stats.acquired_locks} times, waited p99 ${wait.p99} ms, ${stats.held_now} held now`);
  } catch (e) {
    console.error(explain(e));
    process.exitCode = 1;
  }
}

void main();
