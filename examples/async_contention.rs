//! Tokio: many tasks contending on a few locks through one client.
//!
//! `cargo run --release --example async_contention -- --url URL
//!  [--tasks 10000] [--locks 100] [--json FILE] [--round R]`
//!
//! Every task takes lock `i % locks` once (waiting as long as it takes),
//! bumps that lock's counter with a read, a yield and a write (two owners at
//! once would lose an update), and releases. Reports acquisitions per
//! second, the counters (each must be exactly tasks / locks), overlaps seen
//! inside the critical section, and the connections the process held at the
//! server while the tasks waited.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redislock::{Client, Wait};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    match args.iter().position(|a| a == name) {
        Some(i) => args[i + 1].parse().unwrap_or_else(|_| panic!("bad {name}")),
        None => default,
    }
}

/// p50 of a PING, one every 2 ms (the loopback round trip of this run).
fn rtt_us(con: &mut redis::Connection) -> f64 {
    let mut lat: Vec<f64> = (0..200)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(2));
            let t = Instant::now();
            let _: String = redis::cmd("PING").query(con).unwrap();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    lat[lat.len() / 2]
}

/// The server's clients other than `con` itself.
fn connections(con: &mut redis::Connection) -> usize {
    let me: i64 = redis::cmd("CLIENT").arg("ID").query(con).unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(con).unwrap();
    list.lines()
        .filter(|l| !l.starts_with(&format!("id={me} ")))
        .count()
}

struct Guarded {
    count: AtomicU64,
    inside: AtomicBool,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url: String = arg(&args, "--url", String::new());
    assert!(!url.is_empty(), "--url URL is required");
    let tasks: usize = arg(&args, "--tasks", 10_000);
    let locks: usize = arg(&args, "--locks", 100);
    let json: String = arg(&args, "--json", String::new());
    let round: u32 = arg(&args, "--round", 0);
    assert!(
        locks > 0 && tasks >= locks,
        "--tasks must be at least --locks"
    );

    let mut raw = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let rtt = rtt_us(&mut raw);
    drop(raw);
    let client = Client::open(&url).unwrap();
    let guarded: Arc<Vec<Guarded>> = Arc::new(
        (0..locks)
            .map(|_| Guarded {
                count: AtomicU64::new(0),
                inside: AtomicBool::new(false),
            })
            .collect(),
    );
    let overlaps = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let (client, guarded, overlaps) = (client.clone(), guarded.clone(), overlaps.clone());
            tokio::spawn(async move {
                let k = i % locks;
                let lock = client
                    .acquire_async(
                        format!("bench:async:{k}"),
                        Duration::from_secs(30),
                        Wait::Timeout(Duration::from_secs(600)),
                    )
                    .await
                    .expect("acquire");
                let g = &guarded[k];
                if g.inside.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::Relaxed);
                }
                let v = g.count.load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                g.count.store(v + 1, Ordering::SeqCst);
                g.inside.store(false, Ordering::SeqCst);
                lock.release_async().await.expect("release");
            })
        })
        .collect();
    // Connections while the tasks wait, sampled from a thread of its own.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done, url) = (peak.clone(), done.clone(), url.clone());
        std::thread::spawn(move || {
            let mut con = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(connections(&mut con) as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    for h in handles {
        h.await.unwrap();
    }
    let wall = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak_connections = peak.load(Ordering::Relaxed);
    let counts: Vec<u64> = guarded
        .iter()
        .map(|g| g.count.load(Ordering::SeqCst))
        .collect();
    let expected = (tasks / locks) as u64;
    let exact = counts
        .iter()
        .enumerate()
        .all(|(k, &c)| c == expected + u64::from(k < tasks % locks));
    let rec = format!(
        "{{\"bench\": \"async-contention\", \"impl\": \"rust-tokio\", \"round\": {round}, \
         \"tasks\": {tasks}, \"locks\": {locks}, \"seconds\": {wall:.3}, \
         \"acq_per_s\": {:.0}, \"counters_exact\": {exact}, \"overlaps\": {}, \
         \"peak_connections\": {peak_connections}, \"rtt_us\": {rtt:.1}}}",
        tasks as f64 / wall,
        overlaps.load(Ordering::Relaxed),
    );
    println!("{rec}");
    if !json.is_empty() {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&json)
            .unwrap();
        writeln!(f, "{rec}").unwrap();
    }
    assert!(exact, "a counter is off: {counts:?}");
    assert_eq!(overlaps.load(Ordering::Relaxed), 0, "two owners at once");
}
