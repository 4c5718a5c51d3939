//! Named databases are keys of the main database (LMDB's layout; docs/design.md, "Named
//! databases"). A model test against `std` collections: the main database holds the user's
//! keys and the names interleaved; its iteration (both ways), gets and stat equal the model's
//! union; a put, delete, cursor put or cursor delete of a name fails with `Incompatible` and
//! changes nothing; named databases are created and dropped inside nested and aborted
//! transactions; the environment is reopened; the checker runs after every commit. Then the
//! rules one at a time: a name that is a plain key, a DUP_SORT or INTEGER_KEY main database,
//! emptying the main database, `max_dbs` as a limit on open handles, and compacting copies.

use cairn::{Database, DbFlags, Durability, Env, Error, PutFlags, RwTxn};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// What the main database holds under a key.
#[derive(Debug, Clone, PartialEq)]
enum Entry {
    Plain(Vec<u8>),
    /// A named database, with its contents.
    Named(BTreeMap<Vec<u8>, Vec<u8>>),
}

type Model = BTreeMap<Vec<u8>, Entry>;

/// Names, some of which are also used as plain keys (so both orders of the clash happen).
const NAMES: [&str; 5] = ["alpha", "beta", "k00003", "k00011", "zeta"];

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
    CursorPut(Vec<u8>, Vec<u8>),
    CursorDel(Vec<u8>),
    Create(usize),
    Drop(usize),
    PutNamed(usize, Vec<u8>, Vec<u8>),
    ClearMain,
    Commit,
    Abort,
    Nested(Vec<Op>, bool),
    Reopen,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => (0u32..24).prop_map(|i| format!("k{i:05}").into_bytes()),
        2 => (0usize..NAMES.len()).prop_map(|i| NAMES[i].as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 1..12),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), 0..80),
        1 => Just(vec![5u8; 48]),
        1 => Just(vec![9u8; 6000]),
    ]
}

fn flat_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        6 => key().prop_map(Op::Del),
        4 => (key(), value()).prop_map(|(k, v)| Op::CursorPut(k, v)),
        4 => key().prop_map(Op::CursorDel),
        5 => (0usize..NAMES.len()).prop_map(Op::Create),
        3 => (0usize..NAMES.len()).prop_map(Op::Drop),
        8 => (0usize..NAMES.len(), key(), value()).prop_map(|(d, k, v)| Op::PutNamed(d, k, v)),
        1 => Just(Op::ClearMain),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => flat_op(),
        4 => Just(Op::Commit),
        2 => Just(Op::Abort),
        3 => (proptest::collection::vec(flat_op(), 0..12), any::<bool>())
            .prop_map(|(v, c)| Op::Nested(v, c)),
        1 => Just(Op::Reopen),
    ]
}

fn open(dir: &std::path::Path, mode: Durability) -> Env {
    Env::options()
        .max_dbs(NAMES.len() as u32)
        .durability(mode)
        .open(dir)
        .unwrap()
}

fn names(model: &Model) -> Vec<String> {
    model
        .iter()
        .filter(|(_, e)| matches!(e, Entry::Named(_)))
        .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
        .collect()
}

fn is_incompatible<T: std::fmt::Debug>(r: cairn::Result<T>, what: &str) {
    assert!(
        matches!(r, Err(Error::Incompatible { .. })),
        "{what}: {r:?}"
    );
}

/// What a transaction shows of the main database and of every named one equals the model.
fn verify_txn(
    main: Vec<(Vec<u8>, Vec<u8>)>,
    back: Vec<Vec<u8>>,
    stat_entries: u64,
    listed: Vec<String>,
    model: &Model,
) {
    let want: Vec<Vec<u8>> = model.keys().cloned().collect();
    let got: Vec<Vec<u8>> = main.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        got, want,
        "main database keys: names and plain keys interleaved"
    );
    let mut rev = back;
    rev.reverse();
    assert_eq!(rev, want, "main database keys, backwards");
    assert_eq!(
        stat_entries,
        model.len() as u64,
        "main stat counts the names"
    );
    for ((k, v), e) in main.iter().zip(model.values()) {
        match e {
            Entry::Plain(p) => assert_eq!(v, p, "value of {k:?}"),
            // A named database's value is its record (LMDB's: the record's bytes).
            Entry::Named(_) => assert_eq!(v.len(), 48, "record of {k:?}"),
        }
    }
    assert_eq!(listed, names(model), "db_names");
}

