//! The `redislock` command line: exit codes, signal forwarding, lost-lock
//! handling, `status`, and no password in any output.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{wait_until, Server};
use redis::Commands;

const BIN: &str = env!("CARGO_BIN_EXE_redislock");

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn redislock(srv: &Server, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("REDISLOCK_URL", srv.url())
        .stdin(Stdio::null());
    c
}

fn output(mut c: Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().unwrap();
    (
        status.code().expect("redislock was killed by a signal"),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

fn wait_for_key(srv: &Server, key: &str) -> Vec<u8> {
    let mut raw = srv.raw();
    let t = Instant::now();
    loop {
        if let Some(v) = raw.get::<_, Option<Vec<u8>>>(key).unwrap() {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{key} never appeared"
        );
        sleep(ms(10));
    }
}

fn exit_code(child: &mut Child, within: Duration) -> i32 {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().expect("redislock itself was killed");
        }
        assert!(
            t.elapsed() < within,
            "redislock did not exit within {within:?}"
        );
        sleep(ms(10));
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

/// Wait until `run` has started its command, a process `name` (as it
/// shows in /proc) whose parent is `run`: from then on `run` forwards
/// signals to it.
fn wait_for_command(run: &Child, name: &str) {
    let parent = run.id().to_string();
    wait_until(
        &format!("redislock to start {name}"),
        Duration::from_secs(10),
        || {
            std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
                let stat = std::fs::read_to_string(p.path().join("stat")).unwrap_or_default();
                // pid (comm) state ppid ...
                let Some((head, rest)) = stat.rsplit_once(')') else {
                    return false;
                };
                head.split_once(" (").map(|(_, comm)| comm) == Some(name)
                    && rest.split_whitespace().nth(1) == Some(parent.as_str())
            })
        },
    );
}

/// Wait until `key`'s TTL goes up: only a renewal raises it.
fn wait_for_renewal(srv: &Server, key: &str) {
    let mut raw = srv.raw();
    let mut last: i64 = raw.pttl(key).unwrap();
    wait_until(
        &format!("a renewal of {key}"),
        Duration::from_secs(10),
        || {
            let now: i64 = raw.pttl(key).unwrap();
            let up = now > last;
            last = now;
            up
        },
    );
}

