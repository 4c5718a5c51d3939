//! A crash while a new environment is being created leaves a file that opens (as a new, empty
//! environment), never one refused as "not a Cairn file". Regression: creation used to grow
//! the file before writing its first commit, so a process killed in between (found by the
//! kill loop's `create.after_grow` failpoint) or a power loss left a page of zeros that every
//! later open rejected with `NotCairn`.

use cairn::storage::{CrashMode, Fault, SimRng, SimStorage};
use cairn::{Env, PutFlags};
use std::sync::Arc;

const RESERVE: u64 = 64 << 20;

/// Opening `img` works and shows an empty environment that takes writes.
fn opens_empty(img: &[u8], what: &str) {
    let sim = Arc::new(SimStorage::from_image(img, RESERVE).unwrap());
    let env = Env::with_storage(sim, Env::options().initial_size(1 << 20))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e:?}"));
    let r = env.read_txn().unwrap();
    assert_eq!(r.iter(env.main_db()).unwrap().count(), 0, "{what}");
    drop(r);
    let mut w = env.write_txn().unwrap();
    w.put(env.main_db(), b"k", b"v", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    assert!(env.read_txn().unwrap().check().unwrap().is_ok(), "{what}");
}

#[test]
fn a_crash_while_creating_leaves_a_file_that_opens() {
    let mut rng = SimRng::new(7);
    for fault in [Fault::WriteError, Fault::SyncError] {
        for after in 0..4 {
            for crash in [CrashMode::ProcessCrash, CrashMode::PowerLoss] {
                for round in 0..8 {
                    let sim = Arc::new(SimStorage::new(RESERVE).unwrap());
                    sim.inject(fault, after);
                    let created =
                        Env::with_storage(sim.clone(), Env::options().initial_size(1 << 20));
                    let img = sim.crash_image(crash, &mut rng);
                    drop(created);
                    let what = format!("{fault:?} after {after}, {crash:?}, round {round}");
                    opens_empty(&img, &what);
                }
            }
        }
    }
}

#[test]
fn a_real_file_of_one_zero_page_is_created_anew_and_a_longer_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    // One page of zeros, of the smallest and of the largest page size, whatever the options
    // of the open that finds it.
    for (n, len) in [(0, 4096), (1, 65536)] {
        let path = dir.path().join(format!("short{n}"));
        std::fs::write(&path, vec![0u8; len]).unwrap();
        let env = Env::options().no_subdir(true).open(&path).unwrap();
        let mut w = env.write_txn().unwrap();
        w.put(env.main_db(), b"k", b"v", PutFlags::empty()).unwrap();
        w.commit().unwrap();
        drop(env);
        let env = Env::options().no_subdir(true).open(&path).unwrap();
        assert_eq!(
            env.read_txn().unwrap().get(env.main_db(), b"k").unwrap(),
            Some(&b"v"[..])
        );
    }
    let long = dir.path().join("long");
    std::fs::write(&long, vec![0u8; 65536 + 4096]).unwrap();
    let e = Env::options().no_subdir(true).open(&long).err().unwrap();
    assert!(matches!(e, cairn::Error::NotCairn { .. }), "{e:?}");
}