/// The pairs an iterator yields, owned.
fn pairs(it: cairn::Result<cairn::Iter<'_>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The keys an iterator yields, owned.
fn keys_of(it: cairn::Result<cairn::Iter<'_>>) -> Vec<Vec<u8>> {
    it.unwrap().map(|e| e.unwrap().0.to_vec()).collect()
}

/// The keys an iterator yields backwards, owned.
fn keys_back(it: cairn::Result<cairn::Iter<'_>>) -> Vec<Vec<u8>> {
    it.unwrap().rev().map(|e| e.unwrap().0.to_vec()).collect()
}

fn verify_rw(w: &mut RwTxn<'_>, env: &Env, model: &Model) {
    let main = env.main_db();
    verify_txn(
        pairs(w.iter(main)),
        keys_back(w.iter(main)),
        w.stat(main).unwrap().entries,
        w.db_names().unwrap(),
        model,
    );
    for (k, e) in model {
        if let Entry::Named(m) = e {
            let name = std::str::from_utf8(k).unwrap();
            let db = w.open_db(Some(name)).unwrap();
            let got: BTreeMap<_, _> = pairs(w.iter(db)).into_iter().collect();
            assert_eq!(&got, m, "contents of {name}");
        }
    }
}

/// A committed snapshot: as `verify_rw`, and the records in the main database are current
/// (their entry counts are the named databases'), and the checker passes.
fn verify_committed(env: &Env, model: &Model) {
    let r = env.read_txn().unwrap();
    let main = env.main_db();
    verify_txn(
        pairs(r.iter(main)),
        keys_back(r.iter(main)),
        r.stat(main).unwrap().entries,
        r.db_names().unwrap(),
        model,
    );
    for (k, e) in model {
        match e {
            Entry::Plain(v) => assert_eq!(r.get(main, k).unwrap(), Some(&v[..])),
            Entry::Named(m) => {
                let rec = r.get(main, k).unwrap().expect("record");
                let entries = u64::from_le_bytes(rec[8..16].try_into().unwrap());
                assert_eq!(entries, m.len() as u64, "record of {k:?} at commit");
                let db = r.open_db(Some(std::str::from_utf8(k).unwrap())).unwrap();
                assert_eq!(r.stat(db).unwrap().entries, m.len() as u64);
                let got: BTreeMap<_, _> = pairs(r.iter(db)).into_iter().collect();
                assert_eq!(&got, m);
            }
        }
    }
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "checker: {:?}", rep.problems);
    assert_eq!(rep.databases, names(model).len() as u64);
}