/// What `from` writes, as it comes.
fn watch(mut from: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Wait until what came from `rx` (gathered in `seen`) holds every text of
/// `want`.
fn wait_for_text(rx: &mpsc::Receiver<Vec<u8>>, seen: &mut String, want: &[&str]) {
    let t = Instant::now();
    while !want.iter().all(|w| seen.contains(w)) {
        let left = Duration::from_secs(10).saturating_sub(t.elapsed());
        match rx.recv_timeout(left) {
            Ok(bytes) => seen.push_str(&String::from_utf8_lossy(&bytes)),
            Err(e) => panic!("no {want:?} ({e}) in: {seen:?}"),
        }
    }
}

#[test]
fn run_holds_the_lock_while_the_command_runs_and_exits_with_its_status() {
    let srv = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let script = format!(
        "'{}' -p {} GET job > {}; echo \"$REDISLOCK_KEY $REDISLOCK_FENCE\" >> {}; exit 3",
        common::redis_cli_bin(),
        srv.port,
        seen.display(),
        seen.display()
    );
    let (code, _, err) = output(redislock(&srv, &["run", "job", "--", "sh", "-c", &script]));
    assert_eq!(code, 3, "{err}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let mut lines = seen.lines();
    let token = lines.next().unwrap();
    assert!(
        token.starts_with("run:"),
        "the key held {token:?} during the command"
    );
    assert!(token.contains(&format!(":{}:", std::process::id())) || token.split(':').count() == 4);
    let (key, fence) = lines.next().unwrap().split_once(' ').unwrap();
    assert_eq!(key, "job");
    let fence: u64 = fence.parse().unwrap();
    assert!(fence > 0 && fence < 1 << 53, "REDISLOCK_FENCE={fence}");
    let mut raw = srv.raw();
    assert_eq!(
        raw.get::<_, Option<String>>("job").unwrap(),
        None,
        "not released"
    );
    let (code, _, _) = output(redislock(&srv, &["run", "job", "--", "true"]));
    assert_eq!(code, 0);
}

#[test]
fn a_held_lock_exits_75_and_says_who_holds_it() {
    let srv = Server::start();
    let mut first = redislock(&srv, &["run", "--ttl", "20s", "busy", "--", "sleep", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_key(&srv, "busy");
    let (code, _, err) = output(redislock(&srv, &["run", "busy", "--", "true"]));
    assert_eq!(code, 75, "{err}");
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");
    assert!(err.contains("redislock run on host"), "{err}");
    assert!(err.contains("expires in"), "{err}");
    // A bounded wait gives up the same way, after the wait.
    let t = Instant::now();
    let (code, _, _) = output(redislock(
        &srv,
        &["run", "--wait", "300ms", "busy", "--", "true"],
    ));
    assert_eq!(code, 75);
    assert!(t.elapsed() >= ms(280));
    // SIGTERM to redislock reaches the command: sleep dies of it.
    wait_for_command(&first, "sleep");
    signal(&first, libc::SIGTERM);
    assert_eq!(
        exit_code(&mut first, Duration::from_secs(10)),
        128 + libc::SIGTERM
    );
    let mut raw = srv.raw();
    assert_eq!(
        raw.get::<_, Option<String>>("busy").unwrap(),
        None,
        "not released after the signal"
    );
}

#[test]
fn forwarded_signals_reach_the_command_and_its_status_is_kept() {
    let srv = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let got = dir.path().join("got");
    // `ready` once the trap is set.
    let ready = dir.path().join("ready");
    let script = format!(
        "trap 'echo $0 > {} ; exit 4' HUP INT; : > {}; for i in $(seq 600); do sleep 0.05; done",
        got.display(),
        ready.display()
    );
    for sig in [libc::SIGHUP, libc::SIGINT] {
        let mut child = redislock(&srv, &["run", "sig", "--", "sh", "-c", &script, "trapped"])
            .spawn()
            .unwrap();
        wait_until(
            "the command to set its trap",
            Duration::from_secs(10),
            || ready.exists(),
        );
        signal(&child, sig);
        assert_eq!(
            exit_code(&mut child, Duration::from_secs(10)),
            4,
            "signal {sig}"
        );
        assert_eq!(std::fs::read_to_string(&got).unwrap().trim(), "trapped");
        std::fs::remove_file(&got).unwrap();
        std::fs::remove_file(&ready).unwrap();
    }
    // Killed by a signal of its own: 128 + N.
    let (code, _, _) = output(redislock(
        &srv,
        &["run", "sig", "--", "sh", "-c", "kill -KILL $$"],
    ));
    assert_eq!(code, 128 + libc::SIGKILL);
}

#[test]
fn a_lost_lock_stops_the_command_and_exits_70_or_warns() {
    let srv = Server::start();
    let mut raw = srv.raw();
    // Renewed every second: a busy machine's pauses do not make it expire.
    let mut child = redislock(
        &srv,
        &[
            "run", "--ttl", "3s", "--grace", "1s", "lost", "--", "sleep", "30",
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let token = wait_for_key(&srv, "lost");
    // Renewal keeps it past its TTL.
    wait_for_renewal(&srv, "lost");
    assert_eq!(
        raw.get::<_, Option<Vec<u8>>>("lost").unwrap(),
        Some(token),
        "renewed, yet not held by the runner"
    );
    let _: () = raw.set("lost", "thief").unwrap();
    assert_eq!(exit_code(&mut child, Duration::from_secs(10)), 70);
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("lost the lock"), "{err}");
    assert_eq!(
        raw.get::<_, String>("lost").unwrap(),
        "thief",
        "the thief's key was touched"
    );

    // --on-lost warn: the command finishes (when told to, once the warning
    // is out; on its own after 30 s), its status is kept.
    let _: () = raw.del("lost").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "for i in $(seq 1500); do [ -e {} ] && break; sleep 0.02; done; exit 5",
        go.display()
    );
    let mut child = redislock(
        &srv,
        &[
            "run",
            "--ttl",
            "3s",
            "--on-lost",
            "warn",
            "lost",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let err = watch(child.stderr.take().unwrap());
    wait_for_key(&srv, "lost");
    let _: () = raw.set("lost", "thief").unwrap();
    let mut seen = String::new();
    wait_for_text(&err, &mut seen, &["warning: lost the lock"]);
    std::fs::write(&go, "").unwrap();
    assert_eq!(exit_code(&mut child, Duration::from_secs(10)), 5, "{seen}");
}

#[test]
fn status_shows_the_holder_ttl_and_fence() {
    let srv = Server::start();
    let (code, out, _) = output(redislock(&srv, &["status", "st"]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("free")
            && !out.contains("fencing number")
            && out.contains("queued waiters: 0"),
        "{out}"
    );
    let mut child = redislock(&srv, &["run", "--ttl", "3s", "st", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    wait_for_key(&srv, "st");
    let (code, out, _) = output(redislock(&srv, &["status", "st"]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("pid {}", child.id())), "{out}");
    assert!(out.contains("expires in"), "{out}");
    // Its fence is known from the first renewal on (a third of the TTL).
    let start = std::time::Instant::now();
    let out = loop {
        let (_, out, _) = output(redislock(&srv, &["status", "st"]));
        if out.contains("fencing number") {
            break out;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{out}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let kept: String = srv.raw().get("{st}:meta").unwrap();
    let fence = kept.split(':').next().unwrap();
    assert!(out.contains(&format!("fencing number: {fence}\n")), "{out}");
    // A second `run` waits in the queue, and status counts it.
    let mut waiter = redislock(&srv, &["run", "--wait", "30s", "st", "--", "true"])
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        let (_, out, _) = output(redislock(&srv, &["status", "st"]));
        if out.contains("queued waiters: 1") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{out}");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for_command(&child, "sleep");
    signal(&child, libc::SIGTERM);
    exit_code(&mut child, Duration::from_secs(10));
    // The waiter got it at once and finished.
    assert_eq!(exit_code(&mut waiter, Duration::from_secs(10)), 0);
    // A lock taken by another client shows its token.
    let mut raw = srv.raw();
    let _: () = redis::cmd("SET")
        .arg("st")
        .arg("59")
        .arg("PX")
        .arg(30_000)
        .query(&mut raw)
        .unwrap();
    let (code, out, _) = output(redislock(&srv, &["status", "st"]));
    assert_eq!(code, 1);
    assert!(out.contains("token 59"), "{out}");
    assert!(!out.contains("fencing number"), "{out}");
}

#[test]
fn waiting_forever_gets_the_lock_when_it_is_released() {
    let srv = Server::start();
    let mut first = redislock(&srv, &["run", "w", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    wait_for_key(&srv, "w");
    let second = redislock(&srv, &["run", "--wait", "forever", "w", "--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let client = redislock::Client::open(&srv.url()).unwrap();
    wait_until("the second run to queue", Duration::from_secs(10), || {
        client.inspect("w").unwrap().waiters == 1
    });
    wait_for_command(&first, "sleep");
    signal(&first, libc::SIGTERM);
    exit_code(&mut first, Duration::from_secs(10));
    let out = second.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    // stderr is not a terminal: no status line.
    assert!(!String::from_utf8_lossy(&out.stderr).contains("waiting for"));
}

#[test]
fn a_terminal_gets_a_status_line_while_waiting() {
    let srv = Server::start();
    let mut first = redislock(&srv, &["run", "tty", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    wait_for_key(&srv, "tty");
    // util-linux script(1) gives the command a pseudo-terminal. It waits
    // until the status line was seen, then gets the lock.
    let cmd = format!("{BIN} run --wait 30s tty -- true");
    let mut waiting = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .env("REDISLOCK_URL", srv.url())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let out = watch(waiting.stdout.take().unwrap());
    let mut text = String::new();
    wait_for_text(
        &out,
        &mut text,
        &["waiting for \"tty\"", "redislock run on host"],
    );
    wait_for_command(&first, "sleep");
    signal(&first, libc::SIGTERM);
    exit_code(&mut first, Duration::from_secs(10));
    assert_eq!(
        exit_code(&mut waiting, Duration::from_secs(10)),
        0,
        "the waiting run did not get the lock: {text:?}"
    );
}

#[test]
fn errors_exit_with_their_codes_and_never_show_the_password() {
    let srv = Server::start_with(&["--requirepass", "s3cr3t-pw"]);
    let good = format!("redis://:s3cr3t-pw@127.0.0.1:{}", srv.port);
    let bad = format!("redis://:wr0ng-pw@127.0.0.1:{}", srv.port);
    let (code, out, err) = output(redislock(
        &srv,
        &["run", "--url", &good, "pw", "--", "true"],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("s3cr3t") && !err.contains("s3cr3t"));
    let (code, out, err) = output(redislock(&srv, &["status", "--url", &good, "pw"]));
    assert_eq!(code, 0);
    assert!(
        !out.contains("s3cr3t") && !err.contains("s3cr3t"),
        "{out}{err}"
    );
    let (code, out, err) = output(redislock(&srv, &["run", "--url", &bad, "pw", "--", "true"]));
    assert_eq!(code, 69, "{err}");
    assert!(!out.contains("wr0ng") && !err.contains("wr0ng"), "{err}");
    assert!(err.contains("password"), "{err}");
    // Nothing listening.
    let refusing = common::RefusingPort::new();
    let dead = format!("redis://:s3cr3t-pw@127.0.0.1:{}", refusing.port);
    let (code, _, err) = output(redislock(&srv, &["status", "--url", &dead, "pw"]));
    assert_eq!(code, 69, "{err}");
    assert!(
        err.contains("cannot reach Redis") && !err.contains("s3cr3t"),
        "{err}"
    );
    // Bad input.
    let (code, _, _) = output(redislock(
        &srv,
        &["run", "--url", "nope", "k", "--", "true"],
    ));
    assert_eq!(code, 64);
    let (code, _, _) = output(redislock(
        &srv,
        &["run", "--ttl", "soon", "k", "--", "true"],
    ));
    assert_eq!(code, 2, "clap's usage error");
    let (code, _, err) = output(redislock(
        &srv,
        &["run", "--url", &good, "k", "--", "/no/such/command"],
    ));
    assert_eq!(code, 127, "{err}");
}

#[test]
fn run_limit_lets_n_commands_run_at_once_and_shared_runs_exclude_an_exclusive_one() {
    let srv = Server::start();
    let hold = |args: &[&str]| {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "sleep", "30"]);
        redislock(&srv, &all).spawn().unwrap()
    };
    let mut first = hold(&["--limit", "2", "jobs"]);
    let mut second = hold(&["--limit", "2", "jobs"]);
    wait_until("both permits held", Duration::from_secs(10), || {
        srv.raw().zcard::<_, usize>("{jobs}:sem").unwrap() == 2
    });
    let (code, _, err) = output(redislock(
        &srv,
        &["run", "--limit", "2", "jobs", "--", "true"],
    ));
    assert_eq!(code, 75, "{err}");
    assert!(err.contains("no permit"), "{err}");
    // The plain lock of the same name is free.
    let (code, _, err) = output(redislock(&srv, &["run", "jobs", "--", "true"]));
    assert_eq!(code, 0, "{err}");
    for c in [&mut first, &mut second] {
        signal(c, libc::SIGTERM);
    }
    assert_eq!(
        exit_code(&mut first, Duration::from_secs(20)),
        128 + libc::SIGTERM
    );
    assert_eq!(
        exit_code(&mut second, Duration::from_secs(20)),
        128 + libc::SIGTERM
    );

    let mut reader = hold(&["--shared", "report"]);
    wait_until("the reader", Duration::from_secs(10), || {
        srv.raw().zcard::<_, usize>("{report}:rw").unwrap() == 1
    });
    let (code, _, err) = output(redislock(
        &srv,
        &["run", "--shared", "report", "--", "true"],
    ));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = output(redislock(
        &srv,
        &["run", "--exclusive", "report", "--", "true"],
    ));
    assert_eq!(code, 75, "{err}");
    signal(&reader, libc::SIGTERM);
    exit_code(&mut reader, Duration::from_secs(20));
    let (code, _, err) = output(redislock(
        &srv,
        &["run", "--exclusive", "report", "--", "true"],
    ));
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = output(redislock(&srv, &["run", "--limit", "0", "x", "--", "true"]));
    assert_eq!(code, 2);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut srv.raw()).unwrap();
    assert!(
        keys.iter().all(|k| k.starts_with("redislock:fence:{")),
        "{keys:?}"
    );
}

#[test]
fn status_shows_the_holders_and_waiters_of_a_semaphore_and_a_read_write_lock() {
    let srv = Server::start();
    let client = redislock::Client::open(&srv.url()).unwrap();
    let opts = || redislock::AcquireOptions::new(Duration::from_secs(30));
    let permits = client.acquire_semaphore("board", 3, 2, opts()).unwrap();
    let reader = client.acquire_read("board", opts()).unwrap();
    let (code, out, err) = output(redislock(&srv, &["status", "board"]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("semaphore \"board\": 1 holder(s) with 2 permit(s)"),
        "{out}"
    );
    assert!(out.contains("2 permit(s): token"), "{out}");
    assert!(
        out.contains("read-write lock \"board\": 1 holder(s)"),
        "{out}"
    );
    assert!(out.contains("reader: token"), "{out}");
    let info = client.inspect_semaphore("board").unwrap();
    assert_eq!(info.holder_count, 1);
    assert_eq!(info.holders[0].token, permits.token());
    assert_eq!(info.holders[0].fence, permits.fence().unwrap());
    permits.release().unwrap();
    reader.release().unwrap();
    let (code, out, _) = output(redislock(&srv, &["status", "board"]));
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("semaphore"), "{out}");
}
