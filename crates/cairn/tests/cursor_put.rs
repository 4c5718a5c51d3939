//! Puts through a write cursor (`CursorMut::put`), which go straight into the leaf of the
//! previous put when the key falls within it (LMDB's shortcut), compared with BTreeMap: runs
//! of sorted and random keys, new keys between existing ones, values that change size or
//! move to overflow pages, NO_OVERWRITE, deletes and positioning in between, several
//! cursors and databases in one transaction; and plain puts, which try the leaf of the
//! previous put of their database first. The checker runs after every commit.

use cairn::{Database, DbFlags, Env, Error, PutFlags};
use proptest::prelude::*;
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    /// Puts through one cursor: (key, value, no_overwrite).
    Run(usize, Vec<(Vec<u8>, Vec<u8>, bool)>),
    /// A run of ascending keys (start, count, step, value length).
    Sorted(usize, u32, u32, u32, usize),
    /// Puts, then deletes the cursor's pair, then puts again through the same cursor.
    PutDelPut(usize, Vec<u8>, Vec<u8>, Vec<u8>),
    /// Positions the cursor first, then puts.
    SeekPut(usize, Vec<u8>, Vec<u8>),
    Commit,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => (0u32..3000).prop_map(|i| format!("k{i:06}").into_bytes()),
        2 => proptest::collection::vec(any::<u8>(), 0..20),
        1 => (0u32..20).prop_map(|i| vec![b'L'; 700 + i as usize]),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => (0usize..3, any::<u8>()).prop_map(|(i, b)| vec![b; [0, 40, 100][i]]),
        3 => proptest::collection::vec(any::<u8>(), 0..300),
        1 => (0usize..2).prop_map(|i| vec![9u8; [3000, 20000][i]]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..2, proptest::collection::vec((key(), value(), proptest::bool::weighted(0.2)), 0..60))
            .prop_map(|(d, v)| Op::Run(d, v)),
        3 => (0usize..2, 0u32..3000, 1u32..400, 1u32..4, 0usize..200)
            .prop_map(|(d, s, n, st, l)| Op::Sorted(d, s, n, st, l)),
        1 => (0usize..2, key(), value(), value()).prop_map(|(d, k, a, b)| Op::PutDelPut(d, k, a, b)),
        1 => (0usize..2, key(), value()).prop_map(|(d, k, v)| Op::SeekPut(d, k, v)),
        1 => Just(Op::Commit),
    ]
}

fn put(
    c: &mut cairn::CursorMut<'_, '_>,
    m: &mut Model,
    k: &[u8],
    v: &[u8],
    no_overwrite: bool,
) -> Result<(), TestCaseError> {
    let flags = if no_overwrite {
        PutFlags::NO_OVERWRITE
    } else {
        PutFlags::empty()
    };
    let r = c.put(k, v, flags);
    if no_overwrite && m.contains_key(k) {
        prop_assert!(matches!(r, Err(Error::KeyExists)), "{r:?}");
    } else {
        prop_assert!(r.is_ok(), "{r:?}");
        m.insert(k.to_vec(), v.to_vec());
    }
    Ok(())
}

fn verify(env: &Env, w: &cairn::RwTxn<'_>, dbs: &[Database], ms: &[Model]) {
    for (db, m) in dbs.iter().zip(ms) {
        let got: Vec<(Vec<u8>, Vec<u8>)> = w
            .iter(*db)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "contents differ");
        assert_eq!(w.stat(*db).unwrap().entries, m.len() as u64);
    }
    let _ = env;
}

