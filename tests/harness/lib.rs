//! The throwaway Redis server of the documentation's examples, in one
//! place so that each example starts one in a single hidden line:
//!
//! ```text
//! # let redis = redislock_tests::Server::start();
//! ```
//!
//! Not part of the API (hidden from the documentation, no stability
//! promise). Doctests are compiled against the ordinary library build, so
//! this module is always compiled; it costs nothing unless called.
//!
//! Each [`Server`] is `$REDIS_SERVER` (a name on the PATH or a path; a
//! relative path is taken from the repository root), `redis-server` when it
//! is unset, in a fresh temporary directory, listening on a unix socket
//! only (`--port 0`: no TCP at all, so never the server at 6379 and never
//! beyond this machine), saving nothing. It is killed and its directory
//! removed when the value is dropped, and on Linux it is also killed when
//! the thread that started it dies (`PR_SET_PDEATHSIG`), so that an
//! example that aborts leaves no server behind.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a server may take to answer its first PING.
const START_LIMIT: Duration = Duration::from_secs(20);

/// A throwaway server on a unix socket; killed when dropped. Start it from
/// the thread that uses it (an example's `main`): on Linux it dies with the
/// thread that started it.
#[derive(Debug)]
pub struct Server {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Server {
    /// Start a server and wait until its socket answers `PING`. Panics,
    /// with the server's log, when it cannot be started.
    pub fn start() -> Server {
        let dir = temp_dir();
        let socket = dir.join("redis.sock");
        let bin = server_bin();
        let mut command = Command::new(&bin);
        command
            .args(["--port", "0", "--bind", "127.0.0.1"])
            .arg("--unixsocket")
            .arg(&socket)
            .args(["--unixsocketperm", "700", "--daemonize", "no"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        die_with_parent(&mut command);
        let child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                panic!(
                    "cannot start {bin} for this example: {e} \
                     (apt-get install redis-server, or set REDIS_SERVER)"
                );
            }
        };
        let mut server = Server {
            child,
            url: format!("unix://{}", socket.display()),
            dir,
        };
        server.wait_answering(&socket);
        server
    }

    /// The URL of the server: `unix:///tmp/…/redis.sock`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Poll the socket until the server answers, or panic with its log.
    fn wait_answering(&mut self, socket: &Path) {
        let started = Instant::now();
        loop {
            if ping(socket) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the example's server exited ({status}):\n{}", self.log());
            }
            if started.elapsed() > START_LIMIT {
                panic!(
                    "the example's server did not answer within {START_LIMIT:?}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `$REDIS_SERVER`, a relative path taken from the repository root, or
/// `redis-server`.
fn server_bin() -> String {
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

/// A new private directory under the system's temporary directory (or
/// `/tmp` when that one's path is too long for a socket's).
fn temp_dir() -> PathBuf {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let mut base = std::env::temp_dir();
    if base.as_os_str().len() > 60 {
        base = PathBuf::from("/tmp");
    }
    let name = format!(
        "redislock-doctest-{}-{}-{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    let dir = base.join(name);
    std::fs::create_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot create {} for the example: {e}", dir.display()));
    dir
}

/// Whether a server answers `PING` on the socket.
fn ping(socket: &Path) -> bool {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    s.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

/// On Linux, the server gets SIGKILL when the thread that started it dies,
/// so that an aborted example leaves no server running.
fn die_with_parent(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: prctl, getppid and _exit are async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}
