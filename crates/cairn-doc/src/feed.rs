//! The change feed of a collection and its retention.
//!
//! Invariants (docs/doc.md, "Change feed"):
//! - The catalog's `seq` is the sequence number of the collection's last write (0: none);
//!   a write takes `seq + 1` in its own transaction, so numbers follow commit order with no
//!   gap and no reuse (an aborted write's number is taken again by the next write, which is
//!   the first to be seen).
//! - The catalog's `trimmed` is the highest number trimmed (0: none); the feed database holds
//!   exactly the records `trimmed + 1 ..= seq`. A reader asking for changes after `since <
//!   trimmed` is refused ([`Error::FeedTrimmed`]) instead of being handed a gap.
//! - Trimming happens inside writes, at most [`TRIM_PER_WRITE`] records per write (a write's
//!   cost stays bounded when the bound is lowered), oldest first, and never takes the newest
//!   record (a reader can always learn the current sequence number from the feed).
//! - The write path reads no clock: a record's timestamp and the age cut-off of trimming are
//!   the `now` its caller passes (the `*_at` methods; the others pass [`now_ms`]), so the
//!   same writes with the same times make the same feed on every environment (replicas).

use crate::collection::{doc_id, Collection, Doc};
use crate::{Error, ReadTxn, Result};
use cairn::{PutFlags, RwTxn};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Records trimmed at most by one write.
pub const TRIM_PER_WRITE: usize = 16;

const SEQ: &[u8] = b"seq";
const TRIMMED: &[u8] = b"trimmed";
const RETENTION: &[u8] = b"retention";

/// What a write did to its document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created or replaced.
    Put,
    /// Deleted.
    Delete,
}

/// One record of the change feed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Its sequence number (1, 2, 3, ... per collection).
    pub seq: u64,
    /// The document written.
    pub id: String,
    /// Put or delete.
    pub kind: ChangeKind,
    /// The document's version after the write (a delete's: the last version + 1).
    pub version: u64,
    /// When the write ran: milliseconds since the Unix epoch (the writer's clock).
    pub timestamp_ms: u64,
}

/// How much of the feed a collection keeps. Each bound, when set, trims: a record goes once
/// more than `max_count` newer records exist, or once it is older than `max_age`. The newest
/// record always stays. Default: keep everything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// Records kept at most (at least 1 is kept anyway).
    pub max_count: Option<u64>,
    /// Age of the oldest record kept.
    pub max_age: Option<Duration>,
}

/// The writer's clock: milliseconds since the Unix epoch (0 if the clock is before it). What
/// the convenience write methods stamp feed records with; a replicated writer takes the time
/// once, on its leader, and passes it to the `*_at` methods instead.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn read_u64(txn: &impl ReadTxn, c: &Collection, k: &[u8]) -> Result<u64> {
    match txn.get_raw(c.meta, k)? {
        None => Ok(0),
        Some(v) => Ok(u64::from_be_bytes(v.try_into().map_err(|_| {
            Error::Inconsistent(format!("catalog key {k:?}: {} bytes", v.len()))
        })?)),
    }
}

fn decode(seq: u64, v: &[u8]) -> Result<Change> {
    let bad = || Error::Inconsistent(format!("feed record {seq}: {} bytes", v.len()));
    if v.len() < 17 {
        return Err(bad());
    }
    let kind = match v[0] {
        1 => ChangeKind::Put,
        2 => ChangeKind::Delete,
        _ => return Err(bad()),
    };
    Ok(Change {
        seq,
        id: doc_id(&v[17..])?.to_string(),
        kind,
        version: u64::from_be_bytes(v[1..9].try_into().expect("8 bytes")),
        timestamp_ms: u64::from_be_bytes(v[9..17].try_into().expect("8 bytes")),
    })
}

fn seq_of(k: &[u8]) -> Result<u64> {
    Ok(u64::from_be_bytes(k.try_into().map_err(|_| {
        Error::Inconsistent(format!("feed key of {} bytes", k.len()))
    })?))
}

/// Appends the record of a write, stamped `now` (milliseconds since the Unix epoch), and
/// trims by the retention bound as of `now`; returns its number. The caller's clock, not
/// ours: two environments given the same writes with the same `now` end with the same feed.
pub(crate) fn append(
    txn: &mut RwTxn<'_>,
    c: &Collection,
    id: &str,
    kind: ChangeKind,
    version: u64,
    now: u64,
) -> Result<u64> {
    let seq = read_u64(txn, c, SEQ)? + 1;
    let mut v = Vec::with_capacity(17 + id.len());
    v.push(match kind {
        ChangeKind::Put => 1,
        ChangeKind::Delete => 2,
    });
    v.extend_from_slice(&version.to_be_bytes());
    v.extend_from_slice(&now.to_be_bytes());
    v.extend_from_slice(id.as_bytes());
    // APPEND: the number is above every key held, and the engine checks it (AppendOrder).
    txn.put(c.feed, &seq.to_be_bytes(), &v, PutFlags::APPEND)?;
    txn.put(c.meta, SEQ, &seq.to_be_bytes(), PutFlags::empty())?;
    trim(txn, c, now, TRIM_PER_WRITE)?;
    Ok(seq)
}

