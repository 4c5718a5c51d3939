//! MDB_SET / MDB_SET_RANGE on a cursor that is already positioned search the leaf it stands
//! in when that leaf spans the key (no descent from the root); the *_MULTIPLE operations read
//! the leaves the seek read. Both must answer as a fresh cursor does, whatever the order of
//! the keys sought: present or absent, inside the current leaf, before or after it, at its
//! edges, and across the forms of a key's values (one value, inline set, sub-tree).
use cairn::{DbFlags, Env, PutFlags};
use std::collections::BTreeMap;

fn key(i: u64) -> [u8; 8] {
    (i * 2).to_be_bytes()
}

/// xorshift, fixed seed.
fn shuffled(n: u64, mut x: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

#[test]
fn set_on_a_positioned_cursor_answers_as_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let plain = w.create_db(Some("plain"), DbFlags::CREATE).unwrap();
    let fixed = w
        .create_db(
            Some("fixed"),
            DbFlags::CREATE | DbFlags::DUP_SORT | DbFlags::DUP_FIXED,
        )
        .unwrap();
    // Even keys 0..2n: odd probes are absent; several leaves.
    let n = 3000u64;
    let mut model: BTreeMap<[u8; 8], Vec<[u8; 8]>> = BTreeMap::new();
    for i in 0..n {
        w.put(plain, &key(i), &i.to_le_bytes(), PutFlags::empty())
            .unwrap();
        // 1, 2..100 or 700 values: one value, an inline set, a sub-tree of several leaves.
        let count = match i % 3 {
            0 => 1,
            1 => 2 + i % 99,
            _ => 700,
        };
        let count = if i % 300 == 2 { count } else { count.min(150) };
        for v in 0..count {
            let val = (v * 7 + i).to_be_bytes();
            w.put(fixed, &key(i), &val, PutFlags::empty()).unwrap();
            model.entry(key(i)).or_default().push(val);
        }
    }
    w.commit().unwrap();
    for vals in model.values_mut() {
        vals.sort();
        vals.dedup();
    }
    let r = env.read_txn().unwrap();
    let probes: Vec<u64> = (0..2 * n + 2)
        .chain(shuffled(2 * n + 2, 0x9E37_79B9_7F4A_7C15))
        .chain((0..2 * n + 2).rev())
        .collect();
    let mut c = r.cursor(plain).unwrap();
    let mut cr = r.cursor(plain).unwrap();
    for &p in &probes {
        let k = p.to_be_bytes();
        let want = (p % 2 == 0 && p / 2 < n).then(|| (p / 2).to_le_bytes());
        let got = c.set(&k).unwrap();
        assert_eq!(
            got.map(|(gk, gv)| (gk.to_vec(), gv.to_vec())),
            want.map(|v| (k.to_vec(), v.to_vec())),
            "set {p}"
        );
        let fresh = r.cursor(plain).unwrap().set_range(&k).unwrap();
        assert_eq!(cr.set_range(&k).unwrap(), fresh, "set_range {p}");
        // A step after the seek continues from where it landed.
        if got.is_some() {
            let next = c.next().unwrap();
            let wnext = (p / 2 + 1 < n).then(|| key(p / 2 + 1));
            assert_eq!(next.map(|(k, _)| k.to_vec()), wnext.map(|k| k.to_vec()));
        }
    }
    let mut c = r.cursor(fixed).unwrap();
    for &p in &probes {
        let k = p.to_be_bytes();
        let Some(vals) = model.get(&k) else {
            assert!(c.set(&k).unwrap().is_none(), "set {p}");
            continue;
        };
        let (gk, gv) = c.set(&k).unwrap().expect("present");
        assert_eq!((gk, gv), (&k[..], &vals[0][..]), "set {p}");
        assert_eq!(c.count(), vals.len() as u64);
        let mut seen = Vec::new();
        let (ck, chunk) = c.get_multiple().unwrap().expect("a chunk");
        assert_eq!(ck, &k[..]);
        seen.extend_from_slice(chunk);
        while let Some((ck, chunk)) = c.next_multiple().unwrap() {
            assert_eq!(ck, &k[..]);
            seen.extend_from_slice(chunk);
        }
        assert_eq!(seen, vals.concat(), "chunks of {p}");
        // The cursor stands at the key's last value.
        assert_eq!(c.current().unwrap().unwrap().1, &vals[vals.len() - 1][..]);
    }
}

/// The same shortcut under the other key orders (bytes compared from the end, native
/// integers): a positioned cursor's SET, SET_RANGE and the step after them answer as a fresh
/// cursor's, the fresh cursor (a descent from the root) being the oracle.
#[test]
#[allow(
    clippy::host_endian_bytes,
    reason = "INTEGER_KEY keys are native integers, as in LMDB"
)]
fn set_on_a_positioned_cursor_under_other_key_orders() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let rev = w
        .create_db(Some("rev"), DbFlags::CREATE | DbFlags::REVERSE_KEY)
        .unwrap();
    let int = w
        .create_db(Some("int"), DbFlags::CREATE | DbFlags::INTEGER_KEY)
        .unwrap();
    let n = 4000u64;
    // Keys whose order differs from their bytes' order: the last byte varies fastest under
    // REVERSE_KEY, the low byte is first in memory under INTEGER_KEY.
    let rkey = |i: u64| {
        (i * 2)
            .to_be_bytes()
            .iter()
            .rev()
            .copied()
            .collect::<Vec<u8>>()
    };
    let ikey = |i: u64| (i * 2).to_ne_bytes().to_vec();
    for i in 0..n {
        w.put(rev, &rkey(i), &i.to_le_bytes(), PutFlags::empty())
            .unwrap();
        w.put(int, &ikey(i), &i.to_le_bytes(), PutFlags::empty())
            .unwrap();
    }
    w.commit().unwrap();
    let r = env.read_txn().unwrap();
    let probes: Vec<u64> = (0..2 * n + 2)
        .chain(shuffled(2 * n + 2, 0x2545_F491_4F6C_DD1D))
        .chain((0..2 * n + 2).rev())
        .collect();
    for (db, make) in [(rev, &rkey as &dyn Fn(u64) -> Vec<u8>), (int, &ikey)] {
        let mut c = r.cursor(db).unwrap();
        let mut cr = r.cursor(db).unwrap();
        let mut hits = 0;
        for &p in &probes {
            // Even probes are the keys (present below 2n); odd ones flip the number's lowest
            // bit: absent, between two present keys.
            let mut k = make(p / 2);
            if p % 2 == 1 {
                let low = if db == int && cfg!(target_endian = "big") {
                    k.len() - 1
                } else {
                    0
                };
                k[low] ^= 1;
            }
            let fresh = r.cursor(db).unwrap().set(&k).unwrap();
            let got = c.set(&k).unwrap();
            assert_eq!(got, fresh, "set {p}");
            if got.is_some() {
                hits += 1;
                let fresh_next = {
                    let mut f = r.cursor(db).unwrap();
                    f.set(&k).unwrap();
                    f.next().unwrap()
                };
                assert_eq!(c.next().unwrap(), fresh_next, "next after set {p}");
            }
            let fresh = r.cursor(db).unwrap().set_range(&k).unwrap();
            assert_eq!(cr.set_range(&k).unwrap(), fresh, "set_range {p}");
        }
        // Every key is found by each of the three passes.
        assert_eq!(hits, 3 * n);
    }
}
