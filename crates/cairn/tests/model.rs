//! Model-based tests: random operation sequences over several databases, with commits, aborts,
//! nested transactions and reopen, compared with `std`'s BTreeMap after every step. The checker
//! runs after every commit. Durable mode writes pages with pwrite; lazy mode (by default) writes
//! them in place through the writable map: both run.

mod model_runner;

use cairn::{Database, DbFlags, Durability, Env, PutFlags, RwTxn};
use model_runner::{DataOp, Step};
use proptest::prelude::*;
use std::collections::BTreeMap;

type Model = Vec<BTreeMap<Vec<u8>, Vec<u8>>>;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, Vec<u8>, Vec<u8>),
    Del(usize, Vec<u8>),
    Nested(Vec<(usize, Vec<u8>, Option<Vec<u8>>)>, bool),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u32..400).prop_map(|i| format!("k{i:05}").into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..24),
        (0u32..20).prop_map(|i| vec![b'L'; 900 + i as usize]),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), 0..120),
        1 => (0usize..3).prop_map(|i| vec![7u8; [3000, 9000, 70000][i]]),
    ]
}

fn op() -> impl Strategy<Value = Step<Op>> {
    prop_oneof![
        30 => (0usize..3, key(), value()).prop_map(|(d, k, v)| Step::Data(Op::Put(d, k, v))),
        10 => (0usize..3, key()).prop_map(|(d, k)| Step::Data(Op::Del(d, k))),
        4 => Just(Step::Commit),
        1 => Just(Step::Abort),
        2 => (proptest::collection::vec((0usize..3, key(), proptest::option::of(value())), 0..20), any::<bool>())
            .prop_map(|(v, c)| Step::Data(Op::Nested(v, c))),
        1 => Just(Step::Reopen),
    ]
}

fn open(dir: &std::path::Path, mode: Durability) -> (Env, Vec<Database>) {
    let env = Env::options()
        .max_dbs(8)
        .durability(mode)
        .open(dir)
        .unwrap();
    let mut w = env.write_txn().unwrap();
    let dbs = vec![
        env.main_db(),
        w.create_db(Some("alpha"), DbFlags::CREATE).unwrap(),
        w.create_db(Some("beta"), DbFlags::CREATE).unwrap(),
    ];
    w.commit().unwrap();
    (env, dbs)
}

/// The names of this test's named databases: keys of the main database too (their values
/// are records), left out of the main database's comparison with its model (tests/named_dbs.rs
/// models them).
const NAMES: [&[u8]; 2] = [b"alpha", b"beta"];

fn user_key(d: usize, k: &[u8]) -> bool {
    d != 0 || !NAMES.contains(&k)
}

fn verify(env: &Env, dbs: &[Database], model: &Model) {
    let r = env.read_txn().unwrap();
    for (i, (d, m)) in dbs.iter().zip(model).enumerate() {
        let got: Vec<(Vec<u8>, Vec<u8>)> = r
            .iter(*d)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .filter(|e| e.as_ref().map_or(true, |(k, _)| user_key(i, k)))
            .collect::<Result<_, _>>()
            .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "contents differ");
        let back: Vec<Vec<u8>> = r
            .iter(*d)
            .unwrap()
            .rev()
            .map(|e| e.unwrap().0.to_vec())
            .filter(|k| user_key(i, k))
            .collect();
        let want_back: Vec<Vec<u8>> = m.keys().rev().cloned().collect();
        assert!(back == want_back, "reverse differs");
        for (k, v) in m.iter().take(50) {
            assert_eq!(r.get(*d, k).unwrap(), Some(&v[..]));
        }
        let names = if i == 0 { NAMES.len() } else { 0 };
        assert_eq!(r.stat(*d).unwrap().entries, (m.len() + names) as u64);
    }
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "checker: {:?}", rep.problems);
}

fn run(ops: Vec<Step<Op>>, mode: Durability) {
    model_runner::run(ops, vec![BTreeMap::new(); 3], |p| open(p, mode), verify);
}

