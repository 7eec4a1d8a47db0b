// redislock for Node.js: the lock that C, Python, PHP and Ruby programs
// take the same way, from one Rust core (the native addon redislock.node).
// These declarations describe index.js; the guide is docs/node.md.
//
// They need no other declarations: Buffer is @types/node's where the
// program has it (a Uint8Array otherwise), AbortSignal the DOM's or
// @types/node's (else the shape index.js checks), and the
// [Symbol.asyncDispose] methods exist where the program's lib declares
// Symbol.asyncDispose (esnext.disposable, or @types/node).

/** A Buffer where the program has Node.js's types, else the Uint8Array it is. */
type NodeBuffer = typeof globalThis extends { Buffer: abstract new (...args: any) => infer B } ? B : Uint8Array;

/** What index.js takes for an AbortSignal where no lib declares one. */
interface AbortSignalShape {
  readonly aborted: boolean;
  readonly reason: any;
  addEventListener(type: 'abort', listener: (this: any, event: any) => any, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: (this: any, event: any) => any): void;
  throwIfAborted(): void;
}

/** The AbortSignal of the program's lib (DOM or @types/node), else its shape. */
export type AbortSignalLike = typeof globalThis extends { AbortSignal: { prototype: infer S } } ? S : AbortSignalShape;

/** Symbol.asyncDispose where the program's lib declares it, else nothing. */
type AsyncDisposeKey = SymbolConstructor extends { readonly asyncDispose: infer K extends symbol } ? K : never;
/** `[Symbol.asyncDispose](): Promise<void>` where it exists (an empty type elsewhere). */
type MaybeAsyncDisposable = { [K in AsyncDisposeKey]: () => Promise<void> };

/**
 * What runs this thread's calls: 'libuv' (Node.js's own event loop, which
 * reads the replies on this thread) or 'tokio' (the addon's own thread:
 * on Bun, Deno, or with REDISLOCK_NODE_EVENT_LOOP=tokio).
 */
export declare function eventLoop(): 'libuv' | 'tokio';

/** Default time to live of an acquisition, in milliseconds. */
export declare const DEFAULT_TTL: 30000;

/** A lock name or a token: a string (stored UTF-8) or bytes. */
export type LockName = string | Uint8Array;

/** The options of acquire, tryAcquire and using. */
export interface AcquireOptions {
  /**
   * Time to live of the acquisition: a whole number of milliseconds from 1
   * to 30 days (default {@link DEFAULT_TTL}, 30000). Not a number: TypeError;
   * out of range: RangeError. Longer is refused as a likely unit mistake: a
   * lock that must live longer is renewed (`autoRenew`, `using`) or extended.
   */
  ttl?: number;
  /**
   * How long to wait for the lock, in ms. Omitted, null or negative: as
   * long as it takes (acquire, using); 0: try once (tryAcquire's default).
   */
  wait?: number | null;
  /**
   * An AbortSignal that ends the wait: the Promise rejects with its
   * `reason`. In `using`, it also aborts the signal given to `fn`.
   */
  signal?: AbortSignalLike | null;
  /**
   * Renew the lock in the background (at about a third of its TTL) until
   * it is released. Default false; `using` always renews.
   */
  autoRenew?: boolean;
  /**
   * Draw the fencing number in the acquisition. Default false: it is drawn
   * on first use, by {@link Lock.drawFence} (see {@link Lock.fence}).
   */
  fenced?: boolean;
  /**
   * The caller's own token (a request id, or the token of a lock it holds
   * on another name), instead of 128 random bits: 1 byte to 64 KiB. Whoever
   * knows it can release the lock (`releaseToken`): it must be unique to
   * this owner. Empty or too long: TypeError.
   */
  token?: LockName | null;
}

/** The options of acquireRead and acquireWrite. */
export interface SharedOptions extends AcquireOptions {
  /**
   * Behave as tryAcquire: `wait` defaults to 0, and a wait that runs out
   * resolves null instead of rejecting with LockTimeoutError.
   */
  tryAcquire?: boolean;
}

