//! `make demo`: contending worker processes share one lock on a throwaway
//! redis-server and do a non-atomic read-modify-write of one counter under
//! it. Prints acquisitions per worker, the fencing numbers' order, and the
//! counter against the total of acquisitions (they must match).
//!
//! `cargo run --release --example demo -- [--workers N] [--seconds S]`

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redis::Commands;
use redislock::{Client, Wait};

const LOCK: &str = "demo:lock";
const COUNTER: &str = "demo:counter";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--worker") {
        worker(&args[2], args[3].parse().unwrap(), args[4].parse().unwrap());
        return;
    }
    let mut workers = 4usize;
    let mut seconds = 3.0f64;
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--workers" => workers = args[i + 1].parse().expect("--workers N"),
            "--seconds" => seconds = args[i + 1].parse().expect("--seconds S"),
            other => panic!("unknown argument {other}; use --workers N --seconds S"),
        }
        i += 2;
    }
    let server = common::Server::start();
    println!(
        "redislock {} demo: {workers} worker processes, one lock, {seconds} s, redis-server on 127.0.0.1:{}",
        redislock::VERSION,
        server.port
    );
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..workers)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "--worker",
                    &server.url(),
                    &i.to_string(),
                    &seconds.to_string(),
                ])
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a worker")
        })
        .collect();
    let mut rows = Vec::new();
    for mut child in children {
        let out = child.stdout.take().unwrap();
        let mut fences = Vec::new();
        let mut waits = Vec::new();
        for line in BufReader::new(out).lines() {
            let line = line.unwrap();
            let mut parts = line.split_whitespace();
            let fence: u64 = parts.next().unwrap().parse().unwrap();
            let wait_us: u64 = parts.next().unwrap().parse().unwrap();
            fences.push(fence);
            waits.push(wait_us);
        }
        let status = child.wait().unwrap();
        assert!(status.success(), "a worker failed");
        rows.push((fences, waits));
    }

    println!(
        "\n{:<8} {:>12} {:>14} {:>14} {:>12}",
        "worker", "acquired", "first fence", "last fence", "p50 wait"
    );
    let mut all = Vec::new();
    for (i, (fences, waits)) in rows.iter().enumerate() {
        let mut w = waits.clone();
        w.sort_unstable();
        let p50 = w.get(w.len() / 2).copied().unwrap_or(0);
        println!(
            "{:<8} {:>12} {:>14} {:>14} {:>10}µs",
            format!("rust-{i}"),
            fences.len(),
            fences.first().map_or(0, |f| *f),
            fences.last().map_or(0, |f| *f),
            p50
        );
        assert!(
            fences.windows(2).all(|w| w[1] > w[0]),
            "a worker saw fences go backwards"
        );
        all.extend_from_slice(fences);
    }
    all.sort_unstable();
    let total = all.len();
    all.dedup();
    let unique = all.len() == total;
    let mut raw = server.raw();
    let counter: usize = raw.get::<_, Option<usize>>(COUNTER).unwrap().unwrap_or(0);
    println!("\nfencing numbers: {total} handed out, all distinct: {unique}");
    println!(
        "counter: {counter}, acquisitions: {total} -> {}",
        if counter == total {
            "exact"
        } else {
            "LOST UPDATES"
        }
    );
    if counter != total || !unique || total == 0 {
        std::process::exit(1);
    }
}

/// One worker: acquire, increment the counter non-atomically, release,
/// until the time is up. Prints `fence wait_µs` per acquisition.
fn worker(url: &str, _index: usize, seconds: f64) {
    let client = Client::open(url).unwrap();
    let mut raw = redis::Client::open(url).unwrap().get_connection().unwrap();
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut out = String::new();
    while Instant::now() < end {
        let t = Instant::now();
        let lock = client
            .acquire(
                LOCK,
                Duration::from_secs(5),
                Wait::Timeout(Duration::from_secs(10)),
            )
            .unwrap();
        let waited = t.elapsed();
        let n: u64 = raw.get::<_, Option<u64>>(COUNTER).unwrap().unwrap_or(0);
        let _: () = raw.set(COUNTER, n + 1).unwrap();
        out.push_str(&format!("{} {}\n", lock.fence(), waited.as_micros()));
        lock.release().unwrap();
    }
    print!("{out}");
}
