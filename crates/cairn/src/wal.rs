//! The commit log of [`Durability::Logged`](crate::Durability) (docs/design.md, "Logged
//! commits"): a logged commit is a lazy commit (pages written, not flushed) plus one record of
//! the transaction's effects appended to the log file and flushed. After a power loss,
//! recovery falls back to the last steady commit and replays the records that follow it.
//!
//! Invariants:
//! - A record is current when its epoch is the txnid of the steady commit the log follows;
//!   records of older epochs (the log is rewritten from its start after every steady commit)
//!   are never replayed.
//! - Records of one epoch form a chain: each names the commit it was built on (`base`: txnid
//!   and fingerprint, a hash of its meta) and its own commit (txnid and fingerprint), and the
//!   next record's base is that commit. Replay applies a record only when its base is the state
//!   replay has reached, so a gap (a commit that was not logged) ends it; fingerprints tell
//!   apart two commits that got the same txnid (a commit that failed after its record was
//!   written, and the one that took its number).
//! - The record's checksum covers its header and body: a record torn by a crash (its flush did
//!   not return, so no caller was told it committed) ends the replay.
//! - Effects are unconditional: replaying them on the state they were recorded on gives the
//!   state the commit produced (flags such as NO_OVERWRITE and APPEND were resolved when the
//!   call succeeded).
//! - Every loop over the log is bounded by the log's length: a record is at least a header
//!   long and a body never extends past the end.

use crate::error::{Error, Result};
use crate::format::xxh3_64;
use crate::storage::Storage;

/// "CLG1", little-endian.
const MAGIC: u32 = u32::from_le_bytes(*b"CLG1");
/// Bytes of a record's header (byte table in docs/design.md).
pub(crate) const HEADER: usize = 64;
/// Where the checksum sits in the header (it covers the bytes before it and the body).
const SUM_AT: usize = 56;

/// A record written past what this handle has written of the log is followed, in the same
/// write, by this many zeros: the log's blocks are preallocated (fallocate), and the first
/// write to such a block makes the flush record the block as written (file-system metadata,
/// a journal commit). Zeroing ahead pays that once per this many bytes instead of at each
/// record's flush. Zeros lie past the record, where no current record is.
pub(crate) const ZERO_AHEAD: u64 = 1 << 20;

/// Effect codes in a record's body.
const OP_PUT: u8 = 1;
const OP_DEL: u8 = 2;
const OP_DEL_PAIR: u8 = 3;

/// The effects a write transaction recorded so far: ops referring to databases by their
/// position in `dbs` (handle indexes, turned into names at commit).
#[derive(Default, Debug)]
pub(crate) struct Effects {
    pub dbs: Vec<usize>,
    pub ops: Vec<u8>,
}

impl Effects {
    fn db(&mut self, idx: usize) -> u32 {
        match self.dbs.iter().position(|&d| d == idx) {
            Some(i) => i as u32,
            None => {
                self.dbs.push(idx);
                (self.dbs.len() - 1) as u32
            }
        }
    }

    fn push(&mut self, op: u8, idx: usize, key: &[u8], val: Option<&[u8]>) {
        let d = self.db(idx);
        self.ops.push(op);
        self.ops.extend_from_slice(&d.to_le_bytes());
        self.ops
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.ops.extend_from_slice(key);
        if let Some(v) = val {
            self.ops.extend_from_slice(&(v.len() as u32).to_le_bytes());
            self.ops.extend_from_slice(v);
        }
    }

    /// `key` now holds `val` (in a sorted-duplicates database: the pair exists).
    pub fn put(&mut self, idx: usize, key: &[u8], val: &[u8]) {
        self.push(OP_PUT, idx, key, Some(val));
    }

    /// `key` (with all its values) was deleted.
    pub fn delete(&mut self, idx: usize, key: &[u8]) {
        self.push(OP_DEL, idx, key, None);
    }

    /// The pair `key`/`val` of a sorted-duplicates database was deleted.
    pub fn delete_pair(&mut self, idx: usize, key: &[u8], val: &[u8]) {
        self.push(OP_DEL_PAIR, idx, key, Some(val));
    }

    /// A mark to truncate back to when a nesting level aborts.
    pub fn mark(&self) -> usize {
        self.ops.len()
    }

    /// Forgets the ops recorded after `mark`.
    pub fn truncate(&mut self, mark: usize) {
        self.ops.truncate(mark);
    }
}

