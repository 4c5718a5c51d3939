//! The LMDB reader (crates/cairn-lmdb) over arbitrary data files: open, list the named
//! databases and read every pair of every database (free, main, named). Never a panic, a hang
//! or an allocation beyond the input's size; errors are expected.
#![no_main]

use std::io::Write;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("data.mdb");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(data))
        .expect("write input");
    let Ok(env) = cairn_lmdb::LmdbEnv::open(dir.path(), Some(false)) else {
        return;
    };
    let mut p = env.pairs(&env.free_db());
    while let Ok(Some(_)) = p.next() {}
    let mut p = env.main_pairs();
    while let Ok(Some(_)) = p.next() {}
    if let Ok(named) = env.named_dbs() {
        for d in named {
            let mut p = env.pairs(&d.record);
            while let Ok(Some(_)) = p.next() {}
        }
    }
});
