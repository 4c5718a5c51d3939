//! A writer taking over from another handle's writer (another process, or another handle in
//! this process: both have their own writer state) must keep the pages that live readers of
//! other handles still see. Regression: reloading the free tree released every pending run.
use cairn::{Env, PutFlags};

#[test]
fn a_reader_of_one_handle_keeps_its_pages_through_another_handles_writes() {
    let dir = tempfile::tempdir().unwrap();
    let a = Env::open(dir.path()).unwrap();
    let b = Env::open(dir.path()).unwrap();
    let db = a.main_db();
    let val = vec![1u8; 300];
    let mut w = a.write_txn().unwrap();
    for i in 0u32..2000 {
        w.put(db, &i.to_be_bytes(), &val, PutFlags::empty())
            .unwrap();
    }
    w.commit().unwrap();
    // b's writer state is now loaded and current.
    let mut w = b.write_txn().unwrap();
    w.put(b.main_db(), b"b", b"1", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    // A reader of b holds this snapshot while a rewrites every page...
    let r = b.read_txn().unwrap();
    let seen = r.id();
    let mut w = a.write_txn().unwrap();
    for i in 0u32..2000 {
        w.put(db, &i.to_be_bytes(), &[2u8; 300], PutFlags::empty())
            .unwrap();
    }
    w.commit().unwrap();
    // ... and b's writer, taking over, must not reuse the pages a's commit freed.
    for round in 0u8..3 {
        let mut w = b.write_txn().unwrap();
        for i in 0u32..2000 {
            w.put(
                b.main_db(),
                &i.to_be_bytes(),
                &[3 + round; 300],
                PutFlags::empty(),
            )
            .unwrap();
        }
        w.commit().unwrap();
    }
    assert_eq!(r.id(), seen);
    for i in 0u32..2000 {
        assert_eq!(
            r.get(b.main_db(), &i.to_be_bytes()).unwrap(),
            Some(&val[..]),
            "key {i} changed under a live snapshot"
        );
    }
    assert!(r.check().unwrap().problems.is_empty());
}
