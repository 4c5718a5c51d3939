//! The API's promises one by one: versions, conditional puts, a unique violation that leaves
//! nothing behind, queries refused while an index builds, a background build that writers
//! run beside, tokens that resume across transactions, group commit's error passing.

use cairn::Env;
use cairn_doc::{
    spawn_build, write_grouped, Collection, Error, Handle, IndexSpec, IndexState, Query,
};
use serde_json::json;
use std::ops::Bound;
use std::sync::Arc;

fn ids(p: &cairn_doc::QueryPage) -> Vec<&str> {
    p.docs.iter().map(|d| d.id.as_str()).collect()
}

#[test]
fn versions_and_conditional_puts() {
    let dir = tempfile::tempdir().unwrap();
    let h = Handle::open(Arc::new(Env::open(dir.path()).unwrap()), "c").unwrap();
    assert_eq!(h.put("a", &json!({"x": 1})).unwrap(), 1);
    assert_eq!(h.put("a", &json!({"x": 2})).unwrap(), 2);
    let d = h.get("a").unwrap().unwrap();
    assert_eq!((d.version, d.seq, d.body), (2, 2, json!({"x": 2})));
    assert!(matches!(
        h.put_if("a", &json!(3), Some(1)),
        Err(Error::VersionMismatch {
            expected: 1,
            found: 2,
            ..
        })
    ));
    assert_eq!(h.put_if("a", &json!(3), Some(2)).unwrap(), 3);
    assert_eq!(h.put_if("b", &json!(3), Some(0)).unwrap(), 1);
    assert_eq!(h.delete("a").unwrap(), Some(4));
    assert_eq!(h.delete("a").unwrap(), None);
    assert!(h.get("a").unwrap().is_none());
    // The refused conditional put and the delete of nothing left no feed record.
    assert_eq!(h.changes(0, 100).unwrap().len(), 5);
}

#[test]
fn unique_violation_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let c = Collection::open(&env, "users").unwrap();
    let mut w = env.write_txn().unwrap();
    c.declare_index(&mut w, "email", IndexSpec::new("/email").unique())
        .unwrap();
    c.declare_index(&mut w, "age", IndexSpec::new("/age"))
        .unwrap();
    c.put(&mut w, "ada", &json!({"email": "a@x", "age": 36}))
        .unwrap();
    c.put(&mut w, "bob", &json!({"email": "b@x", "age": 50}))
        .unwrap();
    // bob takes ada's address: refused, and bob's old entries (age 50, b@x) stay.
    let e = c
        .put(&mut w, "bob", &json!({"email": "a@x", "age": 20}))
        .unwrap_err();
    assert!(
        matches!(&e, Error::UniqueViolation { index, existing_id, .. } if index == "email" && existing_id == "ada"),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "unique index \"email\": value \"a@x\" is already held by document \"ada\""
    );
    // The transaction goes on after the refusal.
    c.put(&mut w, "cy", &json!({"email": "c@x", "age": 20}))
        .unwrap();
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    c.verify(&r).unwrap();
    assert_eq!(c.get(&r, "bob").unwrap().unwrap().version, 1);
    let p = c.query(&r, "age", &Query::eq(json!(50))).unwrap();
    assert_eq!(ids(&p), ["bob"]);
    assert_eq!(c.last_seq(&r).unwrap(), 3);
    // Group commit: the refused closure is rolled back alone, with our error.
    drop(r);
    let e = write_grouped(&env, |t| c.put(t, "dan", &json!({"email": "c@x"}))).unwrap_err();
    assert!(matches!(e, Error::UniqueViolation { .. }));
    assert!(c.get(&env.read_txn().unwrap(), "dan").unwrap().is_none());
    // The same value again under the same id is no violation.
    write_grouped(&env, |t| {
        c.put(t, "cy", &json!({"email": "c@x", "age": 21}))
    })
    .unwrap();
}

