//! Simulated power losses through the fault-injecting storage. Each case runs random
//! transactions (small and overflow values, deletes, several databases, two of them DUP_SORT
//! with keys growing into sub-trees and shrinking back: one of variable-size values, one
//! DUP_FIXED of 8-byte values, whose sub-trees have packed leaves), then cuts the power
//! at a random moment: between commits, in the middle of a commit's writes, or after the writes
//! but before the flush returned. Every unsynced write is dropped, kept or torn per 512-byte
//! sector. The reopened database must pass the checker and hold exactly the acknowledged
//! durable commits (plus, possibly, the one in flight); in lazy mode, a prefix of the commits.
//! `CAIRN_CRASHES` sets the number of cases (default 2,000); a failure prints its seed, and
//! `CAIRN_SEED` replays one.

use cairn::storage::{CrashMode, Fault, SimRng, SimStorage, Storage};
use cairn::{DbFlags, Durability, Env, PutFlags};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Databases main, "side", "dups" and "fixed"; the DUP_SORT ones hold each pair as
/// key 0 value.
type Model = [BTreeMap<Vec<u8>, Vec<u8>>; 4];

fn pair(k: &[u8], v: &[u8]) -> Vec<u8> {
    [k, b"\0", v].concat()
}

fn opts(d: Durability) -> cairn::EnvOptions {
    Env::options().durability(d).max_dbs(4)
}

fn read_all(env: &Env) -> Model {
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "checker after crash: {:?}", rep.problems);
    let main = env.main_db();
    let mut out: Model = Default::default();
    // The main database's keys that name the named databases hold their records (checked by
    // the checker above); the model keeps the user's keys.
    let names = r.db_names().unwrap();
    for (k, v) in r.iter(main).unwrap().map(Result::unwrap) {
        if !names.iter().any(|n| n.as_bytes() == k) {
            out[0].insert(k.to_vec(), v.to_vec());
        }
    }
    if let Ok(db) = r.open_db(Some("side")) {
        for (k, v) in r.iter(db).unwrap().map(Result::unwrap) {
            out[1].insert(k.to_vec(), v.to_vec());
        }
    }
    for (i, name) in [(2, "dups"), (3, "fixed")] {
        if let Ok(db) = r.open_db(Some(name)) {
            for (k, v) in r.iter(db).unwrap().map(Result::unwrap) {
                out[i].insert(pair(k, v), Vec::new());
            }
        }
    }
    out
}

/// One change to a DUP_SORT database: a pair added or deleted, a key's values deleted, or a
/// burst of values that makes a key's set an inline set or a sub-tree. `fixed`: 8-byte
/// values (a DUP_FIXED database), else 5 to 54 bytes.
fn dup_op(
    rng: &mut SimRng,
    w: &mut cairn::RwTxn<'_>,
    (db, fixed): (cairn::Database, bool),
    m: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let k = format!("dkey{:02}", rng.below(20)).into_bytes();
    let val = |rng: &mut SimRng| {
        let n = rng.below(2000);
        if fixed {
            return (n * 7919).to_be_bytes().to_vec();
        }
        let mut v = format!("{n:05}").into_bytes();
        v.resize(5 + (n % 50) as usize, b'.');
        v
    };
    match rng.below(10) {
        0 => {
            w.delete(db, &k).unwrap();
            m.retain(|p, _| !(p.starts_with(&k) && p.get(k.len()) == Some(&0)));
        }
        1..=3 => {
            let v = val(rng);
            let had = m.remove(&pair(&k, &v)).is_some();
            assert_eq!(w.delete_pair(db, &k, &v).unwrap(), had);
        }
        4 => {
            for _ in 0..rng.below(400) {
                let v = val(rng);
                w.put(db, &k, &v, PutFlags::empty()).unwrap();
                m.insert(pair(&k, &v), Vec::new());
            }
        }
        _ => {
            let v = val(rng);
            w.put(db, &k, &v, PutFlags::empty()).unwrap();
            m.insert(pair(&k, &v), Vec::new());
        }
    }
}

fn one_case(seed: u64, mode: Durability) {
    run_case(seed, mode, CrashMode::PowerLoss);
}

/// A crash of the process alone: every write survives in the page cache and the system did
/// not reboot, so even lazy commits must all be there.
fn process_crash_case(seed: u64, mode: Durability) {
    run_case(seed, mode, CrashMode::ProcessCrash);
}

