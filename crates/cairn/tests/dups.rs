//! Sorted duplicates (DUP_SORT), model-based: random operation sequences over four DUP_SORT
//! databases (bytewise values; DUP_FIXED | INTEGER_DUP u64 values; REVERSE_DUP values;
//! DUP_FIXED | INTEGER_DUP u32 values: the two DUP_FIXED ones with packed sub-tree leaves), with
//! commits, aborts, nested transactions and reopen, compared with a
//! `BTreeMap<key, BTreeSet<value>>` after every step; the checker runs after every commit. Then
//! directed tests: one key growing to 100,000 values and shrinking back, the MULTIPLE
//! operations, errors, compaction and dropping.
#![allow(
    clippy::host_endian_bytes,
    reason = "INTEGER_DUP values are native integers, as in LMDB"
)]

mod model_runner;

use cairn::{format, Cursor, Database, DbFlags, Env, Error, PutFlags, RwTxn};
use model_runner::{DataOp, Step};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Values are kept in the model under a sort key that orders them as the database does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Bytes,
    Int,
    Reverse,
    Int4,
}

impl Order {
    fn sort_key(self, v: &[u8]) -> Vec<u8> {
        match self {
            Order::Bytes => v.to_vec(),
            Order::Reverse => v.iter().rev().copied().collect(),
            Order::Int => u64::from_ne_bytes(v.try_into().unwrap())
                .to_be_bytes()
                .to_vec(),
            Order::Int4 => u32::from_ne_bytes(v.try_into().unwrap())
                .to_be_bytes()
                .to_vec(),
        }
    }
    fn value(self, sk: &[u8]) -> Vec<u8> {
        match self {
            Order::Bytes => sk.to_vec(),
            Order::Reverse => sk.iter().rev().copied().collect(),
            Order::Int => u64::from_be_bytes(sk.try_into().unwrap())
                .to_ne_bytes()
                .to_vec(),
            Order::Int4 => u32::from_be_bytes(sk.try_into().unwrap())
                .to_ne_bytes()
                .to_vec(),
        }
    }
}

const ORDERS: [Order; 4] = [Order::Bytes, Order::Int, Order::Reverse, Order::Int4];
/// The DUP_FIXED databases (packed sub-tree leaves) and their value sizes.
const FIXED: [(usize, usize); 2] = [(1, 8), (3, 4)];

type Set = BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>;
type KeyRange<'k> = (std::ops::Bound<&'k [u8]>, std::ops::Bound<&'k [u8]>);
type Model = Vec<Set>;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, Vec<u8>, u32, u8),
    DelPair(usize, Vec<u8>, u32),
    DelKey(usize, Vec<u8>),
    Grow(usize, Vec<u8>, u32, u32),
    Shrink(usize, Vec<u8>, u32),
    Multiple(usize, Vec<u8>, u32, u32),
    Nested(Vec<(usize, Vec<u8>, u32, bool)>, bool),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        20 => (0u32..24).prop_map(|i| format!("k{i:03}").into_bytes()),
        1 => (0u32..3).prop_map(|i| vec![b'L' + i as u8; 1900]),
    ]
}

/// The value numbered `n` for database `d`: short and long byte strings, or a u64.
fn value(d: usize, n: u32) -> Vec<u8> {
    match ORDERS[d] {
        Order::Int => u64::from(n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .to_ne_bytes()
            .to_vec(),
        Order::Int4 => n.wrapping_mul(0x9E37_79B9).to_ne_bytes().to_vec(),
        _ => {
            let len = match n % 17 {
                0 => 300 + (n % 5) as usize * 200,
                1..=3 => 0,
                _ => 1 + (n % 40) as usize,
            };
            let mut v = format!("v{n:05}").into_bytes();
            v.resize(len.max(6), (n % 251) as u8);
            v.truncate(if n % 17 == 1 { 0 } else { v.len() });
            v
        }
    }
}

fn op() -> impl Strategy<Value = Step<Op>> {
    prop_oneof![
        30 => (0usize..4, key(), 0u32..400, 0u8..4).prop_map(|(d, k, v, f)| Step::Data(Op::Put(d, k, v, f))),
        10 => (0usize..4, key(), 0u32..400).prop_map(|(d, k, v)| Step::Data(Op::DelPair(d, k, v))),
        3 => (0usize..4, key()).prop_map(|(d, k)| Step::Data(Op::DelKey(d, k))),
        2 => (0usize..4, key(), 0u32..5000, 1u32..700).prop_map(|(d, k, s, n)| Step::Data(Op::Grow(d, k, s, n))),
        3 => (0usize..4, key(), 1u32..8).prop_map(|(d, k, m)| Step::Data(Op::Shrink(d, k, m))),
        2 => (0usize..2, key(), 0u32..5000, 1u32..1200)
            .prop_map(|(f, k, s, n)| Step::Data(Op::Multiple(FIXED[f].0, k, s, n))),
        4 => Just(Step::Commit),
        1 => Just(Step::Abort),
        2 => (
            proptest::collection::vec((0usize..4, key(), 0u32..400, any::<bool>()), 0..20),
            any::<bool>()
        )
            .prop_map(|(v, c)| Step::Data(Op::Nested(v, c))),
        1 => Just(Step::Reopen),
    ]
}

fn open(dir: &std::path::Path) -> (Env, Vec<Database>) {
    let env = Env::options().max_dbs(8).open(dir).unwrap();
    let mut w = env.write_txn().unwrap();
    let c = DbFlags::CREATE | DbFlags::DUP_SORT;
    let dbs = vec![
        w.create_db(Some("bytes"), c).unwrap(),
        w.create_db(Some("int"), c | DbFlags::DUP_FIXED | DbFlags::INTEGER_DUP)
            .unwrap(),
        w.create_db(Some("reverse"), c | DbFlags::REVERSE_DUP)
            .unwrap(),
        w.create_db(Some("int4"), c | DbFlags::DUP_FIXED | DbFlags::INTEGER_DUP)
            .unwrap(),
    ];
    w.commit().unwrap();
    (env, dbs)
}

fn pairs(d: usize, m: &Set) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter()
        .flat_map(|(k, vs)| vs.iter().map(move |sk| (k.clone(), ORDERS[d].value(sk))))
        .collect()
}

