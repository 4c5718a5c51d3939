//! The sorted-duplicates suite (LMDB's DUPSORT; the engines of `engines::DUP_ENGINES`): the
//! shape of OpenLDAP's indexes, many sorted values under each of a few keys.
//!
//! N pairs (1,000,000 in the full set) over 1,000 keys, 16-byte decimal keys and values:
//! 1. insert every pair in random order, 10,000 pairs per write transaction;
//! 2. iterate every key's values (SET_KEY, then NEXT_DUP to the last), in one read transaction,
//!    `ITER_PASSES` times over;
//! 3. delete half of the pairs (one key/value pair at a time) in random order, 10,000 per
//!    transaction; then check that the other half is all there.
//!
//! Then the same three phases over a DUPFIXED | INTEGERDUP database (values: the pair's
//! number as a native 8-byte integer, stored packed), iterating in bulk: GET_MULTIPLE, then
//! NEXT_MULTIPLE, each call handing out a run of packed values (rows `dupfixed-*`).

use std::hint::black_box;
use std::time::Instant;

use anyhow::{ensure, Context, Result};

use crate::engines::{self, WriteKind};
use crate::workloads::{dec_key, disk_bytes, permutation, touch, Output, Params, Scratch};

/// Keys the pairs are spread over.
const KEYS: u64 = 1000;
/// Pairs per write transaction.
const BATCH: usize = 10_000;
/// Passes of the iteration phase.
const ITER_PASSES: u64 = 10;

/// A pair: the key, the value in a buffer, the value's length.
type Pair = ([u8; 16], [u8; 16], usize);

/// Pair `i`: key `i % KEYS`, value `i` (so a key's values are unique and its values interleave
/// with every other key's in insertion order), as 16 decimal digits.
fn pair(i: u64) -> Pair {
    (dec_key(i % KEYS), dec_key(i), 16)
}

/// Pair `i` of the DUPFIXED database: key `i % KEYS`, value `i` as a native 8-byte integer
/// (the first 8 bytes of the buffer).
#[allow(
    clippy::host_endian_bytes,
    reason = "INTEGERDUP values are native-endian integers by definition"
)]
fn fixed_pair(i: u64) -> Pair {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&i.to_ne_bytes());
    (dec_key(i % KEYS), v, 8)
}

