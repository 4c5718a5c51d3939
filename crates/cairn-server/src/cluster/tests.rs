//! The `doc` extension applied directly (as cairn-raft's apply calls it: a nested transaction
//! per entry, dropped on a refusal) on two environments: the same entries make byte-identical
//! documents and feeds, refusals answer the single-node statuses and change nothing.

use super::*;
use cairn_raft::ext::Extension;

/// Applies `w` in a transaction of `env` as cairn-raft does: committed if applied, dropped
/// if refused. The answer or the refusal's status.
fn apply(env: &cairn::Env, w: &DocWrite) -> Result<Answer, u16> {
    let mut t = env.write_txn().unwrap();
    let r = DocExtension.apply(&mut t, &encode(w).unwrap()).unwrap();
    match r {
        Ok(a) => {
            t.commit().unwrap();
            Ok(postcard::from_bytes(&a).unwrap())
        }
        Err(why) => {
            t.abort();
            Err(refused(&why).status.as_u16())
        }
    }
}

fn put(id: &str, body: &str, pre: Preconditions, at_ms: u64) -> DocWrite {
    DocWrite {
        at_ms,
        op: DocOp::Put {
            coll: "c".into(),
            id: id.into(),
            body: body.as_bytes().to_vec(),
            pre,
        },
    }
}

fn if_match(v: u64) -> Preconditions {
    Preconditions {
        if_match: Some(decode::Condition::Versions(vec![v])),
        if_none_match: None,
    }
}

/// Every database of `env` by name, with its (key, value) pairs, raw.
type Dump = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Every (key, value) of every database of `env`, raw.
fn dump(env: &cairn::Env) -> Dump {
    let r = env.read_txn().unwrap();
    let mut out = Vec::new();
    for name in r.db_names().unwrap() {
        let db = r.open_db(Some(&name)).unwrap();
        let kv = r
            .iter(db)
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        out.push((name, kv));
    }
    out
}

