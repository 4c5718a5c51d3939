//! Snapshot isolation under load: reader threads open read transactions and re-verify their
//! whole snapshot again and again while a writer commits continuously (small values, overflow
//! values, deletes, bulk growth and shrink); read transactions move between threads; one
//! reader holds its snapshot through the whole churn. Every snapshot must stay exactly as it
//! began, and the checker must pass at the end.
//! `CAIRN_CONCURRENCY_TXNS` sets the writer's transaction count (default 1,000: a few seconds).

mod support;

use cairn::{Database, DbFlags, Durability, Env, PutFlags, RoTxn};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use support::Rng;

const READERS: usize = 4;

fn txns() -> u64 {
    std::env::var("CAIRN_CONCURRENCY_TXNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

/// What a snapshot holds, summed up: an FNV-1a hash over every entry of both databases in
/// order (forward), the same backward, the counts, and a sample of keys with their values.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    id: u64,
    forward: u64,
    backward: u64,
    entries: [u64; 2],
    sample: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in (bytes.len() as u32).to_le_bytes().iter().chain(bytes) {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

fn fingerprint(r: &RoTxn<'_>, dbs: [Database; 2], probes: &[Vec<u8>]) -> Fingerprint {
    let mut forward = 0xcbf2_9ce4_8422_2325u64;
    let mut backward = forward;
    let mut entries = [0u64; 2];
    for (d, &db) in dbs.iter().enumerate() {
        for e in r.iter(db).unwrap() {
            let (k, v) = e.unwrap();
            fnv(&mut forward, k);
            fnv(&mut forward, v);
            entries[d] += 1;
        }
        let mut back: Vec<(&[u8], &[u8])> = r.iter(db).unwrap().rev().map(Result::unwrap).collect();
        back.reverse();
        for (k, v) in back {
            fnv(&mut backward, k);
            fnv(&mut backward, v);
        }
        assert_eq!(r.stat(db).unwrap().entries, entries[d], "stat vs iteration");
    }
    let sample = probes
        .iter()
        .map(|k| (k.clone(), r.get(dbs[0], k).unwrap().map(<[u8]>::to_vec)))
        .collect();
    assert_eq!(forward, backward, "forward and backward iteration differ");
    Fingerprint {
        id: r.id(),
        forward,
        backward,
        entries,
        sample,
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

fn probes() -> Vec<Vec<u8>> {
    (0..40).map(|i| key(i * 97)).collect()
}

/// One writer transaction of the churn: mostly small puts and deletes, some overflow values,
/// now and then a bulk load (growth) or a bulk delete (shrink).
fn churn(env: &Env, dbs: [Database; 2], rng: &mut Rng) {
    let mut w = env.write_txn().unwrap();
    match rng.below(50) {
        0 => {
            let base = rng.below(4000);
            for i in base..base + 800 {
                w.put(dbs[0], &key(i), &[i as u8; 64], PutFlags::empty())
                    .unwrap();
            }
        }
        1 => {
            let base = rng.below(4000);
            for i in base..base + 800 {
                w.delete(dbs[0], &key(i)).unwrap();
            }
        }
        _ => {
            for _ in 0..1 + rng.below(20) {
                let i = rng.below(5000);
                let d = dbs[rng.below(2) as usize];
                match rng.below(10) {
                    0..=2 => {
                        w.delete(d, &key(i)).unwrap();
                    }
                    3 => {
                        let len = 3000 + rng.below(30_000) as usize;
                        w.put(d, &key(i), &vec![rng.next() as u8; len], PutFlags::empty())
                            .unwrap();
                    }
                    _ => {
                        let len = rng.below(200) as usize;
                        w.put(d, &key(i), &vec![rng.next() as u8; len], PutFlags::empty())
                            .unwrap();
                    }
                }
            }
        }
    }
    w.commit().unwrap();
}

fn setup() -> (tempfile::TempDir, Env, [Database; 2]) {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options()
        .durability(Durability::Lazy)
        .max_readers(64)
        .max_dbs(4)
        .open(dir.path())
        .unwrap();
    let mut w = env.write_txn().unwrap();
    let side = w.create_db(Some("side"), DbFlags::CREATE).unwrap();
    for i in 0..3000 {
        w.put(env.main_db(), &key(i), &[i as u8; 50], PutFlags::empty())
            .unwrap();
    }
    w.commit().unwrap();
    let dbs = [env.main_db(), side];
    (dir, env, dbs)
}

#[test]
fn snapshots_stay_put_while_the_writer_churns() {
    let (_dir, env, dbs) = setup();
    let probes = probes();
    let done = AtomicBool::new(false);
    let verified = AtomicU64::new(0);
    let held = env.read_txn().unwrap();
    let held_print = fingerprint(&held, dbs, &probes);
    let n = txns();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Set `done` even if the writer panics, so the readers stop and the panic shows.
            struct Done<'a>(&'a AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Release);
                }
            }
            let _done = Done(&done);
            let mut rng = Rng(42);
            for _ in 0..n {
                churn(&env, dbs, &mut rng);
            }
        });
        for t in 0..READERS {
            let (env, probes, done, verified) = (&env, &probes, &done, &verified);
            s.spawn(move || {
                let mut rng = Rng(t as u64);
                while !done.load(Ordering::Acquire) {
                    let r = env.read_txn().unwrap();
                    let first = fingerprint(&r, dbs, probes);
                    for _ in 0..1 + rng.below(4) {
                        std::thread::yield_now();
                        assert_eq!(
                            fingerprint(&r, dbs, probes),
                            first,
                            "reader {t}: snapshot moved"
                        );
                        verified.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        // Read transactions handed from thread to thread (RoTxn is Send): each hop
        // re-verifies, and the transaction comes back and is verified again.
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                let mut r = env.read_txn().unwrap();
                let first = fingerprint(&r, dbs, &probes);
                for _ in 0..3 {
                    let (tx, rx) = mpsc::channel::<RoTxn<'_>>();
                    let want = first.clone();
                    let probes = &probes;
                    r = std::thread::scope(|inner| {
                        let h = inner.spawn(move || {
                            let r = rx.recv().unwrap();
                            assert_eq!(
                                fingerprint(&r, dbs, probes),
                                want,
                                "moved snapshot changed"
                            );
                            r
                        });
                        tx.send(r).unwrap();
                        h.join().unwrap()
                    });
                }
                assert_eq!(
                    fingerprint(&r, dbs, &probes),
                    first,
                    "snapshot changed after hops"
                );
            }
        });
    });
    // The snapshot held through the whole churn is exactly what it was.
    assert_eq!(
        fingerprint(&held, dbs, &probes),
        held_print,
        "long-held snapshot moved"
    );
    drop(held);
    assert!(
        verified.load(Ordering::Relaxed) > 0,
        "readers verified nothing"
    );
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "checker after the churn: {:?}", rep.problems);
    assert!(r.id() > held_print.id + n / 2, "the writer committed");
}

