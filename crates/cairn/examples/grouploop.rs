//! Profiling aid: T threads each committing one-put grouped writes (`Env::write_grouped`) for
//! S seconds, in logged, durable or lazy mode; prints commits/s and commits per group. Run
//! under perf to see where a grouped commit's CPU goes:
//! `cargo run --release -p cairn --example grouploop -- 64 5 logged [dir] [plain]`; with
//! `plain` each write is a plain write transaction instead (the comparison at one thread).
use cairn::{Durability, Env, PutFlags};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().map_or(64, |s| s.parse().unwrap());
    let secs: f64 = args.next().map_or(5.0, |s| s.parse().unwrap());
    let mode = match args.next().as_deref() {
        None | Some("logged") => Durability::Logged,
        Some("durable") => Durability::Durable,
        Some("lazy") => Durability::Lazy,
        Some(m) => return Err(format!("mode {m}: logged, durable or lazy").into()),
    };
    let tmp = tempfile::tempdir_in(args.next().unwrap_or_else(|| "target".into()))?;
    let plain = args.next().as_deref() == Some("plain");
    let env = Env::options()
        .durability(mode)
        .map_reserve(1 << 32)
        .open(tmp.path())?;
    let db = env.main_db();
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads as u64 {
            let (env, stop, done) = (&env, &stop, &done);
            s.spawn(move || {
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = x.to_be_bytes();
                    let put = |w: &mut cairn::RwTxn<'_>| {
                        w.put(db, &[k, k].concat(), &[7u8; 100], PutFlags::empty())
                    };
                    if plain {
                        let mut w = env.write_txn().unwrap();
                        put(&mut w).unwrap();
                        w.commit().unwrap();
                    } else {
                        env.write_grouped(put).unwrap();
                    }
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    let el = t0.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    let commits = env.read_txn()?.id();
    println!(
        "{threads} threads {mode:?}{}: {n} writes in {el:.2} s = {:.0}/s, {commits} commits ({:.1} writes a commit)",
        if plain { " plain" } else { " grouped" },
        n as f64 / el,
        n as f64 / commits.max(1) as f64
    );
    Ok(())
}
