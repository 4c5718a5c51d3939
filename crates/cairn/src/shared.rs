//! State shared between the writer and the readers without locks: the latest commit records
//! (behind per-cell sequence counters) and the reader table. Everything is an atomic word, so
//! the same layout can live in the memory-mapped lock file.
//!
//! Reader protocol (why a reader never loses its snapshot):
//! 1. claim a free slot (CAS 0 -> CLAIMING);
//! 2. loop: t = current; slot = t; full fence; if current == t, done; else retry.
//! 3. copy the commit record of t from cell t % 3 under its sequence counter; if the cell has
//!    moved on (t no longer among the last three commits), go back to 2.
//!
//! The writer publishes a commit by writing its cell, then `current`, and computes pinned
//! snapshots by scanning the slots after a full fence. A reader that stored t after the writer's
//! scan re-checks `current` and sees a newer value, so it never keeps a snapshot whose pages the
//! writer could be reusing.

use crate::error::{Error, Result};
use crate::format::{Meta, MetaSlot, SECTOR};
use std::sync::atomic::{fence, AtomicU64, Ordering};

const WORDS: usize = SECTOR / 8;
const CLAIMING: u64 = u64::MAX;

struct MetaCell {
    seq: AtomicU64,
    words: [AtomicU64; WORDS],
}

/// The reader table and the published commit records.
pub struct Shared {
    current: AtomicU64,
    cells: [MetaCell; 3],
    slots: Box<[AtomicU64]>,
}

impl Shared {
    /// A table with `max_readers` slots, publishing `meta` as the current commit.
    pub fn new(max_readers: usize, meta: &Meta) -> Shared {
        let cell = || MetaCell {
            seq: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        };
        let s = Shared {
            current: AtomicU64::new(0),
            cells: [cell(), cell(), cell()],
            slots: (0..max_readers).map(|_| AtomicU64::new(0)).collect(),
        };
        s.publish(meta);
        s
    }

    /// Makes `meta` the current commit (writer only, under the writer lock).
    pub fn publish(&self, meta: &Meta) {
        let bytes = meta.encode();
        let cell = &self.cells[(meta.txnid % 3) as usize];
        let seq = cell.seq.load(Ordering::Relaxed);
        cell.seq.store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        for (i, w) in cell.words.iter().enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            w.store(u64::from_le_bytes(a), Ordering::Relaxed);
        }
        cell.seq.store(seq + 2, Ordering::Release);
        self.current.store(meta.txnid, Ordering::SeqCst);
    }

    fn read_cell(&self, t: u64) -> Option<Meta> {
        let cell = &self.cells[(t % 3) as usize];
        for _ in 0..64 {
            let s1 = cell.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut bytes = [0u8; SECTOR];
            for (i, w) in cell.words.iter().enumerate() {
                bytes[i * 8..i * 8 + 8].copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
            fence(Ordering::Acquire);
            if cell.seq.load(Ordering::Relaxed) != s1 {
                continue;
            }
            return match Meta::decode(&bytes) {
                MetaSlot::Valid(m) if m.txnid == t => Some(m),
                _ => None,
            };
        }
        None
    }

    /// Registers a reader and returns its slot and snapshot.
    pub fn begin_read(&self) -> Result<(usize, Meta)> {
        let slot = self.claim()?;
        loop {
            let t = self.current.load(Ordering::SeqCst);
            self.slots[slot].store(t, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if self.current.load(Ordering::SeqCst) != t {
                continue;
            }
            if let Some(m) = self.read_cell(t) {
                return Ok((slot, m));
            }
        }
    }

    fn claim(&self) -> Result<usize> {
        for (i, s) in self.slots.iter().enumerate() {
            if s.load(Ordering::Relaxed) == 0
                && s.compare_exchange(0, CLAIMING, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return Ok(i);
            }
        }
        Err(Error::ReadersFull {
            max: self.slots.len() as u32,
        })
    }

    /// Releases a reader slot.
    pub fn end_read(&self, slot: usize) {
        self.slots[slot].store(0, Ordering::Release);
    }

    /// Snapshots held by readers, sorted (writer only).
    pub fn pinned(&self) -> Vec<u64> {
        fence(Ordering::SeqCst);
        let mut v: Vec<u64> = self
            .slots
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .filter(|&t| t != 0 && t != CLAIMING)
            .collect();
        v.sort_unstable();
        v
    }

    /// Number of readers holding a snapshot, and the table size.
    pub fn reader_counts(&self) -> (usize, usize) {
        (self.pinned().len(), self.slots.len())
    }
}
