'use strict';
// redislock for Node.js: the lock that C, Python, PHP and Ruby programs
// take the same way, from one Rust core (the native addon redislock.node).
// This file only checks arguments and turns the addon's failures into the
// error classes below; waiting, renewal and the wire protocol are the core's.

const { Buffer } = require('node:buffer');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { inspect } = require('node:util');

/**
 * The native addon, from the first of these places that holds a file:
 *   1. $REDISLOCK_NODE_ADDON, a path to a redislock .node file (explicit:
 *      nothing else is tried when it is set);
 *   2. the prebuilt addon of this platform, next to this file
 *      (redislock.linux-x64-gnu.node in the npm package of `make dist`);
 *   3. redislock.node next to this file, built from source (`make node`,
 *      or the install script of the source package).
 * Paths are absolute, from this file's directory, never from the working
 * directory. A file that is there but cannot be loaded (truncated, another
 * architecture, another version) is an error naming it, and the places
 * tried before it: no other place is tried after it. The addon's version
 * must be package.json's, so that a stale addon is caught, not used.
 */
function loadAddon() {
  const candidates = [];
  if (process.env.REDISLOCK_NODE_ADDON) {
    candidates.push([path.resolve(process.env.REDISLOCK_NODE_ADDON), '$REDISLOCK_NODE_ADDON']);
  } else {
    const platform = platformName();
    candidates.push([path.join(__dirname, `redislock.${platform}.node`), `the prebuilt addon for ${platform}`]);
    candidates.push([path.join(__dirname, 'redislock.node'), 'built from source']);
  }
  const tried = [];
  const failed = (file, cause) =>
    new Error(`redislock: cannot load the native addon ${file}; tried:\n    ${tried.join('\n    ')}`, cause && { cause });
  for (const [file, what] of candidates) {
    if (!fs.existsSync(file)) {
      tried.push(`${file} (${what}): no such file`);
      continue;
    }
    let addon;
    try {
      checkElf(file);
      addon = require(file);
    } catch (e) {
      // process.dlopen's message starts with the file's path already.
      const message = e.message.startsWith(file) ? e.message.slice(file.length).replace(/^:\s*/, '') : e.message;
      tried.push(`${file} (${what}): ${message}`);
      throw failed(file, e);
    }
    const expected = require('./package.json').version;
    const got = typeof addon.version === 'function' ? addon.version() : null;
    if (got !== expected) {
      const message =
        got === null
          ? `it reports no version (no version() function: built from older sources?), and this package (${__dirname}) is ${expected}`
          : `it is version ${got}, and this package (${__dirname}) is ${expected}`;
      tried.push(`${file} (${what}): ${message}`);
      throw failed(file);
    }
    return addon;
  }
  throw new Error(
    `redislock: no native addon found; tried:\n    ${tried.join('\n    ')}\n` +
      'The npm package of `make dist` carries the addon for x86_64 Linux (glibc 2.17 or newer). ' +
      'Elsewhere it is built from source: `make node` in the repository, or `npm rebuild redislock` ' +
      'of the source package, with a Rust toolchain (cargo 1.88 or newer: https://rustup.rs).',
  );
}

/** napi-rs's name of this platform: linux-x64-gnu, linux-arm64-musl, darwin-arm64, win32-x64-msvc... */
function platformName() {
  const { platform, arch } = process;
  if (platform === 'win32') return `win32-${arch}-msvc`;
  if (platform !== 'linux') return `${platform}-${arch}`;
  let musl;
  try {
    musl = fs.readFileSync('/usr/bin/ldd', 'latin1').includes('musl');
  } catch {
    musl = !process.report?.getReport?.().header?.glibcVersionRuntime;
  }
  return `linux-${arch}-${musl ? 'musl' : 'gnu'}`;
}

// ELF e_machine of each process.arch.
const ELF_MACHINES = { ia32: 3, arm: 40, ppc: 20, ppc64: 21, s390x: 22, x64: 62, arm64: 183, riscv64: 243, loong64: 258 };

/**
 * On Linux, throw unless `file` is a whole ELF shared object for this
 * process's architecture: dlopen says only "No such file or directory" for
 * another architecture's, and maps a truncated one, which then crashes the
 * process (SIGBUS) instead of failing.
 */