/// Applies one operation (no Commit/Abort/Reopen) to a transaction and the model.
fn apply(w: &mut RwTxn<'_>, env: &Env, model: &mut Model, op: &Op) {
    let main = env.main_db();
    match op {
        Op::Put(k, v) => {
            let r = w.put(main, k, v, PutFlags::empty());
            match model.get(k) {
                Some(Entry::Named(_)) => is_incompatible(r, "put of a name"),
                _ => {
                    r.unwrap();
                    model.insert(k.clone(), Entry::Plain(v.clone()));
                }
            }
        }
        Op::Del(k) => {
            let r = w.delete(main, k);
            match model.get(k) {
                Some(Entry::Named(_)) => is_incompatible(r, "delete of a name"),
                Some(Entry::Plain(_)) => {
                    assert!(r.unwrap());
                    model.remove(k);
                }
                None => assert!(!r.unwrap()),
            }
        }
        Op::CursorPut(k, v) => {
            let r = w.cursor_mut(main).unwrap().put(k, v, PutFlags::empty());
            match model.get(k) {
                Some(Entry::Named(_)) => is_incompatible(r, "cursor put of a name"),
                _ => {
                    r.unwrap();
                    model.insert(k.clone(), Entry::Plain(v.clone()));
                }
            }
        }
        Op::CursorDel(k) => {
            let mut c = w.cursor_mut(main).unwrap();
            let found = c.set(k).unwrap();
            assert_eq!(found.is_some(), model.contains_key(k));
            if found.is_none() {
                return;
            }
            match model.get(k) {
                Some(Entry::Named(_)) => {
                    is_incompatible(c.put_current(b"x"), "cursor put_current on a name");
                    is_incompatible(c.del_current(), "cursor delete of a name");
                }
                _ => {
                    c.del_current().unwrap();
                    model.remove(k);
                }
            }
        }
        Op::Create(i) => {
            let name = NAMES[*i];
            let r = w.create_db(Some(name), DbFlags::CREATE);
            match model.get(name.as_bytes()) {
                Some(Entry::Plain(_)) => {
                    is_incompatible(r, "database created under a plain key");
                    is_incompatible(w.open_db(Some(name)), "database opened under a plain key");
                }
                Some(Entry::Named(_)) => {
                    r.unwrap();
                }
                None => {
                    r.unwrap();
                    model.insert(name.as_bytes().to_vec(), Entry::Named(BTreeMap::new()));
                }
            }
        }
        Op::Drop(i) => {
            let name = NAMES[*i];
            if let Some(Entry::Named(_)) = model.get(name.as_bytes()) {
                let db = w.open_db(Some(name)).unwrap();
                w.drop_db(db).unwrap();
                model.remove(name.as_bytes());
                assert!(matches!(w.stat(db), Err(Error::BadDbi)));
            } else {
                assert!(w.open_db(Some(name)).is_err());
            }
        }
        Op::PutNamed(i, k, v) => {
            let name = NAMES[*i];
            if let Some(Entry::Named(m)) = model.get_mut(name.as_bytes()) {
                let db = w.open_db(Some(name)).unwrap();
                w.put(db, k, v, PutFlags::empty()).unwrap();
                m.insert(k.clone(), v.clone());
            }
        }
        Op::ClearMain => {
            // Emptying the main database keeps its named databases.
            w.clear_db(main).unwrap();
            model.retain(|_, e| matches!(e, Entry::Named(_)));
        }
        Op::Commit | Op::Abort | Op::Reopen | Op::Nested(..) => unreachable!("flat ops only"),
    }
}

fn run(ops: Vec<Op>, mode: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let mut committed = Model::new();
    let mut ops = ops.into_iter();
    loop {
        let env = open(dir.path(), mode);
        verify_committed(&env, &committed);
        if !session(&env, &mut ops, &mut committed) {
            break;
        }
    }
}

/// Runs ops until a Reopen (true) or the end (false), with one write transaction open.
fn session(env: &Env, ops: &mut impl Iterator<Item = Op>, committed: &mut Model) -> bool {
    let mut pending = committed.clone();
    let mut txn = env.write_txn().unwrap();
    for op in ops.by_ref() {
        match op {
            Op::Commit => {
                txn.commit().unwrap();
                *committed = pending.clone();
                verify_committed(env, committed);
                txn = env.write_txn().unwrap();
            }
            Op::Abort => {
                txn.abort();
                pending = committed.clone();
                verify_committed(env, committed);
                txn = env.write_txn().unwrap();
            }
            Op::Nested(inner, keep) => {
                let mut after = pending.clone();
                {
                    let mut child = txn.nested().unwrap();
                    for op in &inner {
                        apply(&mut child, env, &mut after, op);
                    }
                    verify_rw(&mut child, env, &after);
                    if keep {
                        child.commit().unwrap();
                    } else {
                        child.abort();
                    }
                }
                if keep {
                    pending = after;
                }
                verify_rw(&mut txn, env, &pending);
            }
            Op::Reopen => {
                txn.commit().unwrap();
                *committed = pending;
                return true;
            }
            op => {
                apply(&mut txn, env, &mut pending, &op);
                verify_rw(&mut txn, env, &pending);
            }
        }
    }
    txn.commit().unwrap();
    *committed = pending;
    verify_committed(env, committed);
    false
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn main_database_holds_the_names(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops, Durability::Durable);
    }

    #[test]
    fn main_database_holds_the_names_lazy(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops, Durability::Lazy);
    }
}

fn fresh() -> (tempfile::TempDir, Env) {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
    (dir, env)
}

