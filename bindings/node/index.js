'use strict';
// redislock for Node.js: the lock that C, Python, PHP and Ruby programs
// take the same way, from one Rust core (the native addon redislock.node).
// This file only checks arguments and turns the addon's failures into the
// error classes below; waiting, renewal and the wire protocol are the core's.

const { Buffer } = require('node:buffer');
const { inspect } = require('node:util');

const native = loadAddon();

function loadAddon() {
  try {
    return require('./redislock.node');
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    throw new Error(
      'redislock: the native addon redislock.node is not built. In the repository run ' +
        '`make node`; in an installed package run `npm rebuild redislock` (it needs a Rust ' +
        'toolchain, cargo 1.88 or newer: https://rustup.rs).',
      { cause: e },
    );
  }
}

/** Default time to live of an acquisition, in milliseconds. */
const DEFAULT_TTL = 30000;

/** Every error of this library that is not a bad argument. */
class LockError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}
/** The lock stayed held by another owner for the whole wait. */
class LockTimeoutError extends LockError {}
/** An extend or release of a lock this handle no longer holds (expired, taken over, released). */
class LockNotOwnedError extends LockError {}
/** A release whose outcome is unknown: the connection broke after it was sent. */
class LockUnconfirmedError extends LockNotOwnedError {}
/** The key exists and holds something that is not a lock. */
class LockWrongTypeError extends LockError {}
/** Redlock: no majority of the nodes answered. */
class LockQuorumError extends LockError {}
/** The server could not be reached, or did not answer in time. */
class LockConnectionError extends LockError {}
/** The server answered with an error (authentication, permissions, a script refused...). */
class LockServerError extends LockError {}

const CLASSES = {
  NotAcquired: LockTimeoutError,
  NotOwner: LockNotOwnedError,
  Unconfirmed: LockUnconfirmedError,
  WrongType: LockWrongTypeError,
  NoQuorum: LockQuorumError,
  Connection: LockConnectionError,
  Server: LockServerError,
};

function argError(Class, code, message) {
  const e = new Class(message);
  e.code = code;
  return e;
}

/**
 * `text` with every password in it replaced by `***`, by the rule of the
 * core's redact_url: the user info of a URL (`redis://user:***@host`; user
 * info without a `:` is taken for a password: `***@host`; it ends at the
 * last `@` of the URL, since a password may hold one) and the value of any
 * parameter whose name holds `pass`. A word with an `@` after a `:` that is
 * not such a URL (`redis:user:secret@host://`) is hidden whole. Every
 * message made here goes through it (they may show a value the caller
 * gave, such as a URL given where an array was expected).
 */
