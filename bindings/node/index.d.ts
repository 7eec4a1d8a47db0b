/// <reference types="node" />
// redislock for Node.js: the lock that C, Python, PHP and Ruby programs
// take the same way, from one Rust core (the native addon redislock.node).
// These declarations describe index.js; the guide is docs/node.md.

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
  signal?: AbortSignal | null;
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

/** The options of acquireSemaphore. */
export interface SemaphoreOptions extends SharedOptions {
  /** How many permits the semaphore admits in all: a whole number from 1 to 1,000,000. */
  limit: number;
  /** How many of them this holder takes (default 1, at most `limit`). */
  permits?: number;
}

/** A connection pool and subscriber for one Redis deployment, or for several independent servers (Redlock). */
export declare class Client {
  #private;

  /**
   * `urls`: a redis://, rediss://, unix://, redis+sentinel:// or
   * redis+cluster:// URL, or an array of them (Redlock). Nothing is
   * connected until the first call. Throws TypeError for a bad URL.
   */
  constructor(urls: string | readonly string[]);

  /**
   * Take the lock `name`: a Promise of its Lock. `ttl` (ms, default 30000),
   * `wait` (ms; omitted or negative: as long as it takes, 0: try once),
   * `signal` (an AbortSignal that ends the wait: the Promise rejects with
   * its reason), `autoRenew` (renew in the background until released),
   * `fenced` (draw the fencing number in the acquisition; by default it is
   * drawn on first use: see Lock#drawFence). Rejects with LockTimeoutError
   * when the wait runs out.
   */
  acquire(name: LockName, opts?: AcquireOptions | null): Promise<Lock>;

  /** One attempt (or a wait of `opts.wait` ms): the Lock, or null when another owner holds it. */
  tryAcquire(name: LockName, opts?: AcquireOptions | null): Promise<Lock | null>;

  /**
   * Run `fn(signal, lock)` with the lock held, renewed in the background,
   * and released afterwards; a Promise of fn's value. `signal` aborts when
   * the lock is found lost (its reason a LockNotOwnedError) or when
   * `opts.signal` aborts. When fn returned but the lock was lost meanwhile,
   * its work ran unprotected: the Promise rejects with LockNotOwnedError.
   */
  using<T>(name: LockName, fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>): Promise<T>;
  using<T>(
    name: LockName,
    opts: AcquireOptions | null | undefined,
    fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>,
  ): Promise<T>;

  /**
   * Take `permits` (default 1) of the counting semaphore `name`, which
   * admits `limit` in all: a Promise of a Lock whose release gives them
   * back. Waiters are served in arrival order, with no barging. Never
   * collides with the lock of the same name.
   */
  acquireSemaphore(name: LockName, opts: SemaphoreOptions & { tryAcquire: true }): Promise<Lock | null>;
  acquireSemaphore(name: LockName, opts: SemaphoreOptions & { tryAcquire?: false }): Promise<Lock>;
  acquireSemaphore(name: LockName, opts: SemaphoreOptions): Promise<Lock | null>;

  /** The read side of the read-write lock `name`: shared with other readers while no writer holds it or waits for it. */
  acquireRead(name: LockName, opts: SharedOptions & { tryAcquire: true }): Promise<Lock | null>;
  acquireRead(name: LockName, opts: SharedOptions & { tryAcquire?: false }): Promise<Lock>;
  acquireRead(name: LockName, opts?: null): Promise<Lock>;
  acquireRead(name: LockName, opts: SharedOptions): Promise<Lock | null>;

  /** The write side of the read-write lock `name`: alone, once the readers and the writers queued earlier are gone. */
  acquireWrite(name: LockName, opts: SharedOptions & { tryAcquire: true }): Promise<Lock | null>;
  acquireWrite(name: LockName, opts: SharedOptions & { tryAcquire?: false }): Promise<Lock>;
  acquireWrite(name: LockName, opts?: null): Promise<Lock>;
  acquireWrite(name: LockName, opts: SharedOptions): Promise<Lock | null>;

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
   * What this client did since it was made: counters by name
   * (acquired_at_once, acquired_handed_over, waiters_now, ...) and the
   * `wait` and `held` histograms, in milliseconds.
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

  /** The server's address (the first node's for Redlock), without credentials. */
  readonly addr: string;
}

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

