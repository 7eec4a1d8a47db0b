//! `redislock`: flock(1) across machines.
//!
//! ```text
//! redislock run [--url URL] [--ttl 30s] [--wait 0|10s|forever] [--on-lost kill|warn] KEY -- COMMAND [ARGS…]
//! redislock status [--url URL] KEY
//! redislock doctor [--url URL]
//! ```
//!
//! `run` holds the lock while COMMAND runs, renewing it in the background,
//! forwards SIGINT/SIGTERM/SIGHUP to it and exits with its status (128+N
//! when a signal N killed it). Exit 75 (EX_TEMPFAIL) when the lock could not
//! be had, saying who holds it and for how long; exit 70 when the lock was
//! lost while COMMAND ran (COMMAND is stopped: SIGTERM, then SIGKILL after
//! the grace period), unless `--on-lost warn`. The command sees
//! REDISLOCK_KEY, REDISLOCK_TOKEN and REDISLOCK_FENCE in its environment.
//! Tokens of `run` are `run:<host>:<pid>:<random>`, so that `status` and a
//! refused `run` can say which host and process hold a lock.
//!
//! `doctor` checks the servers for what makes a lock unsafe or slow and
//! prints each finding with what to change: exit 0 when nothing makes a lock
//! unsafe, 1 when something does, 69 when the server cannot be reached.

use std::io::{IsTerminal, Write};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use redislock::{parse_duration, AcquireOptions, Client, Error, ErrorKind, LockInfo, Wait};

/// EX_TEMPFAIL: the lock is held by someone else.
const EXIT_HELD: u8 = 75;
/// EX_SOFTWARE: the lock was lost while the command ran.
const EXIT_LOST: u8 = 70;
/// EX_UNAVAILABLE: Redis could not be reached or refused.
const EXIT_UNAVAILABLE: u8 = 69;
/// EX_USAGE: a bad argument.
const EXIT_USAGE: u8 = 64;

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

