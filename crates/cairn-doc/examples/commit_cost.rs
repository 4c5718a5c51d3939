//! What one index adds to a durable commit of a few documents, apart from HTTP: the server's
//! write load (bench/serve/index_peers.py: 10,000 documents preloaded, then new documents
//! written a few per commit) replayed in process. For 0, 1 and 4 indexes (the load test's
//! paths), `COMMITS` commits of `BATCH` new documents each (the size of a group commit at
//! 2,000 writes/s), in durable or logged mode: the time per commit (p50, p99), the CPU per
//! write, and the bytes the process wrote per commit (`/proc/self/io`).
//!
//! `cargo run --release -p cairn-doc --example commit_cost [durable|logged] [COMMITS] [BATCH]`

use cairn::{Durability, Env};
use cairn_doc::{Collection, IndexSpec};
use serde_json::{json, Value};
use std::time::Instant;

const PRELOAD: usize = 10_000;
const PATHS: [&str; 4] = ["/radius", "/country_code", "/timestamp", "/position/lat"];

/// Document i of the load test (bench/serve/index_peers.py's `doc`).
fn doc(i: usize) -> Value {
    json!({
        "position": {"lat": 52.0 + (i * 31 % 1000) as f64 / 1000.0, "lon": 13.404954},
        "radius": i % 100,
        "cidr": "192.168.100.0/22",
        "country_code": format!("C{}", i % 50),
        "nearest_city": "Berlin",
        "timestamp": format!("2026-11-27T12:{:02}:{:02}.{i:07}Z", i / 60 % 60, i % 60),
        "software_source_version": "cairn-bench 0.1.0 (a1b2c3d)",
    })
}

/// Bytes this process has written (write and pwrite calls), from /proc/self/io.
fn written() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    io.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of this process.
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |p| p.1)
        .split_whitespace()
        .collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn put(
    c: &Collection,
    w: &mut cairn::RwTxn<'_>,
    i: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let d = doc(i);
    let text = serde_json::to_vec(&d)?;
    // Ids in time order, as POST draws them.
    c.put_text(w, &format!("{i:012}"), &d, &text, None)?;
    Ok(())
}

/// The measured commits: `commits` of `batch` new documents each; each one's time in ms.
#[inline(never)]
fn timed(
    env: &Env,
    c: &Collection,
    commits: usize,
    batch: usize,
) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    let mut times = Vec::with_capacity(commits);
    let mut next = PRELOAD;
    for _ in 0..commits {
        let t = Instant::now();
        let mut w = env.write_txn()?;
        for _ in 0..batch {
            put(c, &mut w, next)?;
            next += 1;
        }
        w.commit()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(times)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "durable".into());
    let commits: usize = args.next().map_or(Ok(4000), |s| s.parse())?;
    let batch: usize = args.next().map_or(Ok(4), |s| s.parse())?;
    // One index count only (for callgrind: `--toggle-collect='*timed*'`).
    let only: Option<usize> = args.next().map(|s| s.parse()).transpose()?;
    let durability = match mode.as_str() {
        "durable" => Durability::Durable,
        "logged" => Durability::Logged,
        m => return Err(format!("mode {m:?}: durable or logged").into()),
    };
    for k in [0usize, 1, 4] {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let dir = tempfile::tempdir_in(".")?;
        let env = Env::options()
            .durability(durability)
            .max_dbs(64)
            // Small enough for valgrind's address space.
            .map_reserve(8 << 30)
            .open(dir.path())?;
        let c = Collection::open(&env, "bench")?;
        let mut w = env.write_txn()?;
        for (n, p) in PATHS.iter().take(k).enumerate() {
            c.declare_index(&mut w, &format!("i{n}"), IndexSpec::new(p))?;
        }
        for i in 0..PRELOAD {
            put(&c, &mut w, i)?;
        }
        w.commit()?;
        let (b0, c0, t0) = (written(), cpu(), Instant::now());
        let mut times = timed(&env, &c, commits, batch)?;
        let wall = t0.elapsed().as_secs_f64();
        let (bytes, cpu_s) = (written() - b0, cpu() - c0);
        times.sort_by(f64::total_cmp);
        let q = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
        println!(
            "{mode} {k} indexes: commit p50 {:.3} ms p99 {:.3} ms p99.9 {:.3} ms; {:.1} us CPU a write; \
             {:.0} bytes written a commit; {:.0} commits/s",
            q(0.5),
            q(0.99),
            q(0.999),
            cpu_s * 1e6 / (commits * batch) as f64,
            bytes as f64 / commits as f64,
            commits as f64 / wall
        );
    }
    Ok(())
}
