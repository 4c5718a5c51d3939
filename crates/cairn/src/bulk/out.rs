//! The bulk builder's output: sealed pages gathered in aligned buffers and written by
//! [`WRITERS`] writer threads, with O_DIRECT where the filesystem takes it, so the build's CPU
//! work and the disk's work overlap and no copy goes through the page cache (docs/design.md,
//! "Bulk builder"). Several writes are in flight at once: with one, each O_DIRECT write waits
//! for its completion and then for a core to run the writer again, and while the reader and
//! builder keep both cores busy the disk sits idle in between (measured: docs/bench/
//! migrate.md). The file is preallocated ahead of the writes ([`PREALLOC`] at a time, its
//! length with it), because writes that extend a file are serialized by the filesystem.
//!
//! Invariants:
//! - A buffer starts at an address aligned to [`ALIGN`] and holds whole pages (page sizes are
//!   multiples of 4096), written at the offset of its first page: what O_DIRECT asks of a
//!   write. Where a write is refused for its alignment anyway (EINVAL) or the file cannot be
//!   opened with O_DIRECT, that writer reopens the file without it and its later writes are
//!   buffered ones, in 16 KiB calls (`os::pwritev_all`) with a write-back hint every 32 MiB.
//! - At most [`BUFFERS`] buffers exist: the builder waits for a writer to hand one back
//!   (memory stays bounded whatever the disk's speed).
//! - Pages come unfinished unless the hand-over says otherwise: the writer sets each branch
//!   and leaf page's prefix and hints (`format/fill.rs`: the builder fills pages by appends
//!   and leaves those for last), stamps each page (or overflow run, its span read from its
//!   header) with its number, from the buffer's offset, and the bulk writer's txnid, and
//!   seals it with its checksum before writing it: that work costs a writer's core, not the
//!   builder's. Nothing reads a page's prefix, hints, number or checksum before that. A
//!   buffer's pages depend on nothing outside it, so the writers may take buffers in any
//!   order and write them side by side, each at its own offset.
//! - A writer stops at its first error; the builder sees it at its next hand-over or at
//!   [`Out::finish`], which stops and joins every writer (no write is in flight after either
//!   returns). Page 0 is written after every writer has ended, then the file's length is set
//!   to the end of the pages (preallocation may have gone past it) and it is flushed: the
//!   one fdatasync of [`Out::finish`] is the only durability (an O_DIRECT write leaves the
//!   device cache and the file's size unflushed).

use crate::error::{Error, Result};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Alignment of a buffer's start (the largest logical block size O_DIRECT asks for).
pub(crate) const ALIGN: usize = 4096;
/// Buffers in flight at most (one being filled, the rest queued or being written).
const BUFFERS: usize = 8;
/// Writer threads: writes in flight at once. One write at a time leaves the disk idle while
/// the writer waits for a core to take its completion (both cores busy building).
const WRITERS: usize = 3;
/// Bytes preallocated at a time ahead of the writes (the length with them).
const PREALLOC: u64 = 64 << 20;
/// Bytes written buffered between two write-back hints (the fallback only).
const WRITEBACK_EVERY: u64 = 32 << 20;

/// A byte buffer whose start is aligned to [`ALIGN`], of a fixed capacity.
pub(crate) struct AlignedBuf {
    v: Vec<u8>,
    at: usize,
    len: usize,
    cap: usize,
}

impl AlignedBuf {
    pub(crate) fn new(cap: usize) -> AlignedBuf {
        let v = vec![0u8; cap + ALIGN];
        // `align_offset` may decline (usize::MAX): the buffer is then unaligned and an
        // O_DIRECT write of it is refused, which falls back to buffered writes.
        let at = match v.as_ptr().align_offset(ALIGN) {
            a if a < ALIGN => a,
            _ => 0,
        };
        AlignedBuf { v, at, len: 0, cap }
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }
    /// Grows (zero-filled) or shrinks to `len` bytes; false, changing nothing, past capacity.
    pub(crate) fn resize(&mut self, len: usize) -> bool {
        if len > self.cap {
            return false;
        }
        if len > self.len {
            self.v[self.at + self.len..self.at + len].fill(0);
        }
        self.len = len;
        true
    }
    pub(crate) fn extend_from_slice(&mut self, b: &[u8]) -> bool {
        let at = self.len;
        if !self.resize_uninit(at + b.len()) {
            return false;
        }
        self.as_mut()[at..].copy_from_slice(b);
        true
    }
    /// As `resize`, without zeroing (the caller overwrites the new bytes).
    fn resize_uninit(&mut self, len: usize) -> bool {
        if len > self.cap {
            return false;
        }
        self.len = len;
        true
    }
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.v[self.at..self.at + self.len]
    }
    pub(crate) fn as_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.at..self.at + self.len]
    }
}