/** The semaphore's size and this holder's share. */
export interface SemaphoreLimits {
  /** How many permits the semaphore admits in all: a whole number from 1 to 1,000,000. */
  limit: number;
  /** How many of them this holder takes (default 1, at most `limit`). */
  permits?: number;
}

/** The options of acquireSemaphore. */
export interface SemaphoreOptions extends SharedOptions, SemaphoreLimits {}

/**
 * The options of the Client constructor: timeouts, each a whole number of
 * milliseconds from 1 to 3600000 (an hour; otherwise RangeError), which
 * win over the URL's parameters of the same name.
 */
export interface ClientOptions {
  /** Opening a connection (TCP, TLS, AUTH, SELECT): the URL's `connect_timeout`, else 2000. */
  connectTimeout?: number | null;
  /** Each command's reply (not the wait for a held lock: `wait` bounds that): the URL's `command_timeout`, else 2000. */
  commandTimeout?: number | null;
  /** Redlock: each node's reply to an acquire: the URLs' `node_timeout`, else a tenth of the TTL (10 ms at least, the command timeout at most). */
  nodeTimeout?: number | null;
}

/** A connection pool and subscriber for one Redis deployment, or for several independent servers (Redlock). */
export declare class Client {
  #private;

  /**
   * `urls`: a redis://, rediss://, unix://, redis+sentinel:// or
   * redis+cluster:// URL, or an array of them (Redlock). Nothing is
   * connected until the first call. Throws TypeError for a bad URL.
   * `opts`: the connect, command and Redlock node timeouts (ms), which win
   * over the URL's.
   */
  constructor(urls: string | readonly string[], opts?: ClientOptions | null);

  /**
   * Take the lock `name`: a Promise of its Lock. `ttl` (ms, default 30000),
   * `wait` (ms; omitted or negative: as long as it takes, 0: try once),
   * `signal` (an AbortSignal that ends the wait: the Promise rejects with
   * its reason), `autoRenew` (renew in the background until released),
   * `fenced` (draw the fencing number in the acquisition; by default it is
   * drawn on first use: see Lock#drawFence). Rejects with LockTimeoutError
   * when the wait runs out.
   */
  acquire(name: LockName, opts: AcquireOptions & { fenced: true }): Promise<FencedLock>;
  acquire(name: LockName, opts?: AcquireOptions | null): Promise<Lock>;

  /** One attempt (or a wait of `opts.wait` ms): the Lock, or null when another owner holds it. */
  tryAcquire(name: LockName, opts: AcquireOptions & { fenced: true }): Promise<FencedLock | null>;
  tryAcquire(name: LockName, opts?: AcquireOptions | null): Promise<Lock | null>;

  /**
   * Run `fn(signal, lock)` with the lock held, renewed in the background,
   * and released afterwards; a Promise of fn's value. `signal` aborts when
   * the lock is found lost (its reason a LockNotOwnedError) or when
   * `opts.signal` aborts. When fn returned but the lock was lost meanwhile,
   * its work ran unprotected: the Promise rejects with LockNotOwnedError.
   */
  using<T>(name: LockName, fn: (signal: AbortSignalLike, lock: Lock) => T | Promise<T>): Promise<T>;
  using<T>(
    name: LockName,
    opts: AcquireOptions | null | undefined,
    fn: (signal: AbortSignalLike, lock: Lock) => T | Promise<T>,
  ): Promise<T>;

  /**
   * Take `permits` (default 1) of the counting semaphore `name`, which
   * admits `limit` in all: a Promise of a Lock whose release gives them
   * back. Waiters are served in arrival order, with no barging. Never
   * collides with the lock of the same name. Its fence is drawn in the
   * acquisition.
   */
  acquireSemaphore(name: LockName, opts: SemaphoreOptions & { tryAcquire: true }): Promise<FencedLock | null>;
  acquireSemaphore(name: LockName, opts: SemaphoreOptions & { tryAcquire?: false }): Promise<FencedLock>;
  acquireSemaphore(name: LockName, opts: SemaphoreOptions): Promise<FencedLock | null>;

  /** acquireSemaphore with one attempt (or a wait of `opts.wait` ms): the Lock, or null while the permits are taken. */
  tryAcquireSemaphore(name: LockName, opts: AcquireOptions & SemaphoreLimits): Promise<FencedLock | null>;

