//! Group commit (`Env::write_grouped`): many threads, each closure a unit that commits whole or
//! not at all.
//!
//! Every closure `(t, i)` puts two keys, `t-i-a` and `t-i-b`, then by a seeded draw returns
//! Ok, returns an error, or panics. The model: every closure acknowledged Ok is present (both
//! keys, its value), every one that failed is absent, none is half there; the checker passes.
//! Run on a file (reopened), on the fault-injecting storage with a power cut in the middle
//! (durable: nothing acknowledged lost; lazy: nothing half there), and against the bounds.

use cairn::storage::{CrashMode, Fault, SimRng, SimStorage};
use cairn::{Durability, Env, EnvOptions, Error, PutFlags};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Ok,
    Err,
    Panic,
}

/// What a closure was told: its fate as drawn, and whether the call returned Ok.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    fate: Fate,
    acked: bool,
}

type Record = BTreeMap<(u32, u32), Outcome>;

fn key(t: u32, i: u32, half: &str) -> Vec<u8> {
    format!("{t:03}-{i:06}-{half}").into_bytes()
}

fn value(t: u32, i: u32) -> Vec<u8> {
    let mut v = format!("value of {t}/{i}:").into_bytes();
    v.resize(20 + ((t * 31 + i) % 200) as usize, b'x');
    v
}

/// Test closures panic on purpose; their messages would bury real failures.
fn quiet_intended_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let intended = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|s| s.contains("intended panic"));
            if !intended {
                prev(info);
            }
        }));
    });
}

/// `threads` threads, `per_thread` grouped writes each (fewer if the environment fails).
/// Returns every closure's outcome; stops a thread at its first commit failure.
fn run_writers(env: &Env, threads: u32, per_thread: u32, seed: u64) -> Record {
    quiet_intended_panics();
    let db = env.main_db();
    let record = Mutex::new(Record::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let record = &record;
            s.spawn(move || {
                let mut rng = SimRng::new(seed ^ (u64::from(t) << 32));
                for i in 0..per_thread {
                    let fate = match rng.below(10) {
                        0 => Fate::Err,
                        1 => Fate::Panic,
                        _ => Fate::Ok,
                    };
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        env.write_grouped(|txn| {
                            txn.put(db, &key(t, i, "a"), &value(t, i), PutFlags::empty())?;
                            txn.put(db, &key(t, i, "b"), &value(t, i), PutFlags::empty())?;
                            match fate {
                                Fate::Ok => Ok(i),
                                Fate::Err => Err(Error::Invalid("refused by the test".into())),
                                Fate::Panic => panic!("intended panic in closure {t}/{i}"),
                            }
                        })
                    }));
                    let acked = match (&r, fate) {
                        (Ok(Ok(got)), Fate::Ok) => {
                            assert_eq!(*got, i, "a closure's own value comes back");
                            true
                        }
                        (Ok(Err(Error::Invalid(m))), Fate::Err) => {
                            assert!(m.contains("refused by the test"), "own error: {m}");
                            false
                        }
                        (Err(p), Fate::Panic) => {
                            let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
                            assert!(msg.contains("intended panic"), "own panic: {msg}");
                            false
                        }
                        // The environment failed (a power cut in the simulator): stop here.
                        (Ok(Err(_)), _) => {
                            record
                                .lock()
                                .unwrap()
                                .insert((t, i), Outcome { fate, acked: false });
                            return;
                        }
                        (r, f) => panic!("closure {t}/{i} drawn {f:?} came back {r:?}"),
                    };
                    record
                        .lock()
                        .unwrap()
                        .insert((t, i), Outcome { fate, acked });
                }
            });
        }
    });
    record.into_inner().unwrap()
}

/// Checks the database against the record: acknowledged closures present (when `durable`),
/// failed ones absent, none half there; the checker clean. Returns how many are present.
fn verify(env: &Env, record: &Record, durable: bool) -> usize {
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "checker: {:?}", rep.problems);
    let db = env.main_db();
    let mut present = 0;
    for (&(t, i), o) in record {
        let a = r.get(db, &key(t, i, "a")).unwrap();
        let b = r.get(db, &key(t, i, "b")).unwrap();
        assert_eq!(a.is_some(), b.is_some(), "closure {t}/{i} is half there");
        if let Some(a) = a {
            assert_eq!(a, &value(t, i)[..], "closure {t}/{i}: value");
            assert!(
                o.fate == Fate::Ok,
                "closure {t}/{i} failed ({:?}) but is present",
                o.fate
            );
            present += 1;
        } else if o.acked && durable {
            panic!("closure {t}/{i} was acknowledged but is absent");
        }
    }
    // Nothing else is there: every key belongs to a recorded closure.
    let expected = present * 2;
    assert_eq!(r.stat(db).unwrap().entries as usize, expected, "stray keys");
    present
}