/// Where the writer writes: the file, O_DIRECT or buffered (see the module's documentation).
struct Dest {
    file: File,
    path: PathBuf,
    direct: bool,
    unhinted: u64,
    hinted_to: u64,
}

impl Dest {
    fn write_at(&mut self, off: u64, b: &[u8]) -> io::Result<()> {
        if self.direct {
            match self.file.write_all_at(b, off) {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    // Refused for alignment (a filesystem or device with other rules): the
                    // rest goes through the page cache; what was written stays valid.
                    self.file = std::fs::OpenOptions::new().write(true).open(&self.path)?;
                    self.direct = false;
                }
                Err(e) => return Err(e),
            }
        }
        crate::os::pwritev_all(&self.file, off, &[b])?;
        self.unhinted += b.len() as u64;
        if self.unhinted >= WRITEBACK_EVERY {
            let end = off + b.len() as u64;
            crate::os::start_writeback(&self.file, self.hinted_to, end - self.hinted_to);
            self.hinted_to = end;
            self.unhinted = 0;
        }
        Ok(())
    }
}

/// A buffer to write: its byte offset, whether its pages are to be sealed first, the bytes.
type Job = (u64, bool, AlignedBuf);

/// The writer threads and the buffers they share with the builder.
pub(crate) struct Out {
    queue: Option<SyncSender<Job>>,
    free: Receiver<AlignedBuf>,
    made: usize,
    cap: usize,
    threads: Vec<JoinHandle<io::Result<Dest>>>,
    /// Set by the first writer that fails: the others stop at their next buffer, and the
    /// builder at its next hand-over.
    failed: Arc<AtomicBool>,
    /// The file, for preallocation, the commit record, the final length and the flush.
    file: File,
    /// The end of the region preallocated so far.
    alloc_to: u64,
    /// Whether to keep preallocating (off where unsupported or failed, and without O_DIRECT).
    prealloc: bool,
    path: PathBuf,
    direct: bool,
    /// The end of the last byte queued.
    end: u64,
}