/// The names sort among the user's keys in the main database's order: a REVERSE_KEY main
/// database lists them in its own order.
#[test]
fn names_follow_the_main_order() {
    let (_dir, env) = fresh();
    let mut w = env.write_txn().unwrap();
    let main = w
        .create_db(None, DbFlags::CREATE | DbFlags::REVERSE_KEY)
        .unwrap();
    for k in ["ab", "ba", "zz"] {
        w.put(main, k.as_bytes(), b"v", PutFlags::empty()).unwrap();
    }
    w.create_db(Some("xa"), DbFlags::CREATE).unwrap();
    w.create_db(Some("ay"), DbFlags::CREATE).unwrap();
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let keys = keys_of(r.iter(main));
    // Compared from the last byte: "ba" < "xa" < "ab" < "ay" < "zz".
    let want: Vec<&[u8]> = vec![b"ba", b"xa", b"ab", b"ay", b"zz"];
    assert_eq!(keys, want);
    assert_eq!(r.db_names().unwrap(), ["xa", "ay"]);
    assert_eq!(r.stat(main).unwrap().entries, 5);
    assert!(r.check().unwrap().is_ok());
}

/// A name that is a plain key of the main database does not open as a database, in a read
/// or a write transaction, with or without CREATE.
#[test]
fn a_plain_key_is_not_a_database() {
    let (_dir, env) = fresh();
    let main = env.main_db();
    let mut w = env.write_txn().unwrap();
    w.put(main, b"plain", b"v", PutFlags::empty()).unwrap();
    is_incompatible(w.create_db(Some("plain"), DbFlags::CREATE), "create");
    is_incompatible(w.open_db(Some("plain")), "open");
    assert_eq!(w.get(main, b"plain").unwrap(), Some(&b"v"[..]));
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    is_incompatible(r.open_db(Some("plain")), "open in a read transaction");
    assert!(matches!(
        r.open_db(Some("absent")),
        Err(Error::DbNotFound { .. })
    ));
}

/// LMDB's rule: a DUP_SORT or INTEGER_KEY main database holds no named database. CREATE is
/// refused with Incompatible; a plain open finds nothing (MDB_NOTFOUND).
#[test]
fn dupsort_or_integer_main_has_no_named_databases() {
    for flags in [DbFlags::DUP_SORT, DbFlags::INTEGER_KEY] {
        let (_dir, env) = fresh();
        let mut w = env.write_txn().unwrap();
        let main = w.create_db(None, DbFlags::CREATE | flags).unwrap();
        w.put(main, &7u32.to_le_bytes(), b"v", PutFlags::empty())
            .unwrap();
        is_incompatible(w.create_db(Some("x"), DbFlags::CREATE), "create");
        assert!(matches!(
            w.open_db(Some("x")),
            Err(Error::DbNotFound { .. })
        ));
        assert!(w.db_names().unwrap().is_empty());
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        assert!(matches!(
            r.open_db(Some("x")),
            Err(Error::DbNotFound { .. })
        ));
        assert!(r.check().unwrap().is_ok());
    }
}

