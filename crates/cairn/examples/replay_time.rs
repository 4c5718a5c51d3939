//! Measures logged mode's recovery: how long the first open after a power loss takes when it
//! replays N puts from the commit log. The power loss is staged on a real file: the data file
//! is saved right after a flush, N logged commits follow (no flush between), the handle is
//! leaked (no closing flush), and the saved data file is put back: what a power loss that
//! took every unflushed page leaves. Not a benchmark of the harness; a figure for
//! docs/bench/causes.md.
//!
//!   cargo run --release -p cairn --example replay_time -- [puts] [puts per txn] [dir]

use cairn::{Durability, Env, PutFlags};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(400_000);
    let per: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let tmp = tempfile::tempdir_in(args.next().unwrap_or_else(|| ".".into()))?;
    let dir = tmp.path();
    let opts = || {
        Env::options()
            .durability(Durability::Logged)
            .sync_every(None)
            .log_size(256 << 20)
    };
    let env = opts().open(dir)?;
    let db = env.main_db();
    // A base of n keys, flushed: the state the power loss falls back to.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        format!("{:016}", x % (2 * n))
    };
    for _ in 0..n / per {
        let mut w = env.write_txn()?;
        for _ in 0..per {
            w.put(db, next().as_bytes(), &[1u8; 100], PutFlags::empty())?;
        }
        w.commit()?;
    }
    env.sync()?;
    let saved = std::fs::read(dir.join("data.cairn"))?;
    let t = Instant::now();
    for _ in 0..n / per {
        let mut w = env.write_txn()?;
        for _ in 0..per {
            w.put(db, next().as_bytes(), &[2u8; 100], PutFlags::empty())?;
        }
        w.commit()?;
    }
    let logged = t.elapsed();
    let want = env.read_txn()?.stat(db)?.entries;
    std::mem::forget(env);
    std::fs::write(dir.join("data.cairn"), &saved)?;
    std::fs::remove_file(dir.join("lock.cairn"))?;
    let log_bytes = std::fs::metadata(dir.join("data.cairn-log"))?.len();
    let t = Instant::now();
    let env = opts().open(dir)?;
    let replay = t.elapsed();
    let got = env.read_txn()?.stat(env.main_db())?.entries;
    assert_eq!(got, want, "replay lost entries");
    let t = Instant::now();
    drop(env);
    let env = opts().open(dir)?;
    let reopen = t.elapsed();
    drop(env);
    println!(
        "{n} puts in {} logged commits ({:.2} s); open after the loss replayed them in {:.1} ms \
         ({:.0} puts/s); a clean reopen after: {:.2} ms (log file {} MiB)",
        n / per,
        logged.as_secs_f64(),
        replay.as_secs_f64() * 1e3,
        n as f64 / replay.as_secs_f64(),
        reopen.as_secs_f64() * 1e3,
        log_bytes >> 20
    );
    Ok(())
}
