//! What the statistics cost: the uncontended acquire+release cycle of one
//! thread while 8 other threads of the same client contend for another lock
//! (so that every counter and histogram is updated from 9 threads at
//! once), with statistics and without them (a build with
//! `--cfg redislock_no_stats`), run in interleaved pairs against one
//! throwaway server. The ratio is taken inside each pair; the median of
//! the pairs is the figure. The same is done with no contenders.
//!
//! `make bench-stats` builds both and runs
//! `bench_stats --baseline target/no-stats/release/examples/bench_stats`.
//! One measurement alone: `bench_stats --url URL --seconds S --contenders N`
//! prints the cycles/s; with `--cycles N` instead of `--seconds` it runs
//! exactly N cycles after 100 to warm up (for counting instructions per
//! cycle under `valgrind --tool=callgrind`: run N and 2N, subtract).

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, Wait};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// One measurement in this process: try-once cycles/s on a lock nobody
/// else takes, while `contenders` threads queue for another one.
fn measure(url: &str, seconds: f64, cycles: Option<u64>, contenders: usize) -> f64 {
    let client = Client::open(url).unwrap();
    let ttl = Duration::from_secs(10);
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..contenders)
        .map(|_| {
            let (c, stop) = (client.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let lock = c
                        .acquire("bench:hot", ttl, Wait::Timeout(Duration::from_secs(10)))
                        .unwrap();
                    lock.release().unwrap();
                }
            })
        })
        .collect();
    let cycle = || {
        client
            .acquire("bench:cold", ttl, Wait::TryOnce)
            .unwrap()
            .release()
            .unwrap()
    };
    // Warm up: connections open, contenders queued.
    let warm = Instant::now() + Duration::from_millis(200);
    let mut n = 0u64;
    while n < 100 || (cycles.is_none() && Instant::now() < warm) {
        cycle();
        n += 1;
    }
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut n = 0u64;
    if let Some(count) = cycles {
        while n < count {
            cycle();
            n += 1;
        }
    }
    while cycles.is_none() && Instant::now() < end {
        cycle();
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    rate
}

fn run(bin: &str, url: &str, seconds: f64, contenders: usize) -> f64 {
    let out = Command::new(bin)
        .args(["--url", url, "--seconds", &seconds.to_string()])
        .args(["--contenders", &contenders.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
    assert!(out.status.success(), "{bin} failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: f64 = arg(&args, "--seconds").map_or(0.5, |s| s.parse().unwrap());
    if let Some(url) = arg(&args, "--url") {
        let contenders = arg(&args, "--contenders").map_or(8, |s| s.parse().unwrap());
        let cycles = arg(&args, "--cycles").map(|s| s.parse().unwrap());
        println!("{:.1}", measure(&url, seconds, cycles, contenders));
        return;
    }
    let Some(baseline) = arg(&args, "--baseline") else {
        eprintln!(
            "usage: bench_stats --baseline PATH (a build with --cfg redislock_no_stats; \
             `make bench-stats` builds it)"
        );
        std::process::exit(2);
    };
    let pairs: usize = arg(&args, "--pairs").map_or(10, |s| s.parse().unwrap());
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap();
    let srv = common::Server::start();
    let url = srv.url();
    println!(
        "uncontended try-once cycles/s of one thread, with and without statistics \
         ({pairs} interleaved pairs of {seconds} s, ratio inside each pair)\n"
    );
    println!("| other threads of the client | with stats (median) | without (median) | ratio with/without: median [min, max] |");
    println!("|---|---|---|---|");
    for contenders in [8, 0] {
        let (mut with, mut without, mut ratios) = (vec![], vec![], vec![]);
        for i in 0..pairs {
            // Alternate which one goes first.
            let (a, b) = if i % 2 == 0 {
                let a = run(me, &url, seconds, contenders);
                (a, run(&baseline, &url, seconds, contenders))
            } else {
                let b = run(&baseline, &url, seconds, contenders);
                (run(me, &url, seconds, contenders), b)
            };
            with.push(a);
            without.push(b);
            ratios.push(a / b);
        }
        let lo = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().cloned().fold(0.0, f64::max);
        println!(
            "| {contenders} contending | {:.0} | {:.0} | {:.3} [{lo:.3}, {hi:.3}] |",
            median(with),
            median(without),
            median(ratios)
        );
    }
}