fn trim(txn: &mut RwTxn<'_>, c: &Collection, now: u64, max: usize) -> Result<usize> {
    let ret = c.retention(txn)?;
    if ret == Retention::default() {
        return Ok(0);
    }
    let keep = ret.max_count.unwrap_or(u64::MAX).max(1);
    let cutoff = ret
        .max_age
        .map(|a| now.saturating_sub(a.as_millis() as u64));
    let mut count = txn.stat(c.feed)?.entries;
    let mut last_trimmed = None;
    let mut n = 0;
    while n < max && count > 1 {
        let Some((k, v)) = txn.cursor(c.feed)?.first()? else {
            break;
        };
        let seq = seq_of(k)?;
        let old = decode(seq, v)?;
        if count <= keep && cutoff.is_none_or(|t| old.timestamp_ms >= t) {
            break;
        }
        txn.delete(c.feed, &seq.to_be_bytes())?;
        last_trimmed = Some(seq);
        count -= 1;
        n += 1;
    }
    if let Some(s) = last_trimmed {
        txn.put(c.meta, TRIMMED, &s.to_be_bytes(), PutFlags::empty())?;
    }
    Ok(n)
}

impl Collection {
    /// Up to `limit` changes with sequence numbers above `since`, oldest first. Follow the
    /// feed by asking again from the last number returned; asking from 0 reads from the
    /// start. [`Error::FeedTrimmed`] if records above `since` were trimmed.
    pub fn changes(&self, txn: &impl ReadTxn, since: u64, limit: usize) -> Result<Vec<Change>> {
        let trimmed = read_u64(txn, self, TRIMMED)?;
        if since < trimmed {
            return Err(Error::FeedTrimmed {
                since,
                oldest: trimmed + 1,
            });
        }
        let mut out = Vec::new();
        if limit == 0 || since == u64::MAX {
            return Ok(out);
        }
        let mut cur = txn.cursor_raw(self.feed)?;
        let mut e = cur.set_range(&(since + 1).to_be_bytes())?;
        while let Some((k, v)) = e {
            out.push(decode(seq_of(k)?, v)?);
            if out.len() >= limit {
                break;
            }
            e = cur.next()?;
        }
        Ok(out)
    }

    /// The sequence number of the collection's last write (0: none yet).
    pub fn last_seq(&self, txn: &impl ReadTxn) -> Result<u64> {
        read_u64(txn, self, SEQ)
    }

    /// The oldest sequence number a reader may still ask changes after (`changes(since)`
    /// succeeds for every `since >=` this).
    pub fn feed_floor(&self, txn: &impl ReadTxn) -> Result<u64> {
        read_u64(txn, self, TRIMMED)
    }

    /// The retention bound of the feed.
    pub fn retention(&self, txn: &impl ReadTxn) -> Result<Retention> {
        let Some(raw) = txn.get_raw(self.meta, RETENTION)? else {
            return Ok(Retention::default());
        };
        let v: serde_json::Value = serde_json::from_slice(raw)
            .map_err(|e| Error::Inconsistent(format!("retention: {e}")))?;
        Ok(Retention {
            max_count: v["max_count"].as_u64(),
            max_age: v["max_age_ms"].as_u64().map(Duration::from_millis),
        })
    }

    /// Sets the retention bound. Later writes trim the feed to it ([`TRIM_PER_WRITE`]
    /// records each); [`Collection::trim_feed`] trims at once.
    pub fn set_retention(&self, txn: &mut RwTxn<'_>, r: Retention) -> Result<()> {
        let v = serde_json::json!({
            "max_count": r.max_count,
            "max_age_ms": r.max_age.map(|a| a.as_millis() as u64),
        });
        txn.put(
            self.meta,
            RETENTION,
            v.to_string().as_bytes(),
            PutFlags::empty(),
        )?;
        Ok(())
    }

    /// Trims up to `max` records by the retention bound now; returns how many went.
    pub fn trim_feed(&self, txn: &mut RwTxn<'_>, max: usize) -> Result<usize> {
        self.trim_feed_at(txn, max, now_ms())
    }

    /// [`Collection::trim_feed`] as of `at_ms` (milliseconds since the Unix epoch) instead
    /// of this process's clock: the age bound cuts at `at_ms - max_age`.
    pub fn trim_feed_at(&self, txn: &mut RwTxn<'_>, max: usize, at_ms: u64) -> Result<usize> {
        trim(txn, self, at_ms, max)
    }
}

/// Checks the feed against its counters and the documents (the module invariants).
pub(crate) fn verify(txn: &cairn::RoTxn<'_>, c: &Collection, docs: &[Doc]) -> Result<()> {
    let seq = read_u64(txn, c, SEQ)?;
    let trimmed = read_u64(txn, c, TRIMMED)?;
    let mut expect = trimmed + 1;
    for e in txn.iter(c.feed)? {
        let (k, v) = e?;
        let s = seq_of(k)?;
        decode(s, v)?;
        if s != expect {
            return Err(Error::Inconsistent(format!(
                "feed: record {s} where {expect} was expected"
            )));
        }
        expect += 1;
    }
    if expect != seq + 1 && !(seq == 0 && trimmed == 0) {
        return Err(Error::Inconsistent(format!(
            "feed: records end at {} but the last write is {seq}",
            expect - 1
        )));
    }
    for d in docs {
        if d.seq > seq {
            return Err(Error::Inconsistent(format!(
                "document {:?} written at {} after the last write {seq}",
                d.id, d.seq
            )));
        }
        if d.seq > trimmed {
            let raw = txn.get(c.feed, &d.seq.to_be_bytes())?.unwrap_or_default();
            let ch = decode(d.seq, raw)?;
            if ch.id != d.id || ch.kind != ChangeKind::Put || ch.version != d.version {
                return Err(Error::Inconsistent(format!(
                    "document {:?} (version {}) and its feed record {ch:?} disagree",
                    d.id, d.version
                )));
            }
        }
    }
    Ok(())
}
