//! Profiling aid for DUPFIXED sorted duplicates (packed sub-tree leaves): N 8-byte values over
//! 1,000 keys (16-byte decimal keys; each value is its pair number, big-endian) inserted in
//! random order, 10,000 per write transaction; every key's values iterated one by one, then
//! chunk by chunk (GET_MULTIPLE / NEXT_MULTIPLE; one cursor, then a cursor per key as the
//! benchmark harness does: `work_multiple_fresh`); half of the pairs deleted one by one in
//! random order, 10,000 per transaction. Prints each phase's time, the database's page counts
//! and the size of a compacted copy after the inserts and after the deletes. Each phase runs
//! in a function named `work_*`, so that callgrind can count one alone:
//!
//!     valgrind --tool=callgrind --toggle-collect='dupfixedloop::work_insert' \
//!         target/release/examples/dupfixedloop 1000000 [durable|lazy]
use cairn::{Database, DbFlags, Durability, Env, PutFlags};

#[path = "support/pairs.rs"]
mod pairs;
use pairs::{batches, dec, permutation, KEYS};

#[inline(never)]
fn work_insert(env: &Env, db: Database, order: &[u64]) -> cairn::Result<()> {
    batches(env, order, |w, i| {
        w.put(db, &dec(i % KEYS), &i.to_be_bytes(), PutFlags::empty())
    })
}

#[inline(never)]
fn work_iterate(env: &Env, db: Database) -> cairn::Result<u64> {
    let r = env.read_txn()?;
    let mut n = 0;
    for k in 0..KEYS {
        for v in r.iter_dup(db, &dec(k))? {
            n += v?.len() as u64 / 8;
        }
    }
    Ok(n)
}

#[inline(never)]
fn work_multiple(env: &Env, db: Database) -> cairn::Result<u64> {
    let r = env.read_txn()?;
    let mut c = r.cursor(db)?;
    let mut n = 0;
    for k in 0..KEYS {
        if c.set(&dec(k))?.is_none() {
            continue;
        }
        if let Some((_, vals)) = c.get_multiple()? {
            n += vals.len() as u64 / 8;
        }
        while let Some((_, vals)) = c.next_multiple()? {
            n += vals.len() as u64 / 8;
        }
    }
    Ok(n)
}

/// `work_multiple` as the benchmark harness runs it: a new cursor for each key.
#[inline(never)]
fn work_multiple_fresh(env: &Env, db: Database) -> cairn::Result<u64> {
    let r = env.read_txn()?;
    let mut n = 0;
    for k in 0..KEYS {
        let mut c = r.cursor(db)?;
        if c.set(&dec(k))?.is_none() {
            continue;
        }
        let mut chunk = c.get_multiple()?;
        while let Some((_, vals)) = chunk {
            n += vals.len() as u64 / 8;
            chunk = c.next_multiple()?;
        }
    }
    Ok(n)
}

#[inline(never)]
fn work_delete(env: &Env, db: Database, order: &[u64]) -> cairn::Result<()> {
    batches(env, order, |w, i| {
        w.delete_pair(db, &dec(i % KEYS), &i.to_be_bytes())
            .map(|_| ())
    })
}

/// Page counts of the database and the size of a compacted copy of the environment.
fn sizes(env: &Env, db: Database, dir: &std::path::Path, tag: &str) -> cairn::Result<String> {
    let st = env.read_txn()?.stat(db)?;
    let copy = dir.join(format!("copy-{tag}"));
    env.copy_to(&copy, true)?;
    let len = std::fs::metadata(&copy).map_or(0, |m| m.len());
    std::fs::remove_file(&copy).ok();
    Ok(format!(
        "{tag}: {} pairs, {} leaf + {} branch pages, compacted file {:.2} MB",
        st.entries,
        st.leaf_pages,
        st.branch_pages,
        len as f64 / 1e6
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(1_000_000, |s| s.parse().unwrap());
    let durability = match args.next().as_deref() {
        Some("lazy") => Durability::Lazy,
        _ => Durability::Durable,
    };
    let dir = tempfile::tempdir()?;
    let copies = tempfile::tempdir()?;
    let env = Env::options()
        .map_reserve(1 << 32)
        .durability(durability)
        .open(dir.path())?;
    let mut w = env.write_txn()?;
    let db = w.create_db(
        None,
        DbFlags::DUP_SORT | DbFlags::DUP_FIXED | DbFlags::CREATE,
    )?;
    w.commit()?;
    let order = permutation(n, 0x9E37_79B9_7F4A_7C15);
    let t = std::time::Instant::now();
    work_insert(&env, db, &order)?;
    env.sync()?;
    let insert = t.elapsed();
    let after_insert = sizes(&env, db, copies.path(), "inserted")?;
    let t = std::time::Instant::now();
    let seen = work_iterate(&env, db)?;
    let iterate = t.elapsed();
    assert_eq!(seen, n);
    let t = std::time::Instant::now();
    let chunked = work_multiple(&env, db)?;
    let multiple = t.elapsed();
    assert_eq!(chunked, n);
    assert_eq!(work_multiple_fresh(&env, db)?, n);
    let del = permutation(n, 0x2545_F491_4F6C_DD1D);
    let t = std::time::Instant::now();
    work_delete(&env, db, &del[..(n / 2) as usize])?;
    env.sync()?;
    let delete = t.elapsed();
    let after_delete = sizes(&env, db, copies.path(), "half deleted")?;
    eprintln!("insert {insert:?}, iterate {iterate:?}, multiple {multiple:?}, delete {delete:?}");
    println!("{after_insert}\n{after_delete}");
    env.read_txn()?.check()?.into_result()?;
    Ok(())
}
