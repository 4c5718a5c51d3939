//! The bulk builder against the engine's own reader and checker: random contents for every
//! kind of database (plain, REVERSEKEY, INTEGERKEY, DUPSORT with DUPFIXED / INTEGERDUP /
//! REVERSEDUP, named databases), values on overflow runs (in the buffer and written from
//! where they lie), keys of 100,000 values, several page sizes; and input out of order.

use super::*;
use crate::db::{cmp_for, dup_cmp_for, DbFlags};
use crate::{Env, Error};

/// Counter-mode pseudo-random numbers: the page checksum of (seed, counter).
struct Rng(u64, u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed, 0)
    }
    fn next(&mut self) -> u64 {
        self.1 += 1;
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.0.to_le_bytes());
        b[8..].copy_from_slice(&self.1.to_le_bytes());
        format::xxh3_64(&b)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Sorts pairs in the order of a database of `flags` and drops repeats (pairs, or keys
/// without DUPSORT).
fn sorted(flags: u16, mut pairs: Pairs) -> Pairs {
    let f = DbFlags::from_bits_retain(u32::from(flags));
    let (kc, vc) = (cmp_for(f), dup_cmp_for(f));
    let dups = f.contains(DbFlags::DUP_SORT);
    pairs.sort_by(|a, b| {
        kc.cmp(&a.0, &b.0).then_with(|| {
            if dups {
                vc.cmp(&a.1, &b.1)
            } else {
                std::cmp::Ordering::Equal
            }
        })
    });
    pairs.dedup_by(|b, a| kc.cmp(&a.0, &b.0).is_eq() && (!dups || vc.cmp(&a.1, &b.1).is_eq()));
    pairs
}

/// Random pairs for a database of `flags`.
#[allow(
    clippy::host_endian_bytes,
    reason = "INTEGERKEY keys and INTEGERDUP values are native integers, as in LMDB"
)]
fn contents(r: &mut Rng, flags: u16, n: usize, ps: usize) -> Pairs {
    let f = DbFlags::from_bits_retain(u32::from(flags));
    let mut v = Vec::new();
    let key = |r: &mut Rng, i: usize| -> Vec<u8> {
        if f.contains(DbFlags::INTEGER_KEY) {
            if r.below(2) == 0 {
                (r.next() as u32).to_ne_bytes().to_vec()
            } else {
                r.next().to_ne_bytes().to_vec()
            }
        } else {
            let mut k = format!("k{:03}/", i % 7).into_bytes();
            let len = r.below(30) as usize;
            k.extend(r.bytes(len));
            k
        }
    };
    for i in 0..n {
        let k = key(r, i);
        if f.contains(DbFlags::DUP_SORT) {
            // Mostly few values a key; some keys with many (sub-trees).
            let count = match r.below(20) {
                0 => 300 + r.below(2000) as usize,
                1..=5 => 2 + r.below(20) as usize,
                _ => 1,
            };
            for _ in 0..count {
                let val = if f.contains(DbFlags::INTEGER_DUP) {
                    r.next().to_ne_bytes().to_vec()
                } else if f.contains(DbFlags::DUP_FIXED) {
                    r.bytes(12)
                } else {
                    let len = 1 + r.below(60) as usize;
                    r.bytes(len)
                };
                v.push((k.clone(), val));
            }
        } else {
            let len = match r.below(50) {
                0 => ps + r.below(3 * ps as u64) as usize,
                1..=3 => 500 + r.below(1500) as usize,
                _ => r.below(120) as usize,
            };
            v.push((k, r.bytes(len)));
        }
    }
    sorted(flags, v)
}

/// Loads `dbs` (name, flags, pairs; the unnamed one last) into a new file at `path`.
fn build(path: &Path, ps: usize, dbs: &[(Option<&str>, u16, &Pairs)]) -> Result<Vec<Loaded>> {
    let mut w = BulkWriter::create(path, ps)?;
    let mut out = Vec::new();
    let mut named = Vec::new();
    for (name, flags, pairs) in dbs.iter().filter(|d| d.0.is_some()) {
        let mut l = w.database(*flags)?;
        for (k, v) in pairs.iter() {
            l.push(&mut w, k, v)?;
        }
        let got = l.finish(&mut w)?;
        named.push((name.unwrap().as_bytes().to_vec(), got.record));
        out.push(got);
    }
    let (_, flags, pairs) = dbs.iter().find(|d| d.0.is_none()).expect("a main database");
    let mut l = w.database(*flags)?;
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut names = named.iter().peekable();
    for (k, v) in pairs.iter() {
        while let Some((n, rec)) = names.next_if(|(n, _)| n < k) {
            l.push_db(&mut w, n, rec)?;
        }
        l.push(&mut w, k, v)?;
    }
    for (n, rec) in names {
        l.push_db(&mut w, n, rec)?;
    }
    let main = l.finish(&mut w)?;
    w.finish(main.record)?;
    out.push(main);
    Ok(out)
}