  /** The read side of the read-write lock `name`: shared with other readers while no writer holds it or waits for it. */
  acquireRead(name: LockName, opts: SharedOptions & { tryAcquire: true }): Promise<FencedLock | null>;
  acquireRead(name: LockName, opts: SharedOptions & { tryAcquire?: false }): Promise<FencedLock>;
  acquireRead(name: LockName, opts?: null): Promise<FencedLock>;
  acquireRead(name: LockName, opts: SharedOptions): Promise<FencedLock | null>;

  /** acquireRead with one attempt (or a wait of `opts.wait` ms): the Lock, or null while a writer holds it or waits. */
  tryAcquireRead(name: LockName, opts?: AcquireOptions | null): Promise<FencedLock | null>;

  /** The write side of the read-write lock `name`: alone, once the readers and the writers queued earlier are gone. */
  acquireWrite(name: LockName, opts: SharedOptions & { tryAcquire: true }): Promise<FencedLock | null>;
  acquireWrite(name: LockName, opts: SharedOptions & { tryAcquire?: false }): Promise<FencedLock>;
  acquireWrite(name: LockName, opts?: null): Promise<FencedLock>;
  acquireWrite(name: LockName, opts: SharedOptions): Promise<FencedLock | null>;

  /** acquireWrite with one attempt (or a wait of `opts.wait` ms): the Lock, or null while anyone holds it. */
  tryAcquireWrite(name: LockName, opts?: AcquireOptions | null): Promise<FencedLock | null>;

  /** Release the lock `name` if `token` holds it (a handle from another process): a Promise of whether it did. */
  releaseToken(name: LockName, token: LockName): Promise<boolean>;

  /**
   * Take the lock `name` from whoever holds it and hand it to the oldest
   * waiter at once (the operator's unlock): whether a holder was removed.
   * It breaks mutual exclusion if the holder is still working. Fences stay
   * monotonic; a key of another type rejects with LockWrongTypeError.
   */
  forceRelease(name: LockName): Promise<boolean>;

  /**
   * What this client did since it was made: counters in camelCase
   * (acquiredAtOnce, acquiredHandedOver, waitersNow, ...) and the `wait`
   * and `held` histograms, in milliseconds. After close(): as they were then.
   */
  stats(): ClientStats;

  /**
   * Check every server this client's locks may reach for what makes a lock
   * unsafe or slow (eviction, persistence, replication, scripting, ...) and
   * run one lock cycle. Only harmless commands; nothing is left on the
   * server. Rejects only when no server could be asked: LockConnectionError,
   * LockQuorumError (Redlock), LockServerError (credentials refused).
   */
  doctor(): Promise<DoctorReport>;

  /**
   * End this client: the acquisitions still waiting reject with a LockError
   * whose code is ERR_LOCK_CLIENT_CLOSED (they leave the server's queue),
   * every call made from now on rejects the same way, and the connections
   * close once nothing uses them. Resolves once the waits have settled.
   * The locks this client took stay held and usable until released:
   * closing releases nothing. Calling it again does nothing more.
   * `await using client = new Client(url)` closes it at the end of the scope.
   */
  close(): Promise<void>;

  /** True once close() was called. */
  readonly closed: boolean;

  /** The server's address (the first node's for Redlock), without credentials. */
  readonly addr: string;
}

export interface Client extends MaybeAsyncDisposable {}

/** How much a {@link DoctorFinding} matters. */
export type DoctorSeverity = 'ok' | 'warning' | 'unsafe';

/** One thing Client#doctor() checked on one server. */
export interface DoctorFinding {
  /**
   * `ok`: nothing to change; `warning`: safe as the server runs now, but
   * slow, or unsafe after a rare failure (a restart, a failover), or the
   * check could not be made; `unsafe`: a lock can have two owners in normal
   * operation, fences can go backwards, or locks cannot be used at all.
   */
  severity: DoctorSeverity;
  /**
   * Which check: `server`, `role`, `eviction`, `memory`, `scripting`,
   * `time`, `pubsub`, `acl`, `persistence`, `replication`, `clients`, `cluster`,
   * `sentinel`, `redlock`, `latency`, `clock`, `reach` or `lock-cycle`. Stable:
   * match on it.
   */
  check: string;
  /** The server (`host:port` or socket path, never credentials), or the deployment for checks of the whole. */
  server: string;
  /** What was found, and why it matters for a lock. */
  message: string;
  /** What to change; empty when nothing needs to. */
  fix: string;
}