/// Emptying (or "dropping", which only empties) the main database keeps the named databases,
/// their keys and their contents.
#[test]
fn emptying_main_keeps_named_databases() {
    let (dir, env) = fresh();
    let main = env.main_db();
    let mut w = env.write_txn().unwrap();
    for i in 0..2000u32 {
        w.put(
            main,
            format!("m{i:05}").as_bytes(),
            &[1u8; 60],
            PutFlags::empty(),
        )
        .unwrap();
    }
    let a = w.create_db(Some("m00500x"), DbFlags::CREATE).unwrap();
    let b = w
        .create_db(Some("zz"), DbFlags::CREATE | DbFlags::DUP_SORT)
        .unwrap();
    for i in 0..300u32 {
        w.put(a, &i.to_be_bytes(), b"a", PutFlags::empty()).unwrap();
        w.put(b, b"k", &i.to_be_bytes(), PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let mut w = env.write_txn().unwrap();
    w.drop_db(main).unwrap();
    assert_eq!(w.db_names().unwrap(), ["m00500x", "zz"]);
    assert_eq!(w.stat(main).unwrap().entries, 2);
    w.commit().unwrap();
    drop(env);
    let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
    let r = env.read_txn().unwrap();
    let keys = keys_of(r.iter(env.main_db()));
    assert_eq!(keys, [b"m00500x".to_vec(), b"zz".to_vec()]);
    let a = r.open_db(Some("m00500x")).unwrap();
    let b = r.open_db(Some("zz")).unwrap();
    assert_eq!(r.stat(a).unwrap().entries, 300);
    assert_eq!(r.count(b, b"k").unwrap(), 300);
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
    assert_eq!(rep.databases, 2);
}

/// `max_dbs` limits the handles open in an environment (LMDB's MDB_DBS_FULL), not the names
/// a file holds.
#[test]
fn max_dbs_limits_open_handles() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = Env::options().max_dbs(3).open(dir.path()).unwrap();
        let mut w = env.write_txn().unwrap();
        for n in ["a", "b", "c"] {
            w.create_db(Some(n), DbFlags::CREATE).unwrap();
        }
        assert!(matches!(
            w.create_db(Some("d"), DbFlags::CREATE),
            Err(Error::DbsFull { max: 3 })
        ));
        // The refusal changed nothing.
        assert_eq!(w.db_names().unwrap(), ["a", "b", "c"]);
        w.commit().unwrap();
    }
    let env = Env::options().max_dbs(2).open(dir.path()).unwrap();
    let r = env.read_txn().unwrap();
    assert_eq!(r.db_names().unwrap(), ["a", "b", "c"]);
    r.open_db(Some("a")).unwrap();
    r.open_db(Some("b")).unwrap();
    // Reopening a handle already open needs no slot.
    r.open_db(Some("a")).unwrap();
    assert!(matches!(
        r.open_db(Some("c")),
        Err(Error::DbsFull { max: 2 })
    ));
    let rep = r.check().unwrap();
    assert!(rep.is_ok() && rep.databases == 3, "{rep:?}");
    drop(r);
    // A compacting copy reads every named database without a handle for each.
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("copy.cairn");
    env.copy_to(&dest, true).unwrap();
    let copy = Env::options()
        .max_dbs(3)
        .no_subdir(true)
        .open(&dest)
        .unwrap();
    let r = copy.read_txn().unwrap();
    assert_eq!(r.db_names().unwrap(), ["a", "b", "c"]);
    assert!(r.check().unwrap().is_ok());
}

/// Both copies keep the names among the main database's keys, with their contents.
#[test]
fn copies_keep_names_in_main() {
    let (_dir, env) = fresh();
    let main = env.main_db();
    let mut w = env.write_txn().unwrap();
    let mut want = BTreeSet::new();
    for i in 0..500u32 {
        let k = format!("k{i:04}");
        w.put(main, k.as_bytes(), &[3u8; 30], PutFlags::empty())
            .unwrap();
        want.insert(k.into_bytes());
    }
    for n in ["k0100x", "k0400x", "zzz"] {
        let db = w.create_db(Some(n), DbFlags::CREATE).unwrap();
        w.put(db, b"inside", n.as_bytes(), PutFlags::empty())
            .unwrap();
        want.insert(n.as_bytes().to_vec());
    }
    w.commit().unwrap();
    for compact in [false, true] {
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("copy.cairn");
        env.copy_to(&dest, compact).unwrap();
        let copy = Env::options().no_subdir(true).open(&dest).unwrap();
        let r = copy.read_txn().unwrap();
        let keys: BTreeSet<Vec<u8>> = r
            .iter(copy.main_db())
            .unwrap()
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        assert_eq!(keys, want, "compact {compact}");
        for n in ["k0100x", "k0400x", "zzz"] {
            let db = r.open_db(Some(n)).unwrap();
            assert_eq!(r.get(db, b"inside").unwrap(), Some(n.as_bytes()));
        }
        let rep = r.check().unwrap();
        assert!(rep.is_ok() && rep.databases == 3, "{rep:?}");
    }
}

