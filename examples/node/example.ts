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
  eventLoop,
  type AcquireOptions,
  type ClientStats,
  type DoctorFinding,
  type DoctorReport,
  type FencedLock,
  type Histogram,
  type LockErrorCause,
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
  if (e instanceof LockConnectionError) {
    const cause = e.cause as LockErrorCause | undefined; // ECONNREFUSED, ETIMEDOUT...
    return `Redis unreachable (${cause?.code ?? 'no system error'} at ${cause?.address ?? 'unknown'}): ${e.message}`;
  }
  if (e instanceof LockServerError) return `Redis refused: ${e.message}`;
  if (e instanceof LockError) return `${e.name}: ${e.message}`;
  if (e instanceof RangeError || e instanceof TypeError) return `bug in the caller: ${e.message}`;
  if (e instanceof DOMException && e.name === 'TimeoutError') return 'gave up waiting (AbortSignal.timeout)';
  return String(e);
}

/**
 * Whether to try again later. Decided by `code`, which also holds for an
 * error from another copy of the package (a library that bundles its own),
 * where `instanceof` does not.
 */
function retryable(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === 'ERR_LOCK_TIMEOUT' || code === 'ERR_LOCK_NOT_ACQUIRED' || code === 'ERR_LOCK_CONNECTION' || code === 'ERR_LOCK_NO_QUORUM';
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
  await using lock: FencedLock = await client.acquire('invoices', { wait: 1_000, fenced: true });
  await store.write('invoices', 'sent', lock.fence); // fenced: true: a number from the start
}

/** A reindex in batches that stops as soon as its lock is found lost (renewed in the background meanwhile). */
async function reindex(client: Client): Promise<number> {
  const lock = await client.acquire('search:reindex', { ttl: 10_000, autoRenew: true });
  lock.onLost((reason) => console.error(`reindex: ${reason.code}: ${reason.message}`));
  let batches = 0;
  try {
    for (; batches < 3; batches++) await sleep(10, lock.signal); // rejects with the signal's reason once lost
  } finally {
    if (!lock.lost) await lock.release();
  }
  return batches;
}

/** An upload whose lock outlives this request: the request that ends the upload releases it by token, or its TTL ends it. */
async function startUpload(client: Client): Promise<string> {
  const lock = await client.acquire('upload:9', { ttl: 60_000, token: 'request-9' });
  const fence: number | undefined = lock.fence; // not drawn: undefined
  console.log('upload fence drawn:', fence !== undefined);
  lock.forget(); // not released here, nor when the garbage collector takes the handle
  return lock.token.toString();
}

/** A job started here and finished by another process, which has only the name and the token. */
async function handOff(client: Client): Promise<boolean> {
  const lock = await client.acquire(Buffer.from('job:42'), { ttl: 60_000, fenced: false });
  const token = lock.token.toString(); // sent to the other process with the job
  lock.forget(); // this handle lets go: neither it nor the garbage collector releases the lock
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

/** A price check skipped while the table is being written: one attempt at the read side. */
async function quickPriceCheck(client: Client): Promise<boolean> {
  const reader = await client.tryAcquireRead('prices');
  if (reader === null) return false;
  await reader.release();
  return true;
}

async function main(): Promise<void> {
  const urls = process.argv.slice(2);
  if (urls.length === 0) {
    console.error('usage: node example.js REDIS_URL [REDIS_URL...]');
    process.exitCode = 2;
    return;
  }
  // Closed at the end of main: a wait still pending then rejects with ERR_LOCK_CLIENT_CLOSED.
  await using client = new Client(urls.length === 1 ? urls[0] : urls); // several URLs: Redlock
  console.log('client:', client.addr, 'calls run on', eventLoop());

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
    console.log('prices readable now:', await quickPriceCheck(client));
    console.log('reindexed batches:', await reindex(client));
    console.log('upload released by token:', await client.releaseToken('upload:9', await startUpload(client)));
    console.log('reports:', [...store.reports.keys()].join(', '));
    const stats: ClientStats = client.stats();
    const wait: Histogram = stats.wait;
    console.log(`acquired ${stats.acquiredLocks} times, waited p99 ${wait.p99} ms, ${stats.heldNow} held now`);
  } catch (e) {
    console.error(explain(e), retryable(e) ? '(try again later)' : '');
    process.exitCode = 1;
  }
}

void main();
