//! The LMDB side of a migration, on a thread of its own: LMDB's pairs read, checked and
//! copied into batches the builder (`migrate.rs`) takes from a queue, so reading LMDB's file
//! and building Cairn's pages run on two cores.
//!
//! Invariants:
//! - Items go out in LMDB's order. The main database is read once: a named database's record
//!   met there (checked as `LmdbEnv::named_dbs` checks it) becomes a [`Item::Begin`], then
//!   that database's pairs, then an [`Item::End`], at the name's place in the main database's
//!   order; every other pair of the main database is an [`Item::Pair`] of it.
//! - Memory: a batch holds [`BATCH`] bytes of keys and values (more only for one large value,
//!   which LMDB's reader holds anyway), at most [`QUEUE`] batches are queued and the builder
//!   hands emptied ones back; the reader's own memory is the walk's (cairn-lmdb).
//! - The first error of LMDB's reader is the last thing sent. When the builder stops taking
//!   batches (its own error), the reader stops at its next send.

use cairn_lmdb::{DbRecord, LmdbEnv};
use std::sync::mpsc::{Receiver, SyncSender};

/// Bytes of keys and values a batch gathers before it is sent.
pub(crate) const BATCH: usize = 256 << 10;
/// Batches queued at most.
pub(crate) const QUEUE: usize = 4;

const PAIR: u8 = 0;
const BEGIN: u8 = 1;
const END: u8 = 2;

/// One step of the stream.
pub(crate) enum Item<'a> {
    /// A pair of the database being read (the main one, or the named one begun last).
    Pair(&'a [u8], &'a [u8]),
    /// A named database begins: its name and LMDB's record of it.
    Begin(&'a [u8], DbRecord),
    /// The named database begun last is complete.
    End,
}

/// Items, their bytes side by side.
#[derive(Default)]
pub(crate) struct Batch {
    data: Vec<u8>,
    items: Vec<(u8, u32, u32)>,
}

impl Batch {
    fn push(&mut self, kind: u8, k: &[u8], v: &[u8]) {
        self.data.extend_from_slice(k);
        self.data.extend_from_slice(v);
        // LMDB's keys are at most 511 bytes and its values' sizes are 32-bit.
        self.items.push((kind, k.len() as u32, v.len() as u32));
    }

    /// The items in order.
    pub(crate) fn items(&self) -> impl Iterator<Item = Item<'_>> {
        let mut at = 0usize;
        self.items.iter().map(move |&(kind, kl, vl)| {
            let (kl, vl) = (kl as usize, vl as usize);
            let k = &self.data[at..at + kl];
            let v = &self.data[at + kl..at + kl + vl];
            at += kl + vl;
            match kind {
                PAIR => Item::Pair(k, v),
                BEGIN => Item::Begin(k, DbRecord::decode(v).unwrap_or_default()),
                _ => Item::End,
            }
        })
    }
}

/// What the builder receives: a batch, or the reader's error (the last message).
pub(crate) type Msg = Result<Batch, cairn_lmdb::Error>;

/// Why the reader stopped early.
enum Stop {
    Lmdb(cairn_lmdb::Error),
    /// The builder stopped taking batches.
    Gone,
}

impl From<cairn_lmdb::Error> for Stop {
    fn from(e: cairn_lmdb::Error) -> Stop {
        Stop::Lmdb(e)
    }
}

struct Feeder {
    tx: SyncSender<Msg>,
    back: Receiver<Batch>,
    cur: Batch,
}

impl Feeder {
    fn push(&mut self, kind: u8, k: &[u8], v: &[u8]) -> Result<(), Stop> {
        self.cur.push(kind, k, v);
        if self.cur.data.len() >= BATCH {
            self.ship()?;
        }
        Ok(())
    }

    fn ship(&mut self) -> Result<(), Stop> {
        // An emptied batch handed back, else a new one (at most QUEUE + 2 exist: the queued
        // ones, the builder's and this one).
        let mut next = self.back.try_recv().unwrap_or_default();
        next.data.clear();
        next.items.clear();
        let full = std::mem::replace(&mut self.cur, next);
        self.tx.send(Ok(full)).map_err(|_| Stop::Gone)
    }

    fn read(&mut self, env: &LmdbEnv) -> Result<(), Stop> {
        let mut pairs = env.main_pairs();
        let mut name = Vec::new();
        let mut rec = Vec::new();
        // Bounded by LMDB's reader, which ends every walk (a page seen twice is an error).
        loop {
            let named = match pairs.next_entry()? {
                None => break,
                Some((k, v, false)) => {
                    self.push(PAIR, k, v)?;
                    continue;
                }
                Some((k, v, true)) => {
                    name.clear();
                    name.extend_from_slice(k);
                    rec.clear();
                    rec.extend_from_slice(v);
                    pairs.named_db()
                }
            };
            let db = match named {
                Some(r) => r?,
                None => {
                    self.push(PAIR, &name, &rec)?;
                    continue;
                }
            };
            self.push(BEGIN, &name, &rec)?;
            let mut sub = env.pairs(&db.record);
            while let Some((k, v)) = sub.next()? {
                self.push(PAIR, k, v)?;
            }
            self.push(END, &[], &[])?;
        }
        if !self.cur.items.is_empty() {
            self.ship()?;
        }
        Ok(())
    }
}

/// Reads every database of `env` into batches sent on `tx` (see the module's documentation);
/// emptied batches come back on `back`.
pub(crate) fn run(env: &LmdbEnv, tx: SyncSender<Msg>, back: Receiver<Batch>) {
    let mut f = Feeder {
        tx,
        back,
        cur: Batch::default(),
    };
    if let Err(Stop::Lmdb(e)) = f.read(env) {
        let _ = f.tx.send(Err(e));
    }
}