/// A database dropped and created again in one transaction, inside nested transactions that
/// abort: the main database and the handles come back exactly.
#[test]
fn nested_create_and_drop() {
    let (_dir, env) = fresh();
    let main = env.main_db();
    let mut w = env.write_txn().unwrap();
    let a = w.create_db(Some("a"), DbFlags::CREATE).unwrap();
    w.put(a, b"1", b"one", PutFlags::empty()).unwrap();
    {
        let mut n = w.nested().unwrap();
        n.drop_db(a).unwrap();
        assert!(n.db_names().unwrap().is_empty());
        let a2 = n
            .create_db(Some("a"), DbFlags::CREATE | DbFlags::DUP_SORT)
            .unwrap();
        assert_eq!(a2, a, "the handle's slot is reused");
        n.put(a2, b"1", b"x", PutFlags::empty()).unwrap();
        n.put(a2, b"1", b"y", PutFlags::empty()).unwrap();
        {
            let mut nn = n.nested().unwrap();
            nn.create_db(Some("b"), DbFlags::CREATE).unwrap();
            assert_eq!(nn.db_names().unwrap(), ["a", "b"]);
            nn.abort();
        }
        assert_eq!(n.db_names().unwrap(), ["a"]);
        n.abort();
    }
    assert_eq!(w.db_names().unwrap(), ["a"]);
    assert_eq!(w.get(a, b"1").unwrap(), Some(&b"one"[..]));
    assert_eq!(w.stat(main).unwrap().entries, 1);
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let a = r.open_db(Some("a")).unwrap();
    assert_eq!(r.get(a, b"1").unwrap(), Some(&b"one"[..]));
    assert!(r.check().unwrap().is_ok());
}

/// A handle whose database was dropped by another transaction gives BadDbi, not its old
/// record; a reader of an older snapshot still sees it.
#[test]
fn dropped_elsewhere() {
    let (_dir, env) = fresh();
    let mut w = env.write_txn().unwrap();
    let a = w.create_db(Some("a"), DbFlags::CREATE).unwrap();
    w.put(a, b"k", b"v", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    let old = env.read_txn().unwrap();
    let mut w = env.write_txn().unwrap();
    w.drop_db(a).unwrap();
    w.commit().unwrap();
    assert_eq!(old.get(a, b"k").unwrap(), Some(&b"v"[..]));
    let r = env.read_txn().unwrap();
    assert!(matches!(r.get(a, b"k"), Err(Error::BadDbi)));
    let mut w = env.write_txn().unwrap();
    assert!(matches!(
        w.put(a, b"k", b"v", PutFlags::empty()),
        Err(Error::BadDbi)
    ));
    drop(w);
    let _: Database = a;
}

/// The names sort in a user-supplied main order, set before the first named database; a
/// handle without that order finds them by a walk: it opens, reads and writes the named
/// databases (their records are updated in place at commit), and refuses to create or drop
/// one (that would move keys of a main database whose order it does not know).
#[test]
fn names_under_a_user_supplied_main_order() {
    let dir = tempfile::tempdir().unwrap();
    let desc: cairn::format::CmpFn = std::sync::Arc::new(|a: &[u8], b: &[u8]| b.cmp(a));
    {
        let env = Env::options().max_dbs(8).open(dir.path()).unwrap();
        env.set_key_order(env.main_db(), Some(desc.clone()))
            .unwrap();
        let mut w = env.write_txn().unwrap();
        for n in ["a", "m", "z"] {
            let db = w.create_db(Some(n), DbFlags::CREATE).unwrap();
            w.put(db, b"k", n.as_bytes(), PutFlags::empty()).unwrap();
        }
        for k in ["b", "y"] {
            w.put(env.main_db(), k.as_bytes(), b"v", PutFlags::empty())
                .unwrap();
        }
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let keys = keys_of(r.iter(env.main_db()));
        assert_eq!(keys, [&b"z"[..], b"y", b"m", b"b", b"a"]);
        assert_eq!(r.db_names().unwrap(), ["z", "m", "a"]);
    }
    let env = Env::options().max_dbs(8).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    for n in ["a", "m", "z"] {
        let db = w.open_db(Some(n)).unwrap();
        assert_eq!(w.get(db, b"k").unwrap(), Some(n.as_bytes()));
        w.put(db, b"more", b"1", PutFlags::empty()).unwrap();
    }
    assert!(matches!(
        w.create_db(Some("new"), DbFlags::CREATE),
        Err(Error::OrderUnknown { .. })
    ));
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    for n in ["a", "m", "z"] {
        let db = r.open_db(Some(n)).unwrap();
        assert_eq!(r.stat(db).unwrap().entries, 2);
    }
    let rep = r.check().unwrap();
    assert!(rep.is_ok() && rep.databases == 3, "{rep:?}");
    assert_eq!(rep.notes.len(), 1, "{:?}", rep.notes);
}

/// Emptying the main database through a handle without its user-supplied order would put the
/// names back in the handle's order and record that order as the main database's: the
/// program that owns the order would then search a tree kept in another order and lose its
/// named databases. It is refused (OrderUnknown) while names are there to put back.
#[test]
fn emptying_main_without_its_order_keeps_the_order() {
    let dir = tempfile::tempdir().unwrap();
    let desc: cairn::format::CmpFn = std::sync::Arc::new(|a: &[u8], b: &[u8]| b.cmp(a));
    let with_order = || {
        let env = Env::options().max_dbs(8).open(dir.path()).unwrap();
        env.set_key_order(env.main_db(), Some(desc.clone()))
            .unwrap();
        env
    };
    {
        let env = with_order();
        let mut w = env.write_txn().unwrap();
        for n in ["a", "c", "e", "g", "i", "m", "z"] {
            let db = w.create_db(Some(n), DbFlags::CREATE).unwrap();
            w.put(db, b"k", n.as_bytes(), PutFlags::empty()).unwrap();
        }
        w.put(env.main_db(), b"b", b"v", PutFlags::empty()).unwrap();
        w.commit().unwrap();
    }
    {
        let env = Env::options().max_dbs(8).open(dir.path()).unwrap();
        let mut w = env.write_txn().unwrap();
        let r = w.clear_db(env.main_db());
        assert!(matches!(r, Err(Error::OrderUnknown { .. })), "{r:?}");
        drop(w);
    }
    let env = with_order();
    let r = env.read_txn().unwrap();
    for n in ["a", "c", "e", "g", "i", "m", "z"] {
        let db = r.open_db(Some(n)).unwrap();
        assert_eq!(r.get(db, b"k").unwrap(), Some(n.as_bytes()));
    }
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "{rep:?}");
}