function checkElf(file) {
  if (process.platform !== 'linux') return;
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const read = (position, length) => {
      const b = Buffer.alloc(length);
      return fs.readSync(fd, b, 0, length, position) === length ? b : null;
    };
    const ident = read(0, 16);
    if (!ident || ident.readUInt32BE(0) !== 0x7f454c46) throw new Error('not an ELF file (corrupt, or an unfinished download?)');
    const bits = ident[4] === 2 ? 64 : 32;
    const le = ident[5] === 1;
    if (le !== (os.endianness() === 'LE')) throw new Error('it is an ELF file of the other byte order');
    const header = read(0, bits === 64 ? 64 : 52);
    if (!header) throw new Error(`truncated: ${size} bytes, less than its ELF header`);
    const u16 = (b, at) => (le ? b.readUInt16LE(at) : b.readUInt16BE(at));
    const word = (b, at) =>
      bits === 64 ? Number(le ? b.readBigUInt64LE(at) : b.readBigUInt64BE(at)) : le ? b.readUInt32LE(at) : b.readUInt32BE(at);
    const machine = u16(header, 18);
    const want = ELF_MACHINES[process.arch];
    if (want !== undefined && machine !== want) {
      const name = Object.keys(ELF_MACHINES).find((a) => ELF_MACHINES[a] === machine);
      throw new Error(`it is built for another architecture (ELF machine ${machine}${name ? `, ${name}` : ''}; this process is ${process.arch}, machine ${want})`);
    }
    const processBits = ['ia32', 'arm', 'ppc'].includes(process.arch) ? 32 : 64;
    if (want !== undefined && bits !== processBits) throw new Error(`it is a ${bits}-bit ELF file; this process is ${processBits}-bit`);
    // Every segment and the section header table must be in the file.
    const [phoff, phentsize, phnum] = bits === 64 ? [word(header, 32), u16(header, 54), u16(header, 56)] : [word(header, 28), u16(header, 42), u16(header, 44)];
    const [shoff, shentsize, shnum] = bits === 64 ? [word(header, 40), u16(header, 58), u16(header, 60)] : [word(header, 32), u16(header, 46), u16(header, 48)];
    let end = Math.max(phoff + phentsize * phnum, shoff + shentsize * shnum);
    const table = read(phoff, phentsize * phnum);
    if (table) {
      for (let i = 0; i < phnum; i++) {
        const at = i * phentsize;
        const [offset, filesz] = bits === 64 ? [word(table, at + 8), word(table, at + 32)] : [word(table, at + 4), word(table, at + 16)];
        end = Math.max(end, offset + filesz);
      }
    }
    if (size < end) throw new Error(`truncated: ${size} bytes, its ELF headers need ${end}`);
  } finally {
    fs.closeSync(fd);
  }
}

const native = loadAddon();

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
    fenced: checkBoolean(opts.fenced, 'fenced'),
    kind: KIND_LOCK,
    limit: 0,
    permits: 0,
  };
}

// The kinds of lock and the acquisition's flags, as the addon numbers them.
const KIND_LOCK = 0;
const KIND_SEMAPHORE = 1;
const KINDS = { read: 2, write: 3 };
const OR_NULL = 1;
const AUTO_RENEW = 2;
const FENCED = 4;

/** A Promise rejected with what `fn` throws, else fn's Promise: the methods that return one never throw. */
function rejecting(fn) {
  try {
    return fn();
  } catch (e) {
    return Promise.reject(e);
  }
}

/** `r`, an addon call's value, or its failure thrown. */
function value(r) {
  if (r instanceof native.Failure) throw fromFailure(r);
  return r;
}