/// Opens the built file, compares every database with what was loaded, runs the checker.
fn verify(path: &Path, dbs: &[(Option<&str>, u16, &Pairs)]) {
    let env = Env::options()
        .no_subdir(true)
        .no_lock(true)
        .max_dbs(16)
        .open(path)
        .unwrap();
    let r = env.read_txn().unwrap();
    let report = r.check().unwrap();
    assert!(report.is_ok(), "checker: {:?}", report.problems);
    for (name, flags, pairs) in dbs {
        let db = r.open_db(*name).unwrap();
        assert_eq!(
            r.db_flags(db).unwrap().persistent().bits(),
            u32::from(*flags),
            "{name:?}"
        );
        let got: Pairs = r
            .iter(db)
            .unwrap()
            .map(|i| {
                let (k, v) = i.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .filter(|(k, _)| {
                name.is_some() || !dbs.iter().any(|d| d.0.map(str::as_bytes) == Some(&k[..]))
            })
            .collect();
        assert!(got == **pairs, "{name:?}: contents differ");
    }
}

#[test]
fn every_kind_of_database_reads_back_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Rng::new(0x9E37_79B9_7F4A_7C15);
    let kinds: [u16; 8] = [
        0,
        0x02,               // REVERSEKEY
        0x08,               // INTEGERKEY
        0x04,               // DUPSORT
        0x04 | 0x10,        // DUPFIXED
        0x04 | 0x10 | 0x20, // INTEGERDUP
        0x04 | 0x40,        // REVERSEDUP
        0x04 | 0x08,        // DUPSORT, INTEGERKEY
    ];
    for (i, ps) in [4096usize, 8192, 65536].into_iter().enumerate() {
        for (j, &flags) in kinds.iter().enumerate() {
            let n = if ps == 4096 { 3000 } else { 600 };
            let pairs = contents(&mut r, flags, n, ps);
            let p = dir.path().join(format!("one-{i}-{j}"));
            let dbs = [(None, flags, &pairs)];
            let got = build(&p, ps, &dbs).unwrap();
            assert_eq!(got[0].pairs, pairs.len() as u64);
            verify(&p, &dbs);
        }
    }
}

#[test]
fn named_databases_and_an_empty_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Rng::new(7);
    let main = contents(&mut r, 0, 500, 4096);
    let a = contents(&mut r, 0x04 | 0x10, 200, 4096);
    let b = contents(&mut r, 0x02, 800, 4096);
    let empty: Pairs = Vec::new();
    let p = dir.path().join("named");
    // Names that sort among the main database's keys, before and after them.
    let dbs = [
        (Some("k003/m"), 0x04 | 0x10, &a),
        (Some("a"), 0x02, &b),
        (Some("zz"), 0, &empty),
        (None, 0, &main),
    ];
    build(&p, 4096, &dbs).unwrap();
    verify(&p, &dbs);
    // An empty file of nothing.
    let p = dir.path().join("nothing");
    build(&p, 4096, &[(None, 0, &empty)]).unwrap();
    verify(&p, &[(None, 0, &empty)]);
}

#[test]
fn large_values_and_large_duplicate_sets() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Rng::new(99);
    // A value larger than the buffer (written from where it lies), one just under it, and
    // small ones between.
    let plain: Pairs = vec![
        (b"a".to_vec(), r.bytes(10)),
        (b"b".to_vec(), r.bytes(FLUSH_AT + 12_345)),
        (b"c".to_vec(), r.bytes(5000)),
        (b"d".to_vec(), r.bytes(FLUSH_AT - 4096)),
        (b"e".to_vec(), Vec::new()),
    ];
    let p = dir.path().join("big");
    build(&p, 4096, &[(None, 0, &plain)]).unwrap();
    verify(&p, &[(None, 0, &plain)]);
    // 100,000 values under one key, fixed-size and not, between keys of one value.
    for flags in [0x04u16, 0x04 | 0x10] {
        let mut pairs: Pairs = vec![(b"a".to_vec(), b"1".to_vec())];
        for i in 0..100_000u32 {
            let v = if flags & 0x10 != 0 {
                i.to_be_bytes().to_vec()
            } else {
                format!("{i:x}").into_bytes()
            };
            pairs.push((b"many".to_vec(), v));
        }
        pairs.push((b"z".to_vec(), b"2".to_vec()));
        let pairs = sorted(flags, pairs);
        let p = dir.path().join(format!("dups-{flags}"));
        build(&p, 4096, &[(None, flags, &pairs)]).unwrap();
        verify(&p, &[(None, flags, &pairs)]);
    }
}

#[test]
fn input_out_of_order_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(u16, Pairs); 5] = [
        (
            0,
            vec![
                (b"b".to_vec(), b"1".to_vec()),
                (b"a".to_vec(), b"2".to_vec()),
            ],
        ),
        (
            0,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"a".to_vec(), b"2".to_vec()),
            ],
        ),
        (
            0x04,
            vec![
                (b"a".to_vec(), b"2".to_vec()),
                (b"a".to_vec(), b"1".to_vec()),
            ],
        ),
        (
            0x04 | 0x10,
            vec![
                (b"a".to_vec(), b"12".to_vec()),
                (b"a".to_vec(), b"123".to_vec()),
            ],
        ),
        (0x08, vec![(b"abc".to_vec(), b"1".to_vec())]),
    ];
    for (i, (flags, pairs)) in cases.into_iter().enumerate() {
        let p = dir.path().join(format!("bad{i}"));
        let e = build(&p, 4096, &[(None, flags, &pairs)]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Invalid(_) | Error::BadValueSize { .. } | Error::BadIntegerKey { .. }
            ),
            "case {i}: {e}"
        );
    }
    let e = BulkWriter::create(&dir.path().join("ps"), 3000)
        .err()
        .unwrap();
    assert!(matches!(e, Error::Invalid(_)));
}