/** Client#doctor(): every check on every server. */
export interface DoctorReport {
  /** The deployment, as the client names it (no credentials). */
  target: string;
  /** True when nothing makes a lock unsafe (warnings allowed). */
  safe: boolean;
  /** The most serious finding's severity. */
  worst: DoctorSeverity;
  /** In the order checked: each server's, then the whole deployment's. */
  findings: DoctorFinding[];
  /** What `redislock doctor` prints: one line per finding, each fix under it, then a `verdict:` line. */
  text: string;
}

/** A distribution of durations, in milliseconds, in fixed buckets. */
export interface Histogram {
  /** How many durations were recorded. */
  count: number;
  /** Their sum. */
  sum: number;
  /** The longest. */
  max: number;
  /** The median, estimated within its bucket (0 when nothing was recorded). */
  p50: number;
  /** The 90th percentile. */
  p90: number;
  /** The 99th percentile. */
  p99: number;
  /** How many fell in each bucket (not cumulative); the last bucket holds those above the last bound. */
  buckets: number[];
  /** The upper bound of each bucket but the last: 0.05 ms to one hour. */
  bounds: number[];
}

/**
 * Client#stats(): what one client did since it was made. The counters are
 * enumerable in camelCase; their snake_case names (the 0.1 names, as other
 * languages spell them) are non-enumerable aliases, kept for one minor
 * version: reading one emits a DeprecationWarning once.
 */
export interface ClientStats {
  /** Acquisitions that found the lock free on their first try. */
  acquiredAtOnce: number;
  /** Acquisitions that waited and then took the lock by a retry (after an expiry, or a release by a client without waiters' support). */
  acquiredAfterWait: number;
  /** Acquisitions that waited and were handed the lock by its releaser. */
  acquiredHandedOver: number;
  /** Acquisitions that did not get the lock: their wait ran out (or was aborted), or a try-once found it held. */
  acquireTimedOut: number;
  /** Acquisitions that failed with any other error (connection, quorum, server, wrong type). */
  acquireErrors: number;
  /** Releases (by handle or by token) that released or handed over. */
  releasesOk: number;
  /** Releases that found the lock no longer theirs. */
  releasesNotOwner: number;
  /** Extends by the caller that succeeded. */
  extendsOk: number;
  /** Extends by the caller that found the lock gone. */
  extendsLost: number;
  /** Background renewals that succeeded. */
  renewalsOk: number;
  /** Locks that background renewal found gone (or could not reach the server before their TTL ran out). */
  renewalsLost: number;
  /** Held locks found lost, however it was found: each is counted once. */
  locksLost: number;
  /** Releases that handed the lock straight to a waiter. */
  handoffsGiven: number;
  /** Locks this client's waiters were handed. */
  handoffsReceived: number;
  /** Connections that could not be opened, broke, or timed out. */
  connectionErrors: number;
  /** Connections opened again in place of one that broke. */
  reconnects: number;
  /** Lock handles held right now. */
  heldNow: number;
  /** Acquisitions waiting right now for a lock held by someone else. */
  waitersNow: number;
  /** Acquisitions that took a plain lock. */
  acquiredLocks: number;
  /** Acquisitions that took permits of a counting semaphore. */
  acquiredSemaphores: number;
  /** Acquisitions that took the read side of a read-write lock. */
  acquiredReads: number;
  /** Acquisitions that took the write side of a read-write lock. */
  acquiredWrites: number;
  /** Semaphore permits held right now by this client's handles. */
  permitsHeldNow: number;
  /** How long each acquisition took, whatever its outcome. */
  wait: Histogram;
  /** How long each lock handle was held: from acquire to release, collection, or until it was found lost. */
  held: Histogram;