#[test]
fn many_threads_against_the_model() {
    for mode in [Durability::Durable, Durability::Lazy] {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::options().durability(mode).open(dir.path()).unwrap();
        let record = run_writers(&env, 16, 60, 7);
        assert_eq!(record.len(), 16 * 60);
        let acked = record.values().filter(|o| o.acked).count();
        assert_eq!(verify(&env, &record, true), acked);
        drop(env);
        let env = Env::options().durability(mode).open(dir.path()).unwrap();
        assert_eq!(verify(&env, &record, true), acked, "{mode:?}: after reopen");
    }
}

#[test]
fn groups_form_and_stay_within_their_size() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().group_max_writes(3).open(dir.path()).unwrap();
    let db = env.main_db();
    let ids = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..12u32 {
            let (env, ids) = (&env, &ids);
            s.spawn(move || {
                for i in 0..20u32 {
                    let id = env
                        .write_grouped(|txn| {
                            txn.put(db, &key(t, i, "a"), b"v", PutFlags::empty())?;
                            Ok(txn.id())
                        })
                        .unwrap();
                    ids.lock().unwrap().push(id);
                }
            });
        }
    });
    let ids = ids.into_inner().unwrap();
    let mut per_txn: BTreeMap<u64, usize> = BTreeMap::new();
    for id in &ids {
        *per_txn.entry(*id).or_default() += 1;
    }
    assert!(
        per_txn.values().all(|&n| n <= 3),
        "a group over its size: {per_txn:?}"
    );
    assert!(
        per_txn.len() < ids.len(),
        "12 threads of durable writes never shared a commit"
    );
    assert_eq!(env.read_txn().unwrap().stat(db).unwrap().entries, 240);
}

/// A closure that is slow holds its group open; closures queued meanwhile join it only while
/// the group is under its time limit.
#[test]
fn the_time_limit_closes_a_group() {
    for (limit, joins) in [(Duration::ZERO, false), (Duration::from_secs(30), true)] {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::options()
            .group_max_time(limit)
            .open(dir.path())
            .unwrap();
        let db = env.main_db();
        let (tx, rx) = std::sync::mpsc::channel();
        let (first, others) = std::thread::scope(|s| {
            let env = &env;
            let slow = s.spawn(move || {
                env.write_grouped(|txn| {
                    tx.send(()).unwrap();
                    // The others queue while this closure runs.
                    std::thread::sleep(Duration::from_millis(300));
                    txn.put(db, b"slow", b"v", PutFlags::empty())?;
                    Ok(txn.id())
                })
                .unwrap()
            });
            rx.recv().unwrap();
            let quick: Vec<_> = (0..4u32)
                .map(|t| {
                    s.spawn(move || {
                        env.write_grouped(|txn| {
                            txn.put(db, &t.to_be_bytes(), b"v", PutFlags::empty())?;
                            Ok(txn.id())
                        })
                        .unwrap()
                    })
                })
                .collect();
            let first = slow.join().unwrap();
            (
                first,
                quick
                    .into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>(),
            )
        });
        assert_eq!(
            others.iter().all(|&id| id == first),
            joins,
            "limit {limit:?}: slow group {first}, others {others:?}"
        );
        if !joins {
            assert!(others.iter().all(|&id| id > first));
        }
    }
}

#[test]
fn a_panic_reaches_its_caller_and_spares_the_others() {
    quiet_intended_panics();
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let db = env.main_db();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        env.write_grouped(|txn| -> cairn::Result<()> {
            txn.put(db, b"doomed", b"v", PutFlags::empty())?;
            panic!("intended panic: alone");
        })
    }));
    let msg = r.unwrap_err().downcast::<&str>().map(|s| *s).unwrap_or("");
    assert!(msg.contains("intended panic"));
    env.write_grouped(|txn| txn.put(db, b"after", b"v", PutFlags::empty()))
        .unwrap();
    let r = env.read_txn().unwrap();
    assert_eq!(r.get(db, b"doomed").unwrap(), None);
    assert_eq!(r.get(db, b"after").unwrap(), Some(&b"v"[..]));
    assert!(r.check().unwrap().is_ok());
}