impl DataOp for Op {
    type Model = Model;

    fn apply(self, txn: &mut RwTxn<'_>, dbs: &[Database], pending: &mut Model) {
        match self {
            Op::Put(d, k, v) => {
                txn.put(dbs[d], &k, &v, PutFlags::empty()).unwrap();
                assert_eq!(txn.get(dbs[d], &k).unwrap(), Some(&v[..]));
                pending[d].insert(k, v);
            }
            Op::Del(d, k) => {
                assert_eq!(
                    txn.delete(dbs[d], &k).unwrap(),
                    pending[d].remove(&k).is_some()
                );
            }
            Op::Nested(changes, keep) => {
                let mut child = txn.nested().unwrap();
                let mut after = pending.clone();
                for (d, k, v) in changes {
                    match v {
                        Some(v) => {
                            child.put(dbs[d], &k, &v, PutFlags::empty()).unwrap();
                            after[d].insert(k, v);
                        }
                        None => {
                            child.delete(dbs[d], &k).unwrap();
                            after[d].remove(&k);
                        }
                    }
                }
                if keep {
                    child.commit().unwrap();
                    *pending = after;
                } else {
                    child.abort();
                }
                for (d, m) in pending.iter().enumerate() {
                    let got: Vec<Vec<u8>> = txn
                        .iter(dbs[d])
                        .unwrap()
                        .map(|e| e.unwrap().0.to_vec())
                        .filter(|k| user_key(d, k))
                        .collect();
                    assert_eq!(got, m.keys().cloned().collect::<Vec<_>>());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn matches_btreemap(ops in proptest::collection::vec(op(), 1..300)) {
        run(ops, Durability::Durable);
    }

    #[test]
    fn matches_btreemap_lazy_in_place(ops in proptest::collection::vec(op(), 1..300)) {
        run(ops, Durability::Lazy);
    }
}

#[test]
fn bulk_insert_delete_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let db = env.main_db();
    let n = 20_000u32;
    for round in 0..3 {
        let mut w = env.write_txn().unwrap();
        for i in 0..n {
            let k = format!("{:016}", (i.wrapping_mul(2_654_435_761)) % 1_000_000);
            w.put(db, k.as_bytes(), &[round as u8; 100], PutFlags::empty())
                .unwrap();
        }
        w.commit().unwrap();
        let mut w = env.write_txn().unwrap();
        for i in (0..n).step_by(2) {
            let k = format!("{:016}", (i.wrapping_mul(2_654_435_761)) % 1_000_000);
            w.delete(db, k.as_bytes()).unwrap();
        }
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let rep = r.check().unwrap();
        assert!(rep.is_ok(), "{:?}", rep.problems);
    }
    let size = env.info().unwrap().file_size;
    assert!(size < 64 << 20, "file grew to {size}");
}

#[test]
fn append_and_order_errors() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let db = env.main_db();
    let mut w = env.write_txn().unwrap();
    for i in 0..10_000u32 {
        w.put(db, format!("{i:08}").as_bytes(), b"v", PutFlags::APPEND)
            .unwrap();
    }
    assert!(matches!(
        w.put(db, b"00000005", b"v", PutFlags::APPEND),
        Err(cairn::Error::AppendOrder)
    ));
    assert!(matches!(
        w.put(db, b"00000005", b"v", PutFlags::NO_OVERWRITE),
        Err(cairn::Error::KeyExists)
    ));
    let long = vec![1u8; 5000];
    assert!(matches!(
        w.put(db, &long, b"v", PutFlags::empty()),
        Err(cairn::Error::KeyTooLarge { .. })
    ));
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let st = r.stat(db).unwrap();
    assert_eq!(st.entries, 10_000);
    // Appended pages are nearly full: about 10,000 * 26 bytes / 4 KiB.
    assert!(st.leaf_pages < 80, "leaf pages {}", st.leaf_pages);
    assert!(r.check().unwrap().is_ok());
}
