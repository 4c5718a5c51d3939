//! What the LMDB faces rely on from the engine: LMDB's file names and no lock file, one key
//! limit for every kind of database, transaction ids counted as LMDB counts them, and closing
//! a handle that never waits for the writer.

use cairn::{Durability, Env, FileNames, PutFlags};
use std::sync::mpsc;
use std::time::Duration;

#[test]
fn lmdb_file_names_and_auto_detection() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    {
        let env = Env::options().file_names(FileNames::Lmdb).open(p).unwrap();
        let mut w = env.write_txn().unwrap();
        w.put(env.main_db(), b"k", b"v", PutFlags::empty()).unwrap();
        w.commit().unwrap();
    }
    assert!(p.join("data.mdb").is_file());
    assert!(p.join("lock.mdb").is_file());
    assert!(!p.join("data.cairn").exists());
    // The default (Auto) finds LMDB's names in a directory that has only them.
    let opts = Env::options();
    assert_eq!(opts.files(p), (p.join("data.mdb"), p.join("lock.mdb")));
    let env = opts.open(p).unwrap();
    let r = env.read_txn().unwrap();
    assert_eq!(r.get(env.main_db(), b"k").unwrap(), Some(&b"v"[..]));
    // A new directory gets Cairn's names by default.
    let fresh = dir.path().join("fresh");
    drop(Env::open(&fresh).unwrap());
    assert!(fresh.join("data.cairn").is_file() && fresh.join("lock.cairn").is_file());
    // Explicit names win over what is there.
    assert_eq!(
        Env::options().file_names(FileNames::Cairn).files(p).0,
        p.join("data.cairn")
    );
}

#[test]
fn no_lock_creates_no_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options()
        .file_names(FileNames::Lmdb)
        .no_lock(true)
        .open(dir.path())
        .unwrap();
    let mut w = env.write_txn().unwrap();
    w.put(env.main_db(), b"a", b"1", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    assert!(env.read_txn().unwrap().check().unwrap().is_ok());
    drop(env);
    assert!(dir.path().join("data.mdb").is_file());
    assert!(!dir.path().join("lock.mdb").exists());
    // A file with no_subdir: no PATH-lock either.
    let file = dir.path().join("single");
    drop(
        Env::options()
            .no_subdir(true)
            .no_lock(true)
            .open(&file)
            .unwrap(),
    );
    assert!(file.is_file());
    assert!(!dir.path().join("single-lock").exists());
}

#[test]
fn transaction_ids_count_as_lmdb() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    assert_eq!(env.info().unwrap().last_txnid, 0);
    assert_eq!(env.read_txn().unwrap().id(), 0);
    let mut w = env.write_txn().unwrap();
    assert_eq!(w.id(), 1);
    w.put(env.main_db(), b"k", b"v", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    assert_eq!(env.info().unwrap().last_txnid, 1);
    let r = env.read_txn().unwrap();
    assert_eq!(r.id(), 1);
    let held: Vec<_> = env.readers().iter().filter_map(|x| x.txnid).collect();
    assert_eq!(held, vec![1]);
    drop(r);
    assert!(env.readers().iter().all(|x| x.txnid.is_none()));
    // An aborted write transaction leaves the count where it was.
    drop(env.write_txn().unwrap());
    assert_eq!(env.info().unwrap().last_txnid, 1);
    assert_eq!(env.write_txn().unwrap().id(), 2);
}

#[test]
fn one_key_limit_for_every_database() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let max = env.max_key_size();
    let mut w = env.write_txn().unwrap();
    let plain = w.create_db(Some("plain"), cairn::DbFlags::CREATE).unwrap();
    let dups = w
        .create_db(
            Some("dups"),
            cairn::DbFlags::CREATE | cairn::DbFlags::DUP_SORT,
        )
        .unwrap();
    for db in [env.main_db(), plain, dups] {
        let key = vec![7u8; max];
        w.put(db, &key, b"x", PutFlags::empty()).unwrap();
        w.put(db, &key, b"y", PutFlags::empty()).unwrap();
        assert!(matches!(
            w.put(db, &vec![7u8; max + 1], b"x", PutFlags::empty()),
            Err(cairn::Error::KeyTooLarge { .. })
        ));
    }
    w.commit().unwrap();
    assert!(env.read_txn().unwrap().check().unwrap().is_ok());
}

/// Dropping the last handle of a lazy environment while another handle of the same file, on
/// the same thread, holds the writer returns at once (it used to wait for that writer: a
/// hang, since the writer could only finish after the drop returned).
#[test]
fn closing_never_waits_for_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let lazy = || Env::options().durability(Durability::Lazy).sync_every(None);
        let old = lazy().open(&path).unwrap();
        let mut w = old.write_txn().unwrap();
        w.put(old.main_db(), b"old", b"1", PutFlags::empty())
            .unwrap();
        w.commit().unwrap();
        let new = lazy().open(&path).unwrap();
        let mut w2 = new.write_txn().unwrap();
        drop(old); // must not wait for w2's writer lock
        w2.put(new.main_db(), b"new", b"2", PutFlags::empty())
            .unwrap();
        w2.commit().unwrap();
        let r = new.read_txn().unwrap();
        let both = r.get(new.main_db(), b"old").unwrap().is_some()
            && r.get(new.main_db(), b"new").unwrap().is_some();
        tx.send(both).unwrap();
    });
    let both = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("dropping a handle waited for another handle's writer");
    assert!(both);
    let env = Env::open(dir.path()).unwrap();
    assert!(env.read_txn().unwrap().check().unwrap().is_ok());
}

/// The first bytes of an LMDB data file: a meta page (flags 0x08) with LMDB's magic.
fn lmdb_head() -> Vec<u8> {
    let mut b = vec![0u8; 8192];
    b[10..12].copy_from_slice(&0x08u16.to_le_bytes());
    b[16..20].copy_from_slice(&0xBEEF_C0DEu32.to_le_bytes());
    b[20..24].copy_from_slice(&1u32.to_le_bytes());
    b
}

#[test]
fn an_lmdb_data_file_is_refused_untouched_naming_cairn_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("data.mdb"), lmdb_head()).unwrap();
    let lock = vec![7u8; 8192];
    std::fs::write(p.join("lock.mdb"), &lock).unwrap();
    for opts in [
        Env::options().file_names(FileNames::Lmdb),
        Env::options(),
        Env::options().file_names(FileNames::Lmdb).read_only(true),
    ] {
        let e = opts.open(p).err().expect("refused");
        assert!(matches!(e, cairn::Error::LmdbFile { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("cairn migrate") && msg.contains("data.mdb"),
            "{msg}"
        );
    }
    // Nothing created or changed: LMDB's lock file may be in use by LMDB processes.
    assert_eq!(std::fs::read(p.join("lock.mdb")).unwrap(), lock);
    assert_eq!(std::fs::read(p.join("data.mdb")).unwrap(), lmdb_head());
    assert!(!p.join("data.cairn").exists() && !p.join("lock.cairn").exists());
    // The NOSUBDIR layout too, with `-n` in the suggested command.
    let f = p.join("single.mdb");
    std::fs::write(&f, lmdb_head()).unwrap();
    let e = Env::options()
        .no_subdir(true)
        .open(&f)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("cairn migrate -n"), "{e}");
    assert!(!p.join("single.mdb-lock").exists());
}
