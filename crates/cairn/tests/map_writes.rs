//! Lazy environments write their dirty pages in place through a writable map of the data file
//! (`EnvOptions::map_writes`, on by default in lazy mode). These tests check that the pages
//! really go that way (a commit makes no write call per run of pages), and that everything a
//! user relies on holds with them: nested aborts restore pages that lie in the map, a second
//! handle writing with pwrite sees and continues the same file, and what was committed is what
//! a reopen reads. One test function, so that the process's write-call counter
//! (/proc/self/io) sees no other test's writes.

use cairn::{Database, DbFlags, Durability, Env, PutFlags};
use std::collections::BTreeMap;

/// Write system calls this process made so far (`syscw` of /proc/self/io).
fn write_calls() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("syscw:"))
        .and_then(|v| v.trim().parse().ok())
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 100_000).into_bytes()
}

/// Write calls made by one commit of `n` random puts in an environment opened with `opts`.
fn calls_for_a_commit(opts: cairn::EnvOptions, n: u64) -> Option<u64> {
    let dir = tempfile::tempdir().unwrap();
    let env = opts.sync_every(None).open(dir.path()).unwrap();
    // Grow the file and settle the free set first.
    for round in 0..3 {
        let mut w = env.write_txn().unwrap();
        for i in 0..n {
            w.put(
                env.main_db(),
                &key(i + round * n),
                &[round as u8; 100],
                PutFlags::empty(),
            )
            .unwrap();
        }
        w.commit().unwrap();
    }
    let mut w = env.write_txn().unwrap();
    for i in 0..n {
        w.put(env.main_db(), &key(i), &[9u8; 100], PutFlags::empty())
            .unwrap();
    }
    let before = write_calls()?;
    w.commit().unwrap();
    let after = write_calls()?;
    let r = env.read_txn().unwrap();
    assert_eq!(
        r.get(env.main_db(), &key(0)).unwrap(),
        Some(&[9u8; 100][..])
    );
    assert!(r.check().unwrap().is_ok());
    Some(after - before)
}

fn pages_go_in_place() {
    let lazy = Env::options().durability(Durability::Lazy);
    let Some(in_place) = calls_for_a_commit(lazy.clone(), 3000) else {
        eprintln!("no /proc/self/io: write-call counts not checked");
        return;
    };
    let pwrite = calls_for_a_commit(lazy.map_writes(false), 3000).unwrap();
    let durable = calls_for_a_commit(Env::options(), 3000).unwrap();
    eprintln!(
        "write calls per commit: lazy in place {in_place}, lazy pwrite {pwrite}, durable {durable}"
    );
    // In place: pages and meta slot alike (a file system without fallocate would show pwrites).
    assert!(in_place <= 1, "lazy commit made {in_place} write calls");
    assert!(
        pwrite > 20 && durable > 20,
        "{pwrite} / {durable}: pages not written by pwrite?"
    );
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A new lazy environment (pages written in place by default) in a new directory.
fn lazy_env() -> (tempfile::TempDir, Env) {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options()
        .durability(Durability::Lazy)
        .open(dir.path())
        .unwrap();
    (dir, env)
}

fn read_all(env: &Env, db: Database) -> Model {
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "checker: {:?}", rep.problems);
    // The main database's keys that name named databases hold their records; the model
    // keeps the user's keys.
    let names = if db == env.main_db() {
        r.db_names().unwrap()
    } else {
        Vec::new()
    };
    r.iter(db)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .filter(|e| {
            e.as_ref()
                .map_or(true, |(k, _)| !names.iter().any(|n| n.as_bytes() == k))
        })
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A child transaction changes pages its parent wrote in place (and frees and reallocates
/// some), then aborts: the parent sees its own state, and commits it.
fn nested_aborts_restore_pages_in_place() {
    let (dir, env) = lazy_env();
    let db = env.main_db();
    let mut model = Model::new();
    let mut w = env.write_txn().unwrap();
    for i in 0..2000u64 {
        let (k, v) = (key(i), vec![(i % 251) as u8; 60 + (i % 90) as usize]);
        w.put(db, &k, &v, PutFlags::empty()).unwrap();
        model.insert(k, v);
    }
    for round in 0..6u64 {
        let mut child = w.nested().unwrap();
        for i in 0..1500u64 {
            let k = key(i * 7 + round);
            if i % 3 == 0 {
                child.delete(db, &k).unwrap();
            } else {
                child
                    .put(
                        db,
                        &k,
                        &vec![0xEE; 500 + (i % 700) as usize],
                        PutFlags::empty(),
                    )
                    .unwrap();
            }
        }
        child.abort();
        let got: Model = w
            .iter(db)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            got == model,
            "round {round}: the abort did not restore the parent"
        );
        // A kept child on top.
        let mut child = w.nested().unwrap();
        let k = key(1_000_000 + round);
        child.put(db, &k, b"kept", PutFlags::empty()).unwrap();
        child.commit().unwrap();
        model.insert(k, b"kept".to_vec());
    }
    w.commit().unwrap();
    assert!(read_all(&env, db) == model);
    drop(env);
    let env = Env::options()
        .durability(Durability::Lazy)
        .open(dir.path())
        .unwrap();
    assert!(read_all(&env, env.main_db()) == model, "after reopen");
}

/// Two levels deep (as a group commit's job inside its own level runs): an inner level
/// changes pages its outer level and the transaction changed, is merged or undone, and then
/// the outer level is undone or kept. Each undo gives back exactly the state before its level
/// (the images the levels saved, merged with the inner one's dropped where the outer one
/// saved the page first).
fn two_nesting_levels_merge_and_undo() {
    let (_dir, env) = lazy_env();
    let db = env.main_db();
    let mut model = Model::new();
    let mut w = env.write_txn().unwrap();
    let snapshot = |t: &cairn::RwTxn<'_>| -> Model {
        t.iter(db)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()
            .unwrap()
    };
    for i in 0..1500u64 {
        let (k, v) = (key(i), vec![(i % 241) as u8; 40 + (i % 70) as usize]);
        w.put(db, &k, &v, PutFlags::empty()).unwrap();
        model.insert(k, v);
    }
    for round in 0..8u64 {
        let before_outer = snapshot(&w);
        assert!(
            before_outer == model,
            "round {round}: before the outer level"
        );
        let mut outer = w.nested().unwrap();
        for i in 0..400u64 {
            let k = key(i * 3 + round);
            outer
                .put(db, &k, &[0xA0 | (round as u8 & 0xF); 90], PutFlags::empty())
                .unwrap();
        }
        let outer_state = snapshot(&outer);
        {
            let mut inner = outer.nested().unwrap();
            for i in 0..600u64 {
                let k = key(i * 2 + round);
                if i % 4 == 0 {
                    inner.delete(db, &k).unwrap();
                } else {
                    inner.put(db, &k, &[0xB7; 150], PutFlags::empty()).unwrap();
                }
            }
            if round % 2 == 0 {
                inner.commit().unwrap();
            } else {
                inner.abort();
                assert!(
                    snapshot(&outer) == outer_state,
                    "round {round}: the inner undo did not give back the outer level's state"
                );
            }
        }
        if round % 4 < 2 {
            outer.abort();
            assert!(
                snapshot(&w) == before_outer,
                "round {round}: the outer undo did not give back the transaction's state"
            );
        } else {
            let kept = snapshot(&outer);
            outer.commit().unwrap();
            model = kept;
        }
    }
    w.commit().unwrap();
    assert!(read_all(&env, db) == model);
}

