//! Measuring aid: what a random fill's file is made of. Runs db_bench's fillrandom (every key of
//! `0..records` once, in a seeded random order, as `%016d`, 100-byte values, 1,000 puts a
//! transaction), then optionally an overwrite pass in another order, and prints at intervals:
//! the file's length, the pages in use (npages), the free set's reusable and pending (still
//! visible to a pinned snapshot) pages, and the main tree's leaf and branch pages with the
//! pairs a leaf holds on average. Not a benchmark (the harness in bench/ is).
//!
//!   cargo run --release -p cairn --example space -- [records] [lazy|durable] [overwrite] [every]
//!
//! `every`: print every this many transactions (default 100).

use cairn::{Durability, Env, PutFlags};
use std::time::Instant;

// The key order and the decimal keys of the profiling examples (the rest is unused here).
#[allow(dead_code)]
#[path = "support/pairs.rs"]
mod pairs;

fn report(env: &Env, phase: &str, txns: u64, t: &Instant) -> Result<(), cairn::Error> {
    let info = env.info()?;
    let ps = info.page_size as f64;
    let mib = |pages: u64| pages as f64 * ps / (1 << 20) as f64;
    let r = env.read_txn()?;
    let st = r.stat(env.main_db())?;
    let npages = info.last_pgno + 1;
    println!(
        "{phase} txn {txns:>5} {:>6.1}s  file {:>6.1} MiB  used {:>6.1}  reusable {:>6.1}  \
         pending {:>6.1}  leaves {:>6.1} branches {:>4.1}  entries {} ({:.0} pairs/leaf)",
        t.elapsed().as_secs_f64(),
        info.file_size as f64 / (1 << 20) as f64,
        mib(npages),
        mib(info.free_pages),
        mib(info.pending_pages),
        mib(st.leaf_pages),
        mib(st.branch_pages),
        st.entries,
        st.entries as f64 / st.leaf_pages.max(1) as f64,
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let n: u64 = arg(0).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let durability = if arg(1) == Some("durable") {
        Durability::Durable
    } else {
        Durability::Lazy
    };
    let overwrite = arg(2) == Some("overwrite");
    let every: u64 = arg(3).and_then(|a| a.parse().ok()).unwrap_or(100);
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let env = Env::options()
        .durability(durability)
        .map_reserve(1 << 34)
        .open(dir.path())?;
    let db = env.main_db();
    let value = [0x5au8; 100];
    let t = Instant::now();
    let passes: &[(&str, u64)] = if overwrite {
        &[("fill", 1), ("over", 2)]
    } else {
        &[("fill", 1)]
    };
    for &(phase, seed) in passes {
        let order = pairs::permutation(n, seed);
        for (txns, chunk) in order.chunks(1000).enumerate() {
            let mut w = env.write_txn()?;
            for &i in chunk {
                w.put(db, &pairs::dec(i), &value, PutFlags::empty())?;
            }
            w.commit()?;
            if (txns as u64 + 1).is_multiple_of(every) {
                report(&env, phase, txns as u64 + 1, &t)?;
            }
        }
        report(&env, phase, order.len().div_ceil(1000) as u64, &t)?;
    }
    env.sync()?;
    report(&env, "synced", 0, &t)?;
    Ok(())
}
