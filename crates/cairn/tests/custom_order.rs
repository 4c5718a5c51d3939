//! User-supplied key and value orders (Env::set_key_order / set_dup_order, the C API's
//! mdb_set_compare / mdb_set_dupsort).

use cairn::{DbFlags, Env, PutFlags};
use std::sync::Arc;

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
