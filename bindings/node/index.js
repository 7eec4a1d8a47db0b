'use strict';
// redislock for Node.js: the lock that C, Python, PHP and Ruby programs
// take the same way, from one Rust core (the native addon redislock.node).
// This file only checks arguments and turns the addon's failures into the
// error classes below; waiting, renewal and the wire protocol are the core's.

const { Buffer } = require('node:buffer');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { getSystemErrorName, inspect } = require('node:util');

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
    const missing = ['setEventLoop', 'eventLoop'].filter((f) => typeof addon[f] !== 'function');
    if (missing.length) {
      tried.push(`${file} (${what}): it has no ${missing.join('() or ')}() (built from older sources of version ${got}?): build it again`);
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

/**
 * Whether the addon may run its calls on this runtime's libuv event loop:
 * only on Node.js itself. Bun exports every `uv_*` function as a stub that
 * aborts the process (and its napi_get_uv_event_loop succeeds), Deno
 * exports a few: there the calls run on the addon's own thread instead
 * (eventLoop() says 'tokio'), as they do with REDISLOCK_NODE_EVENT_LOOP=tokio.
 * Decided before the first call, in the thread that loads this file.
 */
function libuvAllowed() {
  const asked = process.env.REDISLOCK_NODE_EVENT_LOOP;
  if (asked !== undefined && asked !== '' && asked !== 'auto' && asked !== 'tokio') {
    throw new Error(`redislock: REDISLOCK_NODE_EVENT_LOOP must be auto or tokio, got ${JSON.stringify(asked)}`);
  }
  if (asked === 'tokio') return false;
  const versions = process.versions || {};
  return (
    process.release?.name === 'node' &&
    typeof versions.node === 'string' &&
    typeof versions.uv === 'string' &&
    versions.bun === undefined &&
    versions.deno === undefined &&
    typeof globalThis.Bun === 'undefined' &&
    typeof globalThis.Deno === 'undefined'
  );
}

const native = loadAddon();
native.setEventLoop(libuvAllowed());

/**
 * What runs this thread's calls: 'libuv' (Node.js's own event loop, which
 * reads the replies on this thread) or 'tokio' (the addon's thread, on
 * runtimes without a real libuv or with REDISLOCK_NODE_EVENT_LOOP=tokio).
 */
function eventLoop() {
  return native.eventLoop();
}

/** Default time to live of an acquisition, in milliseconds. */
const DEFAULT_TTL = 30000;

/**
 * Every error of this library that is not a bad argument. `code` is a
 * string to switch on (it also works across two copies of this package,
 * where `instanceof` does not); `cause`, where there is one, is what the
 * layer below reported.
 */
class LockError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
    this.code = options?.code ?? defaultCode(new.target);
  }
}
/** The lock stayed held by another owner for the whole wait (or the one attempt). */
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

/** Each class's `code` when none is given (a subclass of the user's gets its parent's). */
const CODES = new Map([
  [LockError, 'ERR_LOCK_INTERNAL'],
  [LockTimeoutError, 'ERR_LOCK_TIMEOUT'],
  [LockNotOwnedError, 'ERR_LOCK_NOT_OWNED'],
  [LockUnconfirmedError, 'ERR_LOCK_UNCONFIRMED'],
  [LockWrongTypeError, 'ERR_LOCK_WRONG_TYPE'],
  [LockQuorumError, 'ERR_LOCK_NO_QUORUM'],
  [LockConnectionError, 'ERR_LOCK_CONNECTION'],
  [LockServerError, 'ERR_LOCK_SERVER'],
]);

function defaultCode(Class) {
  for (let c = Class; c; c = Object.getPrototypeOf(c)) {
    if (CODES.has(c)) return CODES.get(c);
  }
  return 'ERR_LOCK_INTERNAL';
}

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

/**
 * The error for a failure the addon reported; `triedOnce`: the failure of
 * an acquisition that made one attempt (wait 0), whose code is
 * ERR_LOCK_NOT_ACQUIRED rather than ERR_LOCK_TIMEOUT.
 */
function fromFailure(f, triedOnce = false) {
  const message = redact(f.message);
  if (f.kind === 'InvalidArgument') return argError(TypeError, 'ERR_INVALID_ARG_VALUE', message);
  if (f.kind === 'OutOfRange') return argError(RangeError, 'ERR_OUT_OF_RANGE', message);
  const options = {};
  const cause = causeOf(f);
  if (cause) options.cause = cause;
  if (f.kind === 'Closed') options.code = 'ERR_LOCK_CLIENT_CLOSED';
  else if (f.kind === 'NotAcquired' && triedOnce) options.code = 'ERR_LOCK_NOT_ACQUIRED';
  return new (CLASSES[f.kind] || LockError)(message, options);
}

