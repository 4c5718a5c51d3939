//! Logged mode (docs/design.md, "Logged commits"): a commit flushes its log record, not its
//! pages; a power loss falls back to the last flushed commit and the first handle replays the
//! log. Each test checks what reached which disk (the simulator counts flushes) and what a
//! crash leaves. The crash matrix over random workloads is in tests/crash.rs.

use cairn::storage::{CrashMode, Fault, SimRng, SimStorage};
use cairn::{DbFlags, Durability, Env, EnvOptions, Error, PutFlags};
use std::collections::BTreeMap;
use std::sync::Arc;

fn opts() -> EnvOptions {
    Env::options()
        .durability(Durability::Logged)
        .max_dbs(8)
        .sync_every(None)
}

fn disks() -> (Arc<SimStorage>, Arc<SimStorage>) {
    (
        Arc::new(SimStorage::new(256 << 20).unwrap()),
        Arc::new(SimStorage::new(64 << 20).unwrap()),
    )
}

/// What a power loss leaves of both disks at this instant, as fresh storages.
fn power_loss(
    data: &SimStorage,
    log: &SimStorage,
    seed: u64,
) -> (Arc<SimStorage>, Arc<SimStorage>) {
    let mut rng = SimRng::new(seed);
    let d = data.crash_image(CrashMode::PowerLoss, &mut rng);
    let l = log.crash_image(CrashMode::PowerLoss, &mut rng);
    (
        Arc::new(SimStorage::from_image(&d, 256 << 20).unwrap()),
        Arc::new(SimStorage::from_image(&l, 64 << 20).unwrap()),
    )
}

