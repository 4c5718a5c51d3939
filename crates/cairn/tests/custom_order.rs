//! User-supplied key and value orders (Env::set_key_order / set_dup_order, the C API's
//! mdb_set_compare / mdb_set_dupsort): every path that compares keys or values uses them, the
//! checker verifies them, the file records that they exist (format::ORDER_CUSTOM_*), and a
//! handle without them checks such a file without calling it corrupted, refuses to write it,
//! and refuses to compact it.
//!
//! The model-based test keeps `BTreeMap<K, BTreeSet<V>>` where K and V are newtypes ordered by
//! the same functions the databases use.

use cairn::format::CmpFn;
use cairn::{Database, DbFlags, Env, Error, PutFlags};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Keys: shorter first, then bytes descending (neither bytewise nor REVERSE_KEY).
fn key_order(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| b.cmp(a))
}

/// Values: by length modulo 3, then bytes descending.
fn dup_order(a: &[u8], b: &[u8]) -> Ordering {
    (a.len() % 3).cmp(&(b.len() % 3)).then_with(|| b.cmp(a))
}

/// Fixed-size values: little-endian u32 in descending numeric order.
fn fixed_order(a: &[u8], b: &[u8]) -> Ordering {
    let n = |x: &[u8]| u32::from_le_bytes(x.try_into().expect("4-byte values"));
    n(b).cmp(&n(a))
}

fn arc(f: fn(&[u8], &[u8]) -> Ordering) -> CmpFn {
    Arc::new(f)
}

macro_rules! ordered {
    ($name:ident, $f:ident) => {
        #[derive(Clone, Debug, PartialEq, Eq)]
        struct $name(Vec<u8>);
        impl Ord for $name {
            fn cmp(&self, o: &Self) -> Ordering {
                $f(&self.0, &o.0)
            }
        }
        impl PartialOrd for $name {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }
    };
}
ordered!(K, key_order);
ordered!(V, dup_order);
ordered!(F, fixed_order);

/// The databases of the model test: `plain` (custom key order), `dups` (DUP_SORT, custom key
/// and value orders), `fixed` (DUP_SORT | DUP_FIXED, custom value order only).
struct Dbs {
    plain: Database,
    dups: Database,
    fixed: Database,
}

fn set_orders(env: &Env, d: &Dbs) {
    env.set_key_order(d.plain, Some(arc(key_order))).unwrap();
    env.set_key_order(d.dups, Some(arc(key_order))).unwrap();
    env.set_dup_order(d.dups, Some(arc(dup_order))).unwrap();
    env.set_dup_order(d.fixed, Some(arc(fixed_order))).unwrap();
}

/// Opens (creating) the three databases; with `orders`, sets their orders.
fn open(dir: &std::path::Path, orders: bool) -> (Env, Dbs) {
    let env = Env::options().max_dbs(8).open(dir).unwrap();
    let mut w = env.write_txn().unwrap();
    let d = Dbs {
        plain: w.create_db(Some("plain"), DbFlags::CREATE).unwrap(),
        dups: w
            .create_db(Some("dups"), DbFlags::CREATE | DbFlags::DUP_SORT)
            .unwrap(),
        fixed: w
            .create_db(
                Some("fixed"),
                DbFlags::CREATE | DbFlags::DUP_SORT | DbFlags::DUP_FIXED,
            )
            .unwrap(),
    };
    w.commit().unwrap();
    if orders {
        set_orders(&env, &d);
    }
    (env, d)
}

#[derive(Clone, Debug, Default)]
struct Model {
    plain: BTreeMap<K, Vec<u8>>,
    dups: BTreeMap<K, BTreeSet<V>>,
    fixed: BTreeMap<Vec<u8>, BTreeSet<F>>,
}

#[derive(Clone, Debug)]
enum Flag {
    None,
    NoOverwrite,
    NoDupData,
    Append,
    AppendDup,
}

#[derive(Clone, Debug)]
enum Op {
    PutPlain(Vec<u8>, Vec<u8>, bool, bool),
    DelPlain(Vec<u8>),
    Put(Vec<u8>, Vec<u8>, Flag),
    DelPair(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
    /// Adds `n` values derived from `seed` to a key: past the inline limit into a sub-tree.
    Grow(Vec<u8>, u8, usize),
    /// Deletes the first (or last) `n` values of a key in value order: back inline.
    Shrink(Vec<u8>, bool, usize),
    CursorDel(Vec<u8>, Vec<u8>),
    PutMultiple(Vec<u8>, Vec<u32>, bool),
    DelFixed(Vec<u8>, u32),
    Nested(Vec<(Vec<u8>, Vec<u8>, bool)>, bool),
    Probe(Vec<u8>, Vec<u8>),
    Commit,
    Abort,
    Reopen,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u8..6).prop_map(|i| vec![b'k', b'0' + i]),
        proptest::collection::vec(any::<u8>(), 1..6),
        (0u8..3).prop_map(|i| vec![b'L' + i; 300]),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u8..8).prop_map(|i| vec![b'v', b'a' + i]),
        proptest::collection::vec(any::<u8>(), 0..30),
    ]
}

