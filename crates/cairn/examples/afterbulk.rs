//! Profiling aid: redb's "individual writes" phase (durable single-insert transactions right
//! after a bulk load in one transaction), Cairn alone. Not a benchmark (bench/ is); run it under
//! `strace -f -T` or perf to see where a durable commit waits.
//!
//!   cargo run --release -p cairn --example afterbulk -- [records] [single inserts] [records per loading txn]

use cairn::{Env, PutFlags};
use std::time::Instant;

fn rand(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Bytes this process caused to be written to storage so far (Linux only).
fn write_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/io").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let singles: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    // Records per loading transaction (default: all in one, as redb's bulk load).
    let per_txn: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(n);
    let dir = tempfile::tempdir()?;
    let env = Env::options().map_reserve(1 << 34).open(dir.path())?;
    let db = env.main_db();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut key = [0u8; 24];
    let mut value = [0u8; 150];
    let fill = |b: &mut [u8], x: &mut u64| {
        for c in b.chunks_mut(8) {
            let r = rand(x).to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
    };
    let t = Instant::now();
    let mut w = env.write_txn()?;
    for i in 0..n {
        fill(&mut key, &mut x);
        fill(&mut value, &mut x);
        w.put(db, &key, &value, PutFlags::empty())?;
        if (i + 1) % per_txn == 0 {
            w.commit()?;
            w = env.write_txn()?;
        }
    }
    w.commit()?;
    let i = env.info()?;
    eprintln!(
        "bulk load: {:.2} s; last page {}, free {}, pending {}, file {} pages",
        t.elapsed().as_secs_f64(),
        i.last_pgno,
        i.free_pages,
        i.pending_pages,
        i.file_size / i.page_size as u64
    );
    if let Ok(s) = std::env::var("AFTERBULK_PAUSE_SECS") {
        std::thread::sleep(std::time::Duration::from_secs(s.parse()?));
    }
    let io_before = write_bytes();
    let mut lat = Vec::with_capacity(singles);
    for _ in 0..singles {
        fill(&mut key, &mut x);
        fill(&mut value, &mut x);
        let t = Instant::now();
        let mut w = env.write_txn()?;
        w.put(db, &key, &value, PutFlags::empty())?;
        w.commit()?;
        lat.push(t.elapsed().as_micros());
        if std::env::var_os("CAIRN_DEBUG_DIRTY").is_some() {
            eprintln!("  write_bytes now {:?}", write_bytes());
        }
    }
    if let (Some(a), Some(b)) = (io_before, write_bytes()) {
        eprintln!(
            "bytes sent to the disk per single insert (/proc/self/io): {}",
            (b - a) / singles as u64
        );
    }
    let i = env.info()?;
    eprintln!(
        "after the inserts: last page {}, free {}, pending {}, file {} pages",
        i.last_pgno,
        i.free_pages,
        i.pending_pages,
        i.file_size / i.page_size as u64
    );
    lat.sort_unstable();
    println!(
        "single durable inserts after a bulk load of {n}: p50 {} us, p99 {} us",
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100]
    );
    Ok(())
}