#[derive(Parser)]
#[command(
    name = "redislock",
    version,
    about = "A Redis lock around a command: flock(1) across machines"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum OnLost {
    /// Stop the command (SIGTERM, then SIGKILL) and exit 70.
    Kill,
    /// Print a warning and let the command finish.
    Warn,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run COMMAND while holding the lock KEY.
    Run {
        /// Redis URL (default: $REDISLOCK_URL, then redis://127.0.0.1:6379).
        #[arg(long)]
        url: Option<String>,
        /// Lock TTL, renewed in the background while the command runs.
        #[arg(long, default_value = "30s", value_parser = duration)]
        ttl: Duration,
        /// How long to wait for the lock: 0 (try once), a duration, or `forever`.
        #[arg(long, default_value = "0", value_parser = wait)]
        wait: Wait,
        /// What to do when the lock is lost while the command runs.
        #[arg(long, value_enum, default_value = "kill")]
        on_lost: OnLost,
        /// Time between SIGTERM and SIGKILL when stopping the command.
        #[arg(long, default_value = "10s", value_parser = duration)]
        grace: Duration,
        /// Take one of N permits of the semaphore KEY instead of the lock:
        /// at most N commands run at once.
        #[arg(long, conflicts_with = "shared",
              value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        limit: Option<u32>,
        /// Take the read-write lock KEY shared (a read lock).
        #[arg(long, conflicts_with = "exclusive")]
        shared: bool,
        /// Take the read-write lock KEY exclusively (a write lock: it
        /// excludes `--shared` runs, which the plain lock does not).
        #[arg(long, conflicts_with = "limit")]
        exclusive: bool,
        /// The lock name.
        key: String,
        /// The command and its arguments (after --).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Show who holds the lock KEY (exit 0 when free, 1 when held).
    Status {
        /// Redis URL (default: $REDISLOCK_URL, then redis://127.0.0.1:6379).
        #[arg(long)]
        url: Option<String>,
        /// The lock name.
        key: String,
    },
    /// Check the server for what makes locks unsafe or slow, and what to
    /// change (exit 0: nothing makes them unsafe; 1: something does; 69: the
    /// server cannot be reached).
    Doctor {
        /// Redis URL (default: $REDISLOCK_URL, then redis://127.0.0.1:6379).
        #[arg(long)]
        url: Option<String>,
    },
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn wait(s: &str) -> Result<Wait, String> {
    match s {
        "forever" => Ok(Wait::Forever),
        "0" => Ok(Wait::TryOnce),
        _ => duration(s).map(Wait::Timeout),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Run {
            url,
            ttl,
            wait,
            on_lost,
            grace,
            limit,
            shared,
            exclusive,
            key,
            command,
        } => {
            let kind = match (limit, shared, exclusive) {
                (Some(n), _, _) => Kind::Semaphore(n),
                (None, true, _) => Kind::Shared,
                (None, false, true) => Kind::Exclusive,
                (None, false, false) => Kind::Lock,
            };
            run(url, ttl, wait, on_lost, grace, kind, &key, &command)
        }
        Cmd::Status { url, key } => status(url, &key),
        Cmd::Doctor { url } => doctor(url),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("redislock: {e}");
            ExitCode::from(match e.kind() {
                ErrorKind::InvalidArgument => EXIT_USAGE,
                ErrorKind::NotAcquired => EXIT_HELD,
                _ => EXIT_UNAVAILABLE,
            })
        }
    }
}

fn client(url: Option<String>) -> redislock::Result<Client> {
    let url = url
        .or_else(|| {
            std::env::var("REDISLOCK_URL")
                .ok()
                .filter(|u| !u.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_URL.to_string());
    Client::open(&url)
}

/// Print what `Client::doctor` found; 1 when something makes a lock unsafe.
fn doctor(url: Option<String>) -> redislock::Result<u8> {
    let report = client(url)?.doctor()?;
    println!("{report}");
    Ok(u8::from(!report.is_safe()))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty() && !h.contains(':'))
        .unwrap_or_else(|| "unknown-host".into())
}

/// A token that says where it comes from: `run:<host>:<pid>:<random hex>`.
fn run_token() -> Vec<u8> {
    let mut token = format!("run:{}:{}:", hostname(), std::process::id()).into_bytes();
    token.extend_from_slice(&redislock::random_token());
    token
}

/// "token T (redislock run on host H, pid P)" for people.
fn describe_holder(token: &[u8]) -> String {
    let text = String::from_utf8_lossy(token);
    let parts: Vec<&str> = text.splitn(4, ':').collect();
    match parts.as_slice() {
        ["run", host, pid, _] => format!("token {text} (redislock run on host {host}, pid {pid})"),
        _ => format!("token {text}"),
    }
}

fn describe(info: &LockInfo) -> String {
    match (&info.holder, info.ttl) {
        (None, _) => "free".into(),
        (Some(t), Some(ttl)) => {
            format!("held by {}, expires in {}", describe_holder(t), human(ttl))
        }
        (Some(t), None) => format!("held by {}, with no expiry", describe_holder(t)),
    }
}

fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 10_000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn status(url: Option<String>, key: &str) -> redislock::Result<u8> {
    let client = client(url)?;
    let info = client.inspect(key)?;
    println!("lock {key:?} on {}: {}", client.addr(), describe(&info));
    if let Some(fence) = info.fence {
        println!("fencing number: {fence}");
    }
    println!("queued waiters: {}", info.waiters);
    let mut held = info.holder.is_some();
    // The semaphore and the read-write lock of the same name, when in use.
    for (what, shared) in [
        ("semaphore", client.inspect_semaphore(key)?),
        ("read-write lock", client.inspect_rw(key)?),
    ] {
        if shared.holder_count == 0 && shared.waiters == 0 {
            continue;
        }
        held |= shared.holder_count > 0;
        let permits: u64 = shared.holders.iter().map(|h| u64::from(h.permits)).sum();
        println!(
            "{what} {key:?}: {} holder(s){}, {} queued waiter(s)",
            shared.holder_count,
            if what == "semaphore" {
                format!(" with {permits} permit(s)")
            } else {
                String::new()
            },
            shared.waiters
        );
        for h in &shared.holders {
            let role = match (what, h.writer) {
                ("semaphore", _) => format!("{} permit(s)", h.permits),
                (_, true) => "writer".into(),
                _ => "reader".into(),
            };
            println!(
                "  {role}: {}, expires in {}, fence {}",
                describe_holder(&h.token),
                human(h.ttl),
                h.fence
            );
        }
    }
    Ok(if held { 1 } else { 0 })
}

/// While stderr is a terminal, keep one status line up to date.
fn status_line(
    client: Client,
    key: String,
    stop: Arc<AtomicBool>,
) -> Option<thread::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(thread::spawn(move || {
        let started = Instant::now();
        while !stop.load(Ordering::Acquire) {
            if let Ok(info) = client.inspect(&key) {
                let mut err = std::io::stderr().lock();
                let _ = write!(
                    err,
                    "\r\x1b[2Kredislock: waiting for {key:?} ({} so far): {}",
                    human(started.elapsed()),
                    describe(&info)
                );
                let _ = err.flush();
            }
            for _ in 0..5 {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }))
}

/// What `run` takes: the lock, one permit of a semaphore of N, or a read
/// lock.
#[derive(Clone, Copy)]
enum Kind {
    Lock,
    Semaphore(u32),
    Shared,
    Exclusive,
}

#[allow(clippy::too_many_arguments)]
fn run(
    url: Option<String>,
    ttl: Duration,
    wait: Wait,
    on_lost: OnLost,
    grace: Duration,
    kind: Kind,
    key: &str,
    command: &[String],
) -> redislock::Result<u8> {
    let client = client(url)?;
    let stop = Arc::new(AtomicBool::new(false));
    let line = match (wait, kind) {
        (Wait::TryOnce, _) | (_, Kind::Semaphore(_) | Kind::Shared | Kind::Exclusive) => None,
        _ => status_line(client.clone(), key.to_string(), stop.clone()),
    };
    let opts = AcquireOptions::new(ttl)
        .wait(wait)
        .token(run_token())
        .auto_renew(true)
        .fenced(true);
    let acquired = match kind {
        Kind::Lock => client.acquire_with(key, opts),
        Kind::Semaphore(n) => client.acquire_semaphore(key, n, 1, opts),
        Kind::Shared => client.acquire_read(key, opts),
        Kind::Exclusive => client.acquire_write(key, opts),
    };
    stop.store(true, Ordering::Release);
    if let Some(h) = line {
        let _ = h.join();
    }
    let lock = match acquired {
        Ok(lock) => lock,
        Err(Error::NotAcquired { .. }) => {
            match kind {
                Kind::Lock => {
                    let who = client
                        .inspect(key)
                        .map(|i| describe(&i))
                        .unwrap_or_else(|e| e.to_string());
                    eprintln!("redislock: lock {key:?} is not available: {who}");
                }
                Kind::Semaphore(n) => eprintln!(
                    "redislock: no permit of the semaphore {key:?} (limit {n}) was free in time"
                ),
                Kind::Shared => eprintln!(
                    "redislock: the read-write lock {key:?} is held or awaited by a writer"
                ),
                Kind::Exclusive => eprintln!(
                    "redislock: the read-write lock {key:?} is held by readers or a writer"
                ),
            }
            return Ok(EXIT_HELD);
        }
        Err(e) => return Err(e),
    };

    // Signals to forward, registered before the child exists so none is lost.
    let mut signals =
        signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
            .map_err(|e| Error::Internal(format!("cannot handle signals: {e}")))?;
    // Drawn in the acquire (fenced), or now when the lock was handed over.
    let fence = lock.fence()?;
    let mut child = match Command::new(&command[0])
        .args(&command[1..])
        .env("REDISLOCK_KEY", key)
        .env(
            "REDISLOCK_TOKEN",
            String::from_utf8_lossy(lock.token()).as_ref(),
        )
        .env("REDISLOCK_FENCE", fence.to_string())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("redislock: cannot run {:?}: {e}", command[0]);
            let _ = lock.release();
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    let pid = child.id() as libc::pid_t;
    let mut lost_at: Option<Instant> = None;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| Error::Internal(e.to_string()))?
        {
            break status;
        }
        for sig in signals.pending() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(pid, sig) };
        }
        if lock.is_lost() && lost_at.is_none() {
            lost_at = Some(Instant::now());
            match on_lost {
                OnLost::Kill => {
                    eprintln!(
                        "redislock: lost the lock {key:?} (expired or taken over); stopping the command \
                         (SIGTERM, SIGKILL after {})",
                        human(grace)
                    );
                    // SAFETY: as above.
                    unsafe { libc::kill(pid, libc::SIGTERM) };
                }
                OnLost::Warn => {
                    eprintln!("redislock: warning: lost the lock {key:?}; the command goes on unprotected");
                }
            }
        }
        if let (OnLost::Kill, Some(t)) = (on_lost, lost_at) {
            if t.elapsed() >= grace {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        thread::sleep(Duration::from_millis(20));
    };
    let lost = lock.is_lost();
    if !lost {
        if let Err(e) = lock.release() {
            eprintln!("redislock: releasing {key:?}: {e}");
        }
    }
    if lost && matches!(on_lost, OnLost::Kill) {
        return Ok(EXIT_LOST);
    }
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => 128 + sig as u8,
        _ => 1,
    })
}
