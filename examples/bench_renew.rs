//! Renewal at scale: N locks with background renewal on one client, held
//! for a while; how many were lost, and how much CPU the renewal took.
//!
//! `cargo run --release --example bench_renew -- --url URL [--locks 10000]
//!  [--ttl-ms 3000] [--seconds 30] [--json FILE] [--round R]`
//!
//! The process does nothing but renew during the window, so its CPU time
//! (getrusage) over the window is the renewal's cost, given as % of one core.

use std::io::Write;
use std::time::{Duration, Instant};

use redislock::{AcquireOptions, Client, Lock};

fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    match args.iter().position(|a| a == name) {
        Some(i) => args[i + 1].parse().unwrap_or_else(|_| panic!("bad {name}")),
        None => default,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url: String = arg(&args, "--url", String::new());
    assert!(!url.is_empty(), "--url URL is required");
    let n: usize = arg(&args, "--locks", 10_000);
    let ttl = Duration::from_millis(arg(&args, "--ttl-ms", 3000));
    let seconds: f64 = arg(&args, "--seconds", 30.0);
    let json: String = arg(&args, "--json", String::new());
    let round: u32 = arg(&args, "--round", 0);

    let client = Client::open(&url).unwrap();
    let t = Instant::now();
    let locks: Vec<Lock> = (0..n)
        .map(|i| {
            client
                .acquire_with(
                    format!("bench:renew:{i}"),
                    AcquireOptions::new(ttl).auto_renew(true),
                )
                .unwrap()
        })
        .collect();
    let acquire_s = t.elapsed().as_secs_f64();

    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;

    let lost = locks.iter().filter(|l| l.is_lost()).count();
    // Ask Redis, not the library: every key must still hold its token.
    let mut raw = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut not_owned = 0;
    for chunk in locks.chunks(1000) {
        let keys: Vec<&[u8]> = chunk.iter().map(|l| l.key()).collect();
        let vals: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&keys).query(&mut raw).unwrap();
        not_owned += chunk
            .iter()
            .zip(vals)
            .filter(|(l, v)| v.as_deref() != Some(l.token()))
            .count();
    }
    for l in locks {
        let _ = l.release();
    }
    let rec = format!(
        "{{\"bench\": \"renewal\", \"impl\": \"rust-redislock\", \"round\": {round}, \"locks\": {n}, \
         \"ttl_ms\": {}, \"seconds\": {wall:.1}, \"lost\": {lost}, \"not_owned_at_end\": {not_owned}, \
         \"renew_cpu_pct\": {:.2}, \"acquire_s\": {acquire_s:.2}}}",
        ttl.as_millis(),
        100.0 * cpu / wall
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
}
