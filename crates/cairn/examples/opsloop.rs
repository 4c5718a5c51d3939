//! Profiling aid for the per-operation fixed costs that the Python layer exposes
//! (crates/cairn-py/bench/bench_vs_lmdb.py): one workload per run, over N shuffled 16-byte
//! keys with 100-byte values, the work done in a function named `work_*` so that callgrind can
//! count it alone:
//!
//!     valgrind --tool=callgrind --toggle-collect='opsloop::work*' \
//!         target/release/examples/opsloop get 200000
//!
//! Workloads: get (read txn), rwget (write txn), put (random overwrites), scan (`iter`), next
//! (`Cursor::next`, as the Python iteration uses),
//! cput-sorted / cput-random (CursorMut::put of every key, sorted or shuffled, in one txn),
//! get1 / put1 (one key of a one-key database, N times).
use cairn::{Database, DbFlags, Env, PutFlags};

const VAL: [u8; 100] = [b'v'; 100];

fn keys(n: u64) -> Vec<Vec<u8>> {
    let mut ks: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("key-{i:012}").into_bytes())
        .collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..ks.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ks.swap(i, (x % (i as u64 + 1)) as usize);
    }
    ks
}

#[inline(never)]
fn work_get(env: &Env, db: Database, ks: &[Vec<u8>]) -> cairn::Result<usize> {
    let r = env.read_txn()?;
    let mut n = 0;
    for k in ks {
        n += r.get(db, k)?.map_or(0, <[u8]>::len);
    }
    Ok(n)
}

#[inline(never)]
fn work_rwget(env: &Env, db: Database, ks: &[Vec<u8>]) -> cairn::Result<usize> {
    let w = env.write_txn()?;
    let mut n = 0;
    for k in ks {
        n += w.get(db, k)?.map_or(0, <[u8]>::len);
    }
    Ok(n)
}

#[inline(never)]
fn work_put(env: &Env, db: Database, ks: &[Vec<u8>]) -> cairn::Result<usize> {
    let mut w = env.write_txn()?;
    for k in ks {
        w.put(db, k, &VAL, PutFlags::empty())?;
    }
    w.commit()?;
    Ok(ks.len())
}

#[inline(never)]
fn work_scan(env: &Env, db: Database) -> cairn::Result<usize> {
    let r = env.read_txn()?;
    let mut n = 0;
    for e in r.iter(db)? {
        n += e?.1.len();
    }
    Ok(n)
}

#[inline(never)]
fn work_next(env: &Env, db: Database) -> cairn::Result<usize> {
    let r = env.read_txn()?;
    let mut c = r.cursor(db)?;
    let mut n = 0;
    while let Some((_, v)) = c.next()? {
        n += v.len();
    }
    Ok(n)
}

#[inline(never)]
fn work_cput(env: &Env, db: Database, ks: &[Vec<u8>]) -> cairn::Result<usize> {
    let mut w = env.write_txn()?;
    {
        let mut c = w.cursor_mut(db)?;
        for k in ks {
            c.put(k, &VAL, PutFlags::empty())?;
        }
    }
    w.commit()?;
    Ok(ks.len())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "get".into());
    let n: u64 = args.next().map_or(200_000, |s| s.parse().unwrap());
    let dir = tempfile::tempdir()?;
    let env = Env::options()
        .map_reserve(1 << 32)
        .max_dbs(4)
        .open(dir.path())?;
    let ks = keys(n);
    let mut w = env.write_txn()?;
    let db = w.create_db(Some("data"), DbFlags::CREATE)?;
    let one = w.create_db(Some("one"), DbFlags::CREATE)?;
    for k in &ks {
        w.put(db, k, &VAL, PutFlags::empty())?;
    }
    w.put(one, b"key-000000000001", &VAL, PutFlags::empty())?;
    w.commit()?;
    let one_key = vec![b"key-000000000001".to_vec(); n as usize];
    let out = match mode.as_str() {
        "get" => work_get(&env, db, &ks)?,
        "rwget" => work_rwget(&env, db, &ks)?,
        "put" => work_put(&env, db, &ks)?,
        "scan" => work_scan(&env, db)?,
        "next" => work_next(&env, db)?,
        "cput-sorted" => {
            let mut sorted = ks.clone();
            sorted.sort();
            work_cput(&env, db, &sorted)?
        }
        "cput-random" => work_cput(&env, db, &ks)?,
        "get1" => work_get(&env, one, &one_key)?,
        "put1" => work_put(&env, one, &one_key)?,
        other => return Err(format!("unknown workload {other}").into()),
    };
    println!("{mode} {n}: {out}");
    Ok(())
}