fn flag() -> impl Strategy<Value = Flag> {
    prop_oneof![
        4 => Just(Flag::None),
        1 => Just(Flag::NoOverwrite),
        2 => Just(Flag::NoDupData),
        1 => Just(Flag::Append),
        1 => Just(Flag::AppendDup),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), value(), any::<bool>(), any::<bool>())
            .prop_map(|(k, v, a, b)| Op::PutPlain(k, v, a, b)),
        2 => key().prop_map(Op::DelPlain),
        12 => (key(), value(), flag()).prop_map(|(k, v, f)| Op::Put(k, v, f)),
        4 => (key(), value()).prop_map(|(k, v)| Op::DelPair(k, v)),
        1 => key().prop_map(Op::Del),
        2 => (key(), any::<u8>(), 1usize..150).prop_map(|(k, s, n)| Op::Grow(k, s, n)),
        2 => (key(), any::<bool>(), 1usize..150).prop_map(|(k, f, n)| Op::Shrink(k, f, n)),
        2 => (key(), value()).prop_map(|(k, v)| Op::CursorDel(k, v)),
        3 => (key(), proptest::collection::vec(0u32..600, 1..80), any::<bool>())
            .prop_map(|(k, v, f)| Op::PutMultiple(k, v, f)),
        1 => (key(), 0u32..600).prop_map(|(k, v)| Op::DelFixed(k, v)),
        1 => (proptest::collection::vec((key(), value(), any::<bool>()), 0..12), any::<bool>())
            .prop_map(|(v, c)| Op::Nested(v, c)),
        4 => (key(), value()).prop_map(|(k, v)| Op::Probe(k, v)),
        3 => Just(Op::Commit),
        1 => Just(Op::Abort),
        1 => Just(Op::Reopen),
    ]
}

fn grown(seed: u8, i: usize) -> Vec<u8> {
    let mut v = format!("g{seed:03}-{i:04}").into_bytes();
    v.truncate(5 + i % 5);
    v.extend(std::iter::repeat_n(seed, i % 7));
    v
}

/// Puts into `dups` as the engine should, checking the outcome against the model.
fn put_dup(w: &mut cairn::RwTxn<'_>, db: Database, m: &mut Model, k: &[u8], v: &[u8], f: &Flag) {
    let kk = K(k.to_vec());
    let vv = V(v.to_vec());
    let set = m.dups.get(&kk);
    let flags = match f {
        Flag::None => PutFlags::empty(),
        Flag::NoOverwrite => PutFlags::NO_OVERWRITE,
        Flag::NoDupData => PutFlags::NO_DUP_DATA,
        Flag::Append => PutFlags::APPEND,
        Flag::AppendDup => PutFlags::APPEND_DUP,
    };
    // None: the put must fail and change nothing.
    let ok = match f {
        Flag::None => true,
        Flag::NoOverwrite => set.is_none(),
        Flag::NoDupData => set.is_none_or(|s| !s.contains(&vv)),
        Flag::Append => match m.dups.keys().next_back() {
            None => true,
            Some(last) => *last <= kk,
        },
        Flag::AppendDup => set.is_none_or(|s| s.iter().next_back().is_none_or(|x| *x < vv)),
    };
    let r = w.put(db, k, v, flags);
    if ok {
        r.unwrap();
        m.dups.entry(kk).or_default().insert(vv);
    } else {
        let e = r.expect_err("the put had to fail");
        assert!(
            matches!(e, Error::KeyExists | Error::AppendOrder),
            "{f:?}: {e}"
        );
    }
}

fn del_pair(w: &mut cairn::RwTxn<'_>, db: Database, m: &mut Model, k: &[u8], v: &[u8]) {
    let kk = K(k.to_vec());
    let had = m
        .dups
        .get_mut(&kk)
        .is_some_and(|s| s.remove(&V(v.to_vec())));
    if m.dups.get(&kk).is_some_and(BTreeSet::is_empty) {
        m.dups.remove(&kk);
    }
    assert_eq!(w.delete_pair(db, k, v).unwrap(), had);
}