fn owned(e: Option<(&[u8], &[u8])>) -> Option<(Vec<u8>, Vec<u8>)> {
    e.map(|(k, v)| (k.to_vec(), v.to_vec()))
}

/// Every pair an iterator yields, owned.
fn collect<'a>(
    it: impl Iterator<Item = cairn::Result<(&'a [u8], &'a [u8])>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|e| owned(Some(e.unwrap())).unwrap()).collect()
}

/// A fresh environment with one committed, empty DUP_SORT database "d" (plus `extra` flags).
fn dup_env(extra: DbFlags) -> (tempfile::TempDir, Env, Database) {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let db = w
        .create_db(Some("d"), DbFlags::CREATE | DbFlags::DUP_SORT | extra)
        .unwrap();
    w.commit().unwrap();
    (dir, env, db)
}

/// Checks the cursor operations at one key against the model.
fn check_key(c: &mut Cursor<'_>, d: usize, k: &[u8], vs: &BTreeSet<Vec<u8>>) {
    let o = ORDERS[d];
    let vals: Vec<Vec<u8>> = vs.iter().map(|sk| o.value(sk)).collect();
    let e = |v: &Vec<u8>| Some((k.to_vec(), v.clone()));
    assert_eq!(owned(c.set(k).unwrap()), e(&vals[0]));
    assert_eq!(c.count(), vals.len() as u64);
    assert_eq!(owned(c.last_dup().unwrap()), e(vals.last().unwrap()));
    assert_eq!(owned(c.next_dup().unwrap()), None);
    assert_eq!(owned(c.current().unwrap()), e(vals.last().unwrap()));
    if vals.len() > 1 {
        assert_eq!(owned(c.prev_dup().unwrap()), e(&vals[vals.len() - 2]));
    }
    assert_eq!(owned(c.first_dup().unwrap()), e(&vals[0]));
    assert_eq!(owned(c.prev_dup().unwrap()), None);
    let mid = &vals[vals.len() / 2];
    assert_eq!(owned(c.get_both(k, mid).unwrap()), e(mid));
    // GET_BOTH_RANGE from just below a value (bytewise orders: a proper prefix sorts first).
    if o == Order::Bytes && !mid.is_empty() {
        let below = &mid[..mid.len() - 1];
        let want = vs.range(below.to_vec()..).next().map(|sk| o.value(sk));
        assert_eq!(
            owned(c.get_both_range(k, below).unwrap()),
            want.as_ref().and_then(e)
        );
        if !vs.contains(below) {
            assert_eq!(owned(c.get_both(k, below).unwrap()), None);
        }
    }
}

/// GET_MULTIPLE / NEXT_MULTIPLE / PREV_MULTIPLE at key `k` of a DUP_FIXED database hand out
/// its values `vals` (of `size` bytes) in chunks that concatenate to them, forwards and
/// backwards; each chunk is at most a packed leaf.
fn check_multiple(c: &mut Cursor<'_>, k: &[u8], vals: &[Vec<u8>], size: usize) {
    let all = vals.concat();
    let cap = (4096 - format::PAGE_FIELDS) / size;
    assert!(c.set(k).unwrap().is_some());
    let mut chunks = vec![c.get_multiple().unwrap().unwrap().1.to_vec()];
    while let Some((kk, v)) = c.next_multiple().unwrap() {
        assert_eq!(kk, k);
        chunks.push(v.to_vec());
    }
    assert!(chunks
        .iter()
        .all(|ch| ch.len() <= cap * size && ch.len() % size == 0));
    assert!(chunks.concat() == all, "next_multiple chunks");
    let mut back = vec![chunks.last().unwrap().clone()];
    while let Some((_, v)) = c.prev_multiple().unwrap() {
        back.push(v.to_vec());
    }
    back.reverse();
    assert!(back.concat() == all, "prev_multiple chunks");
}

