<?php
// A throwaway php-fpm (Debian's php-fpm package) serving this directory's
// scripts on a free loopback port, configured the ways the php-fpm section
// of docs/frameworks.md documents, with its own php.ini, pool file, logs and temporary
// directory. Used by tests/FpmTest.php and by `make bench`.
declare(strict_types=1);

require_once __DIR__ . '/FastCgi.php';

final class PhpFpm
{
    /**
     * The configurations:
     * - root:    the master runs as root, workers as nobody: opcache.preload
     *            with opcache.preload_user, and ffi.preload for the
     *            declarations (FFI::load is refused under preload_user);
     * - user:    master and workers run as an unprivileged user:
     *            opcache.preload alone (it loads the declarations itself);
     * - cdef:    ffi.enable=true and nothing preloaded (every request runs
     *            FFI::cdef; the package says so once per worker in the log);
     * - noclass: ffi.enable=preload with ffi.preload but no opcache.preload
     *            (a configuration that cannot work: FFI calls are refused
     *            outside preloaded code).
     */
    public const MODES = ['root', 'user', 'cdef', 'noclass'];

    public readonly string $dir;
    public readonly int $port;
    public readonly string $address;
    private $proc = null;

    /**
     * @param string      $mode    one of MODES
     * @param int         $workers pm = static with this many workers
     * @param string|null $preload a PHP file to preload instead of bindings/php/preload.php
     *                             (it should require that one)
     */
    public function __construct(
        public readonly string $mode,
        public readonly int $workers = 4,
        ?string $preload = null,
    ) {
        if (!in_array($mode, self::MODES, true)) {
            throw new InvalidArgumentException("unknown php-fpm mode $mode");
        }
        $bin = self::binary();
        $root = posix_geteuid() === 0;
        if ($mode === 'root' && !$root) {
            throw new RuntimeException('the root php-fpm configuration needs root');
        }
        $lib = RedisLock\FFI::candidates()[0];
        $this->dir = sys_get_temp_dir() . '/redislock-fpm-' . bin2hex(random_bytes(6));
        mkdir($this->dir);
        chmod($this->dir, 0777);
        $package = dirname(__DIR__, 2);

        $ini = [
            'opcache.enable' => '1',
            'opcache.enable_cli' => '0',
            'opcache.validate_timestamps' => '0',
            'ffi.enable' => $mode === 'cdef' ? 'true' : 'preload',
            'log_errors' => '1',
            'display_errors' => '0',
            'error_log' => "$this->dir/php.log",
            'memory_limit' => '128M',
        ];
        if ($mode === 'root' || $mode === 'user') {
            $ini['opcache.preload'] = $preload ?? "$package/preload.php";
        }
        if ($mode === 'root' || $mode === 'noclass') {
            // As `make install` would leave it, with FFI_LIB naming the library under test.
            $header = preg_replace(
                '/^#define FFI_LIB ".*"$/m',
                '#define FFI_LIB "' . $lib . '"',
                file_get_contents("$package/redislock_preload.h"),
            );
            file_put_contents("$this->dir/redislock_preload.h", $header);
            $ini['ffi.preload'] = "$this->dir/redislock_preload.h";
        }
        if ($mode === 'root') {
            $ini['opcache.preload_user'] = 'nobody';
        }
        $phpIni = '';
        foreach ($ini as $k => $v) {
            $phpIni .= "$k = $v\n";
        }
        file_put_contents("$this->dir/php.ini", $phpIni);

        $this->port = RedisServer::freePort();
        $this->address = "tcp://127.0.0.1:$this->port";
        $pool = "[global]\npid = $this->dir/fpm.pid\nerror_log = $this->dir/fpm.log\n"
            . "daemonize = no\nlog_level = notice\n\n"
            . "[www]\nlisten = 127.0.0.1:$this->port\nlisten.backlog = 512\n"
            . "pm = static\npm.max_children = $workers\n"
            . "catch_workers_output = yes\ndecorate_workers_output = no\nclear_env = yes\n"
            . "env[REDISLOCK_LIB] = $lib\n";
        if ($root && $mode !== 'user') {
            $pool .= "user = nobody\ngroup = nogroup\n";
        }
        file_put_contents("$this->dir/fpm.conf", $pool);

        $cmd = [$bin, '--nodaemonize', '--fpm-config', "$this->dir/fpm.conf", '-c', "$this->dir/php.ini"];
        if ($root && $mode !== 'user') {
            $cmd[] = '--allow-to-run-as-root';
        } elseif ($root) {
            // The unprivileged configuration, from a root test run.
            $cmd = array_merge(['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', '--'], $cmd);
        }
        $env = ['PATH' => (string)getenv('PATH'), 'REDISLOCK_LIB' => $lib];
        $this->proc = proc_open(
            $cmd,
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "$this->dir/stdout.log", 'a'], 2 => ['file', "$this->dir/stdout.log", 'a']],
            $pipes,
            $this->dir,
            $env,
        );
        if (!is_resource($this->proc)) {
            throw new RuntimeException("cannot run $bin");
        }
        $this->waitReady();
    }

    /** The php-fpm binary of Debian's php-fpm package (php-fpm8.2 ...). */
    public static function binary(): string
    {
        foreach (['php-fpm', 'php-fpm' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION] as $name) {
            foreach (['/usr/sbin', '/usr/local/sbin', '/usr/bin'] as $dir) {
                if (is_executable("$dir/$name")) {
                    return "$dir/$name";
                }
            }
        }
        throw new RuntimeException('php-fpm is not installed: apt-get install php-fpm (make test does)');
    }

    private function waitReady(): void
    {
        $deadline = microtime(true) + 15;
        while (microtime(true) < $deadline) {
            if (!proc_get_status($this->proc)['running']) {
                throw new RuntimeException("php-fpm ($this->mode) exited at start:\n" . $this->logs());
            }
            $s = @stream_socket_client($this->address, $errno, $errstr, 0.2);
            if ($s !== false) {
                fclose($s);
                return;
            }
            usleep(20000);
        }
        throw new RuntimeException("php-fpm ($this->mode) did not listen on $this->address:\n" . $this->logs());
    }

    /**
     * Run requests for a script ($script: a path, or a name in this
     * directory), $concurrency at a time.
     *
     * @param list<string> $queries one request per query string
     * @return list<array{status: int, headers: string, body: string, stderr: string, ms: float}>
     */
    public function get(string $script, array $queries, int $concurrency = 1): array
    {
        $path = str_starts_with($script, '/') ? $script : __DIR__ . '/' . $script;
        return FastCgi::run($this->address, array_map(fn($q) => [$path, $q], $queries), $concurrency);
    }

    /** What the master and the workers logged (the PHP error log included). */
    public function logs(): string
    {
        $out = '';
        foreach (['fpm.log', 'php.log', 'stdout.log'] as $f) {
            if (is_file("$this->dir/$f")) {
                $out .= "--- $f\n" . file_get_contents("$this->dir/$f");
            }
        }
        return $out;
    }

    /** The PIDs of the workers (children of the master). */
    public function workerPids(): array
    {
        $master = (int)@file_get_contents("$this->dir/fpm.pid");
        $pids = [];
        foreach (glob('/proc/[0-9]*/stat') as $stat) {
            $fields = explode(' ', (string)@file_get_contents($stat));
            if (isset($fields[3]) && (int)$fields[3] === $master) {
                $pids[] = (int)$fields[0];
            }
        }
        return $pids;
    }

    public function stop(): void
    {
        if ($this->proc === null) {
            return;
        }
        $master = (int)@file_get_contents("$this->dir/fpm.pid");
        $status = proc_get_status($this->proc);
        foreach (array_filter([$master, $status['running'] ? $status['pid'] : 0]) as $pid) {
            posix_kill($pid, SIGTERM);
        }
        $deadline = microtime(true) + 10;
        while (proc_get_status($this->proc)['running'] && microtime(true) < $deadline) {
            usleep(20000);
        }
        if (proc_get_status($this->proc)['running']) {
            posix_kill(proc_get_status($this->proc)['pid'], SIGKILL);
        }
        proc_close($this->proc);
        $this->proc = null;
        foreach (glob("$this->dir/*") as $f) {
            @unlink($f);
        }
        @rmdir($this->dir);
    }

    public function __destruct()
    {
        $this->stop();
    }
}