impl Out {
    /// Creates the file at `path` (which must not exist) and starts its writers; buffers hold
    /// `cap` bytes.
    pub(crate) fn create(path: &Path, cap: usize, ps: usize) -> Result<Out> {
        let open = |direct: bool| {
            let mut o = std::fs::OpenOptions::new();
            o.read(true).write(true).create_new(true);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            o.open(path)
        };
        let (file, direct) = match open(true) {
            Ok(f) => (Ok(f), true),
            // A filesystem without O_DIRECT (tmpfs) refuses the open with EINVAL.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let _ = std::fs::remove_file(path);
                (open(false), false)
            }
            Err(e) => (Err(e), false),
        };
        let created = |e| Error::io(format!("creating {}", path.display()), e);
        let file = file.map_err(created)?;
        let (queue, jobs) = sync_channel::<Job>(BUFFERS);
        let jobs = Arc::new(Mutex::new(jobs));
        let (give_back, free) = sync_channel::<AlignedBuf>(BUFFERS);
        let failed = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::with_capacity(WRITERS);
        for _ in 0..WRITERS {
            let dest = Dest {
                file: file.try_clone().map_err(created)?,
                path: path.to_path_buf(),
                direct,
                unhinted: 0,
                hinted_to: 0,
            };
            let (jobs, give_back) = (Arc::clone(&jobs), give_back.clone());
            let failed = Arc::clone(&failed);
            let t = std::thread::Builder::new()
                .name("cairn-bulk-writer".into())
                .spawn(move || {
                    let r = write_jobs(dest, &jobs, &give_back, &failed, ps);
                    if r.is_err() {
                        failed.store(true, Ordering::Release);
                    }
                    r
                })
                .map_err(|e| Error::io("starting the bulk writer thread", e))?;
            threads.push(t);
        }
        Ok(Out {
            queue: Some(queue),
            free,
            made: 0,
            cap,
            threads,
            failed,
            file,
            alloc_to: 0,
            prealloc: direct,
            end: 0,
            path: path.to_path_buf(),
            direct,
        })
    }

    /// An empty buffer: a new one while fewer than [`BUFFERS`] exist, else the next one a
    /// writer hands back (waiting for it).
    pub(crate) fn buffer(&mut self) -> Result<AlignedBuf> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.stopped());
        }
        if self.made < BUFFERS {
            self.made += 1;
            return Ok(AlignedBuf::new(self.cap));
        }
        match self.free.recv() {
            Ok(b) => Ok(b),
            Err(_) => Err(self.stopped()),
        }
    }

    /// Queues `b` to be written at byte offset `off`; `seal`: its pages are to be stamped and
    /// sealed first (see the module's documentation).
    pub(crate) fn write(&mut self, off: u64, seal: bool, b: AlignedBuf) -> Result<()> {
        // Saturating: an offset past any file fails in the writer, which reports it.
        let end = off.saturating_add(b.len() as u64);
        self.end = self.end.max(end);
        if self.prealloc && end > self.alloc_to {
            // Blocks allocated ahead, the length with them: the writes land inside the file,
            // which lets them run side by side (an extending write is serialized). Only an
            // optimization: where it fails or is unsupported, the writes extend the file.
            let to = end.checked_next_multiple_of(PREALLOC).unwrap_or(end);
            match crate::os::preallocate(&self.file, self.alloc_to, to - self.alloc_to) {
                Ok(true) => self.alloc_to = to,
                // Unsupported: the fallback set the length over holes (`finish` sets it back
                // to the pages' end).
                Ok(false) => {
                    self.alloc_to = to;
                    self.prealloc = false;
                }
                Err(_) => self.prealloc = false,
            }
        }
        let sent = self.queue.as_ref().map(|q| q.send((off, seal, b)));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self.stopped()),
        }
    }

    /// Stops the writers and waits for them: their first error, if any.
    fn join(&mut self) -> Option<Error> {
        self.queue = None;
        // Buffers handed back meanwhile are dropped (the builder takes no more).
        let mut first = None;
        for t in self.threads.drain(..) {
            while self.free.try_recv().is_ok() {}
            let e = match t.join() {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(Error::io("writing the bulk-built file", e)),
                Err(_) => Some(Error::internal("the bulk writer thread panicked")),
            };
            first = first.or(e);
        }
        first
    }

    /// The writers' error, once one stopped early (they end only on an error or at `finish`).
    fn stopped(&mut self) -> Error {
        self.join()
            .unwrap_or_else(|| Error::internal("the bulk writer stopped"))
    }

    /// Waits for every queued buffer to be written, writes `page0` at offset 0, sets the
    /// file's length to the end of what was written and flushes the file (fdatasync).
    pub(crate) fn finish(mut self, page0: &[u8]) -> Result<()> {
        if let Some(e) = self.join() {
            return Err(e);
        }
        let mut b = AlignedBuf::new(page0.len());
        b.extend_from_slice(page0);
        let mut dest = Dest {
            file: self
                .file
                .try_clone()
                .map_err(|e| Error::io("writing the bulk-built file", e))?,
            path: self.path.clone(),
            direct: self.direct,
            unhinted: 0,
            hinted_to: 0,
        };
        dest.write_at(0, b.as_slice())
            .map_err(|e| Error::io("writing the bulk-built file's commit record", e))?;
        let len = self.end.max(page0.len() as u64);
        if self.alloc_to > len {
            self.file
                .set_len(len)
                .map_err(|e| Error::io("setting the bulk-built file's length", e))?;
        }
        crate::os::datasync(&self.file).map_err(|e| Error::io("flushing the bulk-built file", e))
    }
}

