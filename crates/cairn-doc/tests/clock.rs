//! The write path takes the clock as an argument (`put_text_at`, `delete_at`, `trim_feed_at`):
//! two environments given the same writes with the same times end with byte-identical feeds
//! and documents, age-bounded trimming included; the same writes with one time changed do not
//! (so the comparison can fail).

use cairn_doc::{key, Collection, Retention};
use serde_json::json;
use std::time::Duration;

/// One write: put (`Some(doc text)`) or delete (`None`) of an id, at a time.
type Step = (&'static str, Option<String>, u64);

fn steps(shift_at: Option<usize>) -> Vec<Step> {
    let mut out = Vec::new();
    for i in 0..60u64 {
        let id = ["a", "b", "c", "d"][(i % 4) as usize];
        let doc = (i % 7 != 3).then(|| json!({ "n": i, "id": id }).to_string());
        // Irregular gaps, so that the age bound (40 ms) trims some writes and not others.
        let mut at = 1_700_000_000_000 + i * 9 + (i % 5) * 13;
        if shift_at == Some(i as usize) {
            at += 1;
        }
        out.push((id, doc, at));
    }
    out
}

/// Every (key, value) of a database, raw.
type Raw = Vec<(Vec<u8>, Vec<u8>)>;

/// Runs `steps` on a new environment; returns the feed and the documents' database, raw.
fn run(steps: &[Step]) -> (Raw, Raw) {
    let dir = tempfile::tempdir().unwrap();
    let env = cairn::Env::open(dir.path()).unwrap();
    let c = Collection::open(&env, "c").unwrap();
    let mut w = env.write_txn().unwrap();
    c.set_retention(
        &mut w,
        Retention {
            max_count: Some(30),
            max_age: Some(Duration::from_millis(40)),
        },
    )
    .unwrap();
    w.commit().unwrap();
    for (id, doc, at) in steps {
        let mut w = env.write_txn().unwrap();
        match doc {
            Some(text) => {
                let v: serde_json::Value = serde_json::from_str(text).unwrap();
                c.put_text_at(&mut w, id, &v, Some(text.as_bytes()), None, *at)
                    .unwrap();
            }
            None => {
                c.delete_at(&mut w, id, *at).unwrap();
            }
        }
        w.commit().unwrap();
    }
    let mut w = env.write_txn().unwrap();
    let last = steps.last().map_or(0, |s| s.2);
    c.trim_feed_at(&mut w, 1000, last + 5).unwrap();
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    c.verify(&r).unwrap();
    let raw = |name: String| {
        let db = r.open_db(Some(&name)).unwrap();
        r.iter(db)
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect::<Vec<_>>()
    };
    (raw(key::feed_db("c")), raw(key::docs_db("c")))
}

#[test]
fn same_writes_at_the_same_times_make_the_same_feed() {
    let (feed_a, docs_a) = run(&steps(None));
    let (feed_b, docs_b) = run(&steps(None));
    assert_eq!(feed_a, feed_b);
    assert_eq!(docs_a, docs_b);
    // The age bound trimmed: fewer records than writes, fewer than the count bound keeps.
    assert!(!feed_a.is_empty() && feed_a.len() < 30, "{}", feed_a.len());
    // One write's time changed: its record's timestamp differs.
    let (feed_c, _) = run(&steps(Some(59)));
    assert_ne!(feed_a, feed_c);
}
