//! The sorted-duplicates suite (LMDB's DUPSORT; the engines of `engines::DUP_ENGINES`): the
//! shape of OpenLDAP's indexes, many sorted values under each of a few keys.
//!
//! N pairs (1,000,000 in the full set) over 1,000 keys, 16-byte decimal keys and values:
//! 1. insert every pair in random order, 10,000 pairs per write transaction;
//! 2. iterate every key's values (SET_KEY, then NEXT_DUP to the last), in one read transaction,
//!    three times over;
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
const ITER_PASSES: u64 = 3;

/// Pair `i`: key `i % KEYS`, value `i` (so a key's values are unique and its values interleave
/// with every other key's in insertion order).
fn pair(i: u64) -> ([u8; 16], [u8; 16]) {
    (dec_key(i % KEYS), dec_key(i))
}

/// Pair `i` of the DUPFIXED database: key `i % KEYS`, value `i` as a native 8-byte integer.
#[allow(
    clippy::host_endian_bytes,
    reason = "INTEGERDUP values are native-endian integers by definition"
)]
fn fixed_pair(i: u64) -> ([u8; 16], [u8; 8]) {
    (dec_key(i % KEYS), i.to_ne_bytes())
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

pub fn dups(s: &mut Scratch, p: &Params, out: &mut Output) -> Result<()> {
    let n = p.records.max(KEYS);
    out.phase = "open";
    let dir = s.fresh_dir("dups")?;
    let db = engines::open_dups(s.cfg, &dir).with_context(|| format!("opening {dir:?}"))?;

    out.phase = "dup-insert";
    let order = permutation(n, 41);
    let t = Instant::now();
    batches(&*db, &order, &mut |w, i| {
        let (k, v) = pair(i);
        w.put(&k, &v)
    })?;
    db.sync()?;
    out.rate(
        "dup-insert",
        format!("insert N pairs over {KEYS} keys, random order, {BATCH} per txn"),
        n,
        t.elapsed(),
    );
    out.size(
        "dup-size",
        "file size after the inserts".into(),
        disk_bytes(&dir)?,
    );

    out.phase = "dup-iterate";
    // Three passes: one pass of a million values takes a tenth of a second, too short to time
    // well on a busy machine.
    let t = Instant::now();
    let mut seen = 0;
    for _ in 0..ITER_PASSES {
        let got = iterate(&*db)?;
        ensure!(got == n, "iterated {got} pairs, inserted {n}");
        seen += got;
    }
    out.rate(
        "dup-iterate",
        format!("iterate every key's values (SET_KEY + NEXT_DUP), one read txn, x{ITER_PASSES}"),
        seen,
        t.elapsed(),
    );

    out.phase = "dup-delete";
    let half: Vec<u32> = permutation(n, 43)
        .into_iter()
        .filter(|i| i % 2 == 0)
        .collect();
    let t = Instant::now();
    batches(&*db, &half, &mut |w, i| {
        let (k, v) = pair(i);
        ensure!(w.delete_pair(&k, &v)?, "pair {i} missing at delete");
        Ok(())
    })?;
    db.sync()?;
    out.rate(
        "dup-delete",
        format!("delete half of the pairs one by one, random order, {BATCH} per txn"),
        half.len() as u64,
        t.elapsed(),
    );
    let left = iterate(&*db)?;
    ensure!(
        left == n - half.len() as u64,
        "{left} pairs left after the deletes"
    );
    s.discard(db, &dir)?;
    dupfixed(s, p, out)
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

/// The three phases over fixed-size values stored packed.
fn dupfixed(s: &mut Scratch, p: &Params, out: &mut Output) -> Result<()> {
    let n = p.records.max(KEYS);
    out.phase = "open dupfixed";
    let dir = s.fresh_dir("dupfixed")?;
    let db = engines::open_dupfixed(s.cfg, &dir).with_context(|| format!("opening {dir:?}"))?;

    out.phase = "dupfixed-insert";
    let order = permutation(n, 47);
    let t = Instant::now();
    batches(&*db, &order, &mut |w, i| {
        let (k, v) = fixed_pair(i);
        w.put(&k, &v)
    })?;
    db.sync()?;
    out.rate(
        "dupfixed-insert",
        format!(
            "DUPFIXED 8-byte integer values: insert N pairs over {KEYS} keys, random order, \
             {BATCH} per txn"
        ),
        n,
        t.elapsed(),
    );
    out.size(
        "dupfixed-size",
        "DUPFIXED: file size after the inserts".into(),
        disk_bytes(&dir)?,
    );

    out.phase = "dupfixed-iterate";
    let t = Instant::now();
    let mut seen = 0;
    for _ in 0..ITER_PASSES {
        let got = iterate_chunks(&*db)?;
        ensure!(got == n, "iterated {got} values in bulk, inserted {n}");
        seen += got;
    }
    out.rate(
        "dupfixed-iterate",
        format!(
            "DUPFIXED: iterate every key's values in bulk (GET_MULTIPLE + NEXT_MULTIPLE), one \
             read txn, x{ITER_PASSES}"
        ),
        seen,
        t.elapsed(),
    );

    out.phase = "dupfixed-delete";
    let half: Vec<u32> = permutation(n, 53)
        .into_iter()
        .filter(|i| i % 2 == 1)
        .collect();
    let t = Instant::now();
    batches(&*db, &half, &mut |w, i| {
        let (k, v) = fixed_pair(i);
        ensure!(w.delete_pair(&k, &v)?, "pair {i} missing at delete");
        Ok(())
    })?;
    db.sync()?;
    out.rate(
        "dupfixed-delete",
        format!("DUPFIXED: delete half of the pairs one by one, random order, {BATCH} per txn"),
        half.len() as u64,
        t.elapsed(),
    );
    let left = iterate_chunks(&*db)?;
    ensure!(
        left == n - half.len() as u64,
        "{left} pairs left after the deletes"
    );
    s.discard(db, &dir)
}