  /** @deprecated read acquiredAtOnce */
  readonly acquired_at_once: number;
  /** @deprecated read acquiredAfterWait */
  readonly acquired_after_wait: number;
  /** @deprecated read acquiredHandedOver */
  readonly acquired_handed_over: number;
  /** @deprecated read acquireTimedOut */
  readonly acquire_timed_out: number;
  /** @deprecated read acquireErrors */
  readonly acquire_errors: number;
  /** @deprecated read releasesOk */
  readonly releases_ok: number;
  /** @deprecated read releasesNotOwner */
  readonly releases_not_owner: number;
  /** @deprecated read extendsOk */
  readonly extends_ok: number;
  /** @deprecated read extendsLost */
  readonly extends_lost: number;
  /** @deprecated read renewalsOk */
  readonly renewals_ok: number;
  /** @deprecated read renewalsLost */
  readonly renewals_lost: number;
  /** @deprecated read locksLost */
  readonly locks_lost: number;
  /** @deprecated read handoffsGiven */
  readonly handoffs_given: number;
  /** @deprecated read handoffsReceived */
  readonly handoffs_received: number;
  /** @deprecated read connectionErrors */
  readonly connection_errors: number;
  /** @deprecated read heldNow */
  readonly held_now: number;
  /** @deprecated read waitersNow */
  readonly waiters_now: number;
  /** @deprecated read acquiredLocks */
  readonly acquired_locks: number;
  /** @deprecated read acquiredSemaphores */
  readonly acquired_semaphores: number;
  /** @deprecated read acquiredReads */
  readonly acquired_reads: number;
  /** @deprecated read acquiredWrites */
  readonly acquired_writes: number;
  /** @deprecated read permitsHeldNow */
  readonly permits_held_now: number;
}

/**
 * A held lock, semaphore permits or side of a read-write lock (from
 * Client#acquire, tryAcquire, using, acquireSemaphore, acquireRead or
 * acquireWrite). Release it, or it is released when collected (unless
 * forgotten).
 */
export declare class Lock {
  #private;

  /** Locks come from Client#acquire, tryAcquire and using; `new Lock()` throws TypeError. */
  private constructor();

  /** The lock's name, as given to acquire. */
  readonly name: LockName;

  /** This acquisition's token (a Buffer): what the key holds while it is ours (the caller's `token`, else 128 random bits). */
  readonly token: NodeBuffer;

  /**
   * The fencing number, or undefined while none was drawn. It is drawn on
   * first use, by `await lock.drawFence()` (one round trip, which checks
   * the lock is still held), or in the acquisition with `fenced: true`
   * (semaphores and read-write locks always draw it there: their type is
   * {@link FencedLock}, whose fence is a number). Once drawn it stays,
   * also after the release.
   */
  readonly fence: number | undefined;

  /**
   * A Promise of the fencing number: drawn now if it was not yet (one round
   * trip; rejects with LockNotOwnedError if the lock is no longer held),
   * the same number on every later call, also after the release.
   */
  drawFence(): Promise<number>;

  /** True once renewal, an extend or a release found the lock gone. */
  readonly lost: boolean;

  /**
   * An AbortSignal aborted when the lock is found lost (by renewal, an
   * extend or a release), its reason a LockNotOwnedError. It never aborts
   * for a lock released or forgotten first. The same signal every time.
   */
  readonly signal: AbortSignalLike;

  /**
   * Call `fn(reason)` once when the lock is found lost, on the event loop
   * (in a microtask if it was found lost already). Never for a lock
   * released or forgotten first.
   */
  onLost(fn: (reason: LockNotOwnedError) => void): void;

  /** Set the remaining time to live to `ttl` ms (default: the acquisition's). */
  extend(ttl?: number): Promise<void>;

  /** Release the lock. Rejects with LockNotOwnedError when it was lost (or already released, or forgotten). */
  release(): Promise<void>;

  /**
   * Let go of this handle without releasing the lock: it stays held until
   * its TTL runs out (or releaseToken releases it). Renewal stops; neither
   * this handle nor the garbage collector releases it. No I/O.
   */
  forget(): void;

