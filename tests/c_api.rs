//! The C ABI from C: the C test program under `tests/c/` (built with
//! `-std=c11 -Wall -Wextra -Werror -pedantic`) against a throwaway server,
//! once plainly and once under valgrind; the installed library found through
//! pkg-config (shared and static); and the committed headers' freshness.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{RefusingPort, Server};

const S: std::time::Duration = std::time::Duration::from_secs(1);

const CFLAGS: &[&str] = &[
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-g",
    "-O1",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding the libraries cargo built with this test
/// (target/<profile>), found from this test binary's own path.
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    assert!(
        dir.join("libredislock.so").exists(),
        "{} has no libredislock.so: run `cargo build` first (make test does)",
        dir.display()
    );
    dir
}

/// The library installed with scripts/install.sh (as `make install`), once
/// per test process, into a prefix of that process under the build
/// directory (its `lib`; a test runner may run each test in a process of
/// its own, several at once), and a fresh directory for a test's own files
/// (its programs). Prefixes of processes that ended are removed.
fn install() -> (tempfile::TempDir, PathBuf) {
    static INSTALLED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let lib = INSTALLED.get_or_init(|| {
        if let Ok(dir) = std::fs::read_dir(build_dir()) {
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let pid = name
                    .strip_prefix("c-api-prefix-")
                    .and_then(|p| p.parse::<u32>().ok());
                if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let prefix = build_dir().join(format!("c-api-prefix-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&prefix);
        let out = Command::new("bash")
            .arg(root().join("scripts/install.sh"))
            .arg(&prefix)
            .arg(build_dir())
            .output()
            .unwrap();
        assert_ok(&out, "scripts/install.sh");
        prefix.join("lib")
    });
    let work = tempfile::Builder::new()
        .prefix("redislock-c-api-")
        .tempdir()
        .unwrap();
    (work, lib.clone())
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compile the C test program against an installed copy.
fn build_test_program(dir: &Path, lib: &Path) -> PathBuf {
    build_c(dir, lib, "test_api")
}

/// Compile tests/c/NAME.c against an installed copy.
fn build_c(dir: &Path, lib: &Path, name: &str) -> PathBuf {
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(CFLAGS)
        .arg("-I")
        .arg(root().join("include"))
        .arg(root().join(format!("tests/c/{name}.c")))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lredislock", "-lpthread"])
        .output()
        .expect("cc (apt-get install gcc)");
    assert_ok(&out, &format!("compiling tests/c/{name}.c"));
    exe
}

/// A command running the C program `exe`, under valgrind (errors and
/// definite leaks fail it) when asked.
fn c_program(exe: &Path, valgrind: bool) -> Command {
    if !valgrind {
        return Command::new(exe);
    }
    let mut c = Command::new("valgrind");
    c.args([
        "--error-exitcode=99",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "--quiet",
    ])
    .arg(suppressions())
    .arg(exe);
    c
}

/// What a forked child inherits of its parent's threads (see the file).
fn suppressions() -> String {
    format!(
        "--suppressions={}",
        root().join("tests/c/valgrind.supp").display()
    )
}

/// The C program's verdict line: "N passed, N failed".
fn verdict(stdout: &str) -> (u32, u32) {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.contains(" passed, "))
        .unwrap_or_else(|| panic!("no verdict line in:\n{stdout}"));
    let nums: Vec<u32> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums[1])
}

/// A URL nothing answers at, for as long as it lives. It lends its URL
/// (`.arg(dead_url().url())` keeps it for the whole statement) rather than
/// handing itself over: `Command::arg` drops what it is given on return,
/// which would free the port before the program runs.
struct DeadUrl {
    _port: RefusingPort,
    url: String,
}

impl DeadUrl {
    fn url(&self) -> &str {
        &self.url
    }
}

fn dead_url() -> DeadUrl {
    let port = RefusingPort::new();
    let url = format!("redis://127.0.0.1:{}?connect_timeout=1s", port.port);
    DeadUrl { _port: port, url }
}

#[test]
fn the_c_test_program_passes() {
    let (work, lib) = install();
    let exe = build_test_program(work.path(), &lib);
    let srv = Server::start();
    let out = Command::new(&exe)
        .arg(srv.url())
        .arg(dead_url().url())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let (passed, failed) = verdict(&stdout);
    assert_eq!(failed, 0, "{stdout}");
    assert!(passed > 100, "only {passed} checks ran");
    assert_ok(&out, "tests/c/test_api");
}

#[test]
fn redlock_from_c() {
    let (work, lib) = install();
    let exe = build_c(work.path(), &lib, "test_redlock");
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    for valgrind in [false, true] {
        let mut cmd = c_program(&exe, valgrind);
        // Under valgrind a round trip takes milliseconds, and beside the
        // valgrind runs of the other tests on 2 cores a plain one can stall
        // longer than the default per-node timeout (1 s for a 10 s lock,
        // tested in tests/redlock.rs): what is tested here is the C API.
        let opt = if valgrind {
            "node_timeout=5s"
        } else {
            "node_timeout=2s"
        };
        let dead = dead_url();
        let with = |url: String| match url.contains('?') {
            true => format!("{url}&{opt}"),
            false => format!("{url}?{opt}"),
        };
        let out = cmd
            .args(servers.iter().map(|s| with(s.url())))
            .arg(with(dead.url().to_string()))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (passed, failed) = verdict(&stdout);
        assert_eq!(failed, 0, "{stdout}");
        assert!(passed >= 12, "{stdout}");
        assert_ok(&out, "tests/c/test_redlock");
    }
}

#[test]
fn the_c_test_program_is_clean_under_valgrind() {
    let (work, lib) = install();
    let exe = build_test_program(work.path(), &lib);
    let srv = Server::start();
    let out = Command::new("valgrind")
        .args([
            "--error-exitcode=99",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
            "--show-leak-kinds=definite",
            "--child-silent-after-fork=yes",
            "--quiet",
        ])
        .arg(suppressions())
        .arg(&exe)
        .arg(srv.url())
        .arg(dead_url().url())
        .output()
        .expect("valgrind (apt-get install valgrind)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(verdict(&stdout).1, 0, "{stdout}");
    assert!(
        out.status.success(),
        "valgrind found errors or leaks ({}):\n{stderr}",
        out.status
    );
}

fn pkg_config(lib: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("redislock")
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
        .output()
        .expect("pkg-config (apt-get install pkg-config)");
    assert_ok(&out, "pkg-config");
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[test]
fn the_daemon_example_builds_with_pkg_config_shared_and_static() {
    let (work, lib) = install();
    assert!(lib.join("libredislock.so.0").exists());
    let cflags = pkg_config(&lib, &["--cflags"]);
    let libs = pkg_config(&lib, &["--libs"]);
    let static_libs = pkg_config(&lib, &["--static", "--libs"]);
    let srv = Server::start();
    let src = root().join("bindings/c/examples/daemon.c");

    let shared = work.path().join("daemon");
    let out = Command::new("cc")
        .args(CFLAGS)
        .args(&cflags)
        .arg(&src)
        .arg("-o")
        .arg(&shared)
        .args(&libs)
        .output()
        .unwrap();
    assert_ok(&out, "cc daemon.c $(pkg-config --cflags --libs redislock)");
    let out = Command::new(&shared)
        .args([&srv.url(), "3"])
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    assert_ok(&out, "daemon (shared)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("daemon: 3 done, 0 skipped"), "{stdout}");

    // Static: the archive wins over the shared library, no LD_LIBRARY_PATH.
    let fixed = work.path().join("daemon-static");
    let mut args: Vec<String> = static_libs
        .iter()
        .map(|a| {
            if a == "-lredislock" {
                "-l:libredislock.a".to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    args.insert(0, "-o".into());
    args.insert(1, fixed.display().to_string());
    let out = Command::new("cc")
        .args(CFLAGS)
        .args(&cflags)
        .arg(&src)
        .args(&args)
        .output()
        .unwrap();
    assert_ok(&out, "cc daemon.c (static)");
    let out = Command::new(&fixed)
        .args([&srv.url(), "2"])
        .output()
        .unwrap();
    assert_ok(&out, "daemon (static)");
    assert!(String::from_utf8_lossy(&out.stdout).contains("daemon: 2 done"));
    // An unreachable server: the daemon backs off, then reports and fails.
    let out = Command::new(&fixed)
        .arg(dead_url().url())
        .arg("1")
        .output()
        .unwrap();
    let said = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("REDISLOCK_CONNECTION"), "{said}");
}

#[test]
fn the_library_exports_the_committed_list_of_functions_and_the_header_declares_each() {
    // The headers themselves: crates/redislock-ffi/tests/headers.rs.
    let lib = build_dir().join("libredislock.so");
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("nm (apt-get install binutils)");
    assert_ok(&out, "nm -D");
    let mut exported: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
        .collect();
    exported.sort();
    let list = std::fs::read_to_string(root().join("crates/redislock-ffi/symbols.txt")).unwrap();
    let committed: Vec<&str> = list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(
        exported,
        committed,
        "{} exports another list than crates/redislock-ffi/symbols.txt",
        lib.display()
    );
    let h = std::fs::read_to_string(root().join("include/redislock.h")).unwrap();
    for f in &committed {
        assert!(
            h.contains(&format!("{f}(")),
            "{f} is exported but not declared in the header"
        );
    }
}

#[test]
fn stats_add_up_and_lost_callbacks_run_where_the_header_says_from_c() {
    let (work, lib) = install();
    let exe = build_c(work.path(), &lib, "test_stats");
    for valgrind in [false, true] {
        // A fresh server each time: the program counts every key it makes.
        let srv = Server::start();
        let out = c_program(&exe, valgrind).arg(srv.url()).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (passed, failed) = verdict(&stdout);
        assert_eq!(failed, 0, "valgrind: {valgrind}\n{stdout}");
        assert!(passed >= 100, "{stdout}");
        assert_ok(&out, &format!("tests/c/test_stats (valgrind: {valgrind})"));
        let keys: Vec<String> = redis::cmd("KEYS").arg("s:*").query(&mut srv.raw()).unwrap();
        assert_eq!(keys, Vec::<String>::new(), "left behind");
    }
}

/// Run tests/c/test_fence with these arguments (under valgrind when asked);
/// its stdout after checking the verdict.
fn run_fence(exe: &Path, valgrind: bool, args: &[&str]) -> String {
    let out = c_program(exe, valgrind).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (passed, failed) = verdict(&stdout);
    assert_eq!(failed, 0, "{stdout}");
    assert!(passed > 0, "{stdout}");
    assert_ok(&out, &format!("tests/c/test_fence {args:?}"));
    stdout
}

#[test]
fn fences_from_c_leave_no_key_behind_and_grow_across_a_restart() {
    let (work, lib) = install();
    let exe = build_c(work.path(), &lib, "test_fence");
    let mut srv = Server::start();
    let url = srv.url();
    run_fence(&exe, false, &[&url, "names", "2000"]);
    run_fence(&exe, true, &[&url, "names", "50"]);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut srv.raw()).unwrap();
    assert!(!keys.is_empty());
    assert!(keys.len() <= 2000, "{} keys", keys.len());
    assert!(
        keys.iter().all(|k| k.starts_with("redislock:fence:{")),
        "left behind: {:?}",
        keys.iter()
            .filter(|k| !k.starts_with("redislock:fence:{"))
            .collect::<Vec<_>>()
    );
    let fence = |out: String| -> u64 {
        let line = out.lines().find(|l| l.starts_with("fence ")).unwrap();
        line["fence ".len()..].parse().unwrap()
    };
    let f1 = fence(run_fence(&exe, false, &[&url, "fence", "restart-me"]));
    srv.restart();
    let f2 = fence(run_fence(&exe, false, &[&url, "fence", "restart-me"]));
    assert!(f2 > f1 && f2 < 1 << 53, "fence {f2} after {f1}");
}

#[test]
fn semaphores_and_read_write_locks_from_c() {
    let (work, lib) = install();
    let exe = build_c(work.path(), &lib, "test_semaphore");
    let srv = Server::start();
    let out = Command::new(&exe).arg(srv.url()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let (passed, failed) = verdict(&stdout);
    assert_eq!(failed, 0, "{stdout}");
    assert!(passed > 200, "only {passed} checks ran");
    assert_ok(&out, "tests/c/test_semaphore");
    // Every holder released: only the slot counters stay.
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut srv.raw()).unwrap();
    assert!(
        keys.iter().all(|k| k.starts_with("redislock:fence:{")),
        "left behind: {keys:?}"
    );
}

#[test]
fn signals_never_break_a_wait_from_c() {
    let (work, lib) = install();
    let exe = build_c(work.path(), &lib, "test_signals");
    let srv = Server::start();
    let out = c_program(&exe, false).arg(srv.url()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (passed, failed) = verdict(&stdout);
    assert_eq!(failed, 0, "{stdout}");
    assert!(passed >= 9, "{stdout}");
    assert_ok(&out, "tests/c/test_signals");

    // A release held up by paused writes while SIGUSR1 arrives (handler
    // without and with SA_RESTART): the same connection waits for its reply
    // all along (not given up and sent again), and the release reports its
    // true outcome.
    for mode in ["release", "release-restart"] {
        let mut child = c_program(&exe, false)
            .args([srv.url().as_str(), mode])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert_eq!(line, "held\n", "{mode}");
        let mut raw = srv.raw();
        common::pause_writes(&mut raw, true);
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"go\n").unwrap();
        common::wait_until("the release is sent and held up", 10 * S, || {
            !common::held_up_scripts(&mut raw).is_empty()
        });
        let before = common::held_up_scripts(&mut raw);
        std::thread::sleep(S / 2);
        assert_eq!(common::held_up_scripts(&mut raw), before, "{mode}");
        common::pause_writes(&mut raw, false);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        let status = child.wait().unwrap();
        let (passed, failed) = verdict(&rest);
        assert_eq!(failed, 0, "{mode}: {rest}");
        assert!(passed >= 3 && status.success(), "{mode}: {status}: {rest}");
        let held: Option<Vec<u8>> = redis::Commands::get(&mut raw, "sig-release").unwrap();
        assert_eq!(held, None, "{mode}");
    }

    // A waiter stopped and continued five times (SIGSTOP/SIGCONT) while it
    // waits still gets the lock when it is released.
    let client = redislock::Client::open(&srv.url()).unwrap();
    let holder = client
        .acquire("stopped", 30 * S, redislock::Wait::TryOnce)
        .unwrap();
    let child = c_program(&exe, false)
        .args([srv.url().as_str(), "wait"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_until("the C waiter queued", 10 * S, || {
        client.inspect("stopped").unwrap().waiters == 1
    });
    common::stop_and_continue(&child, S / 20);
    holder.release().unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(verdict(&stdout), (3, 0), "{stdout}");
    assert!(out.status.success(), "{}: {stdout}", out.status);
}

#[test]
fn doctor_from_c_with_and_without_valgrind() {
    let (work, lib) = install();
    let exe = build_c(work.path(), &lib, "test_doctor");
    let safe = Server::start();
    let unsafe_ =
        Server::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"]);
    for valgrind in [false, true] {
        let out = c_program(&exe, valgrind)
            .arg(safe.url())
            .arg(unsafe_.url())
            .arg(dead_url().url())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("{stdout}");
        let (passed, failed) = verdict(&stdout);
        assert_eq!(failed, 0, "{stdout}");
        assert!(passed >= 30, "only {passed} checks ran");
        assert_ok(&out, "tests/c/test_doctor");
    }
}

/// tests/fake/fake_redis.py --all: a fake Redis serving every kind of
/// broken reply, each on a port of its own; killed when dropped.
struct FakeServer {
    child: std::process::Child,
    ports: Vec<(String, u16)>,
}

impl FakeServer {
    fn start() -> FakeServer {
        let mut child = Command::new("python3")
            .arg(root().join("tests/fake/fake_redis.py"))
            .arg("--all")
            // It exits by itself then, which ends any call still hung on it.
            .args(["--lifetime", "60"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 (the fake server)");
        let stdout = child.stdout.take().unwrap();
        // Killed on drop from here on, also when reading its ports fails.
        let mut fake = FakeServer {
            child,
            ports: Vec::new(),
        };
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let line = line.unwrap();
            if line == "ready" {
                break;
            }
            let (kind, port) = line.split_once(' ').expect("KIND PORT");
            fake.ports.push((kind.to_string(), port.parse().unwrap()));
        }
        assert!(!fake.ports.is_empty(), "the fake server printed no ports");
        fake
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fake-server suite (issue 51) from C: every kind of broken reply
/// tests/fake/fake_redis.py has, a try-acquire and a waiting acquire each,
/// through tests/c/test_broken_replies.c: no crash, no grant, the right
/// status, no call past its timeout, no unbounded memory. One process per
/// kind, all at once: a crash is reported as the crash of its kind. The
/// fake server uses no real server: skipped in the Valkey pass, which would
/// only repeat it.
#[test]
fn broken_replies_never_grant_from_c() {
    if std::env::var("REDIS_SERVER").is_ok_and(|s| s.contains("valkey")) {
        println!("skipped: the fake server uses no real server (REDIS_SERVER is Valkey)");
        return;
    }
    let (work, lib) = install();
    let exe = build_c(work.path(), &lib, "test_broken_replies");
    let table = Command::new(&exe).arg("--table").output().unwrap();
    assert_ok(&table, "tests/c/test_broken_replies --table");
    let fake = FakeServer::start();
    let served: Vec<&str> = fake.ports.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        String::from_utf8_lossy(&table.stdout)
            .lines()
            .collect::<Vec<_>>(),
        served,
        "the kinds of tests/c/test_broken_replies.c's table and of fake_redis.py differ: \
         give each new kind its expected outcome"
    );
    let children: Vec<_> = fake
        .ports
        .iter()
        .map(|(kind, port)| {
            let child = Command::new(&exe)
                .arg(format!("{kind}={port}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (kind, child)
        })
        .collect();
    let mut failures = Vec::new();
    let mut checks = 0;
    for (kind, child) in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().rev().find(|l| l.contains(" passed, ")) {
            Some(_) => {
                let (passed, failed) = verdict(&stdout);
                checks += passed + failed;
                if failed > 0 || !out.status.success() {
                    failures.push(format!("{kind} ({}):\n{stdout}", out.status));
                }
            }
            None => failures.push(format!(
                "{kind}: the program died ({}; a stack overflow on its 1 MB thread stack?):\n{stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    }
    drop(fake);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checks >= 200, "only {checks} checks ran");
}
