//! `make demo`: one lock shared live by C, Python, PHP, Ruby, Node.js and Java
//! processes and a `redislock run` command, on a throwaway redis-server.
//!
//! Every worker takes the lock `demo:lock`, increments `demo:counter`
//! non-atomically (GET, then SET) and releases, at least once and then until
//! the time is up, and reports `fence value acquired_ns release_ns` per
//! acquisition: the counter as it read it, and CLOCK_MONOTONIC (the
//! machine's clock, in every language) after the acquisition returned and
//! before the release was called (`redislock run` reports `fence value`).
//! The demo prints a table per language and checks, in fence order, that no
//! two holders overlapped: each one read the counter as the one before it
//! left it (what the lock guarantees, whatever the clocks say), and no one
//! acquired before the one before it released (scheduling delays on a busy
//! machine only widen that gap). It also checks that the fences are
//! distinct, that every worker got the lock, and that the counter equals
//! the number of acquisitions. Exit status 1 when any of this fails.
//!
//! ```text
//! cargo run --release --example demo -- --seconds 5 --python PY --prefix DIR --cli BIN
//! ```
//! `--python`: an interpreter with the redislock wheel and redis-py;
//! `--php` (default `php`): with FFI and phpredis; `--ruby` (default
//! `ruby`): with the ffi and redis gems (the Ruby gem is loaded from
//! bindings/ruby); `--node` (default `node`): Node.js 18 or newer (the
//! addon is loaded from bindings/node, built there first); `--java`
//! (default `java`): Java 17 or newer, with `javac` on the PATH, which
//! compiles the Java worker into a temporary directory against `--java-jar`
//! (default target/java/redislock-<version>.jar, `make java`) and `--jna`
//! (default Debian's /usr/share/java/jna.jar); `--prefix`: where
//! `scripts/install.sh` put the C library, which the PHP, Ruby and Java
//! workers load; `--cli`: the `redislock` binary. `make demo` prepares them.
//!
//! `--installed` (make dist-check): the workers load the installed packages,
//! never this repository: the Python one from `--python`'s environment, the
//! PHP one from `$REDISLOCK_DEMO_AUTOLOAD` (a Composer project's
//! vendor/autoload.php), the Ruby gem from `$GEM_HOME`, the Node.js package
//! by `require('redislock')` (`$NODE_PATH`), the Java one from `--java-jar`
//! (the library it carries, extracted into the temporary directory); no
//! REDISLOCK_LIB is set for them. `--workers DIR`: where the worker scripts
//! are (default examples/demo); `--c-worker EXE`: the C worker, already
//! built (else it is built against `--prefix`).

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;

struct Args {
    seconds: f64,
    python: String,
    php: String,
    ruby: String,
    node: String,
    java: String,
    java_jar: PathBuf,
    jna: PathBuf,
    prefix: PathBuf,
    cli: PathBuf,
    installed: bool,
    workers: PathBuf,
    c_worker: Option<PathBuf>,
}

