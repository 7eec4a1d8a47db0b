<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * A connection pool for one Redis deployment, shared by the locks taken
 * through it. Opening validates the URL but does not connect.
 *
 *   $client = new RedisLock\Client('redis://127.0.0.1:6379');
 *   $lock = $client->acquire('reports', ttlMs: 30000, waitMs: 10000);
 *
 * Under php-fpm, Client::persistent($url) gives every request of a worker
 * the same connections (as phpredis pconnect does). Either way, a Lock a
 * request still holds when it ends is released then, also after a fatal
 * error or exit().
 *
 * Timeouts: connectTimeoutMs, commandTimeoutMs and nodeTimeoutMs (Redlock)
 * of the constructor and of persistent(), or the URL's connect_timeout,
 * command_timeout and node_timeout; the option wins over the URL's
 * parameter (which is removed from each URL and the option's added).
 */
final class Client
{
    private ?\FFI\CData $handle = null;

    /**
     * The URL (or the Redlock list) with its password replaced by ***: what
     * var_dump(), print_r() and var_export() show. The URL itself is never
     * kept here; the native client holds it.
     */
    private string $target = '';

    /** Redlock (a list of several URLs): the acquire draws the fence at once. */

    /**
     * @param string|list<string> $url redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock,
     *                                 redis+sentinel://…/service, redis+cluster://… (rediss+… for TLS);
     *                                 a list of URLs is Redlock
     * @param ?int $connectTimeoutMs opening a connection (TCP, TLS, AUTH, SELECT): 1 ms to 1 hour;
     *                               null: the URL's connect_timeout, else 2 s; given, it wins over the URL's
     * @param ?int $commandTimeoutMs each command's reply: as connectTimeoutMs (not the wait for a held lock)
     * @param ?int $nodeTimeoutMs    Redlock: each node's reply to an acquire; null: the URLs' node_timeout,
     *                               else a tenth of the TTL, 10 ms at least, the command timeout at most
     * @throws InvalidArgument for a malformed URL or a timeout out of range (a timeout given both here
     *                         and in the URL is not refused: the option wins)
     */
    public function __construct(
        #[\SensitiveParameter] string|array $url,
        ?int $connectTimeoutMs = null,
        ?int $commandTimeoutMs = null,
        ?int $nodeTimeoutMs = null,
    ) {
        $url = self::withTimeouts($url, $connectTimeoutMs, $commandTimeoutMs, $nodeTimeoutMs);
        $this->handle = self::open($url, false);
        $this->describe($url);
        RequestEnd::track($this);
    }

    /**
     * The worker's shared client for $url: every call with the same URL (or
     * list of URLs) in a process gets the same connections, opened on first
     * use and kept when the request ends, so that a php-fpm worker connects
     * once and not in every request. Locks never outlive their request
     * through it: what a request still holds at its end is released. A
     * worker forked after preload opens its own connections.
     *
     * The timeouts are part of what is shared: the same URL with other
     * timeouts is another client.
     *
     * @param string|list<string> $url as for the constructor
     * @throws InvalidArgument for a malformed URL, or a timeout as the constructor refuses it
     */
    public static function persistent(
        #[\SensitiveParameter] string|array $url,
        ?int $connectTimeoutMs = null,
        ?int $commandTimeoutMs = null,
        ?int $nodeTimeoutMs = null,
    ): self {
        $url = self::withTimeouts($url, $connectTimeoutMs, $commandTimeoutMs, $nodeTimeoutMs);
        $client = (new \ReflectionClass(self::class))->newInstanceWithoutConstructor();
        $client->handle = self::open($url, true);
        $client->describe($url);
        RequestEnd::track($client);
        return $client;
    }

    /**
     * $url with its password replaced by ***, for logs and messages: the
     * password of the user info (redis://user:***@host:6379/0; a user info
     * without a ':' is taken for a password: ***@host), and the value of
     * every query parameter whose name contains "pass" (sentinel_password,
     * a unix socket's pass). Escaped or not, the password never shows; a
     * URL that cannot be read as such is hidden whole.
     */
    public static function redactUrl(#[\SensitiveParameter] string $url): string
    {
        if (str_contains($url, "\0")) {
            return '***';
        }
        // The library's rule, the same in every language.
        $ffi = FFI::get();
        $n = $ffi->redislock_redact_url($url, null, 0);
        $buf = $ffi->new('char[' . max($n, 1) . ']');
        $ffi->redislock_redact_url($url, $buf, $n);
        return \FFI::string($buf, $n);
    }

    /** The core's longest connect, command and node timeout, in ms. */
    private const MAX_TIMEOUT_MS = 3600000;

    /**
     * $url (each URL of a Redlock list) with the timeouts given as its
     * query parameters, which the core parses as in every language (added
     * before any #fragment, where the query ends). The option wins over
     * the URL: every parameter of the URL that names a timeout given here
     * (its name read percent-decoded, as the core reads it) is removed
     * first, whatever it says; the rest of the URL (its other parameters,
     * user info and fragment) stays as it is.
     *
     * @param string|list<string> $url
     * @return string|list<string>
     * @throws InvalidArgument for a timeout out of range
     */
    private static function withTimeouts(
        #[\SensitiveParameter] string|array $url,
        ?int $connectTimeoutMs,
        ?int $commandTimeoutMs,
        ?int $nodeTimeoutMs,
    ): string|array {
        $params = [
            'connect_timeout' => ['connectTimeoutMs', $connectTimeoutMs],
            'command_timeout' => ['commandTimeoutMs', $commandTimeoutMs],
            'node_timeout' => ['nodeTimeoutMs', $nodeTimeoutMs],
        ];
        $given = [];
        foreach ($params as $param => [$option, $ms]) {
            if ($ms === null) {
                continue;
            }
            if ($ms < 1 || $ms > self::MAX_TIMEOUT_MS) {
                throw new InvalidArgument("$option must be 1 ms to 1 hour (1 to 3600000), got $ms");
            }
            $given[$param] = [$option, $ms];
        }
        if ($given === []) {
            return $url;
        }
        if (is_array($url)) {
            return array_map(
                fn ($u) => is_string($u) ? self::withTimeouts($u, $connectTimeoutMs, $commandTimeoutMs, $nodeTimeoutMs) : $u,
                $url,
            );
        }
        $hash = strpos($url, '#');
        $head = $hash === false ? $url : substr($url, 0, $hash);
        $fragment = $hash === false ? '' : substr($url, $hash);
        $q = strpos($head, '?');
        $query = $q === false ? '' : substr($head, $q + 1);
        $kept = [];
        foreach ($query === '' ? [] : explode('&', $query) as $pair) {
            if (!isset($given[rawurldecode(explode('=', $pair, 2)[0])])) {
                $kept[] = $pair;
            }
        }
        $query = implode('&', $kept);
        foreach ($given as $param => [, $ms]) {
            if ($query !== '' && !str_ends_with($query, '&')) {
                $query .= '&';
            }
            $query .= "$param={$ms}ms";
        }
        $head = ($q === false ? $head : substr($head, 0, $q)) . '?' . $query;
        return $head . $fragment;
    }

    /** @param string|list<string> $url */
    private function describe(#[\SensitiveParameter] string|array $url): void
    {
        if (is_array($url)) {
            $this->target = '[' . implode(', ', array_map(self::redactUrl(...), array_values($url))) . ']';
        } else {
            $this->target = self::redactUrl($url);
        }
    }

    /**
     * What var_dump() and print_r() show: the URL without its password,
     * and whether the client was closed.
     *
     * @return array{url: string, closed: bool}
     */
    public function __debugInfo(): array
    {
        return ['url' => $this->target, 'closed' => $this->handle === null];
    }

    /**
     * A client holds native connections: it cannot be serialized (nor its
     * URL, which may hold a password). Keep the URL in configuration and
     * open a Client where it is needed.
     *
     * @throws \LogicException always
     */
    public function __serialize(): array
    {
        throw new \LogicException('a RedisLock\\Client cannot be serialized: open one from its URL where it is needed');
    }

    /** @throws \LogicException always */
    public function __unserialize(array $data): void
    {
        throw new \LogicException('a RedisLock\\Client cannot be unserialized: open one from its URL');
    }

    /**
     * A client is shared, not copied: a clone would free the native client
     * twice. Use the same object (it is safe to share).
     *
     * @throws \LogicException always
     */
    public function __clone()
    {
        // The copy is destroyed when this throws: it must not free the original's.
        $this->handle = null;
        throw new \LogicException('a RedisLock\\Client cannot be cloned: share the same object');
    }

    /** @param string|list<string> $url */
    private static function open(#[\SensitiveParameter] string|array $url, bool $shared): \FFI\CData
    {
        $ffi = FFI::get();
        $out = $ffi->new('redislock_client*');
        if (is_array($url)) {
            $urls = array_values($url);
            $n = count($urls);
            foreach ($urls as $u) {
                if (!is_string($u)) {
                    throw new InvalidArgument('every URL must be a string');
                }
            }
            $arr = $ffi->new('const char*[' . max($n, 1) . ']');
            $keep = [];
            foreach ($urls as $i => $u) {
                $keep[$i] = self::cString($u);
                $arr[$i] = \FFI::cast('const char*', $keep[$i]);
            }
            FFI::checkStatus($shared
                ? $ffi->redislock_client_open_redlock_shared($arr, $n, \FFI::addr($out))
                : $ffi->redislock_client_open_redlock($arr, $n, \FFI::addr($out)));
        } else {
            FFI::checkStatus($shared
                ? $ffi->redislock_client_open_shared($url, \FFI::addr($out))
                : $ffi->redislock_client_open($url, \FFI::addr($out)));
        }
        return $out;
    }

    /** A NUL-terminated copy of $s that lives as long as the returned CData. */
    private static function cString(#[\SensitiveParameter] string $s): \FFI\CData
    {
        $buf = FFI::get()->new('char[' . (strlen($s) + 1) . ']');
        \FFI::memcpy($buf, $s, strlen($s));
        $buf[strlen($s)] = "\0";
        return $buf;
    }

    public function __destruct()
    {
        $this->close();
    }

    /**
     * Free the client (a persistent one: this handle only; the worker keeps
     * the connections). Locks taken through it stay valid. Also done when
     * the object goes away.
     */
    public function close(): void
    {
        if ($this->handle !== null) {
            FFI::get()->redislock_client_free($this->handle);
            $this->handle = null;
        }
    }

    /**
     * Take the lock $key (a binary-safe string).
     *
     * @param int      $ttlMs     how long the lock lives unless extended (1 ms .. 30 days)
     * @param int|null $waitMs    null waits forever, 0 tries once, > 0 is a deadline
     * @param ?string  $token     the caller's token; null for 128 random bits
     * @param bool     $autoRenew renew in the background until released
     * @param bool     $fenced    draw the fencing number in the acquire itself (no round trip of
     *                            its own when fence() is read; otherwise the first fence() draws it)
     * @throws LockTimeout when the wait ran out; WrongType, ConnectionException, InvalidArgument...
     */
    public function acquire(
        string $key,
        int $ttlMs = 30000,
        ?int $waitMs = null,
        ?string $token = null,
        bool $autoRenew = false,
        bool $fenced = false,
    ): Lock {
        $handle = $this->take($key, $ttlMs, $waitMs, $token, $fenced);
        FFI::checkStatus($handle[0]);
        $lock = new Lock($handle[1], $key);
        if ($autoRenew) {
            $lock->autoRenew();
        }
        return $lock;
    }

    /**
     * Take $permits of the counting semaphore $key, which admits $limit
     * permits in all (this call's limit: 1 to 1,000,000; $permits 1 to
     * $limit). Waiters are served in arrival order with no barging; each
     * holder has its own lease ($ttlMs), token and fence, and the Lock is
     * released, extended and renewed like any other. $waitMs: null waits
     * forever, 0 tries once. Throws LockTimeout when the wait runs out.
     * Never collides with the lock of the same name.
     */
    public function acquireSemaphore(
        string $key,
        int $limit,
        int $ttlMs = 30000,
        ?int $waitMs = null,
        int $permits = 1,
    ): Lock {
        if ($limit < 1 || $limit > 1000000) {
            throw new InvalidArgument("limit must be 1 to 1000000, got $limit");
        }
        if ($permits < 1 || $permits > $limit) {
            throw new InvalidArgument("permits must be 1 to the limit ($limit), got $permits");
        }
        return $this->takeShared($key, $ttlMs, $waitMs, fn ($ffi, $out) => $ffi->redislock_acquire_semaphore(
            $this->handle(),
            $key,
            strlen($key),
            $limit,
            $permits,
            $ttlMs,
            $waitMs ?? -1,
            $out,
        ));
    }

    /**
     * Take the read-write lock $key shared: any number of readers at once,
     * while no writer holds it or waits for it (a queued writer stops new
     * readers). As acquireSemaphore() otherwise.
     */
    public function acquireRead(string $key, int $ttlMs = 30000, ?int $waitMs = null): Lock
    {
        return $this->takeReadWrite('redislock_acquire_read', $key, $ttlMs, $waitMs);
    }

    /**
     * Take the read-write lock $key exclusively: once nobody holds it and
     * nobody queued earlier waits. As acquireRead() otherwise.
     */
    public function acquireWrite(string $key, int $ttlMs = 30000, ?int $waitMs = null): Lock
    {
        return $this->takeReadWrite('redislock_acquire_write', $key, $ttlMs, $waitMs);
    }

    /** One attempt: the Lock, or null when another owner holds it. The arguments as for acquire(). */
    public function tryAcquire(
        string $key,
        int $ttlMs = 30000,
        ?string $token = null,
        bool $autoRenew = false,
        bool $fenced = false,
    ): ?Lock {
        [$status, $handle] = $this->take($key, $ttlMs, 0, $token, $fenced);
        if ($status === FFI::NOT_ACQUIRED) {
            return null;
        }
        FFI::checkStatus($status);
        $lock = new Lock($handle, $key);
        if ($autoRenew) {
            $lock->autoRenew();
        }
        return $lock;
    }

    /**
     * Run $fn($lock) holding the lock $key; release it afterwards, also when
     * $fn throws. Returns what $fn returns. The lock is renewed in the
     * background while $fn runs (every third of $ttlMs), as Python's
     * decorator, Node's using() and Java's executeLocked() do, so work may
     * outlast $ttlMs; autoRenew: false holds it for $ttlMs at most.
     *
     * When $fn returned but the lock was lost meanwhile (it expired, or
     * another owner took it: found by background renewal, an extend, or the
     * release here), its work ran unprotected: this throws LockNotOwned
     * instead of returning. When $fn throws, its exception propagates as
     * it is, whatever the release finds. Long work can check
     * $lock->isLost() between its steps to stop early.
     *
     * @throws LockNotOwned when the lock was lost before $fn returned
     */
    public function synchronized(
        string $key,
        callable $fn,
        int $ttlMs = 30000,
        ?int $waitMs = null,
        bool $autoRenew = true,
    ): mixed {
        $lock = $this->acquire($key, ttlMs: $ttlMs, waitMs: $waitMs, autoRenew: $autoRenew);
        try {
            $result = $fn($lock);
        } catch (\Throwable $e) {
            $lock->releaseQuietly();
            throw $e;
        }
        // Lost by renewal or an extend: the release cannot make up for it,
        // whatever it answers (a connection error included).
        $lost = $lock->isLost();
        $cause = null;
        try {
            $lock->release();
        } catch (Unconfirmed $e) {
            // A kind of LockNotOwned, but most likely released: a failure
            // of the release only, unless the lock was lost before.
            if (!$lost) {
                throw $e;
            }
            $cause = $e;
        } catch (LockNotOwned $e) {
            if ($e->getCode() !== FFI::NOT_OWNER) {
                throw $e; // $fn released the lock itself
            }
            $cause = $e;
        } catch (LockException $e) {
            if (!$lost) {
                throw $e;
            }
            $cause = $e;
        }
        if ($lost || $cause !== null) {
            throw new LockNotOwned(
                'synchronized(): the callable returned, but the lock was lost while it ran, so its work ran '
                . 'unprotected: ' . ($cause instanceof LockNotOwned ? $cause->getMessage()
                    : "the lock \"$key\" expired or another owner took it"
                    . ($cause !== null ? ' (and the release failed: ' . $cause->getMessage() . ')' : '')),
                FFI::NOT_OWNER,
                $cause,
            );
        }
        return $result;
    }

    /**
     * What this client (and every handle of the same persistent client in
     * this process) did so far. Keys, as in every binding:
     *
     * - counters: acquired_at_once, acquired_after_wait, acquired_handed_over,
     *   acquire_timed_out, acquire_errors, releases_ok, releases_not_owner,
     *   extends_ok, extends_lost, renewals_ok, renewals_lost, locks_lost,
     *   handoffs_given, handoffs_received, connection_errors, reconnects;
     * - gauges: held_now (lock handles held now), waiters_now (acquisitions
     *   waiting now);
     * - 'wait' (how long each acquisition took) and 'held' (how long each
     *   lock was held): ['count' => int, 'sum' => seconds, 'max' => seconds,
     *   'p50', 'p90', 'p99' => seconds (estimated within the buckets),
     *   'buckets' => 23 counts (not cumulative), 'bounds' => the 22 upper
     *   bounds in seconds (the last bucket has none)].
     *
     * Reading makes no round trip. A process made by pcntl_fork() starts
     * from zero. Prometheus::rows() turns the array into metric samples.
     *
     * @return array<string, int|array{count: int, sum: float, max: float, p50: float, p90: float, p99: float,
     *                                  buckets: list<int>, bounds: list<float>}>
     */
    public function stats(): array
    {
        $ffi = FFI::get();
        $out = $ffi->new('struct redislock_stats');
        $out->size = \FFI::sizeof($out);
        FFI::checkStatus($ffi->redislock_client_stats($this->handle(), \FFI::addr($out)));
        $type = \FFI::typeof($out);
        $stats = [];
        foreach ($type->getStructFieldNames() as $field) {
            if ($field === 'size' || $field === 'reserved') {
                continue;
            }
            $stats[$field] = $type->getStructFieldType($field)->getKind() === \FFI\CType::TYPE_STRUCT
                ? self::histogram($out->$field)
                : $out->$field;
        }
        return $stats;
    }

    /**
     * Check every server this client's locks may reach for what makes a
     * lock unsafe or slow (eviction policy, scripting, TIME and pub/sub
     * refused, persistence, replicas without min-replicas-to-write,
     * maxclients headroom, cluster state, Sentinel quorum, round trip) and
     * run one lock cycle: the same checks as `redislock doctor`, made by
     * the core. A few round trips per server; nothing is left on the
     * server. Returns whatever was found (see Report::isSafe()), e.g. to
     * log at start:
     *
     *   $report = $client->doctor();
     *   error_log((string)$report);
     *
     * @throws ConnectionException when the server (or every sentinel, or every cluster node) cannot be reached
     * @throws NoQuorum            when a majority of the Redlock servers cannot
     * @throws ServerException     when the server refuses the credentials
     */
    public function doctor(): Report
    {
        $ffi = FFI::get();
        $out = $ffi->new('redislock_report*');
        FFI::checkStatus($ffi->redislock_doctor($this->handle(), \FFI::addr($out)));
        try {
            return Report::fromNative($ffi, $out);
        } finally {
            $ffi->redislock_report_free($out);
        }
    }

    /** @var list<float>|null the histograms' bucket bounds in seconds */
    private static ?array $bounds = null;

    /** @return array{count: int, sum: float, max: float, p50: float, p90: float, p99: float,
     *                buckets: list<int>, bounds: list<float>} */
    private static function histogram(\FFI\CData $h): array
    {
        if (self::$bounds === null) {
            $ffi = FFI::get();
            self::$bounds = [];
            for ($i = 0; $i < count($h->buckets) - 1; $i++) {
                self::$bounds[] = $ffi->redislock_stats_bucket_bound_us($i) / 1e6;
            }
        }
        $buckets = [];
        foreach ($h->buckets as $n) {
            $buckets[] = $n;
        }
        return [
            'count' => $h->count,
            'sum' => $h->sum_us / 1e6,
            'max' => $h->max_us / 1e6,
            'p50' => $h->p50_us / 1e6,
            'p90' => $h->p90_us / 1e6,
            'p99' => $h->p99_us / 1e6,
            'buckets' => $buckets,
            'bounds' => self::$bounds,
        ];
    }

    /**
     * Take the lock $key under $token without keeping a handle: it stays
     * held until it expires or releaseToken($key, $token) releases it (the
     * request-id pattern). $waitMs as for acquire(): null (the default)
     * waits forever, 0 tries once, > 0 is a deadline. False when the wait
     * ran out (with 0: when another owner holds it) instead of LockTimeout.
     */
    public function acquireToken(string $key, string $token, int $ttlMs, ?int $waitMs = null): bool
    {
        self::checkTimes($ttlMs, $waitMs);
        // No handle: the token is all a release needs (one FFI call, not three).
        $status = FFI::get()->redislock_acquire(
            $this->handle(),
            $key,
            strlen($key),
            $ttlMs,
            $waitMs ?? -1,
            $token,
            strlen($token),
            null,
        );
        if ($status === FFI::NOT_ACQUIRED) {
            return false;
        }
        FFI::checkStatus($status);
        return true;
    }

    /**
     * Release the lock $key if it holds $token. False when it does not
     * (expired, or held by another owner); nothing is changed then.
     */
    public function releaseToken(string $key, string $token): bool
    {
        $status = FFI::get()->redislock_release_token($this->handle(), $key, strlen($key), $token, strlen($token));
        if ($status === FFI::NOT_OWNER) {
            return false;
        }
        FFI::checkStatus($status);
        return true;
    }

    /**
     * Take the lock $key from whoever holds it (this library's holder, or
     * any string another client stored there) and hand it to the oldest
     * waiter at once, as a release would: true when a holder was removed,
     * false when nobody held it. The operator's unlock, for a lock whose
     * owner is known to be gone (Laravel's forceRelease() uses it); it
     * breaks mutual exclusion if the owner is still working (its release
     * then throws LockNotOwned). Fences stay monotonic. Only the plain lock
     * $key, never a semaphore or read-write lock of that name.
     *
     * @throws WrongType for a key of another type (left alone)
     */
    public function forceRelease(string $key): bool
    {
        $ffi = FFI::get();
        $out = $ffi->new('bool');
        FFI::checkStatus($ffi->redislock_force_release($this->handle(), $key, strlen($key), \FFI::addr($out)));
        return (bool)$out->cdata;
    }

    /**
     * The fencing number of the lock $key held with $token (no handle
     * needed): the one already drawn for this holder, or one drawn now with
     * a check that $token holds the lock. Null when it does not.
     */
    public function fenceToken(string $key, string $token): ?int
    {
        $ffi = FFI::get();
        $out = $ffi->new('uint64_t');
        $status = $ffi->redislock_fence_token($this->handle(), $key, strlen($key), $token, strlen($token), \FFI::addr($out));
        if ($status === FFI::NOT_OWNER) {
            return null;
        }
        FFI::checkStatus($status);
        return (int)$out->cdata;
    }

    /**
     * Set the remaining time of the lock $key to $ttlMs if it holds $token
     * (no handle needed). False when it does not (expired, or another
     * owner): an expired lock is never re-created.
     */
    public function extendToken(string $key, string $token, int $ttlMs): bool
    {
        if ($ttlMs <= 0) {
            throw new InvalidArgument("ttlMs must be at least 1, got $ttlMs");
        }
        $status = FFI::get()->redislock_extend_token(
            $this->handle(),
            $key,
            strlen($key),
            $token,
            strlen($token),
            $ttlMs,
        );
        if ($status === FFI::NOT_OWNER) {
            return false;
        }
        FFI::checkStatus($status);
        return true;
    }

    /** Whether the lock $key holds $token right now (one round trip). */
    public function isOwnedBy(string $key, string $token): bool
    {
        $ffi = FFI::get();
        $out = $ffi->new('bool');
        FFI::checkStatus($ffi->redislock_is_owned_by(
            $this->handle(),
            $key,
            strlen($key),
            $token,
            strlen($token),
            \FFI::addr($out),
        ));
        return $out->cdata;
    }

    private static function checkTimes(int $ttlMs, ?int $waitMs): void
    {
        if ($ttlMs <= 0) {
            throw new InvalidArgument("ttlMs must be at least 1, got $ttlMs");
        }
        if ($waitMs !== null && $waitMs < 0) {
            throw new InvalidArgument("waitMs must be null (forever), 0 (try once) or positive, got $waitMs");
        }
    }

    /** @return array{0: int, 1: \FFI\CData} the status and the lock handle */
    private function take(string $key, int $ttlMs, ?int $waitMs, ?string $token, bool $fenced = false): array
    {
        self::checkTimes($ttlMs, $waitMs);
        $ffi = FFI::get();
        $out = $ffi->new('redislock_lock*');
        $status = $ffi->{$fenced ? 'redislock_acquire_fenced' : 'redislock_acquire'}(
            $this->handle(),
            $key,
            strlen($key),
            $ttlMs,
            $waitMs ?? -1,
            $token,
            $token === null ? 0 : strlen($token),
            \FFI::addr($out),
        );
        return [$status, $out];
    }

    /** One side of the read-write lock $key: $fn is its C function. */
    private function takeReadWrite(string $fn, string $key, int $ttlMs, ?int $waitMs): Lock
    {
        return $this->takeShared($key, $ttlMs, $waitMs, fn ($ffi, $out) => $ffi->$fn(
            $this->handle(),
            $key,
            strlen($key),
            $ttlMs,
            $waitMs ?? -1,
            $out,
        ));
    }

    /** @param callable(\FFI, \FFI\CData): int $acquire */
    private function takeShared(string $key, int $ttlMs, ?int $waitMs, callable $acquire): Lock
    {
        self::checkTimes($ttlMs, $waitMs);
        $ffi = FFI::get();
        $out = $ffi->new('redislock_lock*');
        FFI::checkStatus($acquire($ffi, \FFI::addr($out)));
        // A holder of permits or of a side has its fence from the acquire.
        return new Lock($out, $key);
    }

    private function handle(): \FFI\CData
    {
        return $this->handle ?? throw new LockException('this client was closed');
    }
}