/// Positioning operations of both kinds of transaction against the model.
macro_rules! probe {
    ($t:expr, $d:expr, $m:expr, $k:expr, $v:expr) => {{
        let (t, d, m, k, v): (_, &Dbs, &Model, &Vec<u8>, &Vec<u8>) = ($t, $d, $m, $k, $v);
        let kk = K(k.clone());
        let owned = |e: Option<(&[u8], &[u8])>| e.map(|(a, b)| (a.to_vec(), b.to_vec()));
        // Plain database: get, SET, SET_RANGE, range iterators.
        assert_eq!(
            t.get(d.plain, k).unwrap().map(<[u8]>::to_vec),
            m.plain.get(&kk).cloned()
        );
        let mut c = t.cursor(d.plain).unwrap();
        let want = m
            .plain
            .range(kk.clone()..)
            .next()
            .map(|(a, b)| (a.0.clone(), b.clone()));
        assert_eq!(owned(c.set_range(k).unwrap()), want);
        let want_prev = m
            .plain
            .range(..kk.clone())
            .next_back()
            .map(|(a, b)| (a.0.clone(), b.clone()));
        if want.is_some() {
            assert_eq!(owned(c.prev().unwrap()), want_prev);
        }
        let got: Vec<Vec<u8>> = t
            .range(d.plain, &k[..]..)
            .unwrap()
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        let exp: Vec<Vec<u8>> = m
            .plain
            .range(kk.clone()..)
            .map(|e| e.0 .0.clone())
            .collect();
        assert_eq!(got, exp);
        let got: Vec<Vec<u8>> = t
            .range(d.plain, ..=&k[..])
            .unwrap()
            .rev()
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        let exp: Vec<Vec<u8>> = m
            .plain
            .range(..=kk.clone())
            .rev()
            .map(|e| e.0 .0.clone())
            .collect();
        assert_eq!(got, exp);
        // DUP_SORT database.
        let set = m.dups.get(&kk);
        assert_eq!(
            t.get(d.dups, k).unwrap().map(<[u8]>::to_vec),
            set.map(|s| s.first().unwrap().0.clone())
        );
        assert_eq!(
            t.count(d.dups, k).unwrap(),
            set.map_or(0, |s| s.len() as u64)
        );
        let vals: Vec<Vec<u8>> = t
            .iter_dup(d.dups, k)
            .unwrap()
            .map(|e| e.unwrap().to_vec())
            .collect();
        let exp: Vec<Vec<u8>> = set
            .map(|s| s.iter().map(|x| x.0.clone()).collect())
            .unwrap_or_default();
        assert_eq!(vals, exp);
        let mut c = t.cursor(d.dups).unwrap();
        let both = c.get_both(k, v).unwrap().is_some();
        assert_eq!(both, set.is_some_and(|s| s.contains(&V(v.clone()))));
        let want = set.and_then(|s| s.range(V(v.clone())..).next().map(|x| x.0.clone()));
        let got = c.get_both_range(k, v).unwrap().map(|e| e.1.to_vec());
        assert_eq!(got, want);
        if let Some(at) = want {
            // NEXT_DUP / PREV_DUP from there, FIRST_DUP / LAST_DUP, count.
            let s = set.unwrap();
            let after: Vec<Vec<u8>> = s
                .range(V(at.clone())..)
                .skip(1)
                .map(|x| x.0.clone())
                .collect();
            let mut seen = Vec::new();
            while let Some((_, x)) = c.next_dup().unwrap() {
                seen.push(x.to_vec());
            }
            assert_eq!(seen, after);
            assert_eq!(c.count(), s.len() as u64);
            assert_eq!(c.first_dup().unwrap().unwrap().1, &s.first().unwrap().0[..]);
            assert_eq!(c.prev_dup().unwrap(), None);
            assert_eq!(c.last_dup().unwrap().unwrap().1, &s.last().unwrap().0[..]);
            // NEXT_NODUP / PREV_NODUP.
            let next_key = m
                .dups
                .range(kk.clone()..)
                .nth(1)
                .map(|(a, b)| (a.0.clone(), b.first().unwrap().0.clone()));
            assert_eq!(owned(c.next_nodup().unwrap()), next_key);
            c.get_both_range(k, v).unwrap();
            let prev_key = m
                .dups
                .range(..kk.clone())
                .next_back()
                .map(|(a, b)| (a.0.clone(), b.last().unwrap().0.clone()));
            assert_eq!(owned(c.prev_nodup().unwrap()), prev_key);
        }
        let want = m
            .dups
            .range(kk.clone()..)
            .next()
            .map(|(a, b)| (a.0.clone(), b.first().unwrap().0.clone()));
        assert_eq!(owned(c.set_range(k).unwrap()), want);
        assert_eq!(owned(c.set(k).unwrap()).is_some(), set.is_some());
        // Both ends of the pair iterator, interleaved, meet where the model says.
        let all: Vec<(Vec<u8>, Vec<u8>)> = m
            .dups
            .iter()
            .flat_map(|(a, s)| s.iter().map(move |x| (a.0.clone(), x.0.clone())))
            .collect();
        let mut it = t.iter(d.dups).unwrap();
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let f = it
                .next()
                .map(|e| e.map(|(a, b)| (a.to_vec(), b.to_vec())).unwrap());
            let Some(f) = f else { break };
            front.push(f);
            let b = it
                .next_back()
                .map(|e| e.map(|(a, b)| (a.to_vec(), b.to_vec())).unwrap());
            let Some(b) = b else { break };
            back.push(b);
        }
        back.reverse();
        front.extend(back);
        assert_eq!(front, all);
        // DUP_FIXED: GET_MULTIPLE / NEXT_MULTIPLE hand out the values in the custom order.
        let want: Vec<u8> = m
            .fixed
            .get(k)
            .map(|s| s.iter().flat_map(|x| x.0.clone()).collect())
            .unwrap_or_default();
        let mut c = t.cursor(d.fixed).unwrap();
        let mut got = Vec::new();
        if c.set(k).unwrap().is_some() {
            if let Some((_, chunk)) = c.get_multiple().unwrap() {
                got.extend_from_slice(chunk);
            }
            while let Some((_, chunk)) = c.next_multiple().unwrap() {
                got.extend_from_slice(chunk);
            }
        }
        assert_eq!(got, want);
    }};
}