/// A transaction that drops a named database and creates it again with other flags, then
/// aborts, leaves the database as it was: a write through the handle afterwards keeps the
/// database's own key order (the handle's flags follow its record), not the aborted one's.
#[test]
fn aborted_re_creation_with_other_flags_keeps_the_order() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(8).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let x = w.create_db(Some("x"), DbFlags::CREATE).unwrap();
    for i in [1u64, 256, 65536, 2, 3] {
        w.put(x, &i.to_le_bytes(), b"v", PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    {
        let mut w = env.write_txn().unwrap();
        w.drop_db(x).unwrap();
        let again = w
            .create_db(Some("x"), DbFlags::CREATE | DbFlags::INTEGER_KEY)
            .unwrap();
        assert_eq!(again, x);
        // Aborted.
    }
    // A reader finds the keys in the database's own order.
    {
        let r = env.read_txn().unwrap();
        for i in [1u64, 256, 65536, 2, 3] {
            assert_eq!(r.get(x, &i.to_le_bytes()).unwrap(), Some(&b"v"[..]), "{i}");
        }
    }
    let mut w = env.write_txn().unwrap();
    for i in [1u64, 256, 65536, 2, 3] {
        assert_eq!(w.get(x, &i.to_le_bytes()).unwrap(), Some(&b"v"[..]), "{i}");
    }
    for i in [4u64, 512, 7, 1 << 20] {
        w.put(x, &i.to_le_bytes(), b"v", PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "{rep:?}");
    assert_eq!(r.stat(x).unwrap().entries, 9);
    let mut want: Vec<Vec<u8>> = [1u64, 256, 65536, 2, 3, 4, 512, 7, 1 << 20]
        .iter()
        .map(|i| i.to_le_bytes().to_vec())
        .collect();
    want.sort();
    assert_eq!(keys_of(r.iter(x)), want);
}

/// A reader that opens a named database from a snapshot older than a writer's re-creation of
/// it with other flags does not change the order that writer puts keys in.
#[test]
#[expect(
    clippy::host_endian_bytes,
    reason = "INTEGER_KEY keys are native integers, as in LMDB"
)]
fn reader_open_during_re_creation_keeps_the_writers_order() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(8).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let x = w.create_db(Some("x"), DbFlags::CREATE).unwrap();
    w.put(x, b"k", b"v", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    let mut w = env.write_txn().unwrap();
    w.drop_db(x).unwrap();
    let x = w
        .create_db(Some("x"), DbFlags::CREATE | DbFlags::INTEGER_KEY)
        .unwrap();
    w.put(x, &1u64.to_ne_bytes(), b"v", PutFlags::empty())
        .unwrap();
    {
        let r = env.read_txn().unwrap();
        assert_eq!(r.open_db(Some("x")).unwrap(), x);
    }
    for i in [256u64, 2, 65536, 3] {
        w.put(x, &i.to_ne_bytes(), b"v", PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "{rep:?}");
    assert_eq!(r.stat(x).unwrap().entries, 5);
}

/// A read transaction on the snapshot an earlier one of this thread used reuses its lookup of
/// a named database's record (`txn/read.rs`, `known`); every change must be seen anyway: a
/// commit that changes the database, one that drops and re-creates it in another order, a
/// handle closed and reopened, and another handle's commit.
#[test]
fn reads_see_each_commit_of_a_named_database() {
    let (dir, env) = fresh();
    let get = |env: &Env, db: Database, k: &[u8]| -> Option<Vec<u8>> {
        let r = env.read_txn().unwrap();
        let v = r.get(db, k).unwrap().map(<[u8]>::to_vec);
        v
    };
    let mut w = env.write_txn().unwrap();
    let a = w.create_db(Some("alpha"), DbFlags::CREATE).unwrap();
    w.put(a, b"k", b"1", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    // Twice on one snapshot (the second from what the first remembered), then after a commit.
    assert_eq!(get(&env, a, b"k").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&env, a, b"k").as_deref(), Some(&b"1"[..]));
    let mut w = env.write_txn().unwrap();
    w.put(a, b"k", b"2", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    assert_eq!(get(&env, a, b"k").as_deref(), Some(&b"2"[..]));
    // A commit of another database leaves this one's record as it was: still right.
    let mut w = env.write_txn().unwrap();
    let b = w.create_db(Some("beta"), DbFlags::CREATE).unwrap();
    w.put(b, b"x", b"y", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    assert_eq!(get(&env, a, b"k").as_deref(), Some(&b"2"[..]));
    // Dropped and created again in reverse key order: the new record and the new order.
    let mut w = env.write_txn().unwrap();
    w.drop_db(a).unwrap();
    w.commit().unwrap();
    assert!(matches!(
        env.read_txn().unwrap().get(a, b"k"),
        Err(Error::BadDbi)
    ));
    let mut w = env.write_txn().unwrap();
    let a = w
        .create_db(Some("alpha"), DbFlags::CREATE | DbFlags::REVERSE_KEY)
        .unwrap();
    for k in [&b"ab"[..], b"ba"] {
        w.put(a, k, k, PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    for _ in 0..2 {
        let r = env.read_txn().unwrap();
        let keys: Vec<Vec<u8>> = r.iter(a).unwrap().map(|e| e.unwrap().0.to_vec()).collect();
        // Reverse-key order compares from the last byte: "ba" before "ab".
        assert_eq!(keys, vec![b"ba".to_vec(), b"ab".to_vec()]);
        assert_eq!(r.get(a, b"k").unwrap(), None);
    }
    // Another handle on the same file writes; this handle's next read sees it.
    let other = Env::options().max_dbs(4).open(dir.path()).unwrap();
    let mut w = other.write_txn().unwrap();
    let oa = w.open_db(Some("alpha")).unwrap();
    w.put(oa, b"zz", b"3", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    assert_eq!(get(&env, a, b"zz").as_deref(), Some(&b"3"[..]));
    // An order set on the handle since applies to the next read of the same snapshot: under one
    // that finds every key equal, a key the database lacks is found.
    assert_eq!(get(&env, a, b"not there"), None);
    let all_equal: cairn::CmpFn =
        std::sync::Arc::new(|_: &[u8], _: &[u8]| std::cmp::Ordering::Equal);
    env.set_key_order(a, Some(all_equal)).unwrap();
    assert!(get(&env, a, b"not there").is_some());
}