function redact(text) {
  return String(text)
    .replace(/[^\s'"`]+/g, (word) => {
      const url = /^([^:/]*?)([a-z][a-z0-9+.-]*:\/\/)(.*)$/is.exec(word);
      if (url) {
        let rest = url[3];
        let shown = url[1] + url[2];
        const at = rest.lastIndexOf('@');
        if (at >= 0) {
          const info = rest.slice(0, at);
          const colon = info.indexOf(':');
          shown += colon >= 0 && !/[/?#]/.test(info) ? `${info.slice(0, colon)}:***@` : '***@';
          rest = rest.slice(at + 1);
        }
        return shown + rest.replace(/([?&][^=&]*pass[^=&]*=)[^&]*/gi, '$1***');
      }
      if (/:[^@]*@/.test(word)) return '***';
      return word;
    })
    .replace(/(\b(?:sentinel_)?password=)[^&\s'"`]*/gi, '$1***');
}

function typeError(what, expected, got) {
  const shown = typeof got === 'string' ? JSON.stringify(got) : inspect(got, { depth: 0 });
  return argError(TypeError, 'ERR_INVALID_ARG_TYPE', redact(`${what} must be ${expected}, got ${shown}`));
}

/** The error for a failure the addon reported. */
function fromFailure(f) {
  const message = redact(f.message);
  if (f.kind === 'InvalidArgument') return argError(TypeError, 'ERR_INVALID_ARG_VALUE', message);
  if (f.kind === 'OutOfRange') return argError(RangeError, 'ERR_OUT_OF_RANGE', message);
  return new (CLASSES[f.kind] || LockError)(message);
}

/** The value of an addon call, or its failure thrown. */
async function settle(pending) {
  const r = await pending;
  if (r instanceof native.Failure) throw fromFailure(r);
  return r;
}

function checkName(name, what = 'name') {
  if (typeof name === 'string' || name instanceof Uint8Array) return name;
  throw typeError(what, 'a string or a Buffer', name);
}

function bufferOf(v) {
  return typeof v === 'string' || Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

function checkNumber(v, what) {
  if (typeof v !== 'number') throw typeError(what, 'a number of milliseconds', v);
  return v;
}

function checkCount(v, what) {
  if (typeof v !== 'number') throw typeError(what, 'a whole number', v);
  return v;
}

function checkBoolean(v, what) {
  if (v === undefined) return false;
  if (typeof v !== 'boolean') throw typeError(what, 'a boolean', v);
  return v;
}

function isSignal(s) {
  return s !== null && typeof s === 'object' && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function';
}

/** The options of acquire, tryAcquire and using, checked. */
function acquireOptions(opts, defaultWait) {
  if (opts === undefined || opts === null) opts = {};
  else if (typeof opts !== 'object') throw typeError('options', 'an object', opts);
  const ttl = opts.ttl === undefined ? DEFAULT_TTL : checkNumber(opts.ttl, 'ttl');
  const wait = opts.wait === undefined || opts.wait === null ? defaultWait : checkNumber(opts.wait, 'wait');
  const signal = opts.signal === undefined || opts.signal === null ? undefined : opts.signal;
  if (signal !== undefined && !isSignal(signal)) throw typeError('signal', 'an AbortSignal', signal);
  const token = opts.token === undefined || opts.token === null ? undefined : bufferOf(checkName(opts.token, 'token'));
  return {
    ttl,
    wait,
    signal,
    token,
    autoRenew: checkBoolean(opts.autoRenew, 'autoRenew'),
    fenced: opts.fenced === undefined ? true : checkBoolean(opts.fenced, 'fenced'),
  };
}

const kNative = Symbol('redislock.native');
const kCreate = Symbol('redislock.create');

/** A connection pool and subscriber for one Redis deployment, or for several independent servers (Redlock). */
class Client {
  #native;

  /**
   * `urls`: a redis://, rediss://, unix://, redis+sentinel:// or
   * redis+cluster:// URL, or an array of them (Redlock). Nothing is
   * connected until the first call. Throws TypeError for a bad URL.
   */
  constructor(urls) {
    if (Array.isArray(urls)) {
      if (urls.length === 0) throw argError(TypeError, 'ERR_INVALID_ARG_VALUE', 'urls must not be empty');
      urls.forEach((u, i) => {
        if (typeof u !== 'string') throw typeError(`urls[${i}]`, 'a string', u);
      });
    } else if (typeof urls !== 'string') {
      throw typeError('url', 'a string or an array of strings', urls);
    }
    try {
      this.#native = new native.NativeClient(urls);
    } catch (e) {
      throw argError(TypeError, 'ERR_INVALID_ARG_VALUE', redact(e.message));
    }
  }

  /**
   * Take the lock `name`: a Promise of its Lock. `ttl` (ms, default 30000),
   * `wait` (ms; omitted or negative: as long as it takes, 0: try once),
   * `signal` (an AbortSignal that ends the wait: the Promise rejects with
   * its reason), `autoRenew` (renew in the background until released),
   * `fenced` (draw the fencing number in the acquisition, default true).
   * Rejects with LockTimeoutError when the wait runs out.
   */
  async acquire(name, opts) {
    return this.#acquire(name, acquireOptions(opts, -1), false);
  }

  /** One attempt (or a wait of `opts.wait` ms): the Lock, or null when another owner holds it. */
  async tryAcquire(name, opts) {
    return this.#acquire(name, acquireOptions(opts, 0), true);
  }

  /**
   * Take `permits` (default 1) of the counting semaphore `name`, which
   * admits `limit` permits in all (this call's limit, 1 to 1,000,000):
   * a Promise of a Lock whose release gives them back. Waiters are served
   * in arrival order with no barging; each holder has its own lease
   * (`ttl`), token and fence. Never collides with the lock of the same
   * name. The other options as for acquire; `tryAcquire: true` behaves
   * as the method of that name (`wait` defaults to 0, and a wait that runs
   * out resolves null instead of rejecting).
   */
  async acquireSemaphore(name, opts) {
    if (opts === null || typeof opts !== 'object') throw typeError('options', 'an object with a limit', opts);
    const orNull = checkBoolean(opts.tryAcquire, 'tryAcquire');
    const o = acquireOptions(opts, orNull ? 0 : -1);
    o.kind = 'semaphore';
    o.limit = checkCount(opts.limit, 'limit');
    o.permits = opts.permits === undefined ? 1 : checkCount(opts.permits, 'permits');
    return this.#acquire(name, o, orNull);
  }

  /**
   * The read-write lock `name`, shared: any number of readers at once while
   * no writer holds it or waits for it (a queued writer stops new readers).
   * Options as for acquireSemaphore, without limit and permits.
   */
  async acquireRead(name, opts) {
    return this.#shared(name, opts, 'read');
  }

  /** The read-write lock `name`, exclusive: once nobody holds it and nobody queued earlier waits. */
  async acquireWrite(name, opts) {
    return this.#shared(name, opts, 'write');
  }

  async #shared(name, opts, kind) {
    const orNull = checkBoolean(opts?.tryAcquire, 'tryAcquire');
    const o = acquireOptions(opts, orNull ? 0 : -1);
    o.kind = kind;
    return this.#acquire(name, o, orNull);
  }

  /**
   * Run `fn(signal, lock)` with the lock held, renewed in the background,
   * and released afterwards; a Promise of fn's value. `signal` aborts when
   * the lock is found lost (its reason a LockNotOwnedError) or when
   * `opts.signal` aborts. When fn returned but the lock was lost meanwhile,
   * its work ran unprotected: the Promise rejects with LockNotOwnedError.
   */
  async using(name, opts, fn) {
    if (typeof opts === 'function' && fn === undefined) [opts, fn] = [undefined, opts];
    const o = acquireOptions(opts, -1);
    if (typeof fn !== 'function') throw typeError('fn', 'a function', fn);
    o.autoRenew = true;
    const lock = await this.#acquire(name, o, false);
    const controller = new AbortController();
    const abortWith = () => controller.abort(o.signal.reason);
    // Aborted between the acquisition and now: fn starts with its signal aborted.
    if (o.signal?.aborted) abortWith();
    else o.signal?.addEventListener('abort', abortWith, { once: true });
    lock[kNative].whenLost().then((r) => {
      if (r === true) {
        controller.abort(new LockNotOwnedError(`lock ${inspect(lock.name)} was lost while it was in use`));
      }
    });
    let result;
    try {
      result = await fn(controller.signal, lock);
    } catch (e) {
      await lock.release().catch(() => {});
      throw e;
    } finally {
      o.signal?.removeEventListener('abort', abortWith);
    }
    await lock.release();
    return result;
  }

  /** Release the lock `name` if `token` holds it (a handle from another process): a Promise of whether it did. */
  async releaseToken(name, token) {
    checkName(name);
    checkName(token, 'token');
    return settle(this.#native.releaseToken(bufferOf(name), bufferOf(token)));
  }

  /**
   * Take the lock `name` from whoever holds it (this library's holder, or
   * any string another client stored there) and hand it to the oldest
   * waiter at once, as a release would: a Promise of whether a holder was
   * removed. The operator's unlock, for a lock whose owner is known to be
   * gone; it breaks mutual exclusion if the owner is still working (its
   * release then rejects with LockNotOwnedError). Fences stay monotonic.
   * Only the plain lock `name`; LockWrongTypeError for a key of another type.
   */
  async forceRelease(name) {
    checkName(name);
    return settle(this.#native.forceRelease(bufferOf(name)));
  }

  /**
   * What this client did since it was made: counters by name
   * (acquired_at_once, acquired_handed_over, waiters_now, ...) and the
   * `wait` and `held` histograms, in milliseconds.
   */
  stats() {
    const s = this.#native.stats();
    return { ...s.counters, wait: s.wait, held: s.held };
  }

  /**
   * Check every server this client's locks may reach for what makes a lock
   * unsafe or slow (eviction, persistence, replication, scripting, ...) and
   * run one lock cycle: a Promise of a report { target, safe, worst,
   * findings: [{ severity, check, server, message, fix }], text }, `text`
   * being what `redislock doctor` prints. Only harmless commands; nothing
   * is left on the server. Rejects only when no server could be asked:
   * LockConnectionError, LockQuorumError (Redlock), LockServerError
   * (credentials refused).
   */
  async doctor() {
    return settle(this.#native.doctor());
  }

  /** The server's address (the first node's for Redlock), without credentials. */
  get addr() {
    return this.#native.addr;
  }

  [inspect.custom]() {
    return `Client <${this.#native.addr}>`;
  }

  async #acquire(name, o, orNull) {
    checkName(name);
    const { signal } = o;
    if (signal?.aborted) throw signal.reason;
    let cancel = null;
    let onAbort;
    if (signal) {
      cancel = new native.Cancel();
      onAbort = () => cancel.cancel();
      signal.addEventListener('abort', onAbort, { once: true });
    }
    try {
      const args = {
        ttl: o.ttl,
        wait: o.wait,
        orNull,
        autoRenew: o.autoRenew,
        fenced: o.fenced,
        kind: o.kind || 'lock',
        limit: o.limit || 0,
        permits: o.permits || 0,
        token: o.token,
      };
      const r = await this.#native.acquire(bufferOf(name), args, cancel);
      if (r instanceof native.Failure) {
        if (r.kind === 'Aborted') throw signal.reason;
        throw fromFailure(r);
      }
      return r === null ? null : new Lock(kCreate, name, o.ttl, r);
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
    }
  }
}

/** A held lock (from Client#acquire). Release it, or it is released when collected. */
class Lock {
  #name;
  #ttl;
  #token;

  constructor(key, name, ttl, handle) {
    if (key !== kCreate) throw new TypeError('a Lock comes from Client#acquire');
    this.#name = name;
    this.#ttl = ttl;
    this.#token = handle.token;
    this[kNative] = handle;
  }

  /** The lock's name, as given to acquire. */
  get name() {
    return this.#name;
  }

  /** This acquisition's token (a Buffer): what the key holds while it is ours. */
  get token() {
    return this.#token;
  }

  /**
   * The fencing number drawn while the lock was held: a number, also after
   * the release. `null` while a lock acquired with `fenced: false` is held
   * (no number was drawn); once it is released or found lost, reading it
   * throws LockNotOwnedError instead, since no number can be drawn then.
   */
  get fence() {
    const handle = this[kNative];
    const fence = handle.fence;
    if (fence !== null) return fence;
    if (!handle.held) {
      throw new LockNotOwnedError(`lock ${inspect(this.#name)} was released before its fence was drawn (it was acquired with fenced: false)`);
    }
    if (handle.lost) {
      throw new LockNotOwnedError(`lock ${inspect(this.#name)} was lost before its fence was drawn (it was acquired with fenced: false)`);
    }
    return null;
  }

  /** True once renewal, an extend or a release found the lock gone. */
  get lost() {
    return this[kNative].lost;
  }

  /** Set the remaining time to live to `ttl` ms (default: the acquisition's). */
  async extend(ttl = this.#ttl) {
    checkNumber(ttl, 'ttl');
    await settle(this[kNative].extend(ttl));
  }

  /** Release the lock. Rejects with LockNotOwnedError when it was lost (or already released). */
  async release() {
    await settle(this[kNative].release());
  }

  /** Whether the server still names this handle the owner. */
  async owned() {
    return settle(this[kNative].owned());
  }

  [inspect.custom]() {
    const { fence, held } = this[kNative];
    return `Lock ${inspect(this.#name)} fence=${fence ?? 'none'} held=${held}`;
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using lock = await client.acquire(...)`: released at the end of the scope.
  Lock.prototype[Symbol.asyncDispose] = async function dispose() {
    if (this[kNative].held) await this.release();
  };
}

module.exports = {
  Client,
  Lock,
  LockError,
  LockTimeoutError,
  LockNotOwnedError,
  LockUnconfirmedError,
  LockWrongTypeError,
  LockQuorumError,
  LockConnectionError,
  LockServerError,
  DEFAULT_TTL,
};