/// A lazy handle writing in place and a durable one writing with pwrite take turns on one
/// file, in one process: each sees the other's commits and the checker passes throughout.
fn handles_of_both_kinds_share_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let lazy = Env::options()
        .durability(Durability::Lazy)
        .max_dbs(2)
        .open(dir.path())
        .unwrap();
    let durable = Env::options().max_dbs(2).open(dir.path()).unwrap();
    let mut w = lazy.write_txn().unwrap();
    let dups = w
        .create_db(Some("dups"), DbFlags::CREATE | DbFlags::DUP_SORT)
        .unwrap();
    w.commit().unwrap();
    let mut model = Model::new();
    let mut pairs: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
    for round in 0..40u64 {
        let env = if round % 2 == 0 { &lazy } else { &durable };
        let mut w = env.write_txn().unwrap();
        let dups_db = w.open_db(Some("dups")).unwrap();
        for i in 0..300u64 {
            let n = round * 300 + i;
            let k = key(n % 5000);
            if n % 5 == 0 {
                w.delete(env.main_db(), &k).unwrap();
                model.remove(&k);
            } else {
                let v = vec![(n % 200) as u8; (n % 300) as usize];
                w.put(env.main_db(), &k, &v, PutFlags::empty()).unwrap();
                model.insert(k, v);
            }
            let (dk, dv) = (key(n % 37), format!("{n:010}").into_bytes());
            w.put(dups_db, &dk, &dv, PutFlags::empty()).unwrap();
            pairs.entry(dk).or_default().push(dv);
        }
        w.commit().unwrap();
        for other in [&lazy, &durable] {
            assert!(read_all(other, other.main_db()) == model, "round {round}");
            let r = other.read_txn().unwrap();
            let dups_db = r.open_db(Some("dups")).unwrap();
            for (k, vs) in &pairs {
                let got: Vec<Vec<u8>> = r
                    .iter_dup(dups_db, k)
                    .unwrap()
                    .map(|v| v.unwrap().to_vec())
                    .collect();
                let mut want = vs.clone();
                want.sort();
                assert_eq!(got, want, "round {round}");
            }
        }
    }
    let _ = dups;
    drop(lazy);
    drop(durable);
    let env = Env::open(dir.path()).unwrap();
    assert!(read_all(&env, env.main_db()) == model, "after reopen");
}

/// Hot copies, page by page, taken while a writer builds pages in place (free pages of the
/// copied snapshot among them) and sometimes aborts: every copy opens, passes the checker and
/// holds one committed state whole.
fn hot_copies_while_writing_in_place() {
    let (_dir, env) = lazy_env();
    let db = env.main_db();
    let write_all = move |env: &Env, v: u8, commit: bool| {
        let mut w = env.write_txn().unwrap();
        for k in 0..3000u64 {
            w.put(db, &key(k), &[v; 120], PutFlags::empty()).unwrap();
        }
        if commit {
            w.commit().unwrap();
        }
    };
    write_all(&env, 0, true);
    let writer = {
        let env = env.clone();
        std::thread::spawn(move || {
            for v in 1..=60u8 {
                write_all(&env, v, v % 4 != 0);
            }
        })
    };
    let copies = tempfile::tempdir().unwrap();
    for i in 0..12 {
        let dest = copies.path().join(format!("copy{i}"));
        env.copy_to(&dest, false).unwrap();
        let c = Env::options().no_subdir(true).open(&dest).unwrap();
        let all = read_all(&c, c.main_db());
        assert_eq!(all.len(), 3000, "copy {i}");
        let v = all.values().next().unwrap()[0];
        assert!(
            all.values().all(|x| x == &vec![v; 120]),
            "copy {i} mixes two commits"
        );
    }
    writer.join().unwrap();
}

#[test]
fn map_writes() {
    pages_go_in_place();
    nested_aborts_restore_pages_in_place();
    two_nesting_levels_merge_and_undo();
    handles_of_both_kinds_share_a_file();
    hot_copies_while_writing_in_place();
}
