'use strict';
// node-redlock's API (the `redlock` package, 5.0.0-beta.2: its README and
// index.d.ts) over redislock's Client, for the tests: redlock_contract.test.js
// checks that code written for node-redlock keeps its documented contract on
// it, and rollout.test.js that it excludes node-redlock itself on the same
// names. It is test code, not part of the package. It only translates: the
// ioredis clients given to `new Redlock` become the URL of a redislock
// Client (several: Redlock; a Cluster: redis+cluster://), node-redlock's
// settings become redislock's options, and redislock's outcomes become
// node-redlock's (ExecutionError, ResourceLockedError, a new Lock from
// extend). Acquiring, waiting, renewing, releasing and the Redlock quorum
// are redislock's; nothing here retries or keeps time.
//
// What differs from node-redlock, and why, is in docs/node.md ("Coming from
// node-redlock"). In short:
// - A wait is redislock's (one acquisition, queued and handed the lock, or
//   retrying over Redlock) for retryCount x retryDelay ms (retryCount 0: one
//   try; -1: as long as it takes), not retryCount + 1 attempts; so an
//   ExecutionError's `attempts` has one entry, whose votes are the
//   deployment's outcome, keyed by the redislock Client (redislock reports
//   the outcome of the deployment, not of each node). retryJitter and
//   driftFactor are redislock's own (drift: 1% of the TTL + 2 ms).
// - A duration over 30 days is refused with redislock's RangeError.
// - Several resources are several redislock locks with one token, taken in
//   name order (so that two overlapping acquisitions cannot deadlock) and
//   let go if one of them cannot be had: all or nothing as node-redlock's
//   script is, but not in one atomic step.
// - using() renews every third of the duration (redislock's renewal):
//   automaticExtensionThreshold is not used.
// - Custom scripts cannot be given, nor clients with a keyPrefix.

const { EventEmitter } = require('node:events');
const { Client, LockError, LockTimeoutError, LockNotOwnedError, LockUnconfirmedError } = require('..');

/** node-redlock's defaults. */
const defaultSettings = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
});

/** Another lock holds one or more of the requested resources. */
class ResourceLockedError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ResourceLockedError';
  }
}

/** An operation did not reach a quorum. */
class ExecutionError extends Error {
  constructor(message, attempts) {
    super(message);
    this.name = 'ExecutionError';
    this.attempts = attempts;
  }
}

/** What node-redlock's Lock holds; the redislock handles are kept apart. */
class Lock {
  constructor(redlock, resources, value, attempts, expiration) {
    this.redlock = redlock;
    this.resources = resources;
    this.value = value;
    this.attempts = attempts;
    this.expiration = expiration;
  }

  async release() {
    return this.redlock.release(this);
  }

  async extend(duration) {
    return this.redlock.extend(this, duration);
  }
}

/** Each Lock's redislock handles (one per distinct resource, in name order). */
const handlesOf = new WeakMap();
/** Locks released or replaced by their extension: extending them again fails, as in node-redlock. */
const spent = new WeakSet();

/** The URL of the server (or Cluster) an ioredis client talks to. */
function urlOf(client) {
  const options = client.isCluster ? client.options.redisOptions || {} : client.options;
  if (!options || typeof options !== 'object') throw new TypeError('Redlock takes ioredis clients (Redis or Cluster)');
  if (options.keyPrefix) throw new TypeError('the redislock adapter does not take ioredis clients with a keyPrefix');
  const user = options.username ? encodeURIComponent(options.username) : '';
  const auth = options.password ? `${user}:${encodeURIComponent(options.password)}@` : '';
  const hostPort = (host, port) => `${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (client.isCluster) {
    const nodes = client.startupNodes.map((n) => {
      if (typeof n === 'number') return hostPort('127.0.0.1', n);
      if (typeof n === 'string') return n.replace(/^rediss?:\/\//, '');
      return hostPort(n.host || '127.0.0.1', n.port || 6379);
    });
    return `${options.tls ? 'rediss' : 'redis'}+cluster://${auth}${nodes.join(',')}`;
  }
  if (options.sentinels) throw new TypeError('the redislock adapter does not take ioredis clients of Sentinel');
  if (options.path) return `unix://${options.path}?db=${options.db || 0}`;
  return `${options.tls ? 'rediss' : 'redis'}://${auth}${hostPort(options.host, options.port)}/${options.db || 0}`;
}

/** The distinct resources, in the order they are taken. */
function inOrder(resources) {
  return [...new Set(resources)].sort();
}

class Redlock extends EventEmitter {
  #client;

  constructor(clients, settings = {}, scripts = {}) {
    super();
    // As node-redlock: an "error" event for every vote against, and a
    // listener so that an unwatched one does not crash the process.
    this.on('error', () => {});
    this.clients = new Set(clients);
    if (this.clients.size === 0) throw new Error('Redlock must be instantiated with at least one redis client.');
    if (Object.keys(scripts).length > 0) throw new TypeError('redislock runs its own scripts: custom scripts cannot be given');
    this.settings = Object.fromEntries(
      Object.entries(defaultSettings).map(([k, v]) => [k, typeof settings[k] === 'number' ? settings[k] : v]),
    );
    const urls = [...this.clients].map(urlOf);
    this.#client = new Client(urls.length === 1 ? urls[0] : urls);
  }

  /** The redislock Client behind this Redlock. */
  get client() {
    return this.#client;
  }

  async quit() {
    await Promise.all([...this.clients].map((c) => c.quit()));
  }