/** Client#stats(): what one client did since it was made. */
export interface ClientStats {
  /** Acquisitions that found the lock free on their first try. */
  acquired_at_once: number;
  /** Acquisitions that waited and then took the lock by a retry (after an expiry, or a release by a client without waiters' support). */
  acquired_after_wait: number;
  /** Acquisitions that waited and were handed the lock by its releaser. */
  acquired_handed_over: number;
  /** Acquisitions that did not get the lock: their wait ran out (or was aborted), or a try-once found it held. */
  acquire_timed_out: number;
  /** Acquisitions that failed with any other error (connection, quorum, server, wrong type). */
  acquire_errors: number;
  /** Releases (by handle or by token) that released or handed over. */
  releases_ok: number;
  /** Releases that found the lock no longer theirs. */
  releases_not_owner: number;
  /** Extends by the caller that succeeded. */
  extends_ok: number;
  /** Extends by the caller that found the lock gone. */
  extends_lost: number;
  /** Background renewals that succeeded. */
  renewals_ok: number;
  /** Locks that background renewal found gone (or could not reach the server before their TTL ran out). */
  renewals_lost: number;
  /** Held locks found lost, however it was found: each is counted once. */
  locks_lost: number;
  /** Releases that handed the lock straight to a waiter. */
  handoffs_given: number;
  /** Locks this client's waiters were handed. */
  handoffs_received: number;
  /** Connections that could not be opened, broke, or timed out. */
  connection_errors: number;
  /** Connections opened again in place of one that broke. */
  reconnects: number;
  /** Lock handles held right now. */
  held_now: number;
  /** Acquisitions waiting right now for a lock held by someone else. */
  waiters_now: number;
  /** Acquisitions that took a plain lock. */
  acquired_locks: number;
  /** Acquisitions that took permits of a counting semaphore. */
  acquired_semaphores: number;
  /** Acquisitions that took the read side of a read-write lock. */
  acquired_reads: number;
  /** Acquisitions that took the write side of a read-write lock. */
  acquired_writes: number;
  /** Semaphore permits held right now by this client's handles. */
  permits_held_now: number;
  /** How long each acquisition took, whatever its outcome. */
  wait: Histogram;
  /** How long each lock handle was held: from acquire to release, collection, or until it was found lost. */
  held: Histogram;
}

/**
 * A held lock, semaphore permits or side of a read-write lock (from
 * Client#acquire, tryAcquire, using, acquireSemaphore, acquireRead or
 * acquireWrite). Release it, or it is released when collected.
 */
export declare class Lock implements AsyncDisposable {
  #private;

  /** Locks come from Client#acquire, tryAcquire and using; `new Lock()` throws TypeError. */
  private constructor();

  /** The lock's name, as given to acquire. */
  readonly name: LockName;

  /** This acquisition's token (a Buffer): what the key holds while it is ours (the caller's `token`, else 128 random bits). */
  readonly token: Buffer;

  /**
   * The fencing number: a number once drawn, also after the release. It is
   * drawn on first use, by `await lock.drawFence()` (one round trip, which
   * checks the lock is still held), or in the acquisition with
   * `fenced: true` (semaphores and read-write locks always draw it there).
   * Reading it before it was drawn throws, never returns a null that could
   * pass for a fence: LockError while the lock is held (draw it first),
   * LockNotOwnedError once it was released or found lost ("released before
   * its fence was drawn").
   */
  readonly fence: number;

  /**
   * A Promise of the fencing number: drawn now if it was not yet (one round
   * trip; rejects with LockNotOwnedError if the lock is no longer held),
   * the same number on every later call, also after the release.
   */
  drawFence(): Promise<number>;

  /** True once renewal, an extend or a release found the lock gone. */
  readonly lost: boolean;

  /** Set the remaining time to live to `ttl` ms (default: the acquisition's). */
  extend(ttl?: number): Promise<void>;

  /** Release the lock. Rejects with LockNotOwnedError when it was lost (or already released). */
  release(): Promise<void>;

  /** Whether the server still names this handle the owner. */
  owned(): Promise<boolean>;

  /**
   * `await using lock = await client.acquire(...)`: released at the end of
   * the scope (unless released already). Defined where the runtime has
   * Symbol.asyncDispose (Node 18.18, 20.4 and later).
   */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Every error of this library that is not a bad argument (those are
 * TypeError and RangeError, with `code` ERR_INVALID_ARG_TYPE,
 * ERR_INVALID_ARG_VALUE or ERR_OUT_OF_RANGE). `name` is the class's name.
 */
export declare class LockError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}
/** The lock stayed held by another owner for the whole wait. */
export declare class LockTimeoutError extends LockError {
  name: 'LockTimeoutError';
}
/** An extend or release of a lock this handle no longer holds (expired, taken over, released). */
export declare class LockNotOwnedError extends LockError {
  name: 'LockNotOwnedError' | 'LockUnconfirmedError';
}
/** A release whose outcome is unknown: the connection broke after it was sent. */
export declare class LockUnconfirmedError extends LockNotOwnedError {
  name: 'LockUnconfirmedError';
}
/** The key exists and holds something that is not a lock. */
export declare class LockWrongTypeError extends LockError {
  name: 'LockWrongTypeError';
}
/** Redlock: no majority of the nodes answered. */
export declare class LockQuorumError extends LockError {
  name: 'LockQuorumError';
}
/** The server could not be reached, or did not answer in time. */
export declare class LockConnectionError extends LockError {
  name: 'LockConnectionError';
}
/** The server answered with an error (authentication, permissions, a script refused...). */
export declare class LockServerError extends LockError {
  name: 'LockServerError';
}
