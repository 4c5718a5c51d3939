//! Profiling aid: random point reads over a loaded database (run under callgrind or perf).
use cairn::{Env, PutFlags};
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(100_000, |s| s.parse().unwrap());
    let dir = tempfile::tempdir()?;
    let env = Env::options().map_reserve(1 << 30).open(dir.path())?;
    let db = env.main_db();
    let mut w = env.write_txn()?;
    for i in 0..n {
        w.put(
            db,
            format!("{i:016}").as_bytes(),
            &[7u8; 100],
            PutFlags::APPEND,
        )?;
    }
    w.commit()?;
    let r = env.read_txn()?;
    let mut x = 12345u64;
    let mut found = 0;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = format!("{:016}", x % n);
        found += r.get(db, k.as_bytes())?.is_some() as u64;
    }
    let mut c = 0;
    for e in r.iter(db)? {
        c += e?.1.len();
    }
    println!("{found} {c}");
    Ok(())
}