  async acquire(resources, duration, settings) {
    const s = { ...this.settings, ...settings };
    const wait = waitOf(s);
    const start = Date.now();
    const held = [];
    try {
      for (const name of inOrder(resources)) {
        // Every resource holds the first one's token, as node-redlock's value.
        const token = held.length > 0 ? held[0].token : undefined;
        held.push(await this.#client.acquire(name, { ttl: duration, wait: wait.left(), token, fenced: false }));
      }
    } catch (e) {
      // All or nothing: let go of what was taken.
      await Promise.allSettled(held.map((h) => h.release()));
      throw this.#failed(e, resources, duration, 0);
    }
    return this.#lock(resources, held, start, duration, s);
  }

  async release(lock, _settings) {
    lock.expiration = 0;
    spent.add(lock);
    const handles = handlesOf.get(lock) || [];
    const outcomes = await Promise.allSettled(handles.map((h) => h.release()));
    const failed = outcomes.find((o) => o.status === 'rejected');
    const applied = outcomes.filter((o) => o.status === 'fulfilled').length;
    if (failed) throw this.#failed(failed.reason, lock.resources, undefined, applied);
    return { attempts: [this.#stats(null)] };
  }

  async extend(existing, duration, settings) {
    const s = { ...this.settings, ...settings };
    if (spent.has(existing)) throw new ExecutionError('Cannot extend an already-expired lock.', []);
    const handles = handlesOf.get(existing) || [];
    const start = Date.now();
    const outcomes = await Promise.allSettled(handles.map((h) => h.extend(duration)));
    const failed = outcomes.find((o) => o.status === 'rejected');
    const applied = outcomes.filter((o) => o.status === 'fulfilled').length;
    if (failed) throw this.#failed(failed.reason, existing.resources, duration, applied);
    existing.expiration = 0;
    spent.add(existing);
    return this.#lock(existing.resources, handles, start, duration, s);
  }

  async using(resources, duration, settingsOrRoutine, optionalRoutine) {
    const s = typeof settingsOrRoutine === 'function' ? this.settings : { ...this.settings, ...settingsOrRoutine };
    const routine = optionalRoutine ?? settingsOrRoutine;
    if (typeof routine !== 'function') throw new Error('INVARIANT: routine is not a function.');
    const wait = waitOf(s);
    const controller = new AbortController();
    const signal = controller.signal;
    let routineError = null;
    // redislock's using, once per resource in name order, one inside the
    // other: each renews its lock, and a lock found lost aborts `signal`
    // with node-redlock's `signal.error`.
    const nest = async (names, token) => {
      if (names.length === 0) {
        try {
          return await routine(signal);
        } catch (e) {
          routineError = { e };
          throw e;
        }
      }
      const opts = { ttl: duration, wait: wait.left(), token, fenced: false };
      return this.#client.using(names[0], opts, async (lockSignal, lock) => {
        lockSignal.addEventListener(
          'abort',
          () => {
            if (signal.aborted) return;
            signal.error = this.#failed(lockSignal.reason, resources, duration, 0);
            controller.abort(signal.error);
          },
          { once: true },
        );
        return nest(names.slice(1), token ?? lock.token);
      });
    };
    try {
      return await nest(inOrder(resources), undefined);
    } catch (e) {
      if (routineError !== null && e === routineError.e) throw e;
      throw this.#failed(e, resources, duration, 0);
    }
  }

  /** A node-redlock Lock of `handles`. */
  #lock(resources, handles, start, duration, settings) {
    // node-redlock's own estimate of the end of validity (this process's
    // clock); redislock itself decides validity on the servers.
    const drift = Math.round(settings.driftFactor * duration) + 2;
    const lock = new Lock(this, resources, handles[0].token.toString(), [this.#stats(null)], start + duration - drift);
    handlesOf.set(lock, handles);
    return lock;
  }

  /** node-redlock's ExecutionStats of one operation: one vote, the deployment's. */
  #stats(against) {
    const membershipSize = this.clients.size;
    return Promise.resolve({
      membershipSize,
      quorumSize: Math.floor(membershipSize / 2) + 1,
      votesFor: new Set(against ? [] : [this.#client]),
      votesAgainst: new Map(against ? [[this.#client, against]] : []),
    });
  }

  /** What node-redlock throws where redislock threw `e`. */
  #failed(e, resources, duration, applied) {
    if (e instanceof RangeError && duration !== undefined && !Number.isInteger(duration)) {
      return new Error('Duration must be an integer value in milliseconds.');
    }
    // Bad arguments (TypeError, RangeError: a TTL over 30 days) as redislock
    // throws them; anything else that is not redislock's passes through.
    if (!(e instanceof LockError)) return e;
    const held = (e instanceof LockTimeoutError || e instanceof LockNotOwnedError) && !(e instanceof LockUnconfirmedError);
    const vote = held
      ? new ResourceLockedError(`The operation was applied to: ${applied} of the ${resources.length} requested resources.`)
      : e;
    this.emit('error', vote);
    return new ExecutionError('The operation was unable to achieve a quorum during its retry window.', [this.#stats(vote)]);
  }
}

/**
 * How long an acquisition may wait, from node-redlock's settings: the
 * retries' span (retryCount x retryDelay ms), 0 for retryCount 0 (one try),
 * as long as it takes for -1. `left()` is what remains of it for the next
 * resource (redislock's `wait`: -1 is forever).
 */
function waitOf(settings) {
  if (settings.retryCount === -1) return { left: () => -1 };
  const end = Date.now() + Math.max(0, settings.retryCount * settings.retryDelay);
  return { left: () => Math.max(0, end - Date.now()) };
}

module.exports = { Redlock, Lock, ExecutionError, ResourceLockedError, defaultSettings };