/// A write transaction with databases "a" and "b" created.
fn two_dbs(env: &Env) -> (cairn::RwTxn<'_>, [Database; 2]) {
    let mut w = env.write_txn().unwrap();
    let dbs = [
        w.create_db(Some("a"), DbFlags::CREATE).unwrap(),
        w.create_db(Some("b"), DbFlags::CREATE).unwrap(),
    ];
    (w, dbs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn cursor_puts_match_a_map(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
        let (mut w, dbs) = two_dbs(&env);
        let mut ms = vec![Model::new(), Model::new()];
        for op in ops {
            match op {
                Op::Run(d, items) => {
                    let mut c = w.cursor_mut(dbs[d]).unwrap();
                    // The cursor stands on the pair of its last successful put (a failed
                    // NO_OVERWRITE put leaves it there); checked after every third put, so
                    // that runs of puts also go unobserved.
                    let mut last: Option<(Vec<u8>, Vec<u8>)> = None;
                    for (i, (k, v, no)) in items.iter().enumerate() {
                        let existed = ms[d].contains_key(k);
                        put(&mut c, &mut ms[d], k, v, *no)?;
                        if !(*no && existed) {
                            last = Some((k.clone(), v.clone()));
                        }
                        if i % 3 == 2 {
                            prop_assert_eq!(c.current().unwrap(), last.clone());
                        }
                    }
                }
                Op::Sorted(d, start, n, step, len) => {
                    let mut c = w.cursor_mut(dbs[d]).unwrap();
                    let mut k = Vec::new();
                    for i in 0..n {
                        k = format!("k{:06}", start + i * step).into_bytes();
                        let v = vec![(i % 251) as u8; len];
                        put(&mut c, &mut ms[d], &k, &v, false)?;
                    }
                    // MDB_NEXT from the last put's pair.
                    let want = ms[d]
                        .range::<[u8], _>((std::ops::Bound::Excluded(&k[..]), std::ops::Bound::Unbounded))
                        .next()
                        .map(|(k, v)| (k.clone(), v.clone()));
                    prop_assert_eq!(c.next().unwrap(), want);
                }
                Op::PutDelPut(d, k, a, b) => {
                    let mut c = w.cursor_mut(dbs[d]).unwrap();
                    put(&mut c, &mut ms[d], &k, &a, false)?;
                    c.del_current().unwrap();
                    ms[d].remove(&k);
                    // Neighbours of the deleted key, through the same cursor.
                    let mut k2 = k.clone();
                    k2.push(0);
                    put(&mut c, &mut ms[d], &k2, &b, false)?;
                    put(&mut c, &mut ms[d], &k, &b, false)?;
                }
                Op::SeekPut(d, k, v) => {
                    let mut c = w.cursor_mut(dbs[d]).unwrap();
                    c.set_range(&k).unwrap();
                    c.first().unwrap();
                    put(&mut c, &mut ms[d], &k, &v, false)?;
                    c.last().unwrap();
                    put(&mut c, &mut ms[d], &k, &v, true)?;
                }
                Op::Commit => {
                    w.commit().unwrap();
                    let r = env.read_txn().unwrap();
                    r.check().unwrap();
                    drop(r);
                    w = env.write_txn().unwrap();
                }
            }
            verify(&env, &w, &dbs, &ms);
        }
        w.commit().unwrap();
        env.read_txn().unwrap().check().unwrap();
    }
}

/// The Python putmulti's workload: every key of a full database overwritten in key order
/// through one cursor, then new keys between the existing ones, with a check at the end.
#[test]
fn sorted_overwrite_and_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().open(dir.path()).unwrap();
    let db = env.main_db();
    let mut m = Model::new();
    let mut w = env.write_txn().unwrap();
    for i in (0..20_000u32).step_by(2) {
        let k = format!("key-{i:012}").into_bytes();
        w.put(db, &k, &[1u8; 100], PutFlags::empty()).unwrap();
        m.insert(k, vec![1u8; 100]);
    }
    w.commit().unwrap();
    let mut w = env.write_txn().unwrap();
    {
        let mut c = w.cursor_mut(db).unwrap();
        for i in 0..20_000u32 {
            let k = format!("key-{i:012}").into_bytes();
            let v = vec![(i % 7) as u8; 100];
            c.put(&k, &v, PutFlags::empty()).unwrap();
            m.insert(k, v);
        }
    }
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    r.check().unwrap();
    let got: Vec<(Vec<u8>, Vec<u8>)> = r
        .iter(db)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(got.len(), m.len());
    assert!(got.into_iter().eq(m));
}