  /** Whether the server still names this handle the owner. */
  owned(): Promise<boolean>;
}

/**
 * `await using lock = await client.acquire(...)`: released at the end of
 * the scope (unless released or forgotten already). Declared where the
 * program's lib has Symbol.asyncDispose, defined where the runtime has it
 * (Node.js 18.18, 20.4 and later).
 */
export interface Lock extends MaybeAsyncDisposable {}

/** A Lock whose fencing number was drawn in the acquisition (`fenced: true`, semaphores, read-write locks). */
export type FencedLock = Lock & { readonly fence: number };

/** Every `code` of a {@link LockError}. */
export type LockErrorCode =
  | 'ERR_LOCK_INTERNAL'
  | 'ERR_LOCK_CLIENT_CLOSED'
  | 'ERR_LOCK_TIMEOUT'
  | 'ERR_LOCK_NOT_ACQUIRED'
  | 'ERR_LOCK_NOT_OWNED'
  | 'ERR_LOCK_UNCONFIRMED'
  | 'ERR_LOCK_WRONG_TYPE'
  | 'ERR_LOCK_NO_QUORUM'
  | 'ERR_LOCK_CONNECTION'
  | 'ERR_LOCK_SERVER';

/**
 * The `cause` of a LockError made by the library: what the layer below
 * reported (a connection's failure, the server's error text as a
 * `ReplyError`, the Redlock nodes' outcomes).
 */
export interface LockErrorCause extends Error {
  /** ECONNREFUSED, ETIMEDOUT or another system error's name; a server error's first word (NOAUTH, NOPERM, READONLY...). */
  code?: string;
  /** The server (`host:port` or socket path), never credentials. */
  address?: string;
}

/**
 * Every error of this library that is not a bad argument (those are
 * TypeError and RangeError, with `code` ERR_INVALID_ARG_TYPE,
 * ERR_INVALID_ARG_VALUE or ERR_OUT_OF_RANGE). `name` is the class's name;
 * `code` a string to switch on, which works across two copies of the
 * package (where `instanceof` does not); `cause` what the layer below
 * reported, where there is one (see {@link LockErrorCause}).
 */
export declare class LockError extends Error {
  constructor(message?: string, options?: { cause?: unknown; code?: LockErrorCode });
  code: LockErrorCode;
  cause?: unknown;
}
/** The lock stayed held by another owner for the whole wait (ERR_LOCK_TIMEOUT), or for the one attempt of `wait: 0` (ERR_LOCK_NOT_ACQUIRED). */
export declare class LockTimeoutError extends LockError {
  name: 'LockTimeoutError';
  code: 'ERR_LOCK_TIMEOUT' | 'ERR_LOCK_NOT_ACQUIRED';
}
/** An extend or release of a lock this handle no longer holds (expired, taken over, released). */
export declare class LockNotOwnedError extends LockError {
  name: 'LockNotOwnedError' | 'LockUnconfirmedError';
  code: 'ERR_LOCK_NOT_OWNED' | 'ERR_LOCK_UNCONFIRMED';
}
/** A release whose outcome is unknown: the connection broke after it was sent. */
export declare class LockUnconfirmedError extends LockNotOwnedError {
  name: 'LockUnconfirmedError';
  code: 'ERR_LOCK_UNCONFIRMED';
}
/** The key exists and holds something that is not a lock. */
export declare class LockWrongTypeError extends LockError {
  name: 'LockWrongTypeError';
  code: 'ERR_LOCK_WRONG_TYPE';
}
/** Redlock: no majority of the nodes answered. */
export declare class LockQuorumError extends LockError {
  name: 'LockQuorumError';
  code: 'ERR_LOCK_NO_QUORUM';
}
/** The server could not be reached, or did not answer in time. */
export declare class LockConnectionError extends LockError {
  name: 'LockConnectionError';
  code: 'ERR_LOCK_CONNECTION';
}
/** The server answered with an error (authentication, permissions, a script refused...). */
export declare class LockServerError extends LockError {
  name: 'LockServerError';
  code: 'ERR_LOCK_SERVER';
}
