//! The open path's shortcut (docs/design.md, "Opening: what it costs"): the commit the lock
//! file's last session left current is accepted without reading its pages; any other newest
//! commit is verified page by page as before, so a torn last commit is still found and the
//! open falls back to the one before it.

use cairn::format::{Meta, MetaSlot, META_SLOTS, SECTOR};
use cairn::{Durability, Env, PutFlags};
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The newest valid meta of the data file.
fn newest(data: &Path) -> Meta {
    let f = std::fs::File::open(data).unwrap();
    let mut head = vec![0u8; META_SLOTS * SECTOR];
    f.read_exact_at(&mut head, 0).unwrap();
    head.chunks(SECTOR)
        .filter_map(|s| match Meta::decode(s) {
            MetaSlot::Valid(m) => Some(m),
            _ => None,
        })
        .max_by_key(|m| m.txnid)
        .expect("a valid meta")
}

/// Flips a byte in the middle of the first page the newest commit wrote (its checksum then
/// fails): what a power loss that kept the meta but not that page leaves.
fn damage_last_commit(data: &Path) {
    let m = newest(data);
    assert_eq!(m.list_head, 0, "the commit lists its runs inline");
    let run = m.inline_runs.first().expect("the commit wrote pages");
    let ps = u64::from(m.page_size);
    let off = run.start * ps + ps / 2;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(data)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    f.write_all_at(&[b[0] ^ 0xff], off).unwrap();
}

fn put(env: &Env, k: &[u8]) {
    let mut w = env.write_txn().unwrap();
    w.put(env.main_db(), k, b"value", PutFlags::empty())
        .unwrap();
    w.commit().unwrap();
}

fn open(dir: &Path) -> Env {
    Env::options()
        .durability(Durability::Durable)
        .open(dir)
        .unwrap()
}

fn last_txnid(env: &Env) -> u64 {
    env.info().unwrap().last_txnid
}

fn has(env: &Env, k: &[u8]) -> bool {
    env.read_txn()
        .unwrap()
        .get(env.main_db(), k)
        .unwrap()
        .is_some()
}

#[test]
fn the_published_commit_is_not_reread_and_a_lock_file_without_it_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.cairn");
    let last = {
        let env = open(dir.path());
        put(&env, b"k1");
        put(&env, b"k2");
        last_txnid(&env)
    };
    damage_last_commit(&data);
    // The lock file says the last session ended at that commit: accepted, pages unread.
    {
        let env = open(dir.path());
        assert_eq!(
            last_txnid(&env),
            last,
            "the published commit was not taken as is"
        );
    }
    // Without the lock file nothing vouches for it: verified, found torn, the one before wins.
    std::fs::remove_file(dir.path().join("lock.cairn")).unwrap();
    let env = open(dir.path());
    assert!(last_txnid(&env) < last, "a torn last commit was accepted");
    assert!(has(&env, b"k1") && !has(&env, b"k2"));
    assert!(env.read_txn().unwrap().check().unwrap().is_ok());
}

#[test]
fn a_commit_newer_than_the_published_one_is_verified() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.cairn");
    let lock = dir.path().join("lock.cairn");
    let (before, last, saved) = {
        let env = open(dir.path());
        put(&env, b"k1");
        // The lock file as a writer that died after its next meta write, before publishing,
        // leaves it: its current commit is this one.
        let saved = std::fs::read(&lock).unwrap();
        let before = last_txnid(&env);
        put(&env, b"k2");
        (before, last_txnid(&env), saved)
    };
    assert!(last > before);
    damage_last_commit(&data);
    std::fs::write(&lock, &saved).unwrap();
    let env = open(dir.path());
    assert_eq!(
        last_txnid(&env),
        before,
        "an unpublished torn commit was accepted"
    );
    assert!(has(&env, b"k1") && !has(&env, b"k2"));
    drop(env);
    // Undamaged, the same unpublished commit verifies and is kept.
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock.cairn");
    let (saved, last) = {
        let env = open(dir.path());
        put(&env, b"k1");
        let saved = std::fs::read(&lock).unwrap();
        put(&env, b"k2");
        (saved, last_txnid(&env))
    };
    std::fs::write(&lock, &saved).unwrap();
    let env = open(dir.path());
    assert_eq!(last_txnid(&env), last);
    assert!(has(&env, b"k2"));
}