/**
 * The `cause` of a failure: an Error whose message is what the layer below
 * said (a connection's failure, with `code` ECONNREFUSED, ETIMEDOUT or the
 * system's name of the error when that is what it was; the server's error
 * text, a `ReplyError` with its first word as `code`, such as NOAUTH or
 * NOPERM; the Redlock nodes' outcomes), `address` the server's (no
 * credentials). Undefined when there is none.
 */
function causeOf(f) {
  if (f.cause === null || f.cause === undefined) return undefined;
  const text = redact(f.cause);
  const cause = new Error(text);
  let code;
  if (f.causeKind === 'reply') {
    cause.name = 'ReplyError';
    code = /^[A-Z][A-Z_]+(?=\s|$)/.exec(text)?.[0];
  } else if (f.causeKind === 'io') {
    const os = /\(os error (\d+)\)/.exec(text);
    if (/^connection refused/i.test(text)) code = 'ECONNREFUSED';
    else if (/timed out|no answer in time/i.test(text)) code = 'ETIMEDOUT';
    else if (os) {
      try {
        code = getSystemErrorName(-Number(os[1]));
      } catch {
        code = undefined;
      }
    }
  }
  if (code) cause.code = code;
  if (f.addr) cause.address = f.addr;
  return cause;
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

/** The core's longest connect, command and node timeout, in ms. */
const MAX_TIMEOUT = 3_600_000;

/** The options of the Client constructor, checked: each timeout a whole number of ms, or null. */
function clientOptions(opts) {
  if (opts === undefined || opts === null) opts = {};
  else if (typeof opts !== 'object') throw typeError('options', 'an object', opts);
  const timeout = (what) => {
    const v = opts[what];
    if (v === undefined || v === null) return null;
    checkNumber(v, what);
    if (!Number.isInteger(v) || v < 1 || v > MAX_TIMEOUT) {
      throw argError(
        RangeError,
        'ERR_OUT_OF_RANGE',
        `${what} must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT} (an hour), got ${v}`,
      );
    }
    return v;
  };
  return {
    connectTimeout: timeout('connectTimeout'),
    commandTimeout: timeout('commandTimeout'),
    nodeTimeout: timeout('nodeTimeout'),
  };
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

const kNative = Symbol('redislock.native');
const kCreate = Symbol('redislock.create');

/** A connection pool and subscriber for one Redis deployment, or for several independent servers (Redlock). */
class Client {
  #native;
  /** The acquisitions in flight, and what close() waits on once they are all settled. */
  #pending = 0;
  #settled = null;

  /**
   * `urls`: a redis://, rediss://, unix://, redis+sentinel:// or
   * redis+cluster:// URL, or an array of them (Redlock). Nothing is
   * connected until the first call. Throws TypeError for a bad URL.
   * `opts`: `connectTimeout`, `commandTimeout` and (Redlock) `nodeTimeout`,
   * whole milliseconds from 1 to an hour (RangeError otherwise), which win
   * over the URL's `connect_timeout`, `command_timeout` and `node_timeout`.
   */
  constructor(urls, opts) {
    if (Array.isArray(urls)) {
      if (urls.length === 0) throw argError(TypeError, 'ERR_INVALID_ARG_VALUE', 'urls must not be empty');
      urls.forEach((u, i) => {
        if (typeof u !== 'string') throw typeError(`urls[${i}]`, 'a string', u);
      });
    } else if (typeof urls !== 'string') {
      throw typeError('url', 'a string or an array of strings', urls);
    }
    const { connectTimeout, commandTimeout, nodeTimeout } = clientOptions(opts);
    try {
      this.#native = new native.NativeClient(urls, connectTimeout, commandTimeout, nodeTimeout);
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
   * as tryAcquireSemaphore.
   */
  acquireSemaphore(name, opts) {
    return rejecting(() => this.#semaphore(name, opts, undefined));
  }

  /** acquireSemaphore with one attempt (or a wait of `opts.wait` ms): the Lock, or null while the permits are taken. */
  tryAcquireSemaphore(name, opts) {
    return rejecting(() => this.#semaphore(name, opts, true));
  }

  /**
   * The read-write lock `name`, shared: any number of readers at once while
   * no writer holds it or waits for it (a queued writer stops new readers).
   * Options as for acquireSemaphore, without limit and permits.
   */
  acquireRead(name, opts) {
    return rejecting(() => this.#shared(name, opts, 'read', undefined));
  }

  /** acquireRead with one attempt (or a wait of `opts.wait` ms): the Lock, or null while a writer holds it or waits. */
  tryAcquireRead(name, opts) {
    return rejecting(() => this.#shared(name, opts, 'read', true));
  }

  /** The read-write lock `name`, exclusive: once nobody holds it and nobody queued earlier waits. */
  acquireWrite(name, opts) {
    return rejecting(() => this.#shared(name, opts, 'write', undefined));
  }

  /** acquireWrite with one attempt (or a wait of `opts.wait` ms): the Lock, or null while anyone holds it. */
  tryAcquireWrite(name, opts) {
    return rejecting(() => this.#shared(name, opts, 'write', true));
  }

  /** `orNull`: true for the tryAcquire* methods, undefined for the others (then opts.tryAcquire decides). */
  #semaphore(name, opts, orNull) {
    if (opts === null || typeof opts !== 'object') throw typeError('options', 'an object with a limit', opts);
    orNull ??= checkBoolean(opts.tryAcquire, 'tryAcquire');
    const o = acquireOptions(opts, orNull ? 0 : -1);
    o.kind = KIND_SEMAPHORE;
    o.limit = checkCount(opts.limit, 'limit');
    o.permits = opts.permits === undefined ? 1 : checkCount(opts.permits, 'permits');
    return this.#acquire(name, o, orNull);
  }

  #shared(name, opts, kind, orNull) {
    if (opts !== undefined && opts !== null && typeof opts !== 'object') throw typeError('options', 'an object', opts);
    orNull ??= checkBoolean(opts?.tryAcquire, 'tryAcquire');
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
    // fn's run is part of the call: the process stays for it, as for a pending acquire.
    const alive = setInterval(() => {}, 1 << 30);
    const controller = new AbortController();
    const abortWith = () => controller.abort(o.signal.reason);
    // Aborted between the acquisition and now: fn starts with its signal aborted.
    if (o.signal?.aborted) abortWith();
    else o.signal?.addEventListener('abort', abortWith, { once: true });
    lock.onLost((reason) => controller.abort(reason));
    let result;
    try {
      result = await fn(controller.signal, lock);
    } catch (e) {
      await lock.release().catch(() => {});
      throw e;
    } finally {
      o.signal?.removeEventListener('abort', abortWith);
      clearInterval(alive);
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
   * What this client did since it was made: counters in camelCase
   * (acquiredAtOnce, acquiredHandedOver, waitersNow, ...) and the `wait`
   * and `held` histograms, in milliseconds. The snake_case names of
   * 0.1 (acquired_at_once, ...) are kept as non-enumerable aliases for one
   * minor version; reading one warns once (a DeprecationWarning).
   */
  stats() {
    const s = this.#native.stats();
    const out = {};
    s.names.forEach((name, i) => {
      out[camelCase(name)] = s.values[i];
    });
    out.wait = s.wait;
    out.held = s.held;
    s.names.forEach((name, i) => {
      const v = s.values[i];
      if (name === camelCase(name)) return;
      Object.defineProperty(out, name, {
        get() {
          warnSnakeCase(name);
          return v;
        },
        enumerable: false,
        configurable: true,
      });
    });
    return out;
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

  /**
   * End this client: the acquisitions still waiting reject with a LockError
   * whose code is ERR_LOCK_CLIENT_CLOSED (they leave the server's queue),
   * every call made from now on rejects the same way, and the connections
   * close once nothing uses them. A Promise that resolves once the waits
   * have settled. The locks this client took stay held and usable
   * (release, extend, renewal) until released: closing releases nothing.
   * stats() keeps answering (the figures as they were at the close).
   * Calling it again does nothing more.
   */
  close() {
    this.#native.close();
    if (this.#pending === 0) {
      this.#native.dispose();
      return Promise.resolve();
    }
    this.#settled ??= resolvers();
    return this.#settled.promise;
  }

  /** True once close() was called. */
  get closed() {
    return this.#native.closed;
  }

  /** The server's address (the first node's for Redlock), without credentials. */
  get addr() {
    return this.#native.addr;
  }

  [inspect.custom]() {
    return `Client <${this.#native.addr}>${this.#native.closed ? ' (closed)' : ''}`;
  }

  /** One acquisition more in flight; the function to call once it settled. */
  #begin() {
    this.#pending += 1;
    return () => {
      this.#pending -= 1;
      if (this.#pending === 0 && this.#settled) {
        this.#native.dispose();
        this.#settled.resolve();
        this.#settled = null;
      }
    };
  }

  /** The acquisition `o` of `name`: a Promise of its Lock (or null: `orNull`). */
  #acquire(name, o, orNull) {
    checkName(name);
    const { signal } = o;
    if (signal) return this.#abortable(name, o, orNull);
    const flags = (orNull ? OR_NULL : 0) | (o.autoRenew ? AUTO_RENEW : 0) | (o.fenced ? FENCED : 0);
    const done = this.#begin();
    return this.#native.acquire(bufferOf(name), o.ttl, o.wait, flags, o.kind, o.limit, o.permits, o.token, null).then(
      (r) => {
        done();
        return lockOf(r, name, o);
      },
      (e) => {
        done();
        throw e;
      },
    );
  }

  /** #acquire with an AbortSignal, which ends the wait: the Promise rejects with its reason. */
  async #abortable(name, o, orNull) {
    const { signal } = o;
    if (signal.aborted) throw signal.reason;
    const cancel = new native.Cancel();
    const onAbort = () => cancel.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    const done = this.#begin();
    try {
      const flags = (orNull ? OR_NULL : 0) | (o.autoRenew ? AUTO_RENEW : 0) | (o.fenced ? FENCED : 0);
      const r = await this.#native.acquire(bufferOf(name), o.ttl, o.wait, flags, o.kind, o.limit, o.permits, o.token, cancel);
      if (r instanceof native.Failure && r.kind === 'Aborted') throw signal.reason;
      return lockOf(r, name, o);
    } finally {
      done();
      signal.removeEventListener('abort', onAbort);
    }
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using client = new Client(url)`: closed at the end of the scope.
  Client.prototype[Symbol.asyncDispose] = function dispose() {
    return this.close();
  };
}

/** A Promise and the function that resolves it (Promise.withResolvers, which Node.js 18 and 20 lack). */
function resolvers() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** acquired_at_once -> acquiredAtOnce. */
function camelCase(name) {
  return name.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

let warnedSnakeCase = false;
/** Warn (once in the process) that a snake_case name of stats() was read. */
function warnSnakeCase(name) {
  if (warnedSnakeCase) return;
  warnedSnakeCase = true;
  process.emitWarning(
    `client.stats().${name}: the snake_case names of stats() are deprecated aliases, kept for one minor version; read ${camelCase(name)}`,
    { type: 'DeprecationWarning', code: 'REDISLOCK_STATS_SNAKE_CASE' },
  );
}

/** The Lock of an acquisition's outcome (null stays null), or its failure thrown. */
function lockOf(r, name, o) {
  if (r === null) return null;
  if (r instanceof native.Failure) throw fromFailure(r, o.wait === 0);
  return new Lock(kCreate, name, o.ttl, r);
}

/**
 * Who is told when a held lock is found lost: its AbortController (made by
 * `lock.signal`) and the `lock.onLost` callbacks. The addon calls
 * `lostFound(id)` (a weak threadsafe function: it keeps neither the process
 * alive nor, holding only this registry's id, the Lock from collection);
 * the registry holds each watch weakly, so that a Lock and its listeners
 * can be collected (and the lock released) like any other.
 */
const lostWatches = new Map();
const lostCollected = new FinalizationRegistry((id) => lostWatches.delete(id));
let lostIds = 0;

function lostFound(id) {
  const watch = lostWatches.get(id)?.deref();
  lostWatches.delete(id);
  watch?.fire();
}

class LostWatch {
  constructor(name, handle) {
    this.name = name;
    this.reason = null;
    this.controller = null;
    this.listeners = [];
    this.id = ++lostIds;
    lostWatches.set(this.id, new WeakRef(this));
    lostCollected.register(this, this.id, this);
    handle.watchLost(this.id, lostFound);
  }

  /** The lock was found lost: abort the signal, call the listeners (once). */
  fire() {
    if (this.reason) return;
    this.reason = new LockNotOwnedError(
      `lock ${inspect(this.name)} was lost: renewal, an extend or a release found it expired or held by another owner`,
    );
    this.controller?.abort(this.reason);
    const listeners = this.listeners.splice(0);
    for (const fn of listeners) call(fn, this.reason);
  }

  /** The lock was released or forgotten: nobody will be told anything. */
  end() {
    lostWatches.delete(this.id);
    lostCollected.unregister(this);
    this.listeners.length = 0;
  }
}

/** `fn(reason)`; what it throws is an uncaught exception, as a listener's is. */
function call(fn, reason) {
  try {
    fn(reason);
  } catch (e) {
    process.nextTick(() => {
      throw e;
    });
  }
}

/** Each lock.signal keeps its Lock: a lock whose signal is still in use is not collected (and released). */
const signalLocks = new WeakMap();

/** A held lock (from Client#acquire). Release it, or it is released when collected. */
class Lock {
  #name;
  #ttl;
  #token;
  #lost = null;

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
   * The fencing number, or undefined while none was drawn. It is drawn on
   * first use, by `await lock.drawFence()` (one round trip, which checks
   * the lock is still held), or in the acquisition with `fenced: true`
   * (semaphores and read-write locks always draw it there); once drawn it
   * stays, also after the release. Pass `await lock.drawFence()` where a
   * number is needed: it is never undefined.
   */
  get fence() {
    return this[kNative].fence ?? undefined;
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
    return handle.drawFence().then((r) => this.#outcome(r));
  }

  /**
   * A call's value, or its failure thrown; a loss the call found is told
   * first (the addon's word comes through a weak threadsafe function, which
   * could come too late in a process that has nothing else to do).
   */
  #outcome(r) {
    if (r instanceof native.Failure) {
      if (this.#lost && this[kNative].lost) this.#lost.fire();
      throw fromFailure(r);
    }
    return r;
  }

  /** Why no fence can be drawn: the lock is no longer held. */
  #undrawn(handle) {
    const name = inspect(this.#name);
    const how = 'draw it while the lock is held, with `await lock.drawFence()` or `fenced: true`';
    if (handle.lost) return new LockNotOwnedError(`lock ${name} was lost before its fence was drawn (${how})`);
    return new LockNotOwnedError(`lock ${name} was released before its fence was drawn (${how})`);
  }

  /** True once renewal, an extend or a release found the lock gone. */
  get lost() {
    return this[kNative].lost;
  }

  /**
   * An AbortSignal aborted when the lock is found lost (by renewal, an
   * extend or a release), its reason a LockNotOwnedError. It never aborts
   * for a lock released or forgotten first. The same signal every time.
   */
  get signal() {
    const watch = this.#watch();
    if (!watch.controller) {
      watch.controller = new AbortController();
      if (watch.reason) watch.controller.abort(watch.reason);
      signalLocks.set(watch.controller.signal, this);
    }
    return watch.controller.signal;
  }

  /**
   * Call `fn(reason)` once when the lock is found lost (reason: a
   * LockNotOwnedError), on the event loop; at once (in a microtask) if it
   * was found lost already. Never for a lock released or forgotten first.
   */
  onLost(fn) {
    if (typeof fn !== 'function') throw typeError('fn', 'a function', fn);
    const watch = this.#watch();
    if (watch.reason) queueMicrotask(() => call(fn, watch.reason));
    else watch.listeners.push(fn);
  }

  #watch() {
    if (!this.#lost) {
      this.#lost = new LostWatch(this.#name, this[kNative]);
      // Found lost before anyone watched: the addon calls back at once, on a later turn.
      if (this[kNative].lost) this.#lost.fire();
    }
    return this.#lost;
  }

  /** Set the remaining time to live to `ttl` ms (default: the acquisition's). */
  extend(ttl = this.#ttl) {
    return rejecting(() => {
      checkNumber(ttl, 'ttl');
      return this[kNative].extend(ttl).then((r) => {
        this.#outcome(r);
      });
    });
  }

  /** Release the lock. Rejects with LockNotOwnedError when it was lost (or already released). */
  release() {
    return this[kNative].release().then((r) => {
      this.#outcome(r);
      this.#lost?.end();
    });
  }

  /**
   * Let go of this handle without releasing the lock: it stays held on the
   * server until its TTL runs out (or releaseToken releases it: read
   * `lock.token` first). Renewal stops; neither this handle nor the garbage
   * collector releases it; release() then rejects with LockNotOwnedError.
   * No I/O.
   */
  forget() {
    this[kNative].forget();
    this.#lost?.end();
  }

  /** Whether the server still names this handle the owner. */
  owned() {
    return this[kNative].owned().then((r) => this.#outcome(r));
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
  eventLoop,
};