fn contents(env: &Env, name: Option<&str>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let r = env.read_txn().unwrap();
    assert!(r.check().unwrap().is_ok(), "checker");
    let db = r.open_db(name).unwrap();
    let names = r.db_names().unwrap();
    r.iter(db)
        .unwrap()
        .map(Result::unwrap)
        .filter(|(k, _)| name.is_some() || !names.iter().any(|n| n.as_bytes() == *k))
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

#[test]
fn commits_flush_the_log_only_and_survive_a_power_loss() {
    let (data, log) = disks();
    let env = Env::with_storages(data.clone(), log.clone(), opts()).unwrap();
    {
        let mut w = env.write_txn().unwrap();
        w.create_db(Some("side"), DbFlags::CREATE).unwrap();
        w.commit().unwrap(); // creating a database is not logged: steady
    }
    let data_syncs = data.counters().1;
    let log_syncs = log.counters().1;
    let mut model = BTreeMap::new();
    for i in 0..200u32 {
        let mut w = env.write_txn().unwrap();
        let side = w.open_db(Some("side")).unwrap();
        let k = format!("key{:05}", (i * 7919) % 1000).into_bytes();
        let v = vec![i as u8; 10 + (i as usize % 90)];
        w.put(side, &k, &v, PutFlags::empty()).unwrap();
        model.insert(k.clone(), v);
        if i % 5 == 0 {
            let gone = format!("key{:05}", (i * 31) % 1000).into_bytes();
            if w.delete(side, &gone).unwrap() {
                model.remove(&gone);
            }
        }
        w.commit().unwrap();
    }
    assert_eq!(
        data.counters().1,
        data_syncs,
        "a logged commit flushed the data file"
    );
    assert_eq!(
        log.counters().1 - log_syncs,
        200,
        "one log flush per commit"
    );
    // Every unflushed write of the data file may be lost or torn; the log was flushed.
    let (d2, l2) = power_loss(&data, &log, 7);
    drop(env);
    let env = Env::with_storages(d2, l2, opts()).unwrap();
    assert_eq!(contents(&env, Some("side")), model);
    // The replayed state was made steady and keeps taking commits.
    let mut w = env.write_txn().unwrap();
    w.put(env.main_db(), b"after", b"replay", PutFlags::empty())
        .unwrap();
    w.commit().unwrap();
}

#[test]
fn sorted_duplicates_and_nested_aborts_replay_as_committed() {
    let (data, log) = disks();
    let env = Env::with_storages(data.clone(), log.clone(), opts()).unwrap();
    let mut w = env.write_txn().unwrap();
    let dups = w
        .create_db(Some("dups"), DbFlags::CREATE | DbFlags::DUP_SORT)
        .unwrap();
    w.commit().unwrap();
    let mut w = env.write_txn().unwrap();
    for v in 0..300u32 {
        w.put(dups, b"k", format!("{v:04}").as_bytes(), PutFlags::empty())
            .unwrap();
    }
    {
        let mut n = w.nested().unwrap();
        n.put(dups, b"k", b"aborted", PutFlags::empty()).unwrap();
        n.delete(dups, b"k").unwrap();
        n.abort();
    }
    {
        let mut n = w.nested().unwrap();
        n.delete_pair(dups, b"k", b"0007").unwrap();
        n.commit().unwrap();
    }
    // A pair that exists already: nothing changes, nothing to replay.
    w.put(dups, b"k", b"0008", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    let mut w = env.write_txn().unwrap();
    w.delete_pair(dups, b"k", b"0009").unwrap();
    let mut c = w.cursor_mut(dups).unwrap();
    c.set(b"k").unwrap();
    c.del_current().unwrap(); // 0000
    drop(c);
    w.commit().unwrap();
    let want: Vec<Vec<u8>> = (1..300u32)
        .filter(|v| ![7, 9].contains(v))
        .map(|v| format!("{v:04}").into_bytes())
        .collect();
    let (d2, l2) = power_loss(&data, &log, 11);
    drop(env);
    let env = Env::with_storages(d2, l2, opts()).unwrap();
    let r = env.read_txn().unwrap();
    let dups = r.open_db(Some("dups")).unwrap();
    let got: Vec<Vec<u8>> = r
        .iter_dup(dups, b"k")
        .unwrap()
        .map(|v| v.unwrap().to_vec())
        .collect();
    assert_eq!(got, want);
    assert!(r.check().unwrap().is_ok());
}

#[test]
fn what_the_log_cannot_carry_commits_steady() {
    let (data, log) = disks();
    let env = Env::with_storages(data.clone(), log.clone(), opts().log_size(64 << 10)).unwrap();
    let main = env.main_db();
    let steady_commit = |f: &dyn Fn(&mut cairn::RwTxn<'_>)| {
        let before = data.counters().1;
        let mut w = env.write_txn().unwrap();
        f(&mut w);
        w.commit().unwrap();
        data.counters().1 > before
    };
    assert!(!steady_commit(&|w| w
        .put(main, b"a", b"1", PutFlags::empty())
        .unwrap()));
    // RESERVE: the value is written after the put returns.
    assert!(steady_commit(&|w| {
        w.put_reserve(main, b"r", 4, PutFlags::empty())
            .unwrap()
            .copy_from_slice(b"rrrr")
    }));
    assert!(steady_commit(&|w| {
        w.create_db(Some("x"), DbFlags::CREATE).unwrap();
    }));
    assert!(steady_commit(&|w| {
        let x = w.open_db(Some("x")).unwrap();
        w.clear_db(x).unwrap();
    }));
    // A record larger than the log.
    assert!(steady_commit(&|w| {
        w.put(main, b"big", &vec![1u8; 100 << 10], PutFlags::empty())
            .unwrap()
    }));
    // A put refused before it changed anything (the key's size is checked first): logged.
    assert!(!steady_commit(&|w| {
        w.put(main, b"b", b"2", PutFlags::empty()).unwrap();
        let e = w.put(main, &vec![b'k'; 5000], b"v", PutFlags::empty());
        assert!(matches!(e, Err(Error::KeyTooLarge { .. })));
    }));
    // NO_OVERWRITE refused changes nothing: still logged.
    assert!(!steady_commit(&|w| {
        w.put(main, b"c", b"3", PutFlags::empty()).unwrap();
        let e = w.put(main, b"a", b"x", PutFlags::NO_OVERWRITE);
        assert!(matches!(e, Err(Error::KeyExists)));
    }));
    // The log fills up: records stop fitting, the commit is steady, the log starts over.
    let mut turned = 0;
    for i in 0..40u32 {
        let v = vec![i as u8; 4000];
        if steady_commit(&|w| {
            w.put(main, &i.to_be_bytes(), &v, PutFlags::empty())
                .unwrap()
        }) {
            turned += 1;
        }
    }
    assert!((1..=4).contains(&turned), "{turned} steady commits");
    let (d2, l2) = power_loss(&data, &log, 3);
    let want = contents(&env, None);
    drop(env);
    let env = Env::with_storages(d2, l2, opts()).unwrap();
    assert_eq!(contents(&env, None), want);
}

#[test]
fn a_failed_log_write_fails_the_commit_and_loses_nothing() {
    let (data, log) = disks();
    let env = Env::with_storages(data.clone(), log.clone(), opts()).unwrap();
    let main = env.main_db();
    for (i, fault) in [Fault::WriteError, Fault::SyncError, Fault::DiskFull]
        .into_iter()
        .enumerate()
    {
        let mut w = env.write_txn().unwrap();
        w.put(main, &[i as u8], b"kept", PutFlags::empty()).unwrap();
        w.commit().unwrap();
        let mut w = env.write_txn().unwrap();
        w.put(main, b"lost", b"x", PutFlags::empty()).unwrap();
        log.inject(fault, 0);
        assert!(w.commit().is_err(), "{fault:?}");
        log.heal();
        // The environment keeps working, and the failed commit is not visible.
        assert_eq!(env.read_txn().unwrap().get(main, b"lost").unwrap(), None);
    }
    let want = contents(&env, None);
    assert_eq!(want.len(), 3);
    let (d2, l2) = power_loss(&data, &log, 5);
    drop(env);
    let env = Env::with_storages(d2, l2, opts()).unwrap();
    let got = contents(&env, None);
    // The failed commits' records may have reached the log whole (a flush that failed after
    // writing): then they replay as the commit in flight; none is acknowledged.
    assert!(want.iter().all(|(k, v)| got.get(k) == Some(v)));
}

#[test]
fn a_damaged_record_ends_the_replay_and_a_read_only_first_handle_refuses() {
    let (data, log) = disks();
    let env = Env::with_storages(data.clone(), log.clone(), opts()).unwrap();
    let main = env.main_db();
    let mut w = env.write_txn().unwrap();
    w.put(main, b"base", b"0", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    env.sync().unwrap();
    for i in 0..3u8 {
        let mut w = env.write_txn().unwrap();
        w.put(main, &[b'k', i], &[i], PutFlags::empty()).unwrap();
        w.commit().unwrap();
    }
    // The data file as of the flush (every later write lost), the log whole but with its
    // second record's last byte flipped.
    let mut rng = SimRng::new(1);
    let d = data.crash_image(CrashMode::PowerLoss, &mut rng);
    let mut l = log.image();
    drop(env);
    // Records are found by walking the chain from the start: flip a byte of the second.
    // (A record: a 64-byte header whose bytes 4..8 hold the body's length, then the body.)
    let first_len = 64 + u32::from_le_bytes(l[4..8].try_into().unwrap()) as usize;
    let second_len = 64 + u32::from_le_bytes(l[first_len + 4..first_len + 8].try_into().unwrap());
    l[first_len + second_len as usize - 1] ^= 0x40;
    let ro = Env::with_storages(
        Arc::new(SimStorage::from_image(&d, 256 << 20).unwrap()),
        Arc::new(SimStorage::from_image(&l, 64 << 20).unwrap()),
        opts().read_only(true),
    );
    assert!(matches!(ro, Err(Error::Invalid(_))));
    let env = Env::with_storages(
        Arc::new(SimStorage::from_image(&d, 256 << 20).unwrap()),
        Arc::new(SimStorage::from_image(&l, 64 << 20).unwrap()),
        opts(),
    )
    .unwrap();
    let got = contents(&env, None);
    let keys: Vec<&[u8]> = got.keys().map(|k| &k[..]).collect();
    assert_eq!(keys, vec![&b"base"[..], &[b'k', 0][..]]);
}

#[test]
fn a_real_file_replays_after_its_unflushed_pages_are_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let env = opts().open(path).unwrap();
    let main = env.main_db();
    let mut w = env.write_txn().unwrap();
    w.put(main, b"flushed", b"1", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    env.sync().unwrap();
    // The data file as a power loss right now would leave it: everything is flushed.
    let saved = std::fs::read(path.join("data.cairn")).unwrap();
    for i in 0..50u32 {
        let mut w = env.write_txn().unwrap();
        w.put(main, &i.to_be_bytes(), b"logged", PutFlags::empty())
            .unwrap();
        w.commit().unwrap();
    }
    assert!(path.join("data.cairn-log").exists());
    // A crash without the closing flush, then the pages written since the flush lost.
    std::mem::forget(env);
    std::fs::write(path.join("data.cairn"), &saved).unwrap();
    std::fs::remove_file(path.join("lock.cairn")).unwrap();
    // Opened in durable mode: the log is replayed whatever the mode.
    let env = Env::options().open(path).unwrap();
    let got = contents(&env, None);
    assert_eq!(got.len(), 51);
    assert_eq!(
        got.get(&49u32.to_be_bytes()[..]).map(|v| &v[..]),
        Some(&b"logged"[..])
    );
}

#[test]
fn a_lazy_handles_commit_breaks_the_chain_and_the_next_logged_commit_is_steady() {
    let dir = tempfile::tempdir().unwrap();
    let logged = opts().open(dir.path()).unwrap();
    let lazy = Env::options()
        .durability(Durability::Lazy)
        .sync_every(None)
        .open(dir.path())
        .unwrap();
    let put = |env: &Env, k: &[u8]| {
        let mut w = env.write_txn().unwrap();
        w.put(env.main_db(), k, b"v", PutFlags::empty()).unwrap();
        w.commit().unwrap();
    };
    let logged_keys = || {
        let log = std::fs::read(dir.path().join("data.cairn-log")).unwrap();
        [
            "first-logged",
            "unlogged-lazy",
            "after-the-lazy",
            "next-epoch",
        ]
        .into_iter()
        .filter(|k| log.windows(k.len()).any(|w| w == k.as_bytes()))
        .collect::<Vec<_>>()
    };
    put(&logged, b"first-logged");
    put(&lazy, b"unlogged-lazy");
    // Built on a commit the log does not hold: no record, a flush of the data file instead.
    put(&logged, b"after-the-lazy");
    assert_eq!(logged_keys(), vec!["first-logged"]);
    // A new epoch starts at the log's beginning.
    put(&logged, b"next-epoch");
    assert_eq!(logged_keys(), vec!["next-epoch"]);
    let log = std::fs::read(dir.path().join("data.cairn-log")).unwrap();
    assert!(log.windows(10).position(|w| w == b"next-epoch").unwrap() < 200);
}