/// Builds a record: header, then the database names (`u32` count; each `u32` length and the
/// name's bytes, empty for the main database), then the ops.
pub(crate) fn encode(epoch: u64, base: Link, own: Link, names: &[Vec<u8>], ops: &[u8]) -> Vec<u8> {
    let names_len: usize = names.iter().map(|n| 4 + n.len()).sum();
    let body_len = 4 + names_len + ops.len();
    let mut r = Vec::with_capacity(HEADER + body_len);
    r.extend_from_slice(&MAGIC.to_le_bytes());
    r.extend_from_slice(&(body_len as u32).to_le_bytes());
    r.extend_from_slice(&epoch.to_le_bytes());
    r.extend_from_slice(&base.txnid.to_le_bytes());
    r.extend_from_slice(&own.txnid.to_le_bytes());
    r.extend_from_slice(&base.fp.to_le_bytes());
    r.extend_from_slice(&own.fp.to_le_bytes());
    r.extend_from_slice(&[0u8; 8]);
    r.extend_from_slice(&[0u8; 8]); // checksum, below
    r.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for n in names {
        r.extend_from_slice(&(n.len() as u32).to_le_bytes());
        r.extend_from_slice(n);
    }
    r.extend_from_slice(ops);
    let sum = record_sum(&r);
    r[SUM_AT..HEADER].copy_from_slice(&sum.to_le_bytes());
    r
}

/// Sets a record's own commit (known once its meta is built) and its checksum.
pub(crate) fn seal(record: &mut [u8], own: Link) {
    record[24..32].copy_from_slice(&own.txnid.to_le_bytes());
    record[40..48].copy_from_slice(&own.fp.to_le_bytes());
    let sum = record_sum(record);
    record[SUM_AT..HEADER].copy_from_slice(&sum.to_le_bytes());
}

/// Seals again every record found walking a log image from its start by the records' length
/// fields, so that edits pass the checksums and meet the decoders' bounds checks (the fuzz
/// target `replay_log`). Testing only.
#[doc(hidden)]
pub fn reseal_all(log: &mut [u8]) {
    let mut off = 0usize;
    // Each step moves past at least a header: bounded by the image's length.
    while off + HEADER <= log.len() {
        let len = HEADER + u32_at(log, off + 4) as usize;
        let Some(rec) = log.get_mut(off..off + len) else {
            break;
        };
        let sum = record_sum(rec);
        rec[SUM_AT..HEADER].copy_from_slice(&sum.to_le_bytes());
        off += len;
    }
}

/// XXH3 of the header before the checksum, and of the body.
fn record_sum(r: &[u8]) -> u64 {
    let mut h = xxh3_64(&r[..SUM_AT]);
    h ^= xxh3_64(&r[HEADER..]).rotate_left(17);
    h
}

/// A commit as the log names it: its txnid and a fingerprint of its meta.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Link {
    pub txnid: u64,
    pub fp: u64,
}

impl Link {
    /// The link of a commit record.
    pub fn of(meta: &crate::format::Meta) -> Link {
        Link {
            txnid: meta.txnid,
            // Never 0, which stands for "any" at the start of an epoch (`find_tail`).
            fp: xxh3_64(&meta.encode()) | 1,
        }
    }