/// Writes the pairs of `order` with `op`, `BATCH` per transaction.
fn batches(
    db: &dyn engines::Engine,
    order: &[u32],
    op: &mut dyn FnMut(&mut dyn engines::WriteTxn, u64) -> Result<()>,
) -> Result<()> {
    for chunk in order.chunks(BATCH) {
        db.write(WriteKind::Blind, &mut |w| {
            for &i in chunk {
                op(w, u64::from(i))?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Reads every value of every key in one read transaction; returns how many.
fn iterate(db: &dyn engines::Engine) -> Result<u64> {
    let mut n = 0;
    let mut sum = 0;
    db.read(&mut |r| {
        for k in 0..KEYS {
            n += r.dup_values(&dec_key(k), &mut |v| touch(&mut sum, v))?;
        }
        Ok(())
    })?;
    black_box(sum);
    Ok(n)
}

/// One database layout of the suite: how it opens, what pair `i` is, how its values are read
/// back, and the ids, labels and seeds of its rows.
struct Layout {
    open: fn(&engines::Config, &std::path::Path) -> Result<Box<dyn engines::Engine>>,
    dir: &'static str,
    pair: fn(u64) -> Pair,
    iterate: fn(&dyn engines::Engine) -> Result<u64>,
    /// Phases, also the rows' ids: open, insert, file size, iterate, delete.
    ids: [&'static str; 5],
    /// Label prefixes: of the insert row, of the other rows.
    first: &'static str,
    rest: &'static str,
    /// How the iteration reads the values.
    how: &'static str,
    /// Seeds of the insert and delete orders; the deleted half is `i % 2 == parity`.
    seeds: (u64, u64),
    parity: u32,
}

const LAYOUTS: [Layout; 2] = [
    Layout {
        open: engines::open_dups,
        dir: "dups",
        pair,
        iterate,
        ids: [
            "open",
            "dup-insert",
            "dup-size",
            "dup-iterate",
            "dup-delete",
        ],
        first: "",
        rest: "",
        how: "(SET_KEY + NEXT_DUP)",
        seeds: (41, 43),
        parity: 0,
    },
    Layout {
        open: engines::open_dupfixed,
        dir: "dupfixed",
        pair: fixed_pair,
        iterate: iterate_chunks,
        ids: [
            "open dupfixed",
            "dupfixed-insert",
            "dupfixed-size",
            "dupfixed-iterate",
            "dupfixed-delete",
        ],
        first: "DUPFIXED 8-byte integer values: ",
        rest: "DUPFIXED: ",
        how: "in bulk (GET_MULTIPLE + NEXT_MULTIPLE)",
        seeds: (47, 53),
        parity: 1,
    },
];

pub fn dups(s: &mut Scratch, p: &Params, out: &mut Output) -> Result<()> {
    for l in &LAYOUTS {
        phases(s, p, out, l)?;
    }
    Ok(())
}

/// Insert, iterate and delete half over the database of layout `l`.
fn phases(s: &mut Scratch, p: &Params, out: &mut Output, l: &Layout) -> Result<()> {
    let n = p.records.max(KEYS);
    let [open, insert, size, iter, delete] = l.ids;
    out.phase = open;
    let dir = s.fresh_dir(l.dir)?;
    let db = (l.open)(s.cfg, &dir).with_context(|| format!("opening {dir:?}"))?;

    out.phase = insert;
    let order = permutation(n, l.seeds.0);
    let t = Instant::now();
    batches(&*db, &order, &mut |w, i| {
        let (k, v, len) = (l.pair)(i);
        w.put(&k, &v[..len])
    })?;
    db.sync()?;
    out.rate(
        insert,
        format!(
            "{}insert N pairs over {KEYS} keys, random order, {BATCH} per txn",
            l.first
        ),
        n,
        t.elapsed(),
    );
    out.size(
        size,
        format!("{}file size after the inserts", l.rest),
        disk_bytes(&dir)?,
    );

    out.phase = iter;
    // Ten passes: one pass over a million values takes 1-45 ms depending on the engine and the
    // layout (a bulk pass 1-2 ms), too short to time on a shared machine; with three passes
    // the bulk rows moved 0.64x-0.92x between runs of one build. The first pass after the
    // inserts is the coldest for every engine alike.
    let t = Instant::now();
    let mut seen = 0;
    for _ in 0..ITER_PASSES {
        let got = (l.iterate)(&*db)?;
        ensure!(got == n, "iterated {got} values, inserted {n}");
        seen += got;
    }
    out.rate(
        iter,
        format!(
            "{}iterate every key's values {}, one read txn, x{ITER_PASSES}",
            l.rest, l.how
        ),
        seen,
        t.elapsed(),
    );

    out.phase = delete;
    let half: Vec<u32> = permutation(n, l.seeds.1)
        .into_iter()
        .filter(|i| i % 2 == l.parity)
        .collect();
    let t = Instant::now();
    batches(&*db, &half, &mut |w, i| {
        let (k, v, len) = (l.pair)(i);
        ensure!(w.delete_pair(&k, &v[..len])?, "pair {i} missing at delete");
        Ok(())
    })?;
    db.sync()?;
    out.rate(
        delete,
        format!(
            "{}delete half of the pairs one by one, random order, {BATCH} per txn",
            l.rest
        ),
        half.len() as u64,
        t.elapsed(),
    );
    let left = (l.iterate)(&*db)?;
    ensure!(
        left == n - half.len() as u64,
        "{left} pairs left after the deletes"
    );
    s.discard(db, &dir)
}

/// Reads every value of every key in bulk (runs of packed 8-byte values) in one read
/// transaction; returns how many values (a run that is not whole values is an error).
#[allow(
    clippy::host_endian_bytes,
    reason = "INTEGERDUP values are native-endian integers by definition"
)]
fn iterate_chunks(db: &dyn engines::Engine) -> Result<u64> {
    let mut n = 0;
    let mut sum = 0u64;
    let mut whole = true;
    db.read(&mut |r| {
        for k in 0..KEYS {
            r.dup_chunks(&dec_key(k), &mut |run| {
                // Every value is read, as an application would.
                for v in run.chunks_exact(8) {
                    sum = sum.wrapping_add(u64::from_ne_bytes(v.try_into().expect("8 bytes")));
                    n += 1;
                }
                whole &= run.len() % 8 == 0;
            })?;
        }
        Ok(())
    })?;
    black_box(sum);
    ensure!(whole, "a bulk read handed out a partial value");
    Ok(n)
}
