//! The work of bench/capi/bench_capi.c through Cairn's Rust API, so that the harness's `capi`
//! suite (bench/src/capi.rs) can set the C layer against the engine it wraps.
//!
//! Usage: bench_rust DIR N [RUNS] (N a power of two, RUNS rounds, default 3). Prints
//! "<phase> <CPU ns per operation>", the best round. The phases are functions of their own,
//! never inlined, named as in the C program, so that callgrind counts each one's instructions.

use cairn::{Database, Durability, Env, PutFlags, RoTxn};

/// CPU time of the process in ns, as bench_capi.c measures it.
fn now() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: docs/safety.md §7: clock_gettime writes the timespec it is given.
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

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const VAL: [u8; 100] = [b'v'; 100];

/// n random puts, 1000 per write transaction.
#[inline(never)]
fn phase_put_random(env: &Env, db: Database, n: u64) -> Res<()> {
    let mut i = 0;
    while i < n {
        let mut w = env.write_txn()?;
        for j in i..(i + 1000).min(n) {
            w.put(db, &key_of(perm(j, n)), &VAL, PutFlags::empty())?;
        }
        w.commit()?;
        i += 1000;
    }
    Ok(())
}

/// n random gets in one read transaction.
#[inline(never)]
fn phase_get_random(r: &RoTxn<'_>, db: Database, n: u64) -> Res<u64> {
    let mut sum = 0;
    for j in 0..n {
        let v = r.get(db, &key_of(perm(j * 7 + 3, n)))?.ok_or("missing")?;
        sum += v.len() as u64;
    }
    Ok(sum)
}

/// A cursor over every pair, forwards or backwards.
#[inline(never)]
fn phase_scan(r: &RoTxn<'_>, db: Database, forward: bool) -> Res<u64> {
    let mut c = r.cursor(db)?;
    let mut seen = 0u64;
    loop {
        let e = if forward { c.next()? } else { c.prev()? };
        let Some((_, v)) = e else { break };
        seen += 1 + u64::from(v[0] == 0);
    }
    Ok(seen)
}

/// n random exact seeks through one cursor.
#[inline(never)]
fn phase_cursor_seek(r: &RoTxn<'_>, db: Database, n: u64) -> Res<u64> {
    let mut c = r.cursor(db)?;
    let mut sum = 0;
    for j in 0..n {
        let (_, v) = c.set(&key_of(perm(j * 3 + 2, n)))?.ok_or("missing")?;
        sum += v.len() as u64;
    }
    Ok(sum)
}

/// m short read transactions of one get each.
#[inline(never)]
fn phase_read_txn_get(env: &Env, db: Database, m: u64, n: u64) -> Res<u64> {
    let mut sum = 0;
    for j in 0..m {
        let r = env.read_txn()?;
        let v = r.get(db, &key_of(perm(j * 5 + 1, n)))?.ok_or("missing")?;
        sum += v.len() as u64;
    }
    Ok(sum)
}

/// Opens as the C layer does for MDB_NOSYNC with a 4 GiB mapsize: 1 TiB of address space
/// reserved, less where that is limited (valgrind, ulimit -v).
fn open(dir: &std::path::Path) -> Res<Env> {
    let mut reserve = 1u64 << 40;
    loop {
        let r = Env::options()
            .durability(Durability::Lazy)
            .sync_every_bytes(None)
            .max_size(Some(4 << 30))
            .map_reserve(reserve)
            .open(dir);
        match r {
            Err(cairn::Error::Io { .. }) if reserve > 4 << 30 => {
                reserve = (reserve / 8).max(4 << 30)
            }
            r => return Ok(r?),
        }
    }
}

/// Marks the end of the last phase for a profiler (callgrind --dump-before='*phase_*').
#[inline(never)]
fn phase_done() {
    std::hint::black_box(());
}

const NAMES: [&str; 6] = [
    "put_random",
    "get_random",
    "scan",
    "scan_reverse",
    "cursor_seek",
    "read_txn_get",
];

fn main() -> Res<()> {
    let usage = "usage: bench_rust DIR N(power of two) [RUNS]";
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).ok_or(usage)?);
    let n: u64 = args.get(2).ok_or(usage)?.parse()?;
    let runs: u32 = args.get(3).map_or(Ok(3), |s| s.parse())?;
    if n < 4 || !n.is_power_of_two() || runs == 0 {
        return Err(usage.into());
    }
    let mut best = [f64::MAX; 6];
    for _ in 0..runs {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let env = open(&dir)?;
        let db = env.main_db();
        let m = n / 4;
        let ops = [n, n, n, n, n, m];
        let mut t = [0f64; 7];
        let mut sum = 0;
        t[0] = now();
        phase_put_random(&env, db, n)?;
        t[1] = now();
        let r = env.read_txn()?;
        sum += phase_get_random(&r, db, n)?;
        t[2] = now();
        let seen = phase_scan(&r, db, true)?;
        t[3] = now();
        let back = phase_scan(&r, db, false)?;
        t[4] = now();
        sum += phase_cursor_seek(&r, db, n)?;
        drop(r);
        t[5] = now();
        sum += phase_read_txn_get(&env, db, m, n)?;
        t[6] = now();
        phase_done();
        if seen != n || back != n || sum != (2 * n + m) * VAL.len() as u64 {
            return Err(format!("wrong figures: {seen} {back} pairs scanned of {n}").into());
        }
        for (i, b) in best.iter_mut().enumerate() {
            *b = b.min((t[i + 1] - t[i]) / ops[i] as f64);
        }
    }
    for (name, b) in NAMES.iter().zip(best) {
        println!("{name} {b:.1}");
    }
    Ok(())
}
