//! Sorted loads and sequential reads against a BTreeMap: runs of APPEND puts (which go to the
//! end of the rightmost leaf without a descent while nothing was split or freed since the
//! previous append), mixed with what may move the right edge under that shortcut: plain and
//! cursor puts of larger keys, deletes of the last keys, nested transactions aborted or
//! committed, appends that must fail with AppendOrder. After every operation the iterator is
//! compared with the model forwards, backwards, from both ends at once and over ranges (the
//! read side's in-leaf fast path and its leaf changes); the checker runs after every commit.

use cairn::{Database, Env, Error, PutFlags};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    /// APPEND puts of `n` keys above the current last, `step` apart, values of `len` bytes.
    Append(u32, u32, usize),
    /// An APPEND of a key at or below the last one: AppendOrder, nothing changes.
    AppendBelow(u32),
    /// A plain put of key `k` (anywhere).
    Put(u32, usize),
    /// A put through a cursor of key `k`.
    CursorPut(u32, usize),
    /// Deletes the last `n` keys.
    DeleteLast(u32),
    /// APPENDs of `n` keys inside a nested transaction, aborted (false) or committed.
    Nested(u32, bool),
    Commit,
}

fn key(i: u32) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u32..300, 1u32..4, prop_oneof![Just(100usize), 0usize..400, Just(1500)])
            .prop_map(|(n, s, l)| Op::Append(n, s, l)),
        1 => (0u32..50).prop_map(Op::AppendBelow),
        1 => (0u32..100_000, 0usize..200).prop_map(|(k, l)| Op::Put(k, l)),
        1 => (0u32..100_000, 0usize..200).prop_map(|(k, l)| Op::CursorPut(k, l)),
        1 => (1u32..200).prop_map(Op::DeleteLast),
        1 => (1u32..200, any::<bool>()).prop_map(|(n, c)| Op::Nested(n, c)),
        1 => Just(Op::Commit),
    ]
}

/// The next key above the model's last, at least `next`.
fn above(m: &Model, next: u32) -> u32 {
    let last = m.keys().next_back().map_or(0, |k| {
        std::str::from_utf8(k)
            .unwrap()
            .parse::<u32>()
            .unwrap()
            .saturating_add(1)
    });
    last.max(next)
}

fn append_run(
    w: &mut cairn::RwTxn<'_>,
    db: Database,
    m: &mut Model,
    n: u32,
    step: u32,
    len: usize,
) -> Result<(), TestCaseError> {
    let mut k = above(m, 0);
    for i in 0..n {
        let v = vec![(k % 251) as u8; len + (i as usize % 3)];
        let r = w.put(db, &key(k), &v, PutFlags::APPEND);
        prop_assert!(r.is_ok(), "append {k}: {r:?}");
        m.insert(key(k), v);
        k += step;
    }
    Ok(())
}

