//! The bulk builder: a new data file written straight from sorted streams of (key, value)
//! pairs, one database at a time, without a write transaction: leaves are packed in stream
//! order, branch levels are built bottom-up as leaves complete, big values go to overflow runs
//! and sorted duplicates to inline sets or sub-trees, all in the formats the write path makes
//! (docs/design.md, "Bulk builder"). What `cairn migrate` writes its new file with.
//!
//! Invariants:
//! - Pages are numbered in the order they are completed, from page 1, densely: every page
//!   below the file's page count belongs to exactly one tree (nothing is free), and a page
//!   refers only to pages completed before it (children, overflow runs, sub-trees). The root
//!   of the main database is the last page.
//! - Every page is sealed (number, writer, checksum) on its way to the file (by the writer
//!   thread, or here for a run too large for one buffer) and goes to the file
//!   through aligned buffers of [`FLUSH_AT`] bytes handed to writer threads (`out.rs`:
//!   O_DIRECT where the filesystem takes it); values too large for one buffer go through
//!   several. Memory: one page per tree level of each open tree (the database's and, while a
//!   key's duplicates are being written, its sub-tree's), the writer's few buffers, and one
//!   key's inline set.
//! - Input is checked as it comes: keys strictly increasing in the database's order, values of
//!   a key strictly increasing in the value order, sizes within the engine's limits; anything
//!   else is a typed error and the file is left for the caller to remove.
//! - Page 0 (the only commit record: steady, listing the last pages written, which include the
//!   root) is written last, then the file is flushed once: until [`BulkWriter::finish`]
//!   returns, the file is not a database anyone should open, and the caller keeps it under a
//!   name no one opens (migrate's staging file).
//! - Every pair is read back from its page image right after it is placed (through the
//!   format's read side) and compared with the pair given (`load.rs`): a caller knows the file
//!   holds what it was given without reading it back.

mod load;
mod out;
mod tree;

pub use load::{DbLoad, Loaded};

use crate::error::{Error, Result};
use crate::format::{self, DbRecord, Meta, WrittenRun, SECTOR};
use out::{AlignedBuf, Out};
use std::collections::VecDeque;
use std::path::Path;

/// The transaction id stamped on every page and on the commit record: one past the empty first
/// commit a created file starts with, as if the whole load were the file's first write.
pub const BULK_TXNID: u64 = 2;
/// Bytes of sealed pages gathered before they are written.
pub const FLUSH_AT: usize = 1 << 20;
/// Most pages the commit record lists for recovery to verify at open (the last ones written:
/// the root and the top of every level above the leaves).
const VERIFIED_TAIL: u64 = 64;

/// Where completed pages go: numbered, sealed, gathered and written in order.
pub(crate) struct Sink {
    out: Out,
    ps: usize,
    /// The next page number.
    next: u64,
    /// Sealed pages from `buf_at` on, not yet handed to the writer (a buffer of capacity
    /// `2 * FLUSH_AT`: one page or run of at most FLUSH_AT may go past FLUSH_AT).
    buf: AlignedBuf,
    buf_at: u64,
    /// The first pages of the last completions (for the commit record's verified tail).
    recent: VecDeque<u64>,
}

impl Sink {
    pub(crate) fn page_size(&self) -> usize {
        self.ps
    }

    fn note(&mut self, pg: u64) {
        if self.recent.len() == VERIFIED_TAIL as usize {
            self.recent.pop_front();
        }
        self.recent.push_back(pg);
    }

    /// Queues `page` (one page) as the next page, to be sealed by the writer; returns its
    /// number.
    pub(crate) fn page(&mut self, page: &mut [u8]) -> Result<u64> {
        let pg = self.next;
        if !self.buf.extend_from_slice(page) {
            return Err(Error::internal("a page past the bulk buffer"));
        }
        self.next += 1;
        self.note(pg);
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(pg)
    }