fn run_case(seed: u64, mode: Durability, crash: CrashMode) {
    let mut rng = SimRng::new(seed);
    let sim = Arc::new(SimStorage::new(256 << 20).unwrap());
    // Half of the lazy cases write pages in place (a lazy environment's writable map), where
    // a crash may also keep half-built pages of the transaction under way.
    let in_place = mode != Durability::Durable && seed % 2 == 1;
    sim.set_map_writes(in_place);
    // Logged mode: the commit log on a second simulated disk, small enough in a third of the
    // cases that records stop fitting and commits turn steady.
    let log = Arc::new(SimStorage::new(64 << 20).unwrap());
    let log_size = if seed.is_multiple_of(3) {
        64 << 10
    } else {
        4 << 20
    };
    let open = |data: Arc<SimStorage>, log: Arc<SimStorage>| match mode {
        Durability::Logged => Env::with_storages(data, log, opts(mode).log_size(log_size)),
        _ => Env::with_storage(data, opts(mode)),
    };
    let env = open(sim.clone(), log.clone()).unwrap();
    let mut model: Model = Default::default();
    let mut acked: Vec<Model> = vec![model.clone()];
    let txns = 1 + rng.below(12);
    let crash_at = rng.below(txns + 1);
    let mut in_flight: Option<Model> = None;
    for t in 0..txns {
        let mut w = env.write_txn().unwrap();
        let side = w.create_db(Some("side"), DbFlags::CREATE).unwrap();
        let dups = w
            .create_db(Some("dups"), DbFlags::CREATE | DbFlags::DUP_SORT)
            .unwrap();
        let fixed = w
            .create_db(
                Some("fixed"),
                DbFlags::CREATE | DbFlags::DUP_SORT | DbFlags::DUP_FIXED,
            )
            .unwrap();
        let dbs = [env.main_db(), side];
        let mut next = model.clone();
        for _ in 0..1 + rng.below(60) {
            match rng.below(6) {
                0 => {
                    dup_op(&mut rng, &mut w, (dups, false), &mut next[2]);
                    continue;
                }
                1 => {
                    dup_op(&mut rng, &mut w, (fixed, true), &mut next[3]);
                    continue;
                }
                _ => {}
            }
            let d = rng.below(2) as usize;
            let k = format!("key{:04}", rng.below(300)).into_bytes();
            if rng.below(4) == 0 {
                w.delete(dbs[d], &k).unwrap();
                next[d].remove(&k);
            } else {
                let len = if rng.below(20) == 0 {
                    3000 + rng.below(20000) as usize
                } else {
                    rng.below(200) as usize
                };
                let v = vec![(seed as u8).wrapping_add(t as u8); len];
                w.put(dbs[d], &k, &v, PutFlags::empty()).unwrap();
                next[d].insert(k, v);
            }
        }
        if t == crash_at {
            // Fail this commit part-way: after some writes, or at its flush (of the data file,
            // or in logged mode of the log).
            let disk = if mode == Durability::Logged && rng.below(2) == 0 {
                &log
            } else {
                &sim
            };
            if rng.below(2) == 0 {
                disk.inject(Fault::WriteError, rng.below(4));
            } else {
                disk.inject(Fault::SyncError, 0);
            }
            let r = w.commit();
            if r.is_ok() && mode != Durability::Lazy {
                acked.push(next);
            } else {
                in_flight = Some(next);
            }
            break;
        }
        w.commit().unwrap();
        acked.push(next.clone());
        model = next;
    }
    if in_place && acked.len() > 1 {
        assert!(
            sim.in_place_bytes() > 0,
            "seed {seed}: no page was written in place"
        );
    }
    let img = sim.crash_image(crash, &mut rng);
    let log_img = log.crash_image(crash, &mut rng);
    drop(env); // the image is taken: what the closing flush writes does not reach it
    let mut sim2 = SimStorage::from_image(&img, 256 << 20).unwrap();
    if crash == CrashMode::ProcessCrash {
        sim2 = sim2.same_boot_as(&sim);
    }
    sim2.set_map_writes(in_place);
    let sim2 = Arc::new(sim2);
    let log2 = Arc::new(SimStorage::from_image(&log_img, 64 << 20).unwrap());
    let env2 =
        open(sim2.clone(), log2).unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
    let got = read_all(&env2);
    match (mode, crash) {
        (_, CrashMode::ProcessCrash) => {
            let ok = got == *acked.last().unwrap() || in_flight.as_ref() == Some(&got);
            assert!(ok, "seed {seed}: a process crash lost acknowledged commits");
        }
        (Durability::Durable | Durability::Logged, _) => {
            let ok = got == *acked.last().unwrap() || in_flight.as_ref() == Some(&got);
            assert!(
                ok,
                "seed {seed}: durable state lost or corrupted ({mode:?})"
            );
        }
        (Durability::Lazy, _) => {
            let ok = acked.contains(&got) || in_flight.as_ref() == Some(&got);
            assert!(ok, "seed {seed}: lazy state is not a prefix of the commits");
        }
    }
    // The recovered database keeps working.
    let mut w = env2.write_txn().unwrap();
    w.put(env2.main_db(), b"after", b"crash", PutFlags::empty())
        .unwrap();
    w.commit().unwrap();
    env2.sync().unwrap();
    assert!(
        env2.read_txn().unwrap().check().unwrap().is_ok(),
        "seed {seed}: checker after recovery write"
    );
    let _ = sim2.len();
}

#[test]
fn power_loss() {
    if let Ok(s) = std::env::var("CAIRN_SEED") {
        let seed: u64 = s.parse().unwrap();
        one_case(seed, Durability::Durable);
        one_case(seed, Durability::Lazy);
        one_case(seed, Durability::Logged);
        process_crash_case(seed, Durability::Lazy);
        process_crash_case(seed, Durability::Logged);
        return;
    }
    let n: u64 = std::env::var("CAIRN_CRASHES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let base: u64 = std::env::var("CAIRN_BASE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        });
    println!("power_loss: {n} crashes per mode from base seed {base}");
    for i in 0..n {
        let seed = base.wrapping_mul(1_000_003).wrapping_add(i);
        for mode in [Durability::Durable, Durability::Lazy, Durability::Logged] {
            let r = std::panic::catch_unwind(|| one_case(seed, mode));
            if r.is_err() {
                panic!("crash case failed: replay with CAIRN_SEED={seed} ({mode:?})");
            }
        }
        if i % 4 == 0 {
            for mode in [Durability::Lazy, Durability::Logged] {
                let r = std::panic::catch_unwind(|| process_crash_case(seed, mode));
                if r.is_err() {
                    panic!("process crash case failed: replay with CAIRN_SEED={seed} ({mode:?})");
                }
            }
        }
    }
    println!("power_loss: {} simulated crashes, all recovered", 3 * n);
}