fn apply(w: &mut cairn::RwTxn<'_>, d: &Dbs, m: &mut Model, op: &Op) {
    match op {
        Op::PutPlain(k, v, no_overwrite, append) => {
            let kk = K(k.clone());
            let mut flags = PutFlags::empty();
            let mut ok = true;
            if *no_overwrite {
                flags = flags | PutFlags::NO_OVERWRITE;
                ok &= !m.plain.contains_key(&kk);
            }
            if *append {
                flags = flags | PutFlags::APPEND;
                ok &= m.plain.keys().next_back().is_none_or(|l| *l < kk);
            }
            let r = w.put(d.plain, k, v, flags);
            if ok {
                r.unwrap();
                m.plain.insert(kk, v.clone());
            } else {
                assert!(r.is_err());
            }
        }
        Op::DelPlain(k) => {
            let had = m.plain.remove(&K(k.clone())).is_some();
            assert_eq!(w.delete(d.plain, k).unwrap(), had);
        }
        Op::Put(k, v, f) => put_dup(w, d.dups, m, k, v, f),
        Op::DelPair(k, v) => del_pair(w, d.dups, m, k, v),
        Op::Del(k) => {
            let had = m.dups.remove(&K(k.clone())).is_some();
            assert_eq!(w.delete(d.dups, k).unwrap(), had);
        }
        Op::Grow(k, seed, n) => {
            for i in 0..*n {
                put_dup(w, d.dups, m, k, &grown(*seed, i), &Flag::None);
            }
        }
        Op::Shrink(k, front, n) => {
            let vals: Vec<Vec<u8>> = m
                .dups
                .get(&K(k.clone()))
                .map(|s| s.iter().map(|v| v.0.clone()).collect())
                .unwrap_or_default();
            let pick: Vec<Vec<u8>> = if *front {
                vals.into_iter().take(*n).collect()
            } else {
                vals.into_iter().rev().take(*n).collect()
            };
            for v in pick {
                del_pair(w, d.dups, m, k, &v);
            }
        }
        Op::CursorDel(k, v) => {
            let kk = K(k.clone());
            // GET_BOTH_RANGE's pair, as the model finds it.
            let want = m.dups.get(&kk).and_then(|s| {
                s.range(V(v.clone())..)
                    .next()
                    .map(|x| (k.clone(), x.0.clone()))
            });
            let mut c = w.cursor_mut(d.dups).unwrap();
            let got = c.get_both(k, v).unwrap();
            let exact = m.dups.get(&kk).is_some_and(|s| s.contains(&V(v.clone())));
            assert_eq!(got.is_some(), exact);
            if exact {
                c.del_current().unwrap();
                drop(c);
                let s = m.dups.get_mut(&kk).unwrap();
                s.remove(&V(v.clone()));
                if s.is_empty() {
                    m.dups.remove(&kk);
                }
            } else {
                drop(c);
                let r = w.cursor(d.dups).unwrap().get_both_range(k, v).unwrap();
                let r = r.map(|(a, b)| (a.to_vec(), b.to_vec()));
                assert_eq!(r, want);
            }
        }
        Op::PutMultiple(k, vals, no_dup) => {
            let mut bytes = Vec::new();
            for v in vals {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            let flags = if *no_dup {
                PutFlags::NO_DUP_DATA
            } else {
                PutFlags::empty()
            };
            let r = w.put_multiple(d.fixed, k, &bytes, 4, flags);
            let set = m.fixed.entry(k.clone()).or_default();
            let mut added = 0;
            let mut stopped = false;
            for v in vals {
                if set.insert(F(v.to_le_bytes().to_vec())) {
                    added += 1;
                } else if *no_dup {
                    stopped = true;
                    break;
                }
            }
            if set.is_empty() {
                m.fixed.remove(k);
            }
            match r {
                Ok(n) => {
                    assert!(!stopped);
                    assert_eq!(n, added);
                }
                Err(e) => {
                    assert!(stopped, "{e}");
                    assert!(matches!(e, Error::KeyExists));
                }
            }
        }
        Op::DelFixed(k, v) => {
            let vb = v.to_le_bytes();
            let had = m
                .fixed
                .get_mut(k)
                .is_some_and(|s| s.remove(&F(vb.to_vec())));
            if m.fixed.get(k).is_some_and(BTreeSet::is_empty) {
                m.fixed.remove(k);
            }
            assert_eq!(w.delete_pair(d.fixed, k, &vb).unwrap(), had);
        }
        Op::Nested(ops, commit) => {
            let before = m.clone();
            {
                let mut n = w.nested().unwrap();
                for (k, v, del) in ops {
                    if *del {
                        del_pair(&mut n, d.dups, m, k, v);
                    } else {
                        put_dup(&mut n, d.dups, m, k, v, &Flag::None);
                    }
                }
                if *commit {
                    n.commit().unwrap();
                }
            }
            if !*commit {
                *m = before;
            }
        }
        Op::Probe(k, v) => probe!(&*w, d, &*m, k, v),
        Op::Commit | Op::Abort | Op::Reopen => unreachable!("handled by the driver"),
    }
}

/// Reads every database through `t` and compares with the model, both directions.
fn verify_ro(t: &cairn::RoTxn<'_>, d: &Dbs, m: &Model) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = t
        .iter(d.plain)
        .unwrap()
        .map(|e| e.map(|(a, b)| (a.to_vec(), b.to_vec())).unwrap())
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = m
        .plain
        .iter()
        .map(|(a, b)| (a.0.clone(), b.clone()))
        .collect();
    assert_eq!(got, want);
    let got: Vec<(Vec<u8>, Vec<u8>)> = t
        .iter(d.dups)
        .unwrap()
        .rev()
        .map(|e| e.map(|(a, b)| (a.to_vec(), b.to_vec())).unwrap())
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = m
        .dups
        .iter()
        .rev()
        .flat_map(|(a, s)| s.iter().rev().map(move |x| (a.0.clone(), x.0.clone())))
        .collect();
    assert_eq!(got, want);
    let got: Vec<(Vec<u8>, Vec<u8>)> = t
        .iter(d.fixed)
        .unwrap()
        .map(|e| e.map(|(a, b)| (a.to_vec(), b.to_vec())).unwrap())
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = m
        .fixed
        .iter()
        .flat_map(|(a, s)| s.iter().map(move |x| (a.clone(), x.0.clone())))
        .collect();
    assert_eq!(got, want);
    let pairs = m.dups.values().map(|s| s.len() as u64).sum::<u64>();
    assert_eq!(t.stat(d.dups).unwrap().entries, pairs);
}

/// The checker, with the orders: no problem and nothing left unchecked.
fn check_with_orders(env: &Env) {
    let rep = env.read_txn().unwrap().check().unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert!(rep.notes.is_empty(), "{:?}", rep.notes);
}

/// The checker of a handle without the orders: no problem, and a note for each database that
/// holds data in an order it lacks.
fn check_without_orders(dir: &std::path::Path, m: &Model) {
    let env = Env::options().max_dbs(8).open(dir).unwrap();
    let rep = env.read_txn().unwrap().check().unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    let noted = |db: &str, what: &str| {
        rep.notes
            .iter()
            .any(|n| n.starts_with(&format!("{db}: its {what}")))
    };
    assert_eq!(noted("plain", "keys"), !m.plain.is_empty());
    assert_eq!(noted("dups", "keys"), !m.dups.is_empty());
    assert_eq!(noted("dups", "values"), !m.dups.is_empty());
    assert_eq!(noted("fixed", "values"), !m.fixed.is_empty());
    assert!(!noted("fixed", "keys"));
}

fn run(ops: &[Op]) {
    let dir = tempfile::tempdir().unwrap();
    let (mut env, mut d) = open(dir.path(), true);
    let mut committed = Model::default();
    let mut i = 0;
    while i < ops.len() {
        let mut reopen = false;
        {
            let mut w = env.write_txn().unwrap();
            let mut pending = committed.clone();
            let mut ended = false;
            while i < ops.len() && !ended {
                let op = &ops[i];
                i += 1;
                match op {
                    Op::Commit | Op::Reopen => {
                        reopen = matches!(op, Op::Reopen);
                        ended = true;
                    }
                    Op::Abort => {
                        pending = committed.clone();
                        ended = true;
                    }
                    other => apply(&mut w, &d, &mut pending, other),
                }
            }
            if matches!(ops[i - 1], Op::Abort) {
                w.abort();
            } else {
                w.commit().unwrap();
                committed = pending;
                check_with_orders(&env);
            }
            verify_ro(&env.read_txn().unwrap(), &d, &committed);
        }
        if reopen {
            drop(env);
            check_without_orders(dir.path(), &committed);
            (env, d) = open(dir.path(), true);
            verify_ro(&env.read_txn().unwrap(), &d, &committed);
        }
    }
    let r = env.read_txn().unwrap();
    for (k, v) in [(b"k1".to_vec(), b"va".to_vec()), (vec![b'L'; 300], vec![])] {
        probe!(&r, &d, &committed, &k, &v);
    }
    drop(r);
    drop(env);
    check_without_orders(dir.path(), &committed);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
    #[test]
    fn model_with_custom_orders(ops in proptest::collection::vec(op(), 1..100)) {
        run(&ops);
    }
}

#[test]
fn key_order_and_dup_order_are_used_by_puts_cursors_and_gets() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let db = w.create_db(Some("rev"), DbFlags::CREATE).unwrap();
    let dd = w
        .create_db(Some("dups"), DbFlags::CREATE | DbFlags::DUP_SORT)
        .unwrap();
    // Descending byte order for keys; values ordered by length, then bytes.
    env.set_key_order(db, Some(Arc::new(|a: &[u8], b: &[u8]| b.cmp(a))))
        .unwrap();
    env.set_dup_order(
        dd,
        Some(Arc::new(|a: &[u8], b: &[u8]| {
            a.len().cmp(&b.len()).then(a.cmp(b))
        })),
    )
    .unwrap();
    for k in [b"b", b"a", b"c"] {
        w.put(db, k, k, PutFlags::empty()).unwrap();
    }
    for v in [&b"ccc"[..], b"a", b"bb", b"z"] {
        w.put(dd, b"k", v, PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let keys: Vec<Vec<u8>> = r.iter(db).unwrap().map(|e| e.unwrap().0.to_vec()).collect();
    assert_eq!(keys, vec![b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]);
    assert_eq!(r.get(db, b"b").unwrap(), Some(&b"b"[..]));
    let vals: Vec<Vec<u8>> = r.iter(dd).unwrap().map(|e| e.unwrap().1.to_vec()).collect();
    assert_eq!(
        vals,
        vec![
            b"a".to_vec(),
            b"z".to_vec(),
            b"bb".to_vec(),
            b"ccc".to_vec()
        ]
    );
    let mut c = r.cursor(dd).unwrap();
    assert_eq!(c.get_both_range(b"k", b"y").unwrap().unwrap().1, b"z");
    drop(c);
    drop(r);
    let mut w = env.write_txn().unwrap();
    assert!(w.delete_pair(dd, b"k", b"bb").unwrap());
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    assert_eq!(r.count(dd, b"k").unwrap(), 3);
}

/// Regression (cursor/iter.rs, Iter::new): the pair iterator took its value order from the flags,
/// so its two ends, walked together, stopped early where the custom order and the bytewise
/// one disagree.
#[test]
fn iterator_ends_meet_in_the_custom_value_order() {
    let dir = tempfile::tempdir().unwrap();
    let (env, d) = open(dir.path(), true);
    let mut w = env.write_txn().unwrap();
    let vals: [&[u8]; 4] = [b"ccc", b"a", b"bb", b"z"];
    for v in vals {
        w.put(d.dups, b"k", v, PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let mut it = r.iter(d.dups).unwrap();
    let mut got = vec![it.next().unwrap().unwrap().1.to_vec()];
    got.push(it.next_back().unwrap().unwrap().1.to_vec());
    got.push(it.next().unwrap().unwrap().1.to_vec());
    got.push(it.next_back().unwrap().unwrap().1.to_vec());
    assert!(it.next().is_none());
    let mut want: Vec<V> = vals.iter().map(|v| V(v.to_vec())).collect();
    want.sort();
    let w = |i: usize| want[i].0.clone();
    assert_eq!(got, vec![w(0), w(3), w(1), w(2)]);
}

/// Regression (check.rs, `check`): the checker verified every database in its flags' order,
/// so a sound database in a custom order was reported corrupted.
#[test]
fn checker_uses_the_handles_orders() {
    let dir = tempfile::tempdir().unwrap();
    let (env, d) = open(dir.path(), true);
    let mut w = env.write_txn().unwrap();
    for i in 0..3000u32 {
        let k = format!("{i}").into_bytes();
        w.put(d.plain, &k, b"x", PutFlags::empty()).unwrap();
        w.put(d.dups, &k[..1], &k, PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    check_with_orders(&env);
    // The same file, checked with a different custom order, is out of order.
    env.set_key_order(d.plain, Some(arc(dup_order))).unwrap();
    let rep = env.read_txn().unwrap().check().unwrap();
    assert!(rep.problems.iter().any(|p| p.contains("plain")), "{rep:?}");
}

/// A key grows one value at a time from one value through an inline set into a sub-tree of
/// several levels, and shrinks back, in the custom value order; the checker after each stage.
#[test]
fn a_key_grows_into_a_subtree_and_back_in_custom_order() {
    let dir = tempfile::tempdir().unwrap();
    let (env, d) = open(dir.path(), true);
    let mut model = BTreeSet::new();
    let stages = [1usize, 2, 10, 40, 200, 3000, 200, 40, 10, 2, 1, 0];
    let mut all: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| format!("{:x}", i.wrapping_mul(2_654_435_761)).into_bytes())
        .collect();
    all.dedup();
    for &n in &stages {
        let mut w = env.write_txn().unwrap();
        while model.len() < n {
            let v = all[model.len()].clone();
            w.put(d.dups, b"key", &v, PutFlags::NO_DUP_DATA).unwrap();
            model.insert(V(v));
        }
        while model.len() > n {
            let v = model.iter().nth(model.len() / 2).unwrap().clone();
            assert!(w.delete_pair(d.dups, b"key", &v.0).unwrap());
            model.remove(&v);
        }
        w.commit().unwrap();
        check_with_orders(&env);
        let r = env.read_txn().unwrap();
        let got: Vec<Vec<u8>> = r
            .iter_dup(d.dups, b"key")
            .unwrap()
            .map(|e| e.unwrap().to_vec())
            .collect();
        let want: Vec<Vec<u8>> = model.iter().map(|v| v.0.clone()).collect();
        assert_eq!(got, want, "{n} values");
        let st = r.stat(d.dups).unwrap();
        if n == 3000 {
            assert!(st.leaf_pages > 2 && st.branch_pages > 0, "{st:?}");
        }
        if n <= 10 {
            assert!(st.leaf_pages <= 1, "{st:?}");
        }
    }
}

/// What a handle without the orders does with such a file: the checker notes instead of
/// failing; writes are refused and change nothing; emptying is allowed; a compacting copy is
/// refused before creating anything, a plain copy keeps the order.
#[test]
fn a_handle_without_the_orders() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::default();
    {
        let (env, d) = open(dir.path(), true);
        fill(&env, &d, &mut m, 500, 37);
    }
    check_without_orders(dir.path(), &m);
    let (env, d) = open(dir.path(), false);
    let mut w = env.write_txn().unwrap();
    for (db, what) in [(d.plain, "keys"), (d.dups, "keys"), (d.fixed, "values")] {
        match w.put(db, b"1", &7u32.to_le_bytes(), PutFlags::empty()) {
            Err(Error::OrderUnknown { what: w, .. }) => assert_eq!(w, what),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            w.delete(db, b"1"),
            Err(Error::OrderUnknown { .. })
        ));
    }
    assert!(matches!(
        w.delete_pair(d.dups, b"1", b"1"),
        Err(Error::OrderUnknown { .. })
    ));
    drop(w);
    // Compacting needs the orders; nothing is created.
    let dest = dir.path().join("compact.cairn");
    match env.copy_to(&dest, true) {
        Err(Error::OrderUnknown { db, .. }) => {
            assert!(["plain", "dups", "fixed"].contains(&db.as_str()))
        }
        other => panic!("{other:?}"),
    }
    assert!(!dest.exists());
    let plain_copy = dir.path().join("plain.cairn");
    env.copy_to(&plain_copy, false).unwrap();
    // Emptying needs no order, and an empty database takes the writer's order.
    let mut w = env.write_txn().unwrap();
    w.clear_db(d.fixed).unwrap();
    w.put(d.fixed, b"a", &5u32.to_le_bytes(), PutFlags::empty())
        .unwrap();
    w.put(d.fixed, b"a", &6u32.to_le_bytes(), PutFlags::empty())
        .unwrap();
    w.commit().unwrap();
    let rep = env.read_txn().unwrap().check().unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert!(
        !rep.notes.iter().any(|n| n.starts_with("fixed")),
        "{:?}",
        rep.notes
    );
    drop(env);
    // The plain copy, opened with the orders, holds everything in order.
    let (env, d) = open_file(&plain_copy);
    set_orders(&env, &d);
    verify_ro(&env.read_txn().unwrap(), &d, &m);
    check_with_orders(&env);
}

/// Puts `n` pairs into each database (in `keys` keys for the DUP_SORT ones), in `m` too.
fn fill(env: &Env, d: &Dbs, m: &mut Model, n: u32, keys: u32) {
    let mut w = env.write_txn().unwrap();
    for i in 0..n {
        let k = format!("{}", i % keys).into_bytes();
        let v = format!("{i}").into_bytes();
        w.put(d.plain, &v, &k, PutFlags::empty()).unwrap();
        m.plain.insert(K(v.clone()), k.clone());
        w.put(d.dups, &k, &v, PutFlags::empty()).unwrap();
        m.dups.entry(K(k.clone())).or_default().insert(V(v));
        w.put(d.fixed, &k, &i.to_le_bytes(), PutFlags::empty())
            .unwrap();
        m.fixed
            .entry(k)
            .or_default()
            .insert(F(i.to_le_bytes().to_vec()));
    }
    w.commit().unwrap();
}

/// Opens a copy (one file) and its three databases, without setting orders.
fn open_file(path: &std::path::Path) -> (Env, Dbs) {
    let env = Env::options()
        .max_dbs(8)
        .no_subdir(true)
        .open(path)
        .unwrap();
    let r = env.read_txn().unwrap();
    let d = Dbs {
        plain: r.open_db(Some("plain")).unwrap(),
        dups: r.open_db(Some("dups")).unwrap(),
        fixed: r.open_db(Some("fixed")).unwrap(),
    };
    drop(r);
    (env, d)
}

/// Regression (copy.rs, `compact_copy`): the compacting copy reloaded every database in the
/// flags' order, so a database in a custom order failed with AppendOrder. It now takes the
/// source handle's orders, and the copy records them.
#[test]
fn compacting_copy_keeps_custom_orders() {
    let dir = tempfile::tempdir().unwrap();
    let (env, d) = open(dir.path(), true);
    let mut m = Model::default();
    fill(&env, &d, &mut m, 2000, 13);
    let dest = dir.path().join("compact.cairn");
    env.copy_to(&dest, true).unwrap();
    drop(env);
    let (env, d) = open_file(&dest);
    // Without the orders: sound, with notes.
    let rep = env.read_txn().unwrap().check().unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert_eq!(rep.notes.len(), 4, "{:?}", rep.notes);
    set_orders(&env, &d);
    verify_ro(&env.read_txn().unwrap(), &d, &m);
    check_with_orders(&env);
}

/// An order set while a read transaction runs applies to it after `refresh_orders` (the C
/// API's mdb_set_compare inside a read transaction; the main database's order was taken when
/// the transaction began).
#[test]
fn refresh_orders_in_a_read_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let main = env.main_db();
    env.set_key_order(main, Some(arc(key_order))).unwrap();
    let mut w = env.write_txn().unwrap();
    for i in 0..500u32 {
        w.put(main, format!("{i}").as_bytes(), b"v", PutFlags::empty())
            .unwrap();
    }
    w.commit().unwrap();
    env.set_key_order(main, None).unwrap();
    let mut r = env.read_txn().unwrap();
    env.set_key_order(main, Some(arc(key_order))).unwrap();
    r.refresh_orders();
    for i in 0..500u32 {
        assert_eq!(
            r.get(main, format!("{i}").as_bytes()).unwrap(),
            Some(&b"v"[..])
        );
    }
}
