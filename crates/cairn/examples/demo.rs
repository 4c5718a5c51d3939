//! `make demo`: loads a million records, reads them back, and prints what it measured.

use cairn::{Durability, Env, PutFlags};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let env = Env::options()
        .durability(Durability::Durable)
        .open(dir.path())?;
    let db = env.main_db();
    let value = [0x5au8; 100];

    let t = Instant::now();
    let mut w = env.write_txn()?;
    for i in 0..n {
        w.put(db, format!("{i:016}").as_bytes(), &value, PutFlags::APPEND)?;
    }
    w.commit()?;
    let load = t.elapsed();

    let t = Instant::now();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let r = env.read_txn()?;
    let mut found = 0u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if r.get(db, format!("{:016}", x % n).as_bytes())?.is_some() {
            found += 1;
        }
    }
    let random = t.elapsed();

    let t = Instant::now();
    let scanned = r.iter(db)?.count() as u64;
    let scan = t.elapsed();
    let report = r.check()?;
    drop(r);
    let info = env.info()?;

    let rate = |d: std::time::Duration| n as f64 / d.as_secs_f64();
    println!("Cairn demo: {n} records, 16-byte keys, 100-byte values, one durable commit");
    println!(
        "  load (sorted, append mode) {:>8.0} ms  {:>12.0} records/s",
        load.as_secs_f64() * 1e3,
        rate(load)
    );
    println!(
        "  random reads               {:>8.0} ms  {:>12.0} reads/s  ({found} found)",
        random.as_secs_f64() * 1e3,
        rate(random)
    );
    println!(
        "  full scan                  {:>8.0} ms  {:>12.0} records/s ({scanned} seen)",
        scan.as_secs_f64() * 1e3,
        rate(scan)
    );
    println!(
        "  file size {:.1} MiB, checker: {} pages walked, {}",
        info.file_size as f64 / 1048576.0,
        report.tree_pages,
        if report.is_ok() {
            "no problem"
        } else {
            "PROBLEMS"
        }
    );
    if found != n || scanned != n || !report.is_ok() {
        return Err("demo found a problem".into());
    }
    Ok(())
}
