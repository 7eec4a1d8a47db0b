//! A quick measurement of the Rust core on this machine, against
//! `redis-benchmark -c 1 -P 1` run in the same go on the same throwaway
//! server: uncontended acquire+release cycles/s (try-once and waiting
//! acquires), and the hand-off latency from a release to the woken waiter.
//! The full comparison with other libraries lives in `bench/` (`make bench`).
//!
//! `cargo run --release --example bench_core -- [--seconds S] [--redlock]`
//! (`--redlock`: only the Redlock rows; with `--url URL --json FILE` as
//! well, against that single server, appending JSON lines to FILE)
//!
//! With `--url URL --json FILE [--round R]` (as `bench/run.py` calls it) it
//! uses that server, measures only this library's cycles and hand-off, and
//! appends JSON lines to FILE (redis-benchmark is run by bench/raw_limit.py).
//! With `--url URL --json FILE --paired PAIRS` it pairs our try-once cycle
//! with redis-benchmark's SET + EVALSHA in alternating batches instead (see
//! `paired_mode`): the ratio `make bench` judges the Rust goal by.

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, Wait};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p / 100.0).round() as usize]
}

fn cycle(client: &Client, wait: Wait, seconds: f64) -> (f64, Duration, Duration) {
    let ttl = Duration::from_secs(10);
    let mut lat = Vec::with_capacity(200_000);
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    while Instant::now() < end {
        let t = Instant::now();
        client
            .acquire("bench:lock", ttl, wait)
            .unwrap()
            .release()
            .unwrap();
        lat.push(t.elapsed());
    }
    let rate = lat.len() as f64 / start.elapsed().as_secs_f64();
    lat.sort_unstable();
    (rate, percentile(&lat, 50.0), percentile(&lat, 99.0))
}

