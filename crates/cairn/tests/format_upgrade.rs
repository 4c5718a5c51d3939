//! Files of format version 3 (free tree keyed by run) open and read as they are, and their
//! first commit writes version 4 (free tree keyed by span of pages, docs/design.md, "Free
//! tree" and "Version history") with every free page still accounted for.
//!
//! The fixture `tests/fixtures/v3-free-tree.cairn` was written by Cairn at format version 3:
//! keys `k00000`..`k00399` with 64-byte values (`{i * 7919:064}`) put 50 a transaction,
//! then the multiples of 3 deleted 100 keys' worth a transaction, which left six runs in its
//! free tree; the file is cut to its 17 pages in use.

use cairn::{Database, Env, PutFlags, RoTxn};
use std::collections::BTreeMap;
use std::path::Path;

const FIXTURE: &str = "tests/fixtures/v3-free-tree.cairn";

fn value(i: u32) -> Vec<u8> {
    format!("{:064}", u64::from(i) * 7919).into_bytes()
}

/// What the fixture holds.
fn expected() -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..400u32)
        .filter(|i| i % 3 != 0)
        .map(|i| (format!("k{i:05}").into_bytes(), value(i)))
        .collect()
}

fn contents(r: &RoTxn<'_>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = r.open_db(None).unwrap();
    r.iter(db)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

fn assert_checked(env: &Env) {
    let r = env.read_txn().unwrap();
    let report = r.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// (txnid, format version) of each meta slot in the file's first sector-sized slots.
fn meta_versions(dir: &Path) -> Vec<(u64, u32)> {
    let b = std::fs::read(dir.join("data.cairn")).unwrap();
    (0..3)
        .map(|s| {
            let m = &b[s * 512..(s + 1) * 512];
            let version = u32::from_le_bytes(m[8..12].try_into().unwrap());
            let txnid = u64::from_le_bytes(m[16..24].try_into().unwrap());
            (txnid, version)
        })
        .collect()
}

fn newest_version(dir: &Path) -> u32 {
    meta_versions(dir).into_iter().max().unwrap().1
}

#[test]
fn a_version_3_file_reads_and_its_first_commit_writes_version_4() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    std::fs::copy(fixture, dir.path().join("data.cairn")).unwrap();
    assert_eq!(newest_version(dir.path()), 3);

    let env = Env::open(dir.path()).unwrap();
    let want = expected();
    {
        let r = env.read_txn().unwrap();
        assert_eq!(contents(&r), want);
        let runs = r.free_runs().unwrap();
        assert_eq!(runs.len(), 6, "{runs:?}");
    }
    assert_checked(&env);
    // Opening and reading change nothing in the file.
    assert_eq!(newest_version(dir.path()), 3);

    // The first commit: the old tree's pages are freed, the set written anew by span.
    let mut w = env.write_txn().unwrap();
    let db: Database = w.open_db(None).unwrap();
    w.put(db, b"k00000", &value(0), PutFlags::empty()).unwrap();
    w.commit().unwrap();
    assert_eq!(newest_version(dir.path()), 4);
    assert_checked(&env);
    let mut want = want;
    want.insert(b"k00000".to_vec(), value(0));
    assert_eq!(contents(&env.read_txn().unwrap()), want);

    // More commits on the new form, then a reopen: still whole.
    for i in (0..400u32).filter(|i| i % 5 == 0) {
        let mut w = env.write_txn().unwrap();
        let db = w.open_db(None).unwrap();
        let k = format!("k{i:05}").into_bytes();
        if w.delete(db, &k).unwrap() {
            want.remove(&k);
        }
        w.commit().unwrap();
    }
    assert_checked(&env);
    drop(env);
    let env = Env::open(dir.path()).unwrap();
    assert_checked(&env);
    assert_eq!(contents(&env.read_txn().unwrap()), want);
    let mut w = env.write_txn().unwrap();
    let db = w.open_db(None).unwrap();
    for i in 400..2_000u32 {
        w.put(
            db,
            format!("k{i:05}").as_bytes(),
            &value(i),
            PutFlags::empty(),
        )
        .unwrap();
        want.insert(format!("k{i:05}").into_bytes(), value(i));
    }
    w.commit().unwrap();
    assert_checked(&env);
    assert_eq!(contents(&env.read_txn().unwrap()), want);
    assert!(meta_versions(dir.path()).iter().all(|&(_, v)| v == 4));
}

#[test]
fn an_aborted_first_commit_leaves_version_3() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    std::fs::copy(fixture, dir.path().join("data.cairn")).unwrap();
    let env = Env::open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let db = w.open_db(None).unwrap();
    w.put(db, b"x", b"y", PutFlags::empty()).unwrap();
    w.abort();
    assert_eq!(newest_version(dir.path()), 3);
    assert_checked(&env);
    // The next commit still upgrades, and nothing of the abort shows.
    let mut w = env.write_txn().unwrap();
    let db = w.open_db(None).unwrap();
    w.put(db, b"k00003", &value(3), PutFlags::empty()).unwrap();
    w.commit().unwrap();
    assert_eq!(newest_version(dir.path()), 4);
    assert_checked(&env);
    let mut want = expected();
    want.insert(b"k00003".to_vec(), value(3));
    assert_eq!(contents(&env.read_txn().unwrap()), want);
}