/// The database read four ways against the model.
fn verify(w: &cairn::RwTxn<'_>, db: Database, m: &Model) -> Result<(), TestCaseError> {
    let fwd: Vec<(Vec<u8>, Vec<u8>)> = w
        .iter(db)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    prop_assert_eq!(fwd.len(), want.len());
    prop_assert!(fwd == want, "forward walk differs");
    let back: Vec<Vec<u8>> = w
        .iter(db)
        .unwrap()
        .rev()
        .map(|e| e.unwrap().0.to_vec())
        .collect();
    let want_back: Vec<Vec<u8>> = m.keys().rev().cloned().collect();
    prop_assert!(back == want_back, "backward walk differs");
    // Both ends at once, alternating: every pair exactly once, the ends meet.
    let mut it = w.iter(db).unwrap();
    let (mut front, mut tail) = (Vec::new(), Vec::new());
    while let Some(e) = it.next() {
        front.push(e.unwrap().0.to_vec());
        match it.next_back() {
            Some(e) => tail.push(e.unwrap().0.to_vec()),
            None => break,
        }
    }
    tail.reverse();
    front.extend(tail);
    let keys: Vec<Vec<u8>> = m.keys().cloned().collect();
    prop_assert!(front == keys, "two-ended walk differs");
    // A range from the middle to just past the middle.
    if let Some(mid) = keys.get(keys.len() / 2) {
        let hi = keys.get(keys.len() / 2 + 40).unwrap_or(mid);
        let got: Vec<Vec<u8>> = w
            .range(db, &mid[..]..&hi[..])
            .unwrap()
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        let want: Vec<Vec<u8>> = m
            .range::<[u8], _>((Bound::Included(&mid[..]), Bound::Excluded(&hi[..])))
            .map(|(k, _)| k.clone())
            .collect();
        prop_assert!(got == want, "range walk differs");
    }
    prop_assert_eq!(w.stat(db).unwrap().entries, m.len() as u64);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn appends_and_walks_match_a_map(ops in proptest::collection::vec(op(), 1..30)) {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::options().open(dir.path()).unwrap();
        let db = env.main_db();
        let mut m = Model::new();
        let mut w = env.write_txn().unwrap();
        for op in ops {
            match op {
                Op::Append(n, step, len) => append_run(&mut w, db, &mut m, n, step, len)?,
                Op::AppendBelow(back) => {
                    let Some(last) = m.keys().next_back().cloned() else { continue };
                    let k: u32 = std::str::from_utf8(&last).unwrap().parse().unwrap();
                    let r = w.put(db, &key(k.saturating_sub(back)), b"x", PutFlags::APPEND);
                    prop_assert!(matches!(r, Err(Error::AppendOrder)), "{r:?}");
                }
                Op::Put(k, len) => {
                    let v = vec![3u8; len];
                    w.put(db, &key(k), &v, PutFlags::empty()).unwrap();
                    m.insert(key(k), v);
                }
                Op::CursorPut(k, len) => {
                    let v = vec![5u8; len];
                    w.cursor_mut(db).unwrap().put(&key(k), &v, PutFlags::empty()).unwrap();
                    m.insert(key(k), v);
                }
                Op::DeleteLast(n) => {
                    for _ in 0..n {
                        let Some((k, _)) = m.pop_last() else { break };
                        prop_assert!(w.delete(db, &k).unwrap());
                    }
                }
                Op::Nested(n, keep) => {
                    let mut inner = m.clone();
                    let mut t = w.nested().unwrap();
                    append_run(&mut t, db, &mut inner, n, 1, 100)?;
                    if keep {
                        t.commit().unwrap();
                        m = inner;
                    } else {
                        t.abort();
                    }
                }
                Op::Commit => {
                    w.commit().unwrap();
                    let r = env.read_txn().unwrap();
                    let report = r.check().unwrap();
                    prop_assert!(report.is_ok(), "{:?}", report.problems);
                    drop(r);
                    w = env.write_txn().unwrap();
                }
            }
            verify(&w, db, &m)?;
        }
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let report = r.check().unwrap();
        prop_assert!(report.is_ok(), "{:?}", report.problems);
    }
}

/// Cursor puts between appends: an APPEND after a cursor put of a larger key must see that
/// key, whether it went into the rightmost leaf or split it and started a new one (every fill
/// of that leaf is tried, so some of the 2,000-byte puts split it).
#[test]
fn append_after_a_cursor_put_past_the_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().open(dir.path()).unwrap();
    let db = env.main_db();
    for extra in 0..40 {
        let mut w = env.write_txn().unwrap();
        w.clear_db(db).unwrap();
        for i in 0..100 + extra {
            w.put(db, &key(i), &[1u8; 100], PutFlags::APPEND).unwrap();
        }
        // The cursor's first put (an overwrite of the last key) gives it a leaf of its own,
        // so that its second goes through its own hint and leaves the transaction's alone.
        let mut c = w.cursor_mut(db).unwrap();
        c.put(&key(99 + extra), &[1u8; 100], PutFlags::empty())
            .unwrap();
        c.put(&key(100_000), &[2u8; 2000], PutFlags::empty())
            .unwrap();
        drop(c);
        let r = w.put(db, &key(50_000), b"x", PutFlags::APPEND);
        assert!(matches!(r, Err(Error::AppendOrder)), "fill {extra}: {r:?}");
        w.put(db, &key(100_001), b"y", PutFlags::APPEND).unwrap();
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        assert_eq!(r.iter(db).unwrap().count(), 102 + extra as usize);
        assert!(r.check().unwrap().is_ok());
    }
}