#[test]
fn queries_bounds_order_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let c = Collection::open(&env, "c").unwrap();
    let mut w = env.write_txn().unwrap();
    c.declare_index(&mut w, "v", IndexSpec::new("/v")).unwrap();
    for (id, v) in [
        ("a", json!(2)),
        ("b", json!(1)),
        ("c", json!(2)),
        ("d", json!("x")),
        ("e", json!(true)),
        ("f", json!(null)),
        ("g", json!(2.5)),
        ("h", json!(-0.0)),
    ] {
        c.put(&mut w, id, &json!({ "v": v })).unwrap();
    }
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let all = c.query(&r, "v", &Query::all()).unwrap();
    assert_eq!(ids(&all), ["e", "h", "b", "a", "c", "g", "d"]); // null is not indexed
    let rev = c.query(&r, "v", &Query::all().reverse(true)).unwrap();
    assert_eq!(ids(&rev), ["d", "g", "c", "a", "b", "h", "e"]);
    assert_eq!(
        ids(&c.query(&r, "v", &Query::eq(json!(2))).unwrap()),
        ["a", "c"]
    );
    assert_eq!(ids(&c.query(&r, "v", &Query::eq(json!(0))).unwrap()), ["h"]);
    let q = Query::bounds(Bound::Excluded(json!(1)), Bound::Excluded(json!(2.5)));
    assert_eq!(ids(&c.query(&r, "v", &q).unwrap()), ["a", "c"]);
    let q = Query::bounds(Bound::Included(json!(1)), Bound::Unbounded).reverse(true);
    assert_eq!(
        ids(&c.query(&r, "v", &q).unwrap()),
        ["d", "g", "c", "a", "b"]
    );
    assert!(matches!(
        c.query(&r, "v", &Query::eq(json!(null))),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        c.query(&r, "nope", &Query::all()),
        Err(Error::NoIndex(_))
    ));
    // A page ends on a token; the next page, in a later transaction, continues after it even
    // though the token's own entry was deleted in between.
    let p1 = c.query(&r, "v", &Query::eq(json!(2)).limit(1)).unwrap();
    assert_eq!(ids(&p1), ["a"]);
    let token = p1.next.unwrap();
    drop(r);
    let mut w = env.write_txn().unwrap();
    c.delete(&mut w, "a").unwrap();
    c.put(&mut w, "bb", &json!({"v": 2})).unwrap();
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let p2 = c
        .query(
            &r,
            "v",
            &Query::eq(json!(2)).limit(5).after(Some(token.clone())),
        )
        .unwrap();
    assert_eq!(ids(&p2), ["bb", "c"]);
    assert!(p2.next.is_none());
    let back = Query::eq(json!(2))
        .reverse(true)
        .after(Some(cairn_doc::Token::from_text(token.as_str())));
    assert!(ids(&c.query(&r, "v", &back).unwrap()).is_empty());
    // By path, as the HTTP API names an index.
    assert_eq!(
        ids(&c.query_path(&r, "/v", &Query::eq(json!(2))).unwrap()),
        ["bb", "c"]
    );
    assert!(matches!(
        c.query_path(&r, "/w", &Query::all()),
        Err(Error::NoIndex(_))
    ));
    let bad = Query::all().after(Some(cairn_doc::Token::from_text("zz")));
    assert!(matches!(c.query(&r, "v", &bad), Err(Error::Invalid(_))));
}