/** Nothing, or the addon call's failure thrown. */
function nothing(r) {
  if (r instanceof native.Failure) throw fromFailure(r);
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
   * `fenced` (draw the fencing number in the acquisition; by default it is
   * drawn on first use: see Lock#drawFence). Rejects with LockTimeoutError
   * when the wait runs out.
   */
  acquire(name, opts) {
    return rejecting(() => this.#acquire(name, acquireOptions(opts, -1), false));
  }

  /** One attempt (or a wait of `opts.wait` ms): the Lock, or null when another owner holds it. */
  tryAcquire(name, opts) {
    return rejecting(() => this.#acquire(name, acquireOptions(opts, 0), true));
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
    o.kind = KIND_SEMAPHORE;
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
    o.kind = KINDS[kind];
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

  /** The acquisition `o` of `name`: a Promise of its Lock (or null: `orNull`). */
  #acquire(name, o, orNull) {
    checkName(name);
    const { signal } = o;
    if (signal) return this.#abortable(name, o, orNull);
    const flags = (orNull ? OR_NULL : 0) | (o.autoRenew ? AUTO_RENEW : 0) | (o.fenced ? FENCED : 0);
    return this.#native
      .acquire(bufferOf(name), o.ttl, o.wait, flags, o.kind, o.limit, o.permits, o.token, null)
      .then((r) => lockOf(r, name, o.ttl));
  }

  /** #acquire with an AbortSignal, which ends the wait: the Promise rejects with its reason. */
  async #abortable(name, o, orNull) {
    const { signal } = o;
    if (signal.aborted) throw signal.reason;
    const cancel = new native.Cancel();
    const onAbort = () => cancel.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const flags = (orNull ? OR_NULL : 0) | (o.autoRenew ? AUTO_RENEW : 0) | (o.fenced ? FENCED : 0);
      const r = await this.#native.acquire(bufferOf(name), o.ttl, o.wait, flags, o.kind, o.limit, o.permits, o.token, cancel);
      if (r instanceof native.Failure && r.kind === 'Aborted') throw signal.reason;
      return lockOf(r, name, o.ttl);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }
}

/** The Lock of an acquisition's outcome (null stays null), or its failure thrown. */
function lockOf(r, name, ttl) {
  if (r === null) return null;
  if (r instanceof native.Failure) throw fromFailure(r);
  return new Lock(kCreate, name, ttl, r);
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
    this[kNative] = handle;
  }

  /** The lock's name, as given to acquire. */
  get name() {
    return this.#name;
  }

  /** This acquisition's token (a Buffer): what the key holds while it is ours. */
  get token() {
    this.#token ??= this[kNative].token;
    return this.#token;
  }

  /**
   * The fencing number: a number once drawn, also after the release. It is
   * drawn on first use, by `await lock.drawFence()` (one round trip, which
   * checks the lock is still held), or in the acquisition with
   * `fenced: true` (semaphores and read-write locks always draw it there).
   * Reading it before it was drawn throws, never returns a null that could
   * pass for a fence: LockError while the lock is held (draw it first), and
   * LockNotOwnedError once it was released or found lost (no number can be
   * drawn then).
   */
  get fence() {
    const handle = this[kNative];
    const fence = handle.fence;
    if (fence !== null) return fence;
    throw this.#undrawn(handle);
  }

  /**
   * A Promise of the fencing number: drawn now if it was not yet (one round
   * trip; rejects with LockNotOwnedError if the lock is no longer held),
   * the same number on every later call, also after the release.
   */
  drawFence() {
    const handle = this[kNative];
    const fence = handle.fence;
    if (fence !== null) return Promise.resolve(fence);
    if (!handle.held) return Promise.reject(this.#undrawn(handle));
    return handle.drawFence().then(value);
  }

  /** Why the fence cannot be read: it was never drawn. */
  #undrawn(handle) {
    const name = inspect(this.#name);
    const how = '`await lock.drawFence()` draws it while the lock is held; `fenced: true` draws it in the acquisition';
    if (!handle.held) return new LockNotOwnedError(`lock ${name} was released before its fence was drawn (${how})`);
    if (handle.lost) return new LockNotOwnedError(`lock ${name} was lost before its fence was drawn (${how})`);
    return new LockError(`lock ${name}: its fence is not drawn yet (it is drawn on first use: ${how})`);
  }

  /** True once renewal, an extend or a release found the lock gone. */
  get lost() {
    return this[kNative].lost;
  }

  /** Set the remaining time to live to `ttl` ms (default: the acquisition's). */
  extend(ttl = this.#ttl) {
    return rejecting(() => {
      checkNumber(ttl, 'ttl');
      return this[kNative].extend(ttl).then(nothing);
    });
  }

  /** Release the lock. Rejects with LockNotOwnedError when it was lost (or already released). */
  release() {
    return this[kNative].release().then(nothing);
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
