//! Profiling aid for sorted duplicates, the harness's `dups` suite in one process: N pairs
//! over 1,000 keys (16-byte decimal keys and values) inserted in random order, 10,000 per
//! write transaction; every key's values iterated; half of the pairs deleted one by one in
//! random order, 10,000 per transaction. Each phase runs in a function named `work_*`, so
//! that callgrind can count one alone:
//!
//!     valgrind --tool=callgrind --toggle-collect='dupsloop::work_insert' \
//!         target/release/examples/dupsloop 200000 [durable|lazy] [lazy flush: MiB | <n>ms]
use cairn::{Database, DbFlags, Durability, Env, PutFlags};

#[path = "support/pairs.rs"]
mod pairs;
use pairs::{batches, dec, permutation, KEYS};

#[inline(never)]
fn work_insert(env: &Env, db: Database, order: &[u64]) -> cairn::Result<()> {
    batches(env, order, |w, i| {
        w.put(db, &dec(i % KEYS), &dec(i), PutFlags::empty())
    })
}

#[inline(never)]
fn work_iterate(env: &Env, db: Database) -> cairn::Result<u64> {
    let r = env.read_txn()?;
    let mut n = 0;
    for k in 0..KEYS {
        for v in r.iter_dup(db, &dec(k))? {
            n += v?.len() as u64 / 16;
        }
    }
    Ok(n)
}

#[inline(never)]
fn work_delete(env: &Env, db: Database, order: &[u64]) -> cairn::Result<()> {
    batches(env, order, |w, i| {
        w.delete_pair(db, &dec(i % KEYS), &dec(i)).map(|_| ())
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(200_000, |s| s.parse().unwrap());
    let durability = match args.next().as_deref() {
        Some("lazy") => Durability::Lazy,
        _ => Durability::Durable,
    };
    // Optional: the lazy mode's automatic flush, "<MiB>" written or "<ms>ms" elapsed since
    // the last flush (0: none); the defaults otherwise.
    let dir = tempfile::tempdir()?;
    let mut opts = Env::options().map_reserve(1 << 32).durability(durability);
    if let Some(a) = args.next() {
        let (bytes, period) = match a.strip_suffix("ms") {
            Some(ms) => (None, Some(std::time::Duration::from_millis(ms.parse()?))),
            None => (Some(a.parse::<u64>()? << 20), None),
        };
        opts = opts
            .sync_every_bytes(bytes.filter(|&b| b > 0))
            .sync_every(period.filter(|p| !p.is_zero()));
    }
    let env = opts.open(dir.path())?;
    let mut w = env.write_txn()?;
    let db = w.create_db(None, DbFlags::DUP_SORT | DbFlags::CREATE)?;
    w.commit()?;
    let order = permutation(n, 0x9E37_79B9_7F4A_7C15);
    let t = std::time::Instant::now();
    work_insert(&env, db, &order)?;
    env.sync()?;
    let insert = t.elapsed();
    let st = env.read_txn()?.stat(db)?;
    eprintln!(
        "after the inserts: depth {}, {} branch and {} leaf pages (sub-trees included), file {:.1} MiB",
        st.depth,
        st.branch_pages,
        st.leaf_pages,
        std::fs::metadata(dir.path().join("data.cairn"))?.len() as f64 / (1 << 20) as f64
    );
    let t = std::time::Instant::now();
    let seen = work_iterate(&env, db)?;
    let iterate = t.elapsed();
    assert_eq!(seen, n);
    let del = permutation(n, 0x2545_F491_4F6C_DD1D);
    let t = std::time::Instant::now();
    work_delete(&env, db, &del[..(n / 2) as usize])?;
    env.sync()?;
    let delete = t.elapsed();
    eprintln!("insert {insert:?}, iterate {iterate:?}, delete {delete:?}");
    env.read_txn()?.check()?;
    println!("{n} pairs inserted, iterated, half deleted");
    Ok(())
}