/// The same two round trips with plain redis-rs: the client library's floor.
fn raw_cycle(raw: &mut redis::Connection, sha: &str, seconds: f64) -> f64 {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut n = 0u64;
    while Instant::now() < end {
        let _: Option<String> = redis::cmd("SET")
            .arg("raw")
            .arg("tok")
            .arg("NX")
            .arg("PX")
            .arg(10000)
            .query(raw)
            .unwrap();
        let _: i64 = redis::cmd("EVALSHA")
            .arg(sha)
            .arg(1)
            .arg("raw")
            .arg("tok")
            .query(raw)
            .unwrap();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn redis_benchmark(port: u16, cmd: &[&str]) -> f64 {
    redis_benchmark_n("127.0.0.1", port, 50_000, cmd)
}

fn redis_benchmark_n(host: &str, port: u16, n: u32, cmd: &[&str]) -> f64 {
    let out = Command::new("redis-benchmark")
        .args([
            "-h",
            host,
            "-p",
            &port.to_string(),
            "-c",
            "1",
            "-P",
            "1",
            "-n",
            &n.to_string(),
            "--csv",
        ])
        .args(cmd)
        .output()
        .expect("redis-benchmark (apt-get install redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text
        .lines()
        .last()
        .expect("redis-benchmark printed nothing");
    // "name","rps",...
    last.split(',')
        .nth(1)
        .unwrap()
        .trim_matches('"')
        .parse()
        .unwrap()
}

fn handoff(client: &Client, n: usize) -> Vec<Duration> {
    // The holder releases at t0, the waiter (another thread, another
    // connection) returns from acquire at t1.
    let mut lat = Vec::with_capacity(n);
    let key = "bench:handoff";
    for _ in 0..n {
        let holder = client
            .acquire(key, Duration::from_secs(10), Wait::TryOnce)
            .unwrap();
        let c = client.clone();
        let (tx, rx) = mpsc::channel();
        let waiter = thread::spawn(move || {
            tx.send(()).unwrap();
            let l = c
                .acquire(
                    key,
                    Duration::from_secs(10),
                    Wait::Timeout(Duration::from_secs(10)),
                )
                .unwrap();
            let t1 = Instant::now();
            l.release().unwrap();
            t1
        });
        rx.recv().unwrap();
        // Let the waiter queue up and block.
        thread::sleep(Duration::from_millis(2));
        let t0 = Instant::now();
        holder.release().unwrap();
        let t1 = waiter.join().unwrap();
        lat.push(t1.saturating_duration_since(t0));
    }
    lat.sort_unstable();
    lat
}

/// Try-once cycles/s of a single server, Redlock over 3 and 5 nodes, and
/// Redlock over 5 nodes one of which is stopped (SIGSTOP), interleaved in
/// batches of a tenth of `seconds`; each Redlock rate is also given as a
/// ratio to the single server's batch next to it (median of the batches).
/// With `json`, each deployment's pairs are also appended to that file.
fn redlock_rows(single: &Client, seconds: f64, json: Option<&str>) {
    let three: Vec<common::Server> = (0..3).map(|_| common::Server::start()).collect();
    let five: Vec<common::Server> = (0..5).map(|_| common::Server::start()).collect();
    let mut stalled: Vec<common::Server> = (0..5).map(|_| common::Server::start()).collect();
    let open = |nodes: &[common::Server]| {
        Client::redlock(nodes.iter().map(|s| s.url()))
            .build()
            .unwrap()
    };
    let clients = [
        ("Redlock over 3 nodes", open(&three)),
        ("Redlock over 5 nodes", open(&five)),
        ("Redlock over 5 nodes, one stopped", open(&stalled)),
    ];
    for (_, c) in &clients {
        c.acquire("warm", Duration::from_secs(1), Wait::TryOnce)
            .unwrap()
            .release()
            .unwrap();
    }
    stalled[4].pause();
    let batch = seconds / 10.0;
    let mut single_rates = Vec::new();
    let mut rates = vec![Vec::new(); clients.len()];
    let mut ratios = vec![Vec::new(); clients.len()];
    for _ in 0..10 {
        let s = cycle(single, Wait::TryOnce, batch).0;
        single_rates.push(s);
        for (i, (_, c)) in clients.iter().enumerate() {
            let r = cycle(c, Wait::TryOnce, batch).0;
            rates[i].push(r);
            ratios[i].push(r / s);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    println!("\n| try-once cycles/s (median of 10 interleaved batches) | cycles/s | ratio to the single server |");
    println!("|---|---|---|");
    println!(
        "| single server | {:.0} | 1.00 |",
        median(&mut single_rates)
    );
    for (i, (name, _)) in clients.iter().enumerate() {
        let list: Vec<String> = ratios[i].iter().map(|r| format!("{r:.4}")).collect();
        let rec = format!(
            "{{\"bench\": \"redlock\", \"impl\": \"redislock\", \"lang\": \"rust\", \
             \"deployment\": \"{}\", \"single_cps\": {:.0}, \"redlock_cps\": {:.0}, \"ratio\": [{}]}}",
            name.trim_start_matches("Redlock over "),
            median(&mut single_rates.clone()),
            median(&mut rates[i]),
            list.join(", ")
        );
        println!(
            "| {name} | {:.0} | {:.2} |",
            median(&mut rates[i]),
            median(&mut ratios[i])
        );
        if let Some(path) = json {
            append_line(path, &rec);
        }
    }
    drop(clients);
    stalled[4].resume();
}

/// Try-once acquires (10 s TTL) over 5 nodes with 0 to 3 of them stopped:
/// how long the acquire and the release take, and what the acquire gave.
fn stalled_nodes(samples: usize) {
    println!("\n| stopped nodes of 5 | acquire p50 | acquire max | release p50 | release max | outcome |");
    println!("|---|---|---|---|---|---|");
    for k in 0..=3 {
        let mut nodes: Vec<common::Server> = (0..5).map(|_| common::Server::start()).collect();
        let client = Client::redlock(nodes.iter().map(|s| s.url()))
            .build()
            .unwrap();
        client
            .acquire("warm", Duration::from_secs(1), Wait::TryOnce)
            .unwrap()
            .release()
            .unwrap();
        for node in nodes.iter_mut().take(k) {
            node.pause();
        }
        let (mut acq, mut rel) = (Vec::new(), Vec::new());
        let mut outcomes = std::collections::BTreeMap::new();
        for i in 0..samples {
            let t = Instant::now();
            let r = client.acquire(format!("stall:{i}"), Duration::from_secs(10), Wait::TryOnce);
            acq.push(t.elapsed());
            match r {
                Ok(lock) => {
                    *outcomes.entry("held".to_string()).or_insert(0) += 1;
                    let t = Instant::now();
                    lock.release().unwrap();
                    rel.push(t.elapsed());
                }
                Err(e) => *outcomes.entry(format!("{:?}", e.kind())).or_insert(0) += 1,
            }
        }
        acq.sort_unstable();
        rel.sort_unstable();
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
        let (rp50, rmax) = if rel.is_empty() {
            ("-".to_string(), "-".to_string())
        } else {
            (ms(percentile(&rel, 50.0)), ms(*rel.last().unwrap()))
        };
        let outcome: Vec<String> = outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!(
            "| {k} | {} | {} | {rp50} | {rmax} | {} |",
            ms(percentile(&acq, 50.0)),
            ms(*acq.last().unwrap()),
            outcome.join(", ")
        );
        drop(client);
        for node in nodes.iter_mut().take(k) {
            node.resume();
        }
    }
}

fn opt(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .map(|i| args[i + 1].clone())
}

/// bench/run.py's mode: JSON lines against its server.
fn json_mode(url: &str, path: &str, round: u32, seconds: f64) {
    use std::io::Write;
    let client = Client::open(url).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for (name, wait) in [
        ("rust-redislock", Wait::TryOnce),
        (
            "rust-redislock-waiting",
            Wait::Timeout(Duration::from_secs(5)),
        ),
    ] {
        let (rate, p50, p99) = cycle(&client, wait, seconds);
        let rec = format!(
            "{{\"bench\": \"uncontended\", \"impl\": \"{name}\", \"lang\": \"rust\", \"round\": {round}, \
             \"cycles_per_s\": {rate:.1}, \"p50_us\": {:.1}, \"p99_us\": {:.1}}}",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
        println!("{rec}");
        writeln!(f, "{rec}").unwrap();
    }
    let lat = handoff(&client, 500);
    let rec = format!(
        "{{\"bench\": \"handoff\", \"impl\": \"rust-redislock threads\", \"round\": {round}, \
         \"p50_us\": {:.1}, \"p99_us\": {:.1}}}",
        percentile(&lat, 50.0).as_secs_f64() * 1e6,
        percentile(&lat, 99.0).as_secs_f64() * 1e6
    );
    println!("{rec}");
    writeln!(f, "{rec}").unwrap();
}

/// Ours against redis-benchmark's SET + EVALSHA cycle, paired: `pairs`
/// times, in alternating order, a batch of our try-once cycles and the same
/// number of redis-benchmark SET NX PX and EVALSHA requests (-c 1 -P 1);
/// per pair, our cycles/s over redis-benchmark's cycle rate (1 / (1/SET +
/// 1/EVALSHA)). One JSON line, as the paired benchmarks of bench/ write.
fn paired_mode(url: &str, path: &str, pairs: usize) {
    const BATCH: u32 = 2000;
    let client = Client::open(url).unwrap();
    let parsed = redis::Client::open(url).unwrap();
    let (host, port) = match &parsed.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
        other => panic!("--paired needs a TCP URL, not {other:?}"),
    };
    let mut raw = parsed.get_connection().unwrap();
    let release = "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(release)
        .query(&mut raw)
        .unwrap();
    let ttl = Duration::from_secs(10);
    let ours = || {
        let start = Instant::now();
        for _ in 0..BATCH {
            client
                .acquire("bench:paired", ttl, Wait::TryOnce)
                .unwrap()
                .release()
                .unwrap();
        }
        f64::from(BATCH) / start.elapsed().as_secs_f64()
    };
    let theirs = || {
        let set = redis_benchmark_n(&host, port, BATCH, &["SET", "k", "v", "NX", "PX", "10000"]);
        let evalsha = redis_benchmark_n(&host, port, BATCH, &["EVALSHA", &sha, "1", "k", "tok"]);
        1.0 / (1.0 / set + 1.0 / evalsha)
    };
    ours(); // warm-up
    let (mut ratios, mut ours_us, mut theirs_us) = (Vec::new(), Vec::new(), Vec::new());
    for pair in 0..pairs {
        let (o, t) = if pair % 2 == 0 {
            let o = ours();
            (o, theirs())
        } else {
            let t = theirs();
            (ours(), t)
        };
        ratios.push(o / t);
        ours_us.push(1e6 / o);
        theirs_us.push(1e6 / t);
    }
    let summary = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let m = v[v.len() / 2];
        format!(
            "{{\"median\": {m:.2}, \"min\": {:.2}, \"max\": {:.2}}}",
            v[0],
            v[v.len() - 1]
        )
    };
    let list: Vec<String> = ratios.iter().map(|r| format!("{r:.4}")).collect();
    let rec = format!(
        "{{\"bench\": \"paired\", \"impl\": \"rust-redislock\", \"base\": \"redis-benchmark SET+EVALSHA\", \
         \"lang\": \"rust\", \"round\": 0, \"batch\": {BATCH}, \"ours_us\": {}, \"helper_us\": {}, \
         \"speed_ratio\": [{}]}}",
        summary(&mut ours_us),
        summary(&mut theirs_us),
        list.join(", ")
    );
    println!("{rec}");
    append_line(path, &rec);
}

/// Append one line to the file at `path`.
fn append_line(path: &str, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: f64 = opt(&args, "--seconds").map_or(3.0, |s| s.parse().expect("--seconds S"));
    if args.iter().any(|a| a == "--redlock") {
        // The single server: the one given (as `bench/run.py` does) or a
        // throwaway one like the nodes.
        let server = opt(&args, "--url").is_none().then(common::Server::start);
        let url = opt(&args, "--url").unwrap_or_else(|| server.as_ref().unwrap().url());
        let client = Client::open(&url).unwrap();
        let json = opt(&args, "--json");
        redlock_rows(&client, seconds, json.as_deref());
        if json.is_none() {
            stalled_nodes(10);
        }
        return;
    }
    if let (Some(url), Some(path), Some(pairs)) = (
        opt(&args, "--url"),
        opt(&args, "--json"),
        opt(&args, "--paired"),
    ) {
        paired_mode(&url, &path, pairs.parse().expect("--paired PAIRS"));
        return;
    }
    if let (Some(url), Some(path)) = (opt(&args, "--url"), opt(&args, "--json")) {
        let round = opt(&args, "--round").map_or(0, |r| r.parse().unwrap());
        json_mode(&url, &path, round, seconds);
        return;
    }
    let server = common::Server::start();
    let client = Client::open(&server.url()).unwrap();
    let mut raw = server.raw();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end")
        .query(&mut raw)
        .unwrap();

    // Interleave: benchmark, ours, benchmark, ours.
    let mut rows = Vec::new();
    for round in 0..2 {
        let set = redis_benchmark(server.port, &["SET", "k", "v", "NX", "PX", "10000"]);
        let evalsha = redis_benchmark(server.port, &["EVALSHA", &sha, "1", "k", "tok"]);
        let bench_cycle = 1.0 / (1.0 / set + 1.0 / evalsha);
        let (try_rate, try_p50, try_p99) = cycle(&client, Wait::TryOnce, seconds);
        let (wait_rate, wait_p50, wait_p99) =
            cycle(&client, Wait::Timeout(Duration::from_secs(5)), seconds);
        let raw_rate = raw_cycle(&mut raw, &sha, seconds);
        rows.push((
            round,
            set,
            evalsha,
            bench_cycle,
            raw_rate,
            try_rate,
            try_p50,
            try_p99,
            wait_rate,
            wait_p50,
            wait_p99,
        ));
    }
    println!("| round | redis-benchmark SET/s | EVALSHA/s | SET+EVALSHA cycle/s | plain redis-rs SET+EVALSHA cycles/s | redislock try-once cycles/s (p50/p99) | ratio | redislock waiting-acquire cycles/s (p50/p99) | ratio |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (round, set, evalsha, bc, rr, tr, t50, t99, wr, w50, w99) in rows {
        println!(
            "| {round} | {set:.0} | {evalsha:.0} | {bc:.0} | {rr:.0} | {tr:.0} ({:.0}/{:.0} µs) | {:.2} | {wr:.0} ({:.0}/{:.0} µs) | {:.2} |",
            t50.as_secs_f64() * 1e6,
            t99.as_secs_f64() * 1e6,
            tr / bc,
            w50.as_secs_f64() * 1e6,
            w99.as_secs_f64() * 1e6,
            wr / bc
        );
    }

    redlock_rows(&client, seconds, None);
    stalled_nodes(10);

    let n = 2000;
    let lat = handoff(&client, n);
    println!(
        "\nhand-off release -> waiter holds it ({n} samples): p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        percentile(&lat, 50.0).as_secs_f64() * 1e6,
        percentile(&lat, 99.0).as_secs_f64() * 1e6,
        lat.last().unwrap().as_secs_f64() * 1e6
    );
}