#[test]
fn a_closure_cannot_begin_another_write() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let db = env.main_db();
    let inner = env
        .write_grouped(|txn| {
            txn.put(db, b"outer", b"v", PutFlags::empty())?;
            let w = env.write_txn().err().map(|e| e.to_string());
            let g = env.write_grouped(|_| Ok(())).err().map(|e| e.to_string());
            let s = env.sync().err().map(|e| e.to_string());
            Ok([w, g, s])
        })
        .unwrap();
    for e in inner {
        assert!(e.is_some_and(|m| m.contains("inside a grouped write")));
    }
    // Outside a closure, the same calls work.
    env.write_txn().unwrap().commit().unwrap();
    env.sync().unwrap();
    assert!(env.read_txn().unwrap().get(db, b"outer").unwrap().is_some());
}

#[test]
fn size_limits_fail_one_closure_alone() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options()
        .max_size(Some(4 << 20))
        .open(dir.path())
        .unwrap();
    let db = env.main_db();
    let big = vec![7u8; 8 << 20];
    std::thread::scope(|s| {
        let env = &env;
        let hog = s.spawn(|| env.write_grouped(|txn| txn.put(db, b"big", &big, PutFlags::empty())));
        let small: Vec<_> = (0..8u32)
            .map(|t| {
                s.spawn(move || {
                    env.write_grouped(|txn| txn.put(db, &t.to_be_bytes(), b"v", PutFlags::empty()))
                })
            })
            .collect();
        assert!(matches!(hog.join().unwrap(), Err(Error::MapFull { .. })));
        for h in small {
            h.join().unwrap().unwrap();
        }
    });
    let r = env.read_txn().unwrap();
    assert_eq!(r.stat(db).unwrap().entries, 8);
    assert!(r.check().unwrap().is_ok());
}

#[test]
fn read_only_environments_refuse() {
    let dir = tempfile::tempdir().unwrap();
    Env::open(dir.path()).unwrap();
    let env = Env::options().read_only(true).open(dir.path()).unwrap();
    assert!(matches!(
        env.write_grouped(|_| Ok(())),
        Err(Error::ReadOnly)
    ));
}

/// A power cut in the middle of grouped commits: the simulator fails a write or a flush at a
/// random point while 8 threads write; every thread stops at its first failed commit; the
/// image keeps, drops or tears every unflushed write.
#[test]
fn power_loss_during_grouped_commits() {
    let cases: u64 = std::env::var("CAIRN_GROUP_CRASHES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let mut cut_mid_run = 0;
    for seed in 0..cases {
        for mode in [Durability::Durable, Durability::Lazy] {
            match std::panic::catch_unwind(|| power_cut_case(seed, mode)) {
                Ok(cut) => cut_mid_run += usize::from(cut),
                Err(_) => panic!("group power-loss case failed: seed {seed}, {mode:?}"),
            }
        }
    }
    // The cut must land among the writes, not after them, for the cases to test anything.
    assert!(
        cut_mid_run * 2 >= cases as usize,
        "only {cut_mid_run} of {} cases cut the power while writers ran",
        2 * cases
    );
}

fn opts(mode: Durability) -> EnvOptions {
    Env::options().durability(mode)
}

/// Returns whether the cut stopped writers (some closures were never run).
fn power_cut_case(seed: u64, mode: Durability) -> bool {
    let mut rng = SimRng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5eed);
    let sim = Arc::new(SimStorage::new(256 << 20).unwrap());
    let env = Env::with_storage(sim.clone(), opts(mode)).unwrap();
    // The cut: after a random number of writes (or flushes), every later one fails.
    let fault = if rng.below(2) == 0 {
        Fault::WriteError
    } else {
        Fault::SyncError
    };
    sim.inject(fault, rng.below(120));
    let record = run_writers(&env, 8, 40, seed);
    let crash = match rng.below(3) {
        0 => CrashMode::ProcessCrash,
        _ => CrashMode::PowerLoss,
    };
    let img = sim.crash_image(crash, &mut rng);
    drop(env);
    let mut sim2 = SimStorage::from_image(&img, 256 << 20).unwrap();
    if crash == CrashMode::ProcessCrash {
        sim2 = sim2.same_boot_as(&sim);
    }
    let env2 = Env::with_storage(Arc::new(sim2), opts(mode)).unwrap();
    let keeps_acked = mode == Durability::Durable || crash == CrashMode::ProcessCrash;
    verify(&env2, &record, keeps_acked);
    // The recovered database keeps working, grouped.
    env2.write_grouped(|txn| txn.put(env2.main_db(), b"after", b"cut", PutFlags::empty()))
        .unwrap();
    assert!(env2.read_txn().unwrap().check().unwrap().is_ok());
    record.len() < 8 * 40
}