fn verify_txn(r: &cairn::RoTxn<'_>, dbs: &[Database], model: &Model) {
    for (d, (db, m)) in dbs.iter().zip(model).enumerate() {
        let want = pairs(d, m);
        let got: Vec<(Vec<u8>, Vec<u8>)> = r
            .iter(*db)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got.len(), want.len(), "db {d}: pair count");
        assert!(got == want, "db {d}: pairs differ");
        let back = collect(r.iter(*db).unwrap().rev());
        assert!(back.iter().rev().eq(want.iter()), "db {d}: reverse differs");
        // Both ends at once meet in the middle (possibly inside one key's values).
        let mut it = r.iter(*db).unwrap();
        let (mut front, mut tail) = (Vec::new(), Vec::new());
        for step in 0.. {
            let e = if step % 3 == 0 {
                it.next_back()
            } else {
                it.next()
            };
            match e {
                Some(e) if step % 3 == 0 => tail.push(owned(Some(e.unwrap())).unwrap()),
                Some(e) => front.push(owned(Some(e.unwrap())).unwrap()),
                None => break,
            }
        }
        front.extend(tail.into_iter().rev());
        assert!(front == want, "db {d}: meeting ends differ");
        assert_eq!(r.stat(*db).unwrap().entries, want.len() as u64);
        let mut c = r.cursor(*db).unwrap();
        for (k, vs) in m.iter().take(12) {
            assert_eq!(r.count(*db, k).unwrap(), vs.len() as u64);
            let first = ORDERS[d].value(vs.first().unwrap());
            assert_eq!(r.get(*db, k).unwrap(), Some(&first[..]));
            let fwd: Vec<Vec<u8>> = r
                .iter_dup(*db, k)
                .unwrap()
                .map(|v| v.unwrap().to_vec())
                .collect();
            let wantv: Vec<Vec<u8>> = vs.iter().map(|sk| ORDERS[d].value(sk)).collect();
            assert!(fwd == wantv, "db {d}: iter_dup differs");
            let rev: Vec<Vec<u8>> = r
                .iter_dup(*db, k)
                .unwrap()
                .rev()
                .map(|v| v.unwrap().to_vec())
                .collect();
            assert!(
                rev.iter().rev().eq(wantv.iter()),
                "db {d}: iter_dup rev differs"
            );
            check_key(&mut c, d, k, vs);
            if let Some(&(_, size)) = FIXED.iter().find(|f| f.0 == d) {
                check_multiple(&mut r.cursor(*db).unwrap(), k, &wantv, size);
            }
        }
        // Key ranges cover every value of the keys in them, both directions.
        if let Some(mid) = m.keys().nth(m.len() / 2) {
            use std::ops::Bound::{Excluded, Included, Unbounded};
            use std::ops::RangeBounds;
            let bounds: [KeyRange<'_>; 3] = [
                (Included(mid), Unbounded),
                (Unbounded, Included(mid)),
                (Excluded(mid), Unbounded),
            ];
            for (lo, hi) in bounds {
                let want: Vec<&(Vec<u8>, Vec<u8>)> = want
                    .iter()
                    .filter(|(k, _)| (lo, hi).contains(&&k[..]))
                    .collect();
                let fwd = collect(r.range(*db, (lo, hi)).unwrap());
                assert!(
                    fwd.iter().eq(want.iter().copied()),
                    "db {d}: range {lo:?}..{hi:?}"
                );
                let back = collect(r.range(*db, (lo, hi)).unwrap().rev());
                assert!(
                    back.iter().rev().eq(want.iter().copied()),
                    "db {d}: range rev"
                );
            }
        }
        // NEXT_NODUP / PREV_NODUP walk the keys.
        let mut c = r.cursor(*db).unwrap();
        let mut keys = Vec::new();
        while let Some((k, _)) = c.next_nodup().unwrap() {
            keys.push(k.to_vec());
        }
        assert!(keys.iter().eq(m.keys()), "db {d}: next_nodup keys");
        let mut c = r.cursor(*db).unwrap();
        let mut lasts = Vec::new();
        while let Some((k, v)) = c.prev_nodup().unwrap() {
            lasts.push((k.to_vec(), v.to_vec()));
        }
        let want_lasts: Vec<(Vec<u8>, Vec<u8>)> = m
            .iter()
            .rev()
            .map(|(k, vs)| (k.clone(), ORDERS[d].value(vs.last().unwrap())))
            .collect();
        assert!(lasts == want_lasts, "db {d}: prev_nodup");
    }
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "checker: {:?}", rep.problems);
}

fn verify(env: &Env, dbs: &[Database], model: &Model) {
    verify_txn(&env.read_txn().unwrap(), dbs, model);
}

fn run(ops: Vec<Step<Op>>) {
    model_runner::run(ops, vec![Set::new(); ORDERS.len()], open, verify);
}

/// One put through the API and the model, with put flag choice `f`.
fn put(
    txn: &mut cairn::RwTxn<'_>,
    dbs: &[Database],
    m: &mut Model,
    d: usize,
    k: &[u8],
    n: u32,
    f: u8,
) {
    let v = value(d, n);
    let sk = ORDERS[d].sort_key(&v);
    let set = m[d].get(k);
    let exists = set.is_some_and(|s| s.contains(&sk));
    let (flags, want) = match f {
        1 => (
            PutFlags::NO_DUP_DATA,
            if exists { Err("exists") } else { Ok(()) },
        ),
        2 => (
            PutFlags::NO_OVERWRITE,
            if set.is_some() { Err("exists") } else { Ok(()) },
        ),
        3 => (
            PutFlags::APPEND_DUP,
            if set.is_some_and(|s| s.last().unwrap() >= &sk) {
                Err("order")
            } else {
                Ok(())
            },
        ),
        _ => (PutFlags::empty(), Ok(())),
    };
    let r = txn.put(dbs[d], k, &v, flags);
    match (want, r) {
        (Ok(()), Ok(())) => {
            m[d].entry(k.to_vec()).or_default().insert(sk);
        }
        (Err("exists"), Err(Error::KeyExists)) | (Err("order"), Err(Error::AppendOrder)) => {}
        (w, r) => panic!("put {d} flags {f}: wanted {w:?}, got {r:?}"),
    }
}

fn del_pair(
    txn: &mut cairn::RwTxn<'_>,
    dbs: &[Database],
    m: &mut Model,
    d: usize,
    k: &[u8],
    v: &[u8],
) {
    let sk = ORDERS[d].sort_key(v);
    let had = m[d].get_mut(k).is_some_and(|s| s.remove(&sk));
    if m[d].get(k).is_some_and(BTreeSet::is_empty) {
        m[d].remove(k);
    }
    assert_eq!(
        txn.delete_pair(dbs[d], k, v).unwrap(),
        had,
        "delete_pair {d}"
    );
}

