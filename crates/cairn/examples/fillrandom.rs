//! Profiling aid: db_bench's fillrandom (16-byte keys, 100-byte values, 1,000 puts per
//! transaction by default) against Cairn alone. Not a benchmark (the harness in bench/ is); run it under
//! `perf record` or callgrind to see where a write transaction spends its time.
//!
//!   cargo run --release -p cairn --example fillrandom -- [records] [durable|lazy|logged] [sync|nosync|<MiB>|<ms>ms] [puts per txn] [delete]
//!
//! `delete` then deletes every key in another random order, as many a transaction (db_bench's
//! deleterandom), timed apart in `work_delete` (callgrind: `--toggle-collect='*work_delete*'`).

use cairn::{Durability, Env, PutFlags};
use std::time::Instant;

// The fixed-seed random order of the profiling examples (the rest is unused here).
#[allow(dead_code)]
#[path = "support/pairs.rs"]
mod pairs;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let durability = match args.next().as_deref() {
        Some("durable") => Durability::Durable,
        Some("logged") => Durability::Logged,
        _ => Durability::Lazy,
    };
    // The lazy mode's automatic flush: "nosync" (none), "<MiB>" written or "<ms>ms" elapsed
    // since the last flush; the defaults otherwise.
    let (mut sync_bytes, mut sync_period) = (None, Some(cairn::DEFAULT_SYNC_PERIOD));
    match args.next().as_deref() {
        Some("nosync") => sync_period = None,
        Some(a) if a.ends_with("ms") => {
            sync_period = Some(std::time::Duration::from_millis(
                a.trim_end_matches("ms").parse()?,
            ));
        }
        Some(a) if a.parse::<u64>().is_ok() => {
            (sync_bytes, sync_period) = (Some(a.parse::<u64>()? << 20), None);
        }
        _ => {}
    }
    let batch: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let dir = tempfile::tempdir()?;
    let env = Env::options()
        .durability(durability)
        .sync_every_bytes(sync_bytes)
        .sync_every(sync_period)
        .map_reserve(1 << 32)
        .open(dir.path())?;
    let db = env.main_db();
    let value = [0x5au8; 100];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let mut w = env.write_txn()?;
        for _ in 0..batch.min(n - done) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.put(
                db,
                format!("{:016}", x % n).as_bytes(),
                &value,
                PutFlags::empty(),
            )?;
        }
        w.commit()?;
        done += batch;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "fillrandom {n}: {:.0} puts/s ({secs:.2} s)",
        n as f64 / secs
    );
    if args.next().as_deref() == Some("delete") {
        let t = Instant::now();
        let deleted = work_delete(&env, db, n, batch)?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "deleterandom {n}: {:.0} deletes/s ({secs:.2} s, {deleted} found)",
            n as f64 / secs
        );
    }
    Ok(())
}

/// Deletes keys 0..n in a random order (each once), `batch` a transaction; how many existed.
#[inline(never)]
fn work_delete(
    env: &Env,
    db: cairn::Database,
    n: u64,
    batch: u64,
) -> Result<u64, Box<dyn std::error::Error>> {
    let order = pairs::permutation(n, 0x2545_F491_4F6C_DD1D);
    let mut found = 0;
    for chunk in order.chunks(batch as usize) {
        let mut w = env.write_txn()?;
        for &k in chunk {
            found += u64::from(w.delete(db, format!("{k:016}").as_bytes())?);
        }
        w.commit()?;
    }
    Ok(found)
}
