//! The change feed: a reader following it with `changes(since)` sees every committed write
//! once, in commit order, across reopens of the environment and aborted transactions; the
//! retention bounds (count, age) trim it, and asking for trimmed history is the typed error.

use cairn::Env;
use cairn_doc::{ChangeKind, Collection, Error, Handle, Retention};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn never_skips_or_repeats_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut want = Vec::new();
    let mut seen = Vec::new();
    let mut since = 0;
    for round in 0..6u64 {
        let env = Env::open(dir.path()).unwrap();
        let coll = Collection::open(&env, "c").unwrap();
        for t in 0..10u64 {
            let mut w = env.write_txn().unwrap();
            let mut mine = Vec::new();
            for i in 0..3u64 {
                let id = format!("k{}", (round * 7 + t * 3 + i) % 17);
                if (t + i) % 4 == 3 {
                    if let Some(v) = coll.delete(&mut w, &id).unwrap() {
                        mine.push((id, ChangeKind::Delete, v));
                    }
                } else {
                    let v = coll.put(&mut w, &id, &json!({"r": round})).unwrap();
                    mine.push((id, ChangeKind::Put, v));
                }
            }
            if t % 5 == 4 {
                w.abort(); // its numbers are taken again by the next commit
            } else {
                w.commit().unwrap();
                want.extend(mine);
            }
            // Follow the feed in small pages, from where the last read stopped.
            let r = env.read_txn().unwrap();
            loop {
                let page = coll.changes(&r, since, 2).unwrap();
                let Some(last) = page.last() else { break };
                since = last.seq;
                seen.extend(page);
            }
        }
    }
    let got: Vec<_> = seen
        .iter()
        .map(|c| (c.id.clone(), c.kind, c.version))
        .collect();
    assert_eq!(got, want);
    assert!(seen.iter().enumerate().all(|(i, c)| c.seq == i as u64 + 1));
}

#[test]
fn trimmed_history_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let h = Handle::open(Arc::new(Env::open(dir.path()).unwrap()), "c").unwrap();
    for i in 0..20 {
        h.put(&format!("d{i}"), &json!(i)).unwrap();
    }
    // Lowering the bound trims at most TRIM_PER_WRITE records per write.
    h.set_retention(Retention {
        max_count: Some(5),
        max_age: None,
    })
    .unwrap();
    for i in 20..50 {
        h.put(&format!("d{i}"), &json!(i)).unwrap();
    }
    assert_eq!(h.changes(45, 100).unwrap().len(), 5);
    match h.changes(0, 100) {
        Err(Error::FeedTrimmed {
            since: 0,
            oldest: 46,
        }) => {}
        other => panic!("{other:?}"),
    }
    match h.changes(44, 100) {
        Err(Error::FeedTrimmed { oldest: 46, .. }) => {}
        other => panic!("{other:?}"),
    }
    let r = h.env().read_txn().unwrap();
    assert_eq!(h.collection().feed_floor(&r).unwrap(), 45);
    h.collection().verify(&r).unwrap();
    drop(r);
    // The floor survives a reopen.
    let env = Env::open(dir.path()).unwrap();
    let c = Collection::open(&env, "c").unwrap();
    let r = env.read_txn().unwrap();
    assert!(matches!(
        c.changes(&r, 3, 1),
        Err(Error::FeedTrimmed { oldest: 46, .. })
    ));
    assert_eq!(c.changes(&r, 49, 1).unwrap()[0].id, "d49");
}

#[test]
fn age_bound_trims_old_records() {
    let dir = tempfile::tempdir().unwrap();
    let h = Handle::open(Arc::new(Env::open(dir.path()).unwrap()), "c").unwrap();
    h.set_retention(Retention {
        max_count: None,
        max_age: Some(Duration::from_millis(50)),
    })
    .unwrap();
    for i in 0..5 {
        h.put(&format!("old{i}"), &json!(i)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(120));
    h.put("new", &json!(1)).unwrap();
    // The five old records are past the bound: the write that followed trimmed them.
    assert!(matches!(
        h.changes(0, 10),
        Err(Error::FeedTrimmed { oldest: 6, .. })
    ));
    let ch = h.changes(5, 10).unwrap();
    assert_eq!(ch.len(), 1);
    assert_eq!((ch[0].seq, ch[0].id.as_str()), (6, "new"));
}

#[test]
fn long_poll_wakes_on_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let h = Handle::open(Arc::new(Env::open(dir.path()).unwrap()), "c").unwrap();
    h.put("a", &json!(1)).unwrap();
    // Something there already: no wait.
    assert_eq!(
        h.wait_changes(0, 10, Duration::from_secs(5)).unwrap().len(),
        1
    );
    // Nothing new: the timeout.
    let t = std::time::Instant::now();
    assert!(h
        .wait_changes(1, 10, Duration::from_millis(120))
        .unwrap()
        .is_empty());
    assert!(t.elapsed() >= Duration::from_millis(120));
    // A write of a clone wakes the waiter long before its timeout.
    let h2 = h.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        h2.put("b", &json!(2)).unwrap();
    });
    let t = std::time::Instant::now();
    let ch = h.wait_changes(1, 10, Duration::from_secs(20)).unwrap();
    writer.join().unwrap();
    assert_eq!((ch.len(), ch[0].id.as_str()), (1, "b"));
    assert!(t.elapsed() < Duration::from_secs(10));
    // A write the handle does not see (another collection handle) is found by the re-read.
    let other = Collection::open(h.env(), "c").unwrap();
    let env = h.env().clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        let mut w = env.write_txn().unwrap();
        other.put(&mut w, "c", &json!(3)).unwrap();
        w.commit().unwrap();
    });
    let ch = h.wait_changes(2, 10, Duration::from_secs(20)).unwrap();
    writer.join().unwrap();
    assert_eq!(ch[0].id, "c");
}