    /// Whether a record built on `base` follows this commit (fingerprint 0: the epoch's
    /// steady commit, known by its txnid alone, which the epoch field names).
    pub fn leads_to(self, base: Link) -> bool {
        self.txnid == base.txnid && (self.fp == 0 || self.fp == base.fp)
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A record's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub epoch: u64,
    pub base: Link,
    pub own: Link,
    pub body_len: u64,
}

impl Head {
    /// Bytes of the whole record.
    pub fn len(&self) -> u64 {
        HEADER as u64 + self.body_len
    }
}

/// The header at `off`, if one of epoch `epoch` starts there and its body fits in the log
/// (the checksum is not checked: see [`read`]).
pub(crate) fn head_at(log: &dyn Storage, off: u64, epoch: u64) -> Result<Option<Head>> {
    let len = log.len();
    if off.checked_add(HEADER as u64).is_none_or(|end| end > len) {
        return Ok(None);
    }
    let mut h = [0u8; HEADER];
    log.read_at(off, &mut h)?;
    if u32_at(&h, 0) != MAGIC || u64_at(&h, 8) != epoch || u64_at(&h, 48) != 0 {
        return Ok(None);
    }
    let head = Head {
        epoch,
        base: Link {
            txnid: u64_at(&h, 16),
            fp: u64_at(&h, 32),
        },
        own: Link {
            txnid: u64_at(&h, 24),
            fp: u64_at(&h, 40),
        },
        body_len: u64::from(u32_at(&h, 4)),
    };
    if head.own.txnid <= head.base.txnid || off + head.len() > len {
        return Ok(None);
    }
    Ok(Some(head))
}

/// The whole record at `off` whose checksum holds, if any.
pub(crate) fn read(log: &dyn Storage, off: u64, epoch: u64) -> Result<Option<(Head, Vec<u8>)>> {
    let Some(head) = head_at(log, off, epoch)? else {
        return Ok(None);
    };
    let mut r = vec![0u8; head.len() as usize];
    log.read_at(off, &mut r)?;
    if record_sum(&r) != u64_at(&r, SUM_AT) {
        return Ok(None);
    }
    Ok(Some((head, r)))
}

/// Where the writer appends: after the record of the commit `tip`, in epoch `epoch`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tail {
    pub epoch: u64,
    /// The last record's commit (the steady commit the epoch is named after when the log is
    /// empty).
    pub tip: Link,
    pub offset: u64,
}

/// Finds where the record of a commit built on `base` goes, continuing from `known` (this
/// handle's last position, which another process's appends may have moved past). `epoch`
/// is the txnid of the steady commit the log follows (`base` itself, or the one `base` builds
/// on). None when the log's chain does not reach `base` (a commit that was not logged: a lazy
/// handle's, or one whose record failed): the commit must then be steady.
pub(crate) fn find_tail(
    log: &dyn Storage,
    known: Tail,
    epoch: u64,
    base: Link,
) -> Result<Option<Tail>> {
    let mut t = if known.epoch == epoch && known.tip.txnid <= base.txnid {
        known
    } else {
        let fp = if base.txnid == epoch { base.fp } else { 0 };
        Tail {
            epoch,
            tip: Link { txnid: epoch, fp },
            offset: 0,
        }
    };
    // Each step moves past a record at least HEADER bytes long: bounded by the log's length.
    while t.tip.txnid < base.txnid {
        let Some(h) = head_at(log, t.offset, epoch)? else {
            return Ok(None);
        };
        if !t.tip.leads_to(h.base) {
            return Ok(None);
        }
        t.tip = h.own;
        t.offset += h.len();
    }
    Ok(t.tip.leads_to(base).then_some(t))
}

/// One effect decoded from a record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Op<'a> {
    Put(usize, &'a [u8], &'a [u8]),
    Delete(usize, &'a [u8]),
    DeletePair(usize, &'a [u8], &'a [u8]),
}

/// A record's database names and ops (a record whose checksum held: a malformed body is damage).
pub(crate) struct Body<'a> {
    pub names: Vec<&'a [u8]>,
    ops: &'a [u8],
}

fn damaged(what: &str) -> Error {
    Error::corrupted(format!("commit log record: {what}"))
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
    if b.len() < n {
        return Err(damaged("cut short"));
    }
    let (a, rest) = b.split_at(n);
    *b = rest;
    Ok(a)
}

fn take_u32(b: &mut &[u8]) -> Result<u32> {
    Ok(u32_at(take(b, 4)?, 0))
}

impl<'a> Body<'a> {
    /// Splits a whole record (as `read` returns it).
    pub fn parse(record: &'a [u8]) -> Result<Body<'a>> {
        let mut b = &record[HEADER..];
        let n = take_u32(&mut b)?;
        // Each name takes at least four bytes: bounded by the body.
        if n as usize > b.len() / 4 {
            return Err(damaged("more names than bytes"));
        }
        let mut names = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let l = take_u32(&mut b)? as usize;
            names.push(take(&mut b, l)?);
        }
        Ok(Body { names, ops: b })
    }