/// One writer thread: takes buffers from the shared queue, seals their pages and writes them
/// at their offsets, hands them back. Bounded by the buffers the builder queues; ends when it
/// drops the queue, or at the first error (which ends the others at the builder's next
/// hand-over, which then joins them).
fn write_jobs(
    mut dest: Dest,
    jobs: &Mutex<Receiver<Job>>,
    give_back: &SyncSender<AlignedBuf>,
    failed: &AtomicBool,
    ps: usize,
) -> io::Result<Dest> {
    loop {
        // A poisoned lock means another writer panicked: stop too.
        let job = match jobs.lock() {
            Ok(q) => q.recv(),
            Err(_) => return Err(io::Error::other("a bulk writer thread panicked")),
        };
        let Ok((off, seal, mut b)) = job else { break };
        if failed.load(Ordering::Acquire) {
            break;
        }
        if seal {
            seal_pages(b.as_mut(), off / ps as u64, ps)?;
        }
        dest.write_at(off, b.as_slice())?;
        b.clear();
        // The builder may have stopped taking buffers back: not an error here.
        let _ = give_back.send(b);
    }
    Ok(dest)
}

/// Finishes, stamps and seals the pages of `b`, the first of which is page `first`: page by page, an
/// overflow run whole (its span from its header). Bounded: each step covers at least a page.
fn seal_pages(b: &mut [u8], first: u64, ps: usize) -> io::Result<()> {
    let (mut at, mut pg) = (0usize, first);
    while at < b.len() {
        let (kind, span) = crate::format::page_id(&b[at..])
            .map(|id| (id.kind, id.span))
            .unwrap_or((0, 0));
        let len = usize::try_from(span)
            .unwrap_or(usize::MAX)
            .saturating_mul(ps);
        if span == 0 || len > b.len() - at {
            return Err(io::Error::other(format!(
                "bulk build: page {pg} spans {span} pages past its buffer"
            )));
        }
        let page = &mut b[at..at + len];
        if kind == crate::format::KIND_LEAF || kind == crate::format::KIND_BRANCH {
            crate::format::PageMut::new(page)
                .refresh_prefix()
                .map_err(|e| io::Error::other(format!("bulk build: page {pg}: {e}")))?;
        }
        crate::format::seal_page(page, pg, super::BULK_TXNID);
        at += len;
        pg += span;
    }
    Ok(())
}

impl Drop for Out {
    fn drop(&mut self) {
        // An abandoned build (an error elsewhere): stop the writers and wait for them, so no
        // write lands after the caller removes the file.
        let _ = self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_bounded() {
        let mut b = AlignedBuf::new(8192);
        assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
        assert!(b.extend_from_slice(&[7u8; 4096]));
        assert!(b.resize(8192));
        assert_eq!(&b.as_slice()[4090..4100], &[7, 7, 7, 7, 7, 7, 0, 0, 0, 0]);
        assert!(!b.extend_from_slice(&[1]));
        assert!(!b.resize(8193));
        assert_eq!(b.len(), 8192);
    }

    #[test]
    fn written_in_order_then_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut out = Out::create(&path, 8192, 4096).unwrap();
        for i in 1..20u8 {
            let mut b = out.buffer().unwrap();
            b.extend_from_slice(&[i; 8192]);
            out.write(u64::from(i) * 8192, false, b).unwrap();
        }
        out.finish(&[9u8; 8192]).unwrap();
        let all = std::fs::read(&path).unwrap();
        assert_eq!(all.len(), 20 * 8192);
        for (i, page) in all.chunks(8192).enumerate() {
            let want = if i == 0 { 9 } else { i as u8 };
            assert!(page.iter().all(|&x| x == want), "page {i}");
        }
    }

    #[test]
    fn a_write_error_reaches_the_builder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut out = Out::create(&path, 4096, 4096).unwrap();
        // An offset no file can reach: the writer fails, the next hand-over reports it.
        let mut b = out.buffer().unwrap();
        b.extend_from_slice(&[1u8; 4096]);
        out.write(u64::MAX - 4095, false, b).unwrap();
        let mut err = None;
        for _ in 0..2 * BUFFERS {
            let r = out.buffer().and_then(|mut b| {
                b.extend_from_slice(&[2u8; 4096]);
                out.write(4096, false, b)
            });
            if let Err(e) = r {
                err = Some(e);
                break;
            }
        }
        let e = err.expect("the writer's error");
        assert!(e.to_string().contains("writing the bulk-built file"), "{e}");
    }
}
