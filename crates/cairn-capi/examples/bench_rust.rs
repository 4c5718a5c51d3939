//! The work of bench/capi/bench_capi.c through Cairn's Rust API, so that `make bench-capi`
//! can set the C layer against the engine it wraps. Usage: bench_rust DIR N (a power of two).
//! Prints "<phase> <CPU ns per operation>", best of 3 runs.

use cairn::{Durability, Env, PutFlags};

/// CPU time of the process in ns, as bench_capi.c measures it.
fn now() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

fn perm(i: u64, n: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & (n - 1)
}

/// 16 zero-padded decimal digits, written as bench_capi.c writes them.
fn key_of(mut x: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    for d in k.iter_mut().rev() {
        *d = b'0' + (x % 10) as u8;
        x /= 10;
    }
    k
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).ok_or("usage: bench_rust DIR N")?);
    let n: u64 = args.get(2).ok_or("usage: bench_rust DIR N")?.parse()?;
    if !n.is_power_of_two() {
        return Err("N must be a power of two".into());
    }
    let val = [b'v'; 100];
    let mut best = [f64::MAX; 4];
    for _ in 0..3 {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        // As the C layer opens for MDB_NOSYNC with a 4 GiB mapsize.
        let env = Env::options()
            .durability(Durability::Lazy)
            .sync_every_bytes(None)
            .max_size(Some(4 << 30))
            .map_reserve(1 << 40)
            .open(&dir)?;
        let db = env.main_db();
        let t0 = now();
        let mut i = 0;
        while i < n {
            let mut w = env.write_txn()?;
            for j in i..(i + 1000).min(n) {
                w.put(db, &key_of(perm(j, n)), &val, PutFlags::empty())?;
            }
            w.commit()?;
            i += 1000;
        }
        let t1 = now();
        let mut sum = 0u64;
        let r = env.read_txn()?;
        for j in 0..n {
            let v = r.get(db, &key_of(perm(j * 7 + 3, n)))?.ok_or("missing")?;
            sum += v.len() as u64;
        }
        let t2 = now();
        let mut c = r.cursor(db)?;
        let mut seen = 0u64;
        while let Some((_, v)) = c.next()? {
            seen += 1;
            sum += u64::from(v[0]);
        }
        drop(c);
        drop(r);
        let t3 = now();
        let m = n / 4;
        for j in 0..m {
            let r = env.read_txn()?;
            let v = r.get(db, &key_of(perm(j * 5 + 1, n)))?.ok_or("missing")?;
            sum += v.len() as u64;
        }
        let t4 = now();
        if seen != n || sum == 0 {
            return Err(format!("wrong count {seen}").into());
        }
        let ns = |a: f64, b: f64, ops: u64| (b - a) / ops as f64;
        let r = [ns(t0, t1, n), ns(t1, t2, n), ns(t2, t3, n), ns(t3, t4, m)];
        for (b, x) in best.iter_mut().zip(r) {
            *b = b.min(x);
        }
    }
    for (name, b) in ["put_random", "get_random", "scan", "read_txn_get"]
        .iter()
        .zip(best)
    {
        println!("{name} {b:.1}");
    }
    Ok(())
}