/// A read cursor's steps (which walk the current leaf without reading it again) mixed with
/// every positioning operation, against a sorted model, over a tree of many leaves.
#[test]
fn read_cursor_walk_matches_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().open(dir.path()).unwrap();
    let db = env.main_db();
    let mut w = env.write_txn().unwrap();
    let keys: Vec<Vec<u8>> = (0..5000u32)
        .map(|i| format!("k{:06}", i * 3).into_bytes())
        .collect();
    for k in &keys {
        w.put(db, k, k, PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let mut c = r.cursor(db).unwrap();
    // The model's position: an index into `keys`, None when unpositioned.
    let mut at: Option<usize> = None;
    let mut x = 88172645463325252u64;
    for _ in 0..40_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let probe = format!("k{:06}", (x >> 8) % 15_010).into_bytes();
        let got = match x % 16 {
            0 => {
                at = Some(0);
                c.first().unwrap()
            }
            1 => {
                at = Some(keys.len() - 1);
                c.last().unwrap()
            }
            2 => {
                at = keys.binary_search(&probe).ok();
                c.set(&probe).unwrap()
            }
            3 => {
                let i = keys.partition_point(|k| *k < probe);
                at = (i < keys.len()).then_some(i);
                c.set_range(&probe).unwrap()
            }
            4 => c.current().unwrap(),
            5..=10 => {
                at = match at {
                    None => Some(0),
                    Some(i) => (i + 1 < keys.len()).then_some(i + 1),
                };
                c.next().unwrap()
            }
            _ => {
                at = match at {
                    None => Some(keys.len() - 1),
                    Some(i) => i.checked_sub(1),
                };
                c.prev().unwrap()
            }
        };
        let want = at.map(|i| (&keys[i][..], &keys[i][..]));
        assert_eq!(got, want);
    }
}

#[derive(Debug, Clone)]
enum PlainOp {
    /// Plain `RwTxn::put`s of ascending keys (db, start, count, step, value length): runs
    /// that land in one leaf, which the transaction's put hint then serves.
    Run(usize, u32, u32, u32, usize),
    /// Deletes every key in [start, start + count): empties and merges the hinted leaves.
    DelRange(usize, u32, u32),
    /// A run inside a nested transaction, committed or aborted.
    Nested(usize, u32, u32, bool),
    Commit,
}

fn plain_op() -> impl Strategy<Value = PlainOp> {
    prop_oneof![
        6 => (0usize..2, 0u32..2000, 1u32..120, 1u32..3, 0usize..300)
            .prop_map(|(d, s, n, st, l)| PlainOp::Run(d, s, n, st, l)),
        3 => (0usize..2, 0u32..2000, 1u32..400).prop_map(|(d, s, n)| PlainOp::DelRange(d, s, n)),
        2 => (0usize..2, 0u32..2000, 1u32..100, any::<bool>())
            .prop_map(|(d, s, n, c)| PlainOp::Nested(d, s, n, c)),
        1 => Just(PlainOp::Commit),
    ]
}

fn plain_key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Plain puts go first to the leaf the previous put of the database landed in, while
    /// no dirty page has been freed or restored since: runs of puts, deletes that empty and
    /// merge those leaves, nested transactions aborted under them, two databases.
    #[test]
    fn plain_puts_reusing_the_last_leaf_match_a_map(ops in proptest::collection::vec(plain_op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
        let (mut w, dbs) = two_dbs(&env);
        let mut ms = vec![Model::new(), Model::new()];
        for op in ops {
            match op {
                PlainOp::Run(d, start, n, step, len) => {
                    for i in 0..n {
                        let k = plain_key(start + i * step);
                        let v = vec![(i % 251) as u8; len];
                        w.put(dbs[d], &k, &v, PutFlags::empty()).unwrap();
                        ms[d].insert(k, v);
                    }
                }
                PlainOp::DelRange(d, start, n) => {
                    for i in start..start + n {
                        let k = plain_key(i);
                        let had = ms[d].remove(&k).is_some();
                        prop_assert_eq!(w.delete(dbs[d], &k).unwrap(), had);
                    }
                }
                PlainOp::Nested(d, start, n, commit) => {
                    let mut m2 = ms[d].clone();
                    {
                        let mut t = w.nested().unwrap();
                        for i in 0..n {
                            let k = plain_key(start + i);
                            let v = vec![7u8; 50];
                            t.put(dbs[d], &k, &v, PutFlags::empty()).unwrap();
                            m2.insert(k, v);
                        }
                        if commit {
                            t.commit().unwrap();
                        }
                    }
                    if commit {
                        ms[d] = m2;
                    }
                    // Puts into the leaves the aborted level had dirtied.
                    for i in 0..n {
                        let k = plain_key(start + i);
                        let v = vec![9u8; 20];
                        w.put(dbs[d], &k, &v, PutFlags::empty()).unwrap();
                        ms[d].insert(k, v);
                    }
                }
                PlainOp::Commit => {
                    w.commit().unwrap();
                    env.read_txn().unwrap().check().unwrap();
                    w = env.write_txn().unwrap();
                }
            }
            verify(&env, &w, &dbs, &ms);
        }
        w.commit().unwrap();
        env.read_txn().unwrap().check().unwrap();
    }
}