impl DataOp for Op {
    type Model = Model;

    fn apply(self, txn: &mut RwTxn<'_>, dbs: &[Database], pending: &mut Model) {
        match self {
            Op::Put(d, k, n, f) => put(txn, dbs, pending, d, &k, n, f),
            Op::DelPair(d, k, n) => del_pair(txn, dbs, pending, d, &k, &value(d, n)),
            Op::DelKey(d, k) => {
                let had = pending[d].remove(&k).is_some();
                assert_eq!(txn.delete(dbs[d], &k).unwrap(), had);
            }
            Op::Grow(d, k, s, n) => {
                for i in 0..n {
                    put(txn, dbs, pending, d, &k, s + i, 0);
                }
                assert_eq!(
                    txn.count(dbs[d], &k).unwrap(),
                    pending[d].get(&k).map_or(0, |s| s.len() as u64)
                );
            }
            Op::Shrink(d, k, keep) => {
                let vals: Vec<Vec<u8>> = pending[d]
                    .get(&k)
                    .map(|s| s.iter().map(|sk| ORDERS[d].value(sk)).collect())
                    .unwrap_or_default();
                for (i, v) in vals.iter().enumerate() {
                    if !(i as u32).is_multiple_of(keep) {
                        del_pair(txn, dbs, pending, d, &k, v);
                    }
                }
            }
            Op::Multiple(d, k, s, n) => {
                let mut buf = Vec::new();
                let mut added = 0;
                let set = pending[d].entry(k.clone()).or_default();
                for i in 0..n {
                    let v = value(d, s + i);
                    if set.insert(ORDERS[d].sort_key(&v)) {
                        added += 1;
                    }
                    buf.extend_from_slice(&v);
                }
                let size = if d == 1 { 8 } else { 4 };
                let got = txn
                    .put_multiple(dbs[d], &k, &buf, size, PutFlags::empty())
                    .unwrap();
                assert_eq!(got, added);
            }
            Op::Nested(changes, keep) => {
                let mut child = txn.nested().unwrap();
                let mut after = pending.clone();
                for (d, k, n, del) in changes {
                    if del {
                        del_pair(&mut child, dbs, &mut after, d, &k, &value(d, n));
                    } else {
                        put(&mut child, dbs, &mut after, d, &k, n, 0);
                    }
                }
                if keep {
                    child.commit().unwrap();
                    *pending = after;
                } else {
                    child.abort();
                }
                for (d, m) in pending.iter().enumerate() {
                    let got = collect(txn.iter(dbs[d]).unwrap());
                    assert!(got == pairs(d, m), "db {d} after nested");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
    #[test]
    fn matches_btreemap_of_sets(ops in proptest::collection::vec(op(), 1..200)) {
        run(ops);
    }
}

/// One key grows from one value to 100,000 and shrinks back, crossing every form both ways,
/// with the other keys' values intact and the checker passing at every milestone.
#[test]
fn one_key_grows_and_shrinks() {
    let (_dir, env, db) = dup_env(DbFlags::empty());
    let mut w = env.write_txn().unwrap();
    for k in [&b"a"[..], b"c"] {
        w.put(db, k, b"x", PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let n = 100_000u32;
    let val = |i: u32| format!("{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000_007).into_bytes();
    let milestones = [1, 2, 10, 40, 100, 300, 1000, 10_000, 100_000];
    let mut have = 0;
    for &m in &milestones {
        let mut w = env.write_txn().unwrap();
        for i in have..m {
            w.put(db, b"b", &val(i), PutFlags::NO_DUP_DATA).unwrap();
        }
        have = m;
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        assert_eq!(r.count(db, b"b").unwrap(), u64::from(m));
        assert_eq!(r.stat(db).unwrap().entries, u64::from(m) + 2);
        let rep = r.check().unwrap();
        assert!(rep.is_ok(), "{m}: {:?}", rep.problems);
    }
    {
        let r = env.read_txn().unwrap();
        let got: Vec<&[u8]> = r.iter_dup(db, b"b").unwrap().map(Result::unwrap).collect();
        assert_eq!(got.len(), n as usize);
        assert!(got.windows(2).all(|p| p[0] < p[1]));
        assert!(r.stat(db).unwrap().leaf_pages > 100);
    }
    // Shrink back through the same milestones, deleting pairs in value order from the middle.
    let mut all: Vec<Vec<u8>> = (0..n).map(val).collect();
    all.sort();
    for &m in milestones.iter().rev().skip(1) {
        let mut w = env.write_txn().unwrap();
        while all.len() > m as usize {
            let v = all.remove(all.len() / 2);
            assert!(w.delete_pair(db, b"b", &v).unwrap());
        }
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        assert_eq!(r.count(db, b"b").unwrap(), u64::from(m));
        let got: Vec<Vec<u8>> = r
            .iter_dup(db, b"b")
            .unwrap()
            .map(|v| v.unwrap().to_vec())
            .collect();
        assert!(got == all);
        let rep = r.check().unwrap();
        assert!(rep.is_ok(), "{m}: {:?}", rep.problems);
    }
    let r = env.read_txn().unwrap();
    let st = r.stat(db).unwrap();
    assert_eq!((st.entries, st.leaf_pages, st.branch_pages), (3, 1, 0));
    assert_eq!(r.get(db, b"b").unwrap(), Some(&all[0][..]));
}

/// A DUP_FIXED | INTEGER_DUP key grows to 100,000 values put in random order (4- or 8-byte
/// values: packed sub-tree leaves, several levels of branches) and shrinks back to one value,
/// deleting in random order; at every milestone the values, their order, the GET_MULTIPLE
/// chunks, the page counts and the checker are verified.
fn fixed_key_grows_and_shrinks(size: usize) {
    let (_dir, env, db) = dup_env(DbFlags::DUP_FIXED | DbFlags::INTEGER_DUP);
    let order = if size == 4 { Order::Int4 } else { Order::Int };
    // Distinct values in a scrambled order (an odd multiplier permutes the integers).
    let val = |i: u32| -> Vec<u8> {
        let x = i.wrapping_mul(2_654_435_761);
        if size == 4 {
            x.to_ne_bytes().to_vec()
        } else {
            (u64::from(x) << 7 | 0x55).to_ne_bytes().to_vec()
        }
    };
    let mut w = env.write_txn().unwrap();
    for k in [&b"a"[..], b"c"] {
        w.put(db, k, &val(7), PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let verify = |model: &BTreeSet<Vec<u8>>, what: &str| {
        let r = env.read_txn().unwrap();
        let want: Vec<Vec<u8>> = model.iter().map(|sk| order.value(sk)).collect();
        assert_eq!(r.count(db, b"b").unwrap(), want.len() as u64, "{what}");
        let got: Vec<Vec<u8>> = r
            .iter_dup(db, b"b")
            .unwrap()
            .map(|v| v.unwrap().to_vec())
            .collect();
        assert!(got == want, "{what}: values");
        let back: Vec<Vec<u8>> = r
            .iter_dup(db, b"b")
            .unwrap()
            .rev()
            .map(|v| v.unwrap().to_vec())
            .collect();
        assert!(back.iter().rev().eq(want.iter()), "{what}: reverse");
        if !want.is_empty() {
            check_multiple(&mut r.cursor(db).unwrap(), b"b", &want, size);
            let mut c = r.cursor(db).unwrap();
            let mid = &want[want.len() / 2];
            assert_eq!(c.get_both(b"b", mid).unwrap().map(|e| e.1), Some(&mid[..]));
        }
        let st = r.stat(db).unwrap();
        assert_eq!(st.entries, want.len() as u64 + 2, "{what}");
        let rep = r.check().unwrap();
        assert!(rep.is_ok(), "{what}: {:?}", rep.problems);
        (st.leaf_pages, (want.len() * size) as u64)
    };
    let mut model = BTreeSet::new();
    let milestones = [1u32, 2, 10, 300, 1000, 5000, 30_000, 100_000];
    let mut have = 0;
    for &m in &milestones {
        let mut w = env.write_txn().unwrap();
        for i in have..m {
            let v = val(i);
            w.put(db, b"b", &v, PutFlags::NO_DUP_DATA).unwrap();
            model.insert(order.sort_key(&v));
        }
        have = m;
        w.commit().unwrap();
        let (leaves, data) = verify(&model, &format!("grown to {m}"));
        // Random order fills leaves about 70%: packed, 100,000 values of 8 bytes take about
        // 280 leaves; as nodes with headers and slots they would take about 770.
        assert!(
            leaves * 4096 <= data * 16 / 10 + 2 * 4096,
            "{m}: {leaves} leaf pages for {data} bytes of values"
        );
    }
    let mut peak = verify(&model, "peak").0;
    // Shrink in a different scrambled order, through the same milestones.
    let mut left: Vec<u32> = (0..have).collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..left.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        left.swap(i, (x % (i as u64 + 1)) as usize);
    }
    for &m in milestones.iter().rev().skip(1) {
        let mut w = env.write_txn().unwrap();
        while left.len() > m as usize {
            let v = val(left.pop().unwrap());
            assert!(w.delete_pair(db, b"b", &v).unwrap());
            model.remove(&order.sort_key(&v));
        }
        w.commit().unwrap();
        let (leaves, _) = verify(&model, &format!("shrunk to {m}"));
        assert!(leaves <= peak, "{m}: {leaves} leaf pages, {peak} before");
        peak = leaves;
    }
    let r = env.read_txn().unwrap();
    let st = r.stat(db).unwrap();
    assert_eq!((st.entries, st.leaf_pages, st.branch_pages), (3, 1, 0));
}

#[test]
fn fixed_key_grows_and_shrinks_u32() {
    fixed_key_grows_and_shrinks(4);
}

#[test]
fn fixed_key_grows_and_shrinks_u64() {
    fixed_key_grows_and_shrinks(8);
}

/// Packed leaves, measured: 100,000 8-byte values under one key, loaded in order (one
/// transaction) or with APPEND_DUP, take at most 1.15 x 800 KB of leaf pages (packed: 198
/// leaves of 507 values; with a node header and a slot per value they would take 538).
#[test]
fn fixed_values_are_stored_packed() {
    for flags in [PutFlags::empty(), PutFlags::APPEND_DUP] {
        let (_dir, env, db) = dup_env(DbFlags::DUP_FIXED);
        let mut w = env.write_txn().unwrap();
        for i in 0..100_000u64 {
            w.put(db, b"k", &i.to_be_bytes(), flags).unwrap();
        }
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let st = r.stat(db).unwrap();
        assert_eq!(st.entries, 100_000);
        assert!(
            st.leaf_pages * st.page_size as u64 <= 800_000 * 115 / 100,
            "{flags:?}: {} leaf pages",
            st.leaf_pages
        );
        // The main tree's leaf, and the sub-tree's leaves all full but the last.
        assert_eq!(
            st.leaf_pages,
            1 + 100_000u64.div_ceil(507),
            "{flags:?}: full leaves"
        );
        // GET_MULTIPLE hands out each leaf whole.
        let mut c = r.cursor(db).unwrap();
        c.set(b"k").unwrap();
        let (_, first) = c.get_multiple().unwrap().unwrap();
        assert_eq!(first.len(), 507 * 8);
        assert!(r.check().unwrap().is_ok());
        // Emptying the key frees every sub-tree page.
        drop(r);
        let mut w = env.write_txn().unwrap();
        assert!(w.delete(db, b"k").unwrap());
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let st = r.stat(db).unwrap();
        assert_eq!((st.entries, st.leaf_pages, st.branch_pages), (0, 0, 0));
        assert!(r.check().unwrap().is_ok());
    }
}

/// Keys whose value sets grow together and then all move out to sub-trees leave the main
/// tree compact: while the sets grow inline (~1 KB each) the main leaves split down to a few
/// keys each; when a set moves out its node shrinks to a sub-tree record, and the leaf is
/// merged with a sibling as after a delete. 600 keys, their values put round-robin until each
/// key holds one sub-tree leaf: without the merge the main tree kept ~200 leaves of three
/// records and a third level; merged, its records (~75 bytes each) fill ~11 pages.
#[test]
fn main_tree_stays_compact_when_sets_move_out() {
    const KEYS: u64 = 600;
    for (extra, per_key, size) in [(DbFlags::empty(), 80u64, 16), (DbFlags::DUP_FIXED, 200, 8)] {
        let (_dir, env, db) = dup_env(extra);
        let mut w = env.write_txn().unwrap();
        for v in 0..per_key {
            for k in 0..KEYS {
                let val = format!("{:0size$}", v * KEYS + k);
                w.put(
                    db,
                    format!("key{k:06}").as_bytes(),
                    val.as_bytes(),
                    PutFlags::empty(),
                )
                .unwrap();
            }
            if v % 10 == 9 {
                w.commit().unwrap();
                w = env.write_txn().unwrap();
            }
        }
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let st = r.stat(db).unwrap();
        assert_eq!(st.entries, KEYS * per_key);
        // Each key's values fit one sub-tree leaf (no sub-tree branches), so the branch pages
        // are the main tree's and the leaves beyond one per key are its leaves.
        let main_leaves = st.leaf_pages - KEYS;
        assert!(
            st.depth == 2 && main_leaves <= 45,
            "{extra:?}: depth {}, {main_leaves} main leaves, {} branch pages",
            st.depth,
            st.branch_pages
        );
        assert!(r.check().unwrap().is_ok());
    }
}

/// The write cursor over a DUP_FIXED sub-tree (packed leaves): it walks the values, deletes
/// every other one under it, puts new ones through itself, and GET_BOTH finds them.
#[test]
fn cursor_mut_on_packed_subtree() {
    let (_dir, env, db) = dup_env(DbFlags::DUP_FIXED);
    let v = |i: u64| (i * 2).to_be_bytes().to_vec();
    let mut w = env.write_txn().unwrap();
    for i in 0..3000 {
        w.put(db, b"k", &v(i), PutFlags::empty()).unwrap();
    }
    w.put(db, b"z", &v(1), PutFlags::empty()).unwrap();
    let mut model: BTreeSet<Vec<u8>> = (0..3000).map(v).collect();
    {
        let mut c = w.cursor_mut(db).unwrap();
        let mut at = c.set(b"k").unwrap();
        let mut i = 0u64;
        while let Some((k, val)) = at {
            assert_eq!((k.as_slice(), &val), (&b"k"[..], &v(i)));
            if i % 2 == 1 {
                c.del_current().unwrap();
                model.remove(&val);
                // As in LMDB, the step after a delete lands on the value that followed.
            }
            at = c.next_dup().unwrap();
            i += 1;
        }
        assert_eq!(i, 3000);
        for i in 3000..3300 {
            c.put(b"k", &v(i), PutFlags::empty()).unwrap();
            model.insert(v(i));
        }
        assert_eq!(
            c.get_both(b"k", &v(3150)).unwrap(),
            Some((b"k".to_vec(), v(3150)))
        );
        assert_eq!(c.count().unwrap(), model.len() as u64);
        assert_eq!(c.get_both(b"k", &v(1)).unwrap(), None);
    }
    let got: Vec<Vec<u8>> = w
        .iter_dup(db, b"k")
        .unwrap()
        .map(|x| x.unwrap().to_vec())
        .collect();
    assert!(got.iter().eq(model.iter()));
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
    check_multiple(
        &mut r.cursor(db).unwrap(),
        b"k",
        &model.iter().cloned().collect::<Vec<_>>(),
        8,
    );
}

/// GET_MULTIPLE / NEXT_MULTIPLE / PREV_MULTIPLE over inline sets and sub-tree leaves.
#[test]
fn multiple_ops() {
    let (_dir, env, db) = dup_env(DbFlags::DUP_FIXED | DbFlags::INTEGER_DUP);
    let mut w = env.write_txn().unwrap();
    let mut buf = Vec::new();
    for i in (0..5000u32).rev() {
        buf.extend_from_slice(&i.to_ne_bytes());
    }
    assert_eq!(
        w.put_multiple(db, b"big", &buf, 4, PutFlags::empty())
            .unwrap(),
        5000
    );
    w.put_multiple(db, b"small", &buf[..12], 4, PutFlags::empty())
        .unwrap();
    assert!(matches!(
        w.put(db, b"big", &7u64.to_ne_bytes(), PutFlags::empty()),
        Err(Error::BadValueSize {
            len: 8,
            expected: 4
        })
    ));
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let decode = |b: &[u8]| -> Vec<u32> {
        b.chunks(4)
            .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    };
    let mut c = r.cursor(db).unwrap();
    c.set(b"big").unwrap();
    let mut seen = Vec::new();
    let (k, first) = c.get_multiple().unwrap().unwrap();
    assert_eq!(k, b"big");
    seen.extend(decode(first));
    let mut chunks = 1;
    while let Some((_, vals)) = c.next_multiple().unwrap() {
        seen.extend(decode(vals));
        chunks += 1;
    }
    assert_eq!(seen, (0..5000).collect::<Vec<u32>>());
    // Packed leaves hold (4096 - 40) / 4 = 1014 values: 5 leaves (nodes with headers and
    // slots would take 13 or more).
    assert!((5..=6).contains(&chunks), "{chunks} chunks");
    let mut back = Vec::new();
    while let Some((_, vals)) = c.prev_multiple().unwrap() {
        back.push(decode(vals));
    }
    assert_eq!(back.len(), chunks - 1);
    let mut c = r.cursor(db).unwrap();
    c.set(b"small").unwrap();
    assert_eq!(
        decode(c.get_multiple().unwrap().unwrap().1),
        vec![4997, 4998, 4999]
    );
    assert!(c.next_multiple().unwrap().is_none());
    // MULTIPLE needs DUP_FIXED.
    let plain = env.main_db();
    assert!(matches!(
        r.cursor(plain).unwrap().get_multiple(),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn errors_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    assert!(matches!(
        w.create_db(Some("x"), DbFlags::CREATE | DbFlags::DUP_FIXED),
        Err(Error::Invalid(_))
    ));
    let db = w
        .create_db(Some("d"), DbFlags::CREATE | DbFlags::DUP_SORT)
        .unwrap();
    let max = env.max_key_size();
    assert!(matches!(
        w.put(db, b"k", &vec![1u8; max + 1], PutFlags::empty()),
        Err(Error::ValueTooLarge { .. })
    ));
    // One key limit for every kind of database (LMDB's maxkeysize): a key of exactly
    // max_key_size() bytes goes into a DUPSORT database, one byte more does not.
    assert!(matches!(
        w.put(db, &vec![1u8; max + 1], b"v", PutFlags::empty()),
        Err(Error::KeyTooLarge { .. })
    ));
    let longest = vec![2u8; max];
    w.put(db, &longest, b"v1", PutFlags::empty()).unwrap();
    w.put(db, &longest, b"v2", PutFlags::empty()).unwrap();
    assert_eq!(w.count(db, &longest).unwrap(), 2);
    assert!(w.delete(db, &longest).unwrap());
    // The largest value and a large key still work in every form.
    let big = vec![9u8; max];
    let key = vec![b'K'; max - 100];
    w.put(db, &key, &big, PutFlags::empty()).unwrap();
    w.put(db, &key, b"small", PutFlags::empty()).unwrap();
    assert_eq!(w.count(db, &key).unwrap(), 2);
    assert!(w.delete_pair(db, &key, &big).unwrap());
    assert_eq!(w.get(db, &key).unwrap(), Some(&b"small"[..]));
    assert!(matches!(
        w.put_reserve(db, b"r", 4, PutFlags::empty()),
        Err(Error::Invalid(_))
    ));
    w.put(db, b"k", b"m", PutFlags::empty()).unwrap();
    w.put(db, b"k", b"m", PutFlags::empty()).unwrap();
    assert!(matches!(
        w.put(db, b"k", b"m", PutFlags::NO_DUP_DATA),
        Err(Error::KeyExists)
    ));
    assert!(matches!(
        w.put(db, b"k", b"a", PutFlags::APPEND_DUP),
        Err(Error::AppendOrder)
    ));
    w.put(db, b"k", b"z", PutFlags::APPEND_DUP).unwrap();
    assert!(matches!(
        w.put(db, b"k", b"q", PutFlags::NO_OVERWRITE),
        Err(Error::KeyExists)
    ));
    assert_eq!(w.count(db, b"k").unwrap(), 2);
    let int = w
        .create_db(
            Some("i"),
            DbFlags::CREATE | DbFlags::DUP_SORT | DbFlags::INTEGER_DUP,
        )
        .unwrap();
    assert!(matches!(
        w.put(int, b"k", b"abc", PutFlags::empty()),
        Err(Error::BadValueSize { .. })
    ));
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    assert!(r.check().unwrap().is_ok());
}

/// Compaction keeps every pair; clearing a database frees its sub-trees (the checker finds
/// every page either used or free). Variable-size values, and DUP_FIXED (packed leaves).
#[test]
fn compact_copy_and_drop() {
    compact_copy_and_drop_with(DbFlags::empty());
    compact_copy_and_drop_with(DbFlags::DUP_FIXED);
}

fn compact_copy_and_drop_with(flags: DbFlags) {
    let (dir, env, db) = dup_env(flags);
    let mut w = env.write_txn().unwrap();
    let mut want = Vec::new();
    for k in 0..50u32 {
        for v in 0..(k * k) {
            let (k, v) = (format!("key{k:03}"), format!("val{v:06}"));
            w.put(db, k.as_bytes(), v.as_bytes(), PutFlags::empty())
                .unwrap();
            want.push((k.into_bytes(), v.into_bytes()));
        }
    }
    w.commit().unwrap();
    let out = dir.path().join("compact.cairn");
    env.copy_to(&out, true).unwrap();
    let env2 = Env::options().no_subdir(true).open(&out).unwrap();
    let r = env2.read_txn().unwrap();
    let db2 = r.open_db(Some("d")).unwrap();
    let got = collect(r.iter(db2).unwrap());
    assert!(got == want);
    assert!(r.check().unwrap().is_ok());
    let before = env.read_txn().unwrap().stat(db).unwrap();
    let after = r.stat(db2).unwrap();
    assert!(
        after.leaf_pages <= before.leaf_pages,
        "{after:?} vs {before:?}"
    );
    drop(r);
    let mut w = env.write_txn().unwrap();
    w.drop_db(db).unwrap();
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
    assert_eq!(rep.databases, 0);
}

/// The write cursor in a DUP_SORT database stands on pairs: it steps through values, deletes
/// the pair under it and replaces it.
#[test]
fn cursor_mut_on_pairs() {
    let (_dir, env, db) = dup_env(DbFlags::empty());
    let mut w = env.write_txn().unwrap();
    for (k, v) in [("a", "1"), ("a", "2"), ("a", "3"), ("b", "1"), ("c", "5")] {
        w.put(db, k.as_bytes(), v.as_bytes(), PutFlags::empty())
            .unwrap();
    }
    let pair = |k: &str, v: &str| Some((k.as_bytes().to_vec(), v.as_bytes().to_vec()));
    {
        let mut c = w.cursor_mut(db).unwrap();
        assert_eq!(c.first().unwrap(), pair("a", "1"));
        assert_eq!(c.count().unwrap(), 3);
        assert_eq!(c.next().unwrap(), pair("a", "2"));
        c.del_current().unwrap();
        assert_eq!(c.next().unwrap(), pair("a", "3"));
        assert_eq!(c.next_dup().unwrap(), None);
        assert_eq!(c.current().unwrap(), pair("a", "3"));
        c.put_current(b"4").unwrap();
        assert_eq!(c.current().unwrap(), pair("a", "4"));
        assert_eq!(c.next_nodup().unwrap(), pair("b", "1"));
        assert_eq!(c.prev().unwrap(), pair("a", "4"));
        assert_eq!(c.get_both(b"c", b"5").unwrap(), pair("c", "5"));
        c.del_current_all().unwrap();
        assert_eq!(c.last().unwrap(), pair("b", "1"));
    }
    let all = collect(w.iter(db).unwrap());
    let want: Vec<(Vec<u8>, Vec<u8>)> = [("a", "1"), ("a", "4"), ("b", "1")]
        .iter()
        .map(|(k, v)| pair(k, v).unwrap())
        .collect();
    assert_eq!(all, want);
    assert_eq!(w.stat(db).unwrap().entries, 3);
    w.commit().unwrap();
}

/// Reads everything a DUP_SORT database "d" holds, every way, ignoring errors: it must not
/// panic or hang however the file was damaged. Loops are bounded by the pristine pair count.
fn read_all_dups(path: &std::path::Path, bound: usize) {
    let Ok(env) = Env::open(path) else { return };
    let Ok(r) = env.read_txn() else { return };
    let Ok(db) = r.open_db(Some("d")) else { return };
    let _ = r.check();
    let keys: Vec<Vec<u8>> = match r.iter(db) {
        Ok(it) => it
            .take(bound)
            .filter_map(Result::ok)
            .map(|(k, _)| k.to_vec())
            .collect(),
        Err(_) => Vec::new(),
    };
    if let Ok(it) = r.iter(db) {
        it.rev().take(bound).for_each(drop);
    }
    for k in keys.iter().step_by(97) {
        let _ = r.get(db, k);
        let _ = r.count(db, k);
        if let Ok(it) = r.iter_dup(db, k) {
            it.take(bound).for_each(drop);
        }
        if let Ok(it) = r.iter_dup(db, k) {
            it.rev().take(bound).for_each(drop);
        }
        if let Ok(mut c) = r.cursor(db) {
            let _ = c.set(k);
            let _ = c.last_dup();
            let _ = c.prev_dup();
            let _ = c.get_both_range(k, b"v0");
            let _ = c.next_nodup();
            let _ = c.prev_nodup();
        }
    }
}

/// Damaged value sets and sub-tree records (bytes changed in leaf pages, checksums made valid
/// again so that the bounds checks are what is tested) give errors, never a panic.
#[test]
fn damaged_dup_pages_give_errors_not_panics() {
    let (dir, env, db) = dup_env(DbFlags::empty());
    let mut w = env.write_txn().unwrap();
    let mut pairs = 0;
    for k in 0..40u32 {
        for v in 0..(k * k / 2).max(1) {
            let (k, v) = (format!("k{k:03}"), format!("v{v:05}"));
            w.put(db, k.as_bytes(), v.as_bytes(), PutFlags::empty())
                .unwrap();
            pairs += 1;
        }
    }
    w.commit().unwrap();
    drop(env);
    let path = dir.path().join("data.cairn");
    let pristine = std::fs::read(&path).unwrap();
    const PS: usize = 4096;
    const KIND: usize = 24;
    let leaves: Vec<usize> = (1..pristine.len() / PS)
        .filter(|&pg| pristine[pg * PS + KIND] == format::KIND_LEAF)
        .collect();
    assert!(leaves.len() > 5);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let cases: usize = std::env::var("CAIRN_DUP_DAMAGE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    for case in 0..cases {
        let mut img = pristine.clone();
        let pg = leaves[rnd(leaves.len())];
        let page = &mut img[pg * PS..(pg + 1) * PS];
        for _ in 0..1 + rnd(4) {
            let at = format::SLOTS_AT + rnd(PS - format::SLOTS_AT);
            page[at] ^= 1 << rnd(8);
        }
        let txnid = format::page_id(page).unwrap().txnid;
        format::seal_page(page, pg as u64, txnid);
        std::fs::write(&path, &img).unwrap();
        let p = path.clone();
        let r = std::panic::catch_unwind(move || read_all_dups(p.parent().unwrap(), pairs + 1));
        assert!(r.is_ok(), "case {case}: damage to page {pg} panicked");
    }
}
