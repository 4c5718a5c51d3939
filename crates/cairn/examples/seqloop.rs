//! Profiling aid: db_bench's fillseq (sorted 16-byte `%016d` keys, 100-byte values, appended
//! 1,000 a transaction) and readseq (a forward iteration over every pair, touching each key
//! and value) against Cairn alone. Not a benchmark (the harness in bench/ is); run it under
//! callgrind or `perf record` to see where an append and a cursor step spend their work.
//!
//!   cargo run --release -p cairn --example seqloop -- [records] [fill|scan] [durable|lazy] [passes]
//!
//! `fill` times the sorted load alone; `scan` loads the keys in a random order (as the
//! harness's readseq does, after fillrandom) and times `passes` forward iterations.

use cairn::{Durability, Env, PutFlags};
use std::time::Instant;

fn key(i: u64) -> [u8; 16] {
    // The harness's `%016d` keys, without format!'s cost in the profile.
    let mut k = [b'0'; 16];
    let mut x = i;
    for b in k.iter_mut().rev() {
        *b = b'0' + (x % 10) as u8;
        x /= 10;
    }
    k
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let scan = args.next().as_deref() == Some("scan");
    let durability = match args.next().as_deref() {
        Some("durable") => Durability::Durable,
        _ => Durability::Lazy,
    };
    let passes: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let dir = tempfile::tempdir()?;
    let env = Env::options()
        .durability(durability)
        .map_reserve(1 << 32)
        .open(dir.path())?;
    let db = env.main_db();
    let value = [0x5au8; 100];
    // A sorted order for fill, a random permutation (xorshift-driven Fisher-Yates) for scan.
    let mut order: Vec<u64> = (0..n).collect();
    if scan {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    let flags = if scan {
        PutFlags::empty()
    } else {
        PutFlags::APPEND
    };
    let t = Instant::now();
    for chunk in order.chunks(1000) {
        let mut w = env.write_txn()?;
        for &i in chunk {
            w.put(db, &key(i), &value, flags)?;
        }
        w.commit()?;
    }
    let load = t.elapsed();
    println!(
        "load: {n} puts in {:.1} ms, {:.2} M/s",
        load.as_secs_f64() * 1e3,
        n as f64 / load.as_secs_f64() / 1e6
    );
    if !scan {
        return Ok(());
    }
    for _ in 0..passes {
        let t = Instant::now();
        let r = env.read_txn()?;
        let (mut count, mut sum) = (0u64, 0u64);
        for e in r.iter(db)? {
            let (k, v) = e?;
            // Touch the first and last byte of each, as the harness does.
            sum += u64::from(k[0]) + u64::from(k[k.len() - 1]);
            sum += u64::from(v[0]) + u64::from(v[v.len() - 1]);
            count += 1;
        }
        let el = t.elapsed();
        assert_eq!(count, n, "scan found {count} of {n}");
        println!(
            "scan: {count} pairs in {:.2} ms, {:.2} M/s (sum {sum})",
            el.as_secs_f64() * 1e3,
            count as f64 / el.as_secs_f64() / 1e6
        );
    }
    Ok(())
}