#[test]
fn replicas_applying_the_same_entries_end_identical() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let envs: Vec<cairn::Env> = dirs
        .iter()
        .map(|d| cairn::Env::open(d.path()).unwrap())
        .collect();
    let entries = [
        put("a", r#"{"n":1}"#, Preconditions::default(), 1000),
        put("b", r#"{"n":2}"#, Preconditions::default(), 1001),
        // If-Match on a's version (its seq, 1): applied.
        put("a", r#"{"n":3}"#, if_match(1), 1002),
        // If-Match on a stale version: 412, nothing written.
        put("a", r#"{"n":4}"#, if_match(1), 1003),
        DocWrite {
            at_ms: 1004,
            op: DocOp::Delete {
                coll: "c".into(),
                id: "b".into(),
                pre: Preconditions::default(),
            },
        },
        // A delete of what is gone: 404.
        DocWrite {
            at_ms: 1005,
            op: DocOp::Delete {
                coll: "c".into(),
                id: "b".into(),
                pre: Preconditions::default(),
            },
        },
        DocWrite {
            at_ms: 1006,
            op: DocOp::Bulk {
                coll: "c".into(),
                items: vec![
                    BulkEntry {
                        id: "x".into(),
                        op: BulkOp::Create,
                        doc: Some(br#"{"n":5}"#.to_vec()),
                        if_match: None,
                    },
                    BulkEntry {
                        id: "a".into(),
                        op: BulkOp::Create,
                        doc: Some(br#"{"n":6}"#.to_vec()),
                        if_match: None,
                    },
                ],
            },
        },
    ];
    let answers: Vec<Vec<Result<Answer, u16>>> = envs
        .iter()
        .map(|env| entries.iter().map(|w| apply(env, w)).collect())
        .collect();
    assert_eq!(answers[0], answers[1]);
    let a = &answers[0];
    assert_eq!(
        a[0],
        Ok(Answer::Written {
            version: 1,
            created: true
        })
    );
    assert_eq!(
        a[2],
        Ok(Answer::Written {
            version: 3,
            created: false
        })
    );
    assert_eq!(a[3], Err(412));
    assert_eq!(a[4], Ok(Answer::Deleted { version: 2 }));
    assert_eq!(a[5], Err(404));
    let Ok(Answer::Bulk { results }) = &a[6] else {
        panic!("{:?}", a[6]);
    };
    let results: serde_json::Value = serde_json::from_slice(results).unwrap();
    assert_eq!(results[0]["status"], 201);
    assert_eq!(results[1]["status"], 412, "{results}");
    // Same documents, same feed (timestamps included), byte for byte.
    assert_eq!(dump(&envs[0]), dump(&envs[1]));
    let c = cairn_doc::Collection::open(&envs[0], "c").unwrap();
    let r = envs[0].read_txn().unwrap();
    c.verify(&r).unwrap();
    let times: Vec<u64> = c
        .changes(&r, 0, 100)
        .unwrap()
        .iter()
        .map(|ch| ch.timestamp_ms)
        .collect();
    assert_eq!(times, [1000, 1001, 1002, 1004, 1006]);
}

#[test]
fn refusals_change_nothing_and_garbage_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let env = cairn::Env::open(dir.path()).unwrap();
    // A failed condition on a collection that does not exist: not even the collection stays.
    let create_only = Preconditions {
        if_match: Some(decode::Condition::Any),
        if_none_match: None,
    };
    assert_eq!(apply(&env, &put("a", "{}", create_only, 1)), Err(412));
    assert_eq!(
        apply(&env, &put("", "{}", Preconditions::default(), 1)),
        Err(400)
    );
    assert!(dump(&env).is_empty(), "{:?}", dump(&env));
    let mut t = env.write_txn().unwrap();
    let r = DocExtension.apply(&mut t, b"\xff\xff\xff").unwrap();
    assert_eq!(refused(&r.unwrap_err()).status, StatusCode::BAD_REQUEST);
}

fn op(at_ms: u64, op: DocOp) -> DocWrite {
    DocWrite { at_ms, op }
}

#[test]
fn index_builds_are_entries_every_replica_applies_alike() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let envs: Vec<cairn::Env> = dirs
        .iter()
        .map(|d| cairn::Env::open(d.path()).unwrap())
        .collect();
    let declare = |name: &str, path: &str, unique: bool| DocOp::DeclareIndex {
        coll: "c".into(),
        name: name.into(),
        path: path.into(),
        unique,
    };
    let step = |name: &str| DocOp::BuildStep {
        coll: "c".into(),
        name: name.into(),
        batch: 3,
    };
    let mut entries = Vec::new();
    for i in 0..10u64 {
        // Two documents share the value 7 at /u: a unique index on /u must fail.
        let u = if i == 8 { 7 } else { i };
        let body = format!("{{\"n\":{i},\"u\":{u}}}");
        entries.push(put(&format!("d{i}"), &body, Preconditions::default(), i));
    }
    entries.push(op(20, declare("n", "/n", false)));
    entries.push(op(21, declare("u", "/u", true)));
    // Builds interleaved with a write (below the cursor after the first step, above it
    // before), as writes interleave with a leader's steps.
    entries.push(op(22, step("n")));
    entries.push(put(
        "d0",
        r#"{"n":100,"u":100}"#,
        Preconditions::default(),
        23,
    ));
    for _ in 0..4 {
        entries.push(op(24, step("n")));
        entries.push(op(24, step("u")));
    }
    entries.push(op(
        25,
        DocOp::DropIndex {
            coll: "c".into(),
            name: "nope".into(),
        },
    ));
    let answers: Vec<Vec<Result<Answer, u16>>> = envs
        .iter()
        .map(|env| entries.iter().map(|w| apply(env, w)).collect())
        .collect();
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0].last(), Some(&Err(404)));
    assert_eq!(dump(&envs[0]), dump(&envs[1]));
    let c = cairn_doc::Collection::open(&envs[0], "c").unwrap();
    let r = envs[0].read_txn().unwrap();
    c.verify(&r).unwrap();
    let state = |n: &str| c.index(&r, n).unwrap().unwrap().state;
    assert_eq!(state("n"), IndexState::Ready);
    assert!(
        matches!(state("u"), IndexState::Failed { .. }),
        "{:?}",
        state("u")
    );
    let q = cairn_doc::Query::eq(json!(100));
    assert_eq!(c.query(&r, "n", &q).unwrap().docs[0].id, "d0");
}
