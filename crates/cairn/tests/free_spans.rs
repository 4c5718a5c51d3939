//! The free tree's span records (docs/design.md, "Free tree") when a span is fragmented
//! enough that its record no longer fits in a leaf: the record becomes an overflow value, the
//! commits that rewrite it settle, and the checker accounts for every page throughout.
//!
//! How the fragmentation is made: a reader pinned before the deletes keeps every page they
//! free pending, and each delete commits alone, so neighbouring freed pages carry different
//! freeing transactions and never merge: hundreds of single-page runs. The file stays under
//! 1,024 pages, one span, so the big record's overflow pages always lie in its own span,
//! whether taken from the free set or, after a commit's eighth round, from the end of the
//! file. Rewritten by freeing and taking pages, such a record changed its own span again at
//! every round and the commit failed ("free tree did not converge", which this test caught
//! with the in-place rewrite of `btree::insert` removed); a 1M-key random load met the same
//! with the last span of its file.
use cairn::{Env, PutFlags};

/// Values just past what a leaf holds inline, so that each key has its own overflow page.
const VALUE: usize = 2_100;
const KEYS: u32 = 760;
const HOLE: u32 = 20;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn assert_checked(env: &Env) {
    let r = env.read_txn().unwrap();
    let report = r.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

#[test]
fn fragmented_spans_become_overflow_records_and_commits_settle() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let db = w.open_db(None).unwrap();
    for i in 0..KEYS {
        w.put(db, &key(i), &vec![i as u8; VALUE], PutFlags::empty())
            .unwrap();
    }
    w.commit().unwrap();
    // A hole among the first pages, reusable before the reader is pinned: the deletes below
    // take their new pages from it (lowest first) and give them back, so the span holds
    // reusable pages next to its pending ones.
    let mut w = env.write_txn().unwrap();
    for i in 0..HOLE {
        assert!(w.delete(db, &key(i)).unwrap());
    }
    w.commit().unwrap();
    let mut w = env.write_txn().unwrap();
    w.put(db, b"a", b"b", PutFlags::empty()).unwrap();
    w.commit().unwrap();

    let pinned = env.read_txn().unwrap();
    let mut big = 0;
    for i in (HOLE..KEYS).step_by(2) {
        let mut w = env.write_txn().unwrap();
        assert!(w.delete(db, &key(i)).unwrap());
        w.commit().unwrap();
        let stat = env.read_txn().unwrap().free_tree_stat();
        big = big.max(stat.overflow_pages);
        if i % 100 == 0 {
            assert_checked(&env);
        }
    }
    assert_checked(&env);
    assert!(
        big > 0,
        "no span record grew past a leaf: the test no longer covers overflow records"
    );
    // The pinned snapshot still reads what it saw.
    assert_eq!(
        pinned.get(db, &key(HOLE)).unwrap().map(<[u8]>::len),
        Some(VALUE)
    );
    drop(pinned);

    // Released: the runs become reusable and merge, records shrink back into leaves, and the
    // space is used again.
    for round in 0..3u32 {
        let mut w = env.write_txn().unwrap();
        for i in (0..KEYS).filter(|&i| i < HOLE || i % 2 == 0) {
            w.put(db, &key(i), &vec![round as u8; VALUE], PutFlags::empty())
                .unwrap();
        }
        w.commit().unwrap();
        assert_checked(&env);
    }
    let r = env.read_txn().unwrap();
    for i in 0..KEYS {
        let v = r.get(db, &key(i)).unwrap().unwrap();
        let want = if i < HOLE || i % 2 == 0 { 2 } else { i as u8 };
        assert!(v.len() == VALUE && v.iter().all(|&b| b == want), "key {i}");
    }
    drop(r);
    drop(env);
    let env = Env::open(dir.path()).unwrap();
    assert_checked(&env);
}