#[test]
fn background_build_beside_writers() {
    let dir = tempfile::tempdir().unwrap();
    let env = Arc::new(Env::open(dir.path()).unwrap());
    let h = Handle::open(env.clone(), "c").unwrap();
    let c = h.collection().clone();
    let mut w = env.write_txn().unwrap();
    for i in 0..5000u32 {
        c.put(&mut w, &format!("d{i:05}"), &json!({"g": i % 10}))
            .unwrap();
    }
    w.commit().unwrap();
    assert_eq!(
        h.declare_index("g", IndexSpec::new("/g")).unwrap(),
        IndexState::Building {
            done: 0,
            total: 5000
        }
    );
    assert!(matches!(
        h.query("g", &Query::eq(json!(1))),
        Err(Error::IndexBuilding {
            done: 0,
            total: 5000,
            ..
        })
    ));
    let mut w = env.write_txn().unwrap();
    assert!(matches!(
        c.build_step(&mut w, "g", 100).unwrap(),
        IndexState::Building {
            done: 100,
            total: 5000
        }
    ));
    w.commit().unwrap();
    let steps = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let s2 = steps.clone();
    let builder = spawn_build(h.clone(), "g", 250, move |_| {
        s2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    // Writers change documents on both sides of the build cursor while it moves.
    for i in 0..400u32 {
        let id = format!("d{:05}", (i * 37) % 5200);
        if i % 5 == 0 {
            h.delete(&id).unwrap();
        } else {
            h.put(&id, &json!({"g": 100 + i % 3})).unwrap();
        }
    }
    assert_eq!(builder.join().unwrap().unwrap(), IndexState::Ready);
    assert!(steps.load(std::sync::atomic::Ordering::Relaxed) >= 19);
    let r = env.read_txn().unwrap();
    c.verify(&r).unwrap();
    let all = c.query(&r, "g", &Query::all()).unwrap();
    assert_eq!(all.docs.len() as u64, c.len(&r).unwrap());
    // Declaring it again with another definition is refused; dropping it removes it.
    drop(r);
    assert!(matches!(
        h.declare_index("g", IndexSpec::new("/other")),
        Err(Error::IndexExists(_))
    ));
    // A build left half-done (as by a restart) is resumed by resume_builds.
    h.declare_index("g2", IndexSpec::new("/g")).unwrap();
    h.build_step("g2", 1000).unwrap();
    let resumed = h.resume_builds(700).unwrap();
    assert_eq!(resumed.len(), 1);
    for (name, j) in resumed {
        assert_eq!(
            (name.as_str(), j.join().unwrap().unwrap()),
            ("g2", IndexState::Ready)
        );
    }
    c.verify(&env.read_txn().unwrap()).unwrap();
    assert!(h.drop_index("g").unwrap());
    assert!(h.drop_index("g2").unwrap());
    assert!(h.indexes().unwrap().is_empty());
    assert!(matches!(
        h.query("g", &Query::all()),
        Err(Error::NoIndex(_))
    ));
}

#[test]
fn values_too_long_for_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let c = Collection::open(&env, "c").unwrap();
    let long = "x".repeat(env.max_key_size() + 1);
    let mut w = env.write_txn().unwrap();
    c.put(&mut w, "early", &json!({"s": long})).unwrap();
    c.put(&mut w, "b", &json!({"s": "short"})).unwrap();
    // Built over a document whose value is too long: the build fails and says why.
    c.declare_index(&mut w, "s", IndexSpec::new("/s")).unwrap();
    match c.build_step(&mut w, "s", 10).unwrap() {
        IndexState::Failed { reason } => assert!(reason.contains("\"early\""), "{reason}"),
        s => panic!("{s:?}"),
    }
    c.drop_index(&mut w, "s").unwrap();
    c.delete(&mut w, "early").unwrap();
    assert_eq!(
        c.declare_index(&mut w, "s", IndexSpec::new("/s")).unwrap(),
        IndexState::Building { done: 0, total: 1 }
    );
    assert_eq!(c.build_step(&mut w, "s", 10).unwrap(), IndexState::Ready);
    // Maintained: the write is refused whole.
    let e = c.put(&mut w, "late", &json!({"s": long})).unwrap_err();
    assert!(matches!(e, Error::IndexValueTooLarge { .. }), "{e}");
    assert!(c.get(&w, "late").unwrap().is_none());
    let bad_id = "i".repeat(cairn_doc::key::MAX_ID_LEN + 1);
    assert!(matches!(
        c.put(&mut w, &bad_id, &json!(1)),
        Err(Error::Invalid(_))
    ));
    w.commit().unwrap();
    c.verify(&env.read_txn().unwrap()).unwrap();
}