fn parse_args() -> Args {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut a = Args {
        seconds: 5.0,
        python: "python3".into(),
        php: "php".into(),
        ruby: "ruby".into(),
        node: "node".into(),
        java: "java".into(),
        java_jar: root.join(format!("target/java/redislock-{}.jar", redislock::VERSION)),
        jna: "/usr/share/java/jna.jar".into(),
        prefix: root.join("target/demo-prefix"),
        cli: root.join("target/release/redislock"),
        installed: false,
        workers: root.join("examples/demo"),
        c_worker: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        if argv[i] == "--installed" {
            a.installed = true;
            i += 1;
            continue;
        }
        let v = argv
            .get(i + 1)
            .cloned()
            .unwrap_or_else(|| panic!("{} needs a value", argv[i]));
        match argv[i].as_str() {
            "--seconds" => a.seconds = v.parse().expect("--seconds S"),
            "--python" => a.python = v,
            "--php" => a.php = v,
            "--ruby" => a.ruby = v,
            "--node" => a.node = v,
            "--java" => a.java = v,
            "--java-jar" => a.java_jar = v.into(),
            "--jna" => a.jna = v.into(),
            "--prefix" => a.prefix = v.into(),
            "--cli" => a.cli = v.into(),
            "--workers" => a.workers = v.into(),
            "--c-worker" => a.c_worker = Some(v.into()),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

/// One acquisition: who, which fence, the counter as the holder read it,
/// and when (None for the CLI).
#[derive(Clone)]
struct Acq {
    worker: String,
    lang: &'static str,
    fence: u64,
    value: u64,
    times: Option<(u64, u64)>,
}

fn parse_lines(text: &str, worker: &str, lang: &'static str) -> Vec<Acq> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<u64> = l.split_whitespace().map(|x| x.parse().expect(l)).collect();
            assert!(f.len() == 2 || f.len() == 4, "{worker}: bad line {l:?}");
            Acq {
                worker: worker.into(),
                lang,
                fence: f[0],
                value: f[1],
                times: (f.len() == 4).then(|| (f[2], f[3])),
            }
        })
        .collect()
}

fn build_c_worker(prefix: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = prefix.join("lib");
    let exe = prefix.join("demo-worker-c");
    let status = Command::new("cc")
        .args([
            "-O2",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
        ])
        .arg(format!("-I{}", prefix.join("include").display()))
        .arg(root.join("examples/demo/worker.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lredislock")
        .status()
        .expect("cc");
    assert!(
        status.success(),
        "compiling examples/demo/worker.c failed (is the library installed in {}?)",
        prefix.display()
    );
    exe
}

/// A directory of its own under the system's temporary directory, removed
/// when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The Java worker, compiled with `javac` against `--java-jar` and `--jna`
/// into a temporary directory, which is also the workers' java.io.tmpdir
/// (where a jar that carries the library extracts it). Its class path.
fn build_java_worker(a: &Args, dir: &Path) -> String {
    for jar in [&a.java_jar, &a.jna] {
        assert!(
            jar.is_file(),
            "no {}: the Java worker needs the binding's jar (make java) and JNA (Debian's libjna-java)",
            jar.display()
        );
    }
    let classes = dir.join("classes");
    let cp = format!("{}:{}", a.java_jar.display(), a.jna.display());
    let status = Command::new("javac")
        .args([
            "--release",
            "17",
            "-Xlint:all",
            "-Werror",
            "-encoding",
            "UTF-8",
            "-cp",
        ])
        .arg(&cp)
        .arg("-d")
        .arg(&classes)
        .arg(a.workers.join("worker.java"))
        .status()
        .expect("javac");
    assert!(
        status.success(),
        "compiling worker.java against {} failed",
        a.java_jar.display()
    );
    format!("{cp}:{}", classes.display())
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn main() {
    let a = parse_args();
    let server = common::Server::start();
    let port = server.port.to_string();
    let secs = a.seconds.to_string();
    println!(
        "redislock {} demo: C, Python, PHP, Ruby, Node.js and Java processes and `redislock run` share one lock for {} s \
         ({:?} {} on 127.0.0.1:{port})",
        redislock::VERSION,
        a.seconds,
        common::family(&mut server.raw()),
        common::server_version(&mut server.raw())
    );
    let c_worker = match &a.c_worker {
        Some(exe) => exe.clone(),
        None => build_c_worker(&a.prefix),
    };
    let lib = a.prefix.join("lib/libredislock.so");
    let java_dir =
        TempDir(std::env::temp_dir().join(format!("redislock-demo-{}", std::process::id())));
    let java_cp = build_java_worker(&a, &java_dir.0);

    let redis_cli = common::redis_cli_bin();
    let script = format!(
        "v=$('{redis_cli}' -p {port} GET demo:counter); '{redis_cli}' -p {port} SET demo:counter $((${{v:-0}}+1)) >/dev/null; \
         echo $REDISLOCK_FENCE ${{v:-0}}"
    );
    let team = Workers {
        a: &a,
        c_worker: &c_worker,
        lib: &lib,
        port: &port,
        secs: &secs,
        java_cp: &java_cp,
        java_tmp: &java_dir.0,
        url: server.url(),
    };
    let (mut all, names) = team.run(None, &["demo:lock"], script);
    all.sort_by_key(|x| x.fence);

    // In fence order, each holder must have read what the one before it
    // wrote (the first one, nothing), and acquired after it released. The
    // first is the lock's guarantee seen in the data, without clocks; the
    // second compares CLOCK_MONOTONIC readings of two processes, taken
    // after the acquisition returned and before the release was called:
    // a busy machine's scheduling delays only widen the gap between them.
    // Hand-off: from the previous holder's release call to this acquisition.
    let mut per_lang: BTreeMap<&str, (usize, Vec<u64>)> = BTreeMap::new();
    let mut overlaps = 0;
    let mut checked = 0;
    for (i, acq) in all.iter().enumerate() {
        let e = per_lang.entry(acq.lang).or_default();
        e.0 += 1;
        if i == 0 {
            if acq.value != 0 {
                overlaps += 1;
            }
            continue;
        }
        let prev = &all[i - 1];
        checked += 1;
        let mut overlapped = acq.value != prev.value + 1;
        if let (Some((_, prev_rel)), Some((acq_at, _))) = (prev.times, acq.times) {
            if acq_at < prev_rel {
                overlapped = true;
            } else if prev.worker != acq.worker {
                e.1.push(acq_at - prev_rel);
            }
        }
        if overlapped {
            overlaps += 1;
        }
    }
    let workers = |lang: &str| if lang == "redislock run" { 1 } else { 2 };
    println!(
        "\n{:<15} {:>8} {:>13} {:>17}",
        "language", "workers", "acquisitions", "median hand-off"
    );
    for (lang, (n, mut handoffs)) in per_lang {
        handoffs.sort_unstable();
        let median = handoffs
            .get(handoffs.len() / 2)
            .map(|ns| format!("{} µs", ns / 1000))
            .unwrap_or_else(|| "-".into());
        println!("{lang:<15} {:>8} {n:>13} {median:>17}", workers(lang));
    }
    let total = all.len();
    let distinct = all.windows(2).all(|w| w[1].fence > w[0].fence);
    println!(
        "\nfencing numbers: {total} handed out, all distinct: {distinct}; in fence order, {checked} consecutive \
         acquisitions checked across languages, {overlaps} overlapping holders"
    );
    let mut raw = server.raw();
    let counter: usize = raw
        .get::<_, Option<usize>>("demo:counter")
        .unwrap()
        .unwrap_or(0);
    let exact = counter == total;
    println!(
        "counter: {counter}, acquisitions: {total} -> {}",
        if exact { "exact" } else { "LOST UPDATES" }
    );
    if !names.is_empty() {
        println!("no acquisition by: {}", names.join(", "));
    }
    let lock_ok = exact && distinct && overlaps == 0 && total > 0 && names.is_empty();

    // The same processes and `redislock run` again, sharing a semaphore of
    // LIMIT permits: each takes one, counts it (INCR) and holds it 1 ms.
    // Between an acquisition's return and its release call the permit is
    // surely held, so more than LIMIT such spans at one instant would be a
    // violation (the clocks can hide one, never invent one).
    const LIMIT: usize = 2;
    println!("\nthe same processes and `redislock run --limit {LIMIT}` on a semaphore of {LIMIT} permits:");
    let script =
        format!("'{redis_cli}' -p {port} INCR demo:pool:done >/dev/null; echo $REDISLOCK_FENCE 0");
    let limit = LIMIT.to_string();
    let (permits, missing) = team.run(Some(&limit), &["--limit", &limit, "demo:pool"], script);
    let mut edges: Vec<(u64, i32)> = permits
        .iter()
        .filter_map(|p| p.times)
        .flat_map(|(from, to)| [(from, 1), (to, -1)])
        .collect();
    // At one instant, releases before acquisitions.
    edges.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    let done: usize = raw
        .get::<_, Option<usize>>("demo:pool:done")
        .unwrap()
        .unwrap_or(0);
    let mut fences: Vec<u64> = permits.iter().map(|p| p.fence).collect();
    fences.sort_unstable();
    fences.dedup();
    let sem_distinct = fences.len() == permits.len();
    println!(
        "{} permits taken ({done} counted), at most {most} held at once by the clocks, fences all distinct: \
         {sem_distinct}",
        permits.len()
    );
    if !missing.is_empty() {
        println!("no permit for: {}", missing.join(", "));
    }
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("{demo:pool}*")
        .query(&mut raw)
        .unwrap();
    if !left.is_empty() {
        println!("left on the server: {left:?}");
    }
    let sem_ok = most as usize <= LIMIT
        && done == permits.len()
        && sem_distinct
        && missing.is_empty()
        && left.is_empty();
    drop(java_dir);
    if !lock_ok || !sem_ok {
        std::process::exit(1);
    }
}

/// The demo's workers: two C, two Python, two PHP, two Ruby, two Node.js and
/// two Java processes and a loop of `redislock run`, all until the time is up.
struct Workers<'a> {
    a: &'a Args,
    c_worker: &'a Path,
    lib: &'a Path,
    port: &'a str,
    secs: &'a str,
    /// The Java worker's class path (the binding's jar, JNA, the worker).
    java_cp: &'a str,
    java_tmp: &'a Path,
    url: String,
}

impl Workers<'_> {
    /// Where a worker finds the library: `--prefix`'s (REDISLOCK_LIB), or
    /// with `--installed` only where its package put it.
    fn library<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        if self.a.installed {
            cmd.env_remove("REDISLOCK_LIB")
                .env("REDISLOCK_DEMO_INSTALLED", "1")
        } else {
            cmd.env("REDISLOCK_LIB", self.lib)
        }
    }

    /// Run them all: with `limit`, on the semaphore of that many permits.
    /// `run_args`: what `redislock run` takes before `--`; `script`: what
    /// it runs. The acquisitions of all, and the workers that had none.
    fn run(
        &self,
        limit: Option<&str>,
        run_args: &[&str],
        script: String,
    ) -> (Vec<Acq>, Vec<String>) {
        let mut args = vec![self.port, self.secs];
        args.extend(limit);
        let mut children: Vec<(String, &'static str, Child)> = Vec::new();
        for i in 0..2 {
            children.push((
                format!("c-{i}"),
                "C",
                spawn(Command::new(self.c_worker).args(&args)),
            ));
            children.push((
                format!("python-{i}"),
                "Python",
                spawn(
                    self.library(&mut Command::new(&self.a.python))
                        .arg(self.a.workers.join("worker.py"))
                        .args(&args),
                ),
            ));
            children.push((
                format!("php-{i}"),
                "PHP",
                spawn(
                    self.library(&mut Command::new(&self.a.php))
                        .arg(self.a.workers.join("worker.php"))
                        .args(&args),
                ),
            ));
            children.push((
                format!("ruby-{i}"),
                "Ruby",
                spawn(
                    self.library(&mut Command::new(&self.a.ruby))
                        .arg(self.a.workers.join("worker.rb"))
                        .args(&args),
                ),
            ));
            children.push((
                format!("node-{i}"),
                "Node.js",
                spawn(
                    self.library(&mut Command::new(&self.a.node))
                        .arg(self.a.workers.join("worker.js"))
                        .args(&args),
                ),
            ));
            // A small JVM (one GC thread, the quick JIT): two of them among
            // a dozen processes, on a machine of perhaps two cores.
            children.push((
                format!("java-{i}"),
                "Java",
                spawn(
                    self.library(&mut Command::new(&self.a.java))
                        .args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
                        .arg(format!("-Djava.io.tmpdir={}", self.java_tmp.display()))
                        .args(["-cp", self.java_cp, "Worker"])
                        .args(&args),
                ),
            ));
        }
        // The command line: `redislock run` around the script, once and
        // then again and again until the time is up.
        let cli = self.a.cli.clone();
        let url = self.url.clone();
        let deadline = Instant::now() + Duration::from_secs_f64(self.a.seconds);
        let mut cli_args: Vec<String> = ["run", "--url", &url, "--ttl", "30s", "--wait", "30s"]
            .iter()
            .chain(run_args)
            .map(|s| s.to_string())
            .collect();
        cli_args.extend(["--", "sh", "-c", &script].map(String::from));
        let cli_thread = thread::spawn(move || {
            let mut out = String::new();
            loop {
                let o = Command::new(&cli)
                    .args(&cli_args)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap_or_else(|e| panic!("{}: {e}", cli.display()));
                assert!(
                    o.status.success(),
                    "redislock run failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                out.push_str(&String::from_utf8_lossy(&o.stdout));
                if Instant::now() >= deadline {
                    break;
                }
            }
            out
        });
        let mut all = Vec::new();
        let mut names: Vec<String> = children.iter().map(|(name, _, _)| name.clone()).collect();
        names.push("cli".into());
        for (name, lang, child) in children {
            let o = child.wait_with_output().unwrap();
            assert!(o.status.success(), "worker {name} failed ({})", o.status);
            all.extend(parse_lines(
                &String::from_utf8_lossy(&o.stdout),
                &name,
                lang,
            ));
        }
        all.extend(parse_lines(
            &cli_thread.join().unwrap(),
            "cli",
            "redislock run",
        ));
        // Every worker acquires at least once, however late a busy machine
        // lets it start: one that did not never shared the lock.
        names.retain(|name| !all.iter().any(|acq| &acq.worker == name));
        (all, names)
    }
}
