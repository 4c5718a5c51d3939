//! Unique constraints under concurrent writers: threads put documents through group commit
//! (`write_grouped`), every value of the unique field wanted by several threads at once;
//! exactly one document wins each value, every loser gets `UniqueViolation` and leaves no
//! trace (no document, no index entry, no feed record), and the group's other writes commit.

use cairn::Env;
use cairn_doc::{write_grouped, Collection, Error, IndexSpec, Query};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const THREADS: u64 = 8;
const VALUES: u64 = 60;

#[test]
fn unique_values_have_one_winner_each() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let coll = Collection::open(&env, "users").unwrap();
    let mut w = env.write_txn().unwrap();
    coll.declare_index(&mut w, "email", IndexSpec::new("/email").unique())
        .unwrap();
    w.commit().unwrap();
    let wins = AtomicU64::new(0);
    let losses = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (env, coll, wins, losses) = (&env, &coll, &wins, &losses);
            s.spawn(move || {
                for v in 0..VALUES {
                    // Threads walk the values from different starting points, so that the
                    // colliding puts land in one group as often as in different groups.
                    let v = (v + t * 7) % VALUES;
                    let id = format!("t{t}-v{v}");
                    let doc = json!({"email": format!("user{v}@example.com"), "t": t});
                    match write_grouped(env, |txn| coll.put(txn, &id, &doc)) {
                        Ok(1) => wins.fetch_add(1, Relaxed),
                        Ok(n) => panic!("version {n} for a new document"),
                        Err(Error::UniqueViolation { .. }) => losses.fetch_add(1, Relaxed),
                        Err(e) => panic!("{e}"),
                    };
                }
            });
        }
    });
    assert_eq!(wins.load(Relaxed), VALUES);
    assert_eq!(losses.load(Relaxed), VALUES * (THREADS - 1));
    let r = env.read_txn().unwrap();
    coll.verify(&r).unwrap();
    assert_eq!(coll.len(&r).unwrap(), VALUES);
    for v in 0..VALUES {
        let page = coll
            .query(
                &r,
                "email",
                &Query::eq(json!(format!("user{v}@example.com"))),
            )
            .unwrap();
        assert_eq!(page.docs.len(), 1, "value {v}");
        assert!(page.docs[0].id.ends_with(&format!("-v{v}")));
    }
    // Only the winners' writes are in the feed, numbered without a gap.
    let feed = coll.changes(&r, 0, usize::MAX).unwrap();
    assert_eq!(feed.len() as u64, VALUES);
    assert!(feed.iter().enumerate().all(|(i, c)| c.seq == i as u64 + 1));
}