/// The writer reads only the reader slots below the table's high-water mark: a reader in the
/// last slot claimed (after others came and went) must still pin its snapshot.
#[test]
fn a_reader_in_the_highest_slot_pins_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_readers(16).open(dir.path()).unwrap();
    let db = env.main_db();
    let mut w = env.write_txn().unwrap();
    for i in 0..2_000u64 {
        w.put(db, &key(i), b"first", PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    // Twelve snapshots at once take twelve slots; keep only the last one claimed.
    let mut held: Vec<RoTxn<'_>> = (0..12).map(|_| env.read_txn().unwrap()).collect();
    let last = held.pop().unwrap();
    drop(held);
    let readers = env.readers();
    assert_eq!(
        readers.len(),
        12,
        "slots stay claimed while idle: {readers:?}"
    );
    assert_eq!(readers.iter().filter(|r| r.txnid.is_some()).count(), 1);
    // Rewrite every page many times over: pages of the held snapshot must not be reused.
    for round in 0..50u64 {
        let mut w = env.write_txn().unwrap();
        for i in 0..2_000u64 {
            w.put(
                db,
                &key(i),
                format!("round {round}").as_bytes(),
                PutFlags::empty(),
            )
            .unwrap();
        }
        w.commit().unwrap();
    }
    for i in 0..2_000u64 {
        assert_eq!(
            last.get(db, &key(i)).unwrap(),
            Some(&b"first"[..]),
            "key {i}"
        );
    }
    drop(last);
    let rep = env.read_txn().unwrap().check().unwrap();
    assert!(rep.is_ok(), "checker after the churn: {:?}", rep.problems);
}