    /// Writes `value` as the next overflow run; returns its first page and its page count.
    pub(crate) fn overflow(&mut self, value: &[u8]) -> Result<(u64, u64)> {
        let ps = self.ps;
        let span = format::overflow_pages(ps, value.len());
        let span32 = u32::try_from(span)
            .map_err(|_| Error::Invalid(format!("a value of {} bytes", value.len())))?;
        let pg = self.next;
        let bytes = span as usize * ps;
        if bytes <= FLUSH_AT {
            // Built in the buffer, as any page.
            let at = self.buf.len();
            if !self.buf.resize(at + bytes) {
                return Err(Error::internal("an overflow run past the bulk buffer"));
            }
            let run = &mut self.buf.as_mut()[at..];
            format::init_overflow(run, span32);
            format::overflow_value_mut(run)[..value.len()].copy_from_slice(value);
            self.next += span;
            self.note(pg);
            if self.buf.len() >= FLUSH_AT {
                self.flush()?;
            }
        } else {
            // Sealed from where the value lies, then copied through whole buffers of
            // FLUSH_AT bytes (a multiple of every page size): header, value, the zeros that
            // end the last page.
            self.flush()?;
            let pad = bytes - format::PAGE_FIELDS - value.len();
            let mut hdr = [0u8; format::PAGE_FIELDS];
            format::seal_overflow_header(&mut hdr, span32, (pg, BULK_TXNID), value, pad);
            let (h_end, v_end) = (format::PAGE_FIELDS, format::PAGE_FIELDS + value.len());
            let (mut done, mut off) = (0usize, pg * ps as u64);
            // Bounded: each step writes min(FLUSH_AT, what is left) > 0 bytes of `bytes`.
            while done < bytes {
                let n = (bytes - done).min(FLUSH_AT);
                let mut b = self.out.buffer()?;
                b.resize(n);
                let dst = b.as_mut();
                // This piece is bytes [done, done + n) of the run: the header's part of it,
                // the value's, and zeros (the buffer was zero-filled).
                let (h0, h1) = (done.min(h_end), (done + n).min(h_end));
                if h0 < h1 {
                    dst[h0 - done..h1 - done].copy_from_slice(&hdr[h0..h1]);
                }
                let (v0, v1) = (done.clamp(h_end, v_end), (done + n).clamp(h_end, v_end));
                if v0 < v1 {
                    dst[v0 - done..v1 - done].copy_from_slice(&value[v0 - h_end..v1 - h_end]);
                }
                self.out.write(off, false, b)?;
                done += n;
                off += n as u64;
            }
            self.next += span;
            self.buf_at = self.next;
            self.note(pg);
        }
        Ok((pg, span))
    }

    /// Hands the gathered pages to the writer and takes an empty buffer.
    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let fresh = self.out.buffer()?;
        let full = std::mem::replace(&mut self.buf, fresh);
        self.out.write(self.buf_at * self.ps as u64, true, full)?;
        self.buf_at = self.next;
        Ok(())
    }

    /// The run of the last pages written (at most [`VERIFIED_TAIL`], whole completions only).
    fn tail_run(&self) -> Option<WrittenRun> {
        let start = self
            .recent
            .iter()
            .copied()
            .find(|&s| self.next - s <= VERIFIED_TAIL)
            .or_else(|| self.recent.back().copied())?;
        Some(WrittenRun {
            start,
            len: u32::try_from(self.next - start).ok()?,
            txnid: BULK_TXNID,
        })
    }
}

/// What a finished build wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkStats {
    /// Pages in the file, page 0 included.
    pub pages: u64,
}

/// A data file being built. Databases are loaded one after another with [`DbLoad`]; named
/// databases first, then the main database, into which their records go as it is loaded.
pub struct BulkWriter {
    pub(crate) sink: Sink,
}

impl BulkWriter {
    /// Creates the file at `path` (which must not exist) with pages of `page_size` bytes.
    pub fn create(path: &Path, page_size: usize) -> Result<BulkWriter> {
        if !format::valid_page_size(page_size) {
            return Err(Error::Invalid(format!("page size {page_size}")));
        }
        let mut out = Out::create(path, 2 * FLUSH_AT, page_size)?;
        let buf = out.buffer()?;
        Ok(BulkWriter {
            sink: Sink {
                out,
                ps: page_size,
                next: 1,
                buf,
                buf_at: 1,
                recent: VecDeque::with_capacity(VERIFIED_TAIL as usize),
            },
        })
    }

    /// Page size of the file.
    pub fn page_size(&self) -> usize {
        self.sink.ps
    }

    /// Starts loading a database with these flags (LMDB's values, as stored in records).
    pub fn database(&self, flags: u16) -> Result<DbLoad> {
        DbLoad::new(self.sink.ps, flags)
    }

    /// Writes the remaining pages and the commit record whose main database is `main` (the
    /// record the main database's load returned), and flushes the file.
    pub fn finish(mut self, main: DbRecord) -> Result<BulkStats> {
        self.sink.flush()?;
        let npages = self.sink.next;
        if main.root >= npages {
            return Err(Error::Invalid(format!(
                "main database root {} past the {npages} pages built",
                main.root
            )));
        }
        let runs: Vec<WrittenRun> = self.sink.tail_run().into_iter().collect();
        let meta = Meta {
            version: format::FORMAT_VERSION,
            page_size: self.sink.ps as u32,
            txnid: BULK_TXNID,
            flags: format::MF_STEADY,
            npages,
            last_steady: BULK_TXNID,
            run_count: runs.len() as u32,
            list_head: 0,
            main,
            free: DbRecord::default(),
            inline_runs: runs,
            boot_id: [0; format::BOOT_ID],
        };
        let mut page0 = vec![0u8; self.sink.ps];
        page0[..SECTOR].copy_from_slice(&meta.encode());
        self.sink.out.finish(&page0)?;
        Ok(BulkStats { pages: npages })
    }
}

#[cfg(test)]
mod tests;