    /// The next op, None at the end.
    pub fn next_op(&mut self) -> Result<Option<Op<'a>>> {
        if self.ops.is_empty() {
            return Ok(None);
        }
        let b = &mut self.ops;
        let code = take(b, 1)?[0];
        let db = take_u32(b)? as usize;
        if db >= self.names.len() {
            return Err(damaged("op names no database"));
        }
        let kl = take_u32(b)? as usize;
        let key = take(b, kl)?;
        let mut val = || -> Result<&'a [u8]> {
            let vl = take_u32(b)? as usize;
            take(b, vl)
        };
        Ok(Some(match code {
            OP_PUT => Op::Put(db, key, val()?),
            OP_DEL => Op::Delete(db, key),
            OP_DEL_PAIR => Op::DeletePair(db, key, val()?),
            _ => return Err(damaged("unknown op")),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::SimStorage;

    fn link(txnid: u64) -> Link {
        Link {
            txnid,
            fp: txnid * 1000 + 7,
        }
    }

    fn record(epoch: u64, base: u64, txnid: u64) -> Vec<u8> {
        let mut e = Effects::default();
        e.put(0, b"k", b"v");
        e.delete(3, b"gone");
        e.delete_pair(3, b"k2", b"v2");
        let names = [b"".to_vec(), b"side".to_vec()];
        encode(epoch, link(base), link(txnid), &names, &e.ops)
    }

    #[test]
    fn records_round_trip_and_chain() {
        let log = SimStorage::new(1 << 20).unwrap();
        log.grow(1 << 16).unwrap();
        let r1 = record(10, 10, 11);
        let r2 = record(10, 11, 13);
        log.write_at(0, &[&r1, &r2]).unwrap();
        let (h, whole) = read(&log, 0, 10).unwrap().unwrap();
        assert_eq!((h.base, h.own), (link(10), link(11)));
        let mut body = Body::parse(&whole).unwrap();
        assert_eq!(body.names, vec![&b""[..], &b"side"[..]]);
        assert_eq!(body.next_op().unwrap(), Some(Op::Put(0, b"k", b"v")));
        assert_eq!(body.next_op().unwrap(), Some(Op::Delete(1, b"gone")));
        assert_eq!(
            body.next_op().unwrap(),
            Some(Op::DeletePair(1, b"k2", b"v2"))
        );
        assert_eq!(body.next_op().unwrap(), None);
        // Another epoch's records are not current.
        assert!(read(&log, 0, 9).unwrap().is_none());
        let empty = Tail::default();
        let s = 10;
        let t = find_tail(&log, empty, s, link(13)).unwrap().unwrap();
        assert_eq!(t.offset, (r1.len() + r2.len()) as u64);
        assert_eq!(
            find_tail(&log, empty, s, link(10)).unwrap().unwrap().offset,
            0
        );
        // A base the chain does not reach (12 was never logged; 14 is past the end), or
        // another commit that got the same txnid as a logged one.
        assert!(find_tail(&log, empty, s, link(12)).unwrap().is_none());
        assert!(find_tail(&log, empty, s, link(14)).unwrap().is_none());
        let other = Link { txnid: 13, fp: 1 };
        assert!(find_tail(&log, empty, s, other).unwrap().is_none());
        // Continuing from a known position.
        let mid = Tail {
            epoch: 10,
            tip: link(11),
            offset: r1.len() as u64,
        };
        assert_eq!(find_tail(&log, mid, s, link(13)).unwrap(), Some(t));
    }

    #[test]
    fn a_flipped_bit_or_a_cut_ends_the_record() {
        let log = SimStorage::new(1 << 20).unwrap();
        log.grow(1 << 12).unwrap();
        let mut r = record(5, 5, 6);
        let last = r.len() - 1;
        r[last] ^= 1;
        log.write_at(0, &[&r]).unwrap();
        assert!(read(&log, 0, 5).unwrap().is_none());
        let short = SimStorage::new(1 << 20).unwrap();
        let r = record(5, 5, 6);
        short.write_at(0, &[&r[..r.len() - 1]]).unwrap();
        assert!(read(&short, 0, 5).unwrap().is_none());
        assert!(head_at(&short, u64::MAX - 4, 5).unwrap().is_none());
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        let ops = [OP_PUT, 0, 0, 0, 0, 9, 0, 0, 0, b'x'];
        let (a, b) = (link(1), link(2));
        let r = encode(1, a, b, &[b"".to_vec()], &ops);
        let mut body = Body::parse(&r).unwrap();
        assert!(body.next_op().is_err());
        let r = encode(1, a, b, &[], &[OP_DEL, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(Body::parse(&r).unwrap().next_op().is_err());
        let r = encode(1, a, b, &[b"".to_vec()], &[7, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(Body::parse(&r).unwrap().next_op().is_err());
    }
}
