//! The verified-page table, and the page reads that consult it: a tree or overflow page is
//! checked against its checksum the first time this process reads it.

use super::*;

/// Offsets are remembered per 4 KiB unit, whatever the page size.
pub(super) const UNIT: u64 = format::MIN_PAGE_SIZE as u64;
/// Entries per lazily allocated chunk of the table (128 KiB each).
const CHUNK: u64 = 1 << 14;

/// Which pages of the file were verified against their checksum, and as written by which
/// transaction: one word per 4 KiB of the reserved range, allocated in chunks on first use,
/// read without locks.
pub struct VerifiedPages {
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
}

impl VerifiedPages {
    pub(super) fn new(reserve: u64) -> VerifiedPages {
        let units = reserve.div_ceil(UNIT);
        let n = units.div_ceil(CHUNK) as usize;
        VerifiedPages {
            chunks: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The entry of the page at `off`, if its chunk exists (or is created when `alloc`).
    fn entry(&self, off: u64, alloc: bool) -> Option<&AtomicU64> {
        let unit = off / UNIT;
        let cell = self.chunks.get((unit / CHUNK) as usize)?;
        let chunk = if alloc {
            cell.get_or_init(|| (0..CHUNK).map(|_| AtomicU64::new(0)).collect())
        } else {
            cell.get()?
        };
        chunk.get((unit % CHUNK) as usize)
    }

    /// Whether the page at `off`, stamped by `txnid`, was verified.
    #[inline]
    pub(super) fn is_verified(&self, off: u64, txnid: u64) -> bool {
        txnid != 0
            && self
                .entry(off, false)
                .is_some_and(|e| e.load(Ordering::Acquire) == txnid)
    }

    pub(super) fn mark(&self, off: u64, txnid: u64) {
        if let Some(e) = self.entry(off, true) {
            e.store(txnid, Ordering::Release);
        }
    }

    /// Remembers pages this process just wrote as verified: it sealed them itself, so their
    /// checksum holds by construction and reading them back need not hash them again.
    pub(super) fn wrote(&self, off: u64, bufs: &[&[u8]]) {
        let mut at = off;
        for b in bufs {
            // Whole pages only (meta sectors are 512 bytes and live in page 0).
            if at.is_multiple_of(UNIT) && b.len() as u64 >= UNIT {
                if let Ok(id) = format::page_id(b) {
                    if id.txnid != 0 && id.pgno != 0 {
                        self.mark(at, id.txnid);
                    }
                }
            }
            at += b.len() as u64;
        }
    }

    /// Forgets every page starting in `[off, off + len)`.
    pub(super) fn forget(&self, off: u64, len: u64) {
        let mut at = off.div_ceil(UNIT) * UNIT;
        // Past the table nothing is remembered.
        let covered = self.chunks.len() as u64 * CHUNK * UNIT;
        let end = off.saturating_add(len).min(covered);
        while at < end {
            match self.entry(at, false) {
                Some(e) => {
                    e.store(0, Ordering::Release);
                    at += UNIT;
                }
                // A chunk never allocated holds nothing to forget.
                None => at = (at / UNIT / CHUNK + 1) * CHUNK * UNIT,
            }
        }
    }
}

/// The `span` pages at `pgno` (a tree page, or a whole overflow run), verified against their
/// checksum, number and a writer no newer than `max_txnid` the first time this process reads
/// them. `span` must be what the page's header declares, so a page verified alone is never
/// taken for the head of a longer run.
#[inline]
pub(crate) fn read_pages(
    storage: &dyn Storage,
    page_size: usize,
    pgno: u64,
    span: u64,
    max_txnid: u64,
) -> Result<&[u8]> {
    let ps = page_size as u64;
    let off = pgno
        .checked_mul(ps)
        .ok_or_else(|| Error::corrupted(format!("page {pgno} out of range")))?;
    let len = span
        .checked_mul(ps)
        .and_then(|l| usize::try_from(l).ok())
        .ok_or_else(|| Error::corrupted(format!("run of {span} pages out of range")))?;
    let b = storage.bytes(off, len)?;
    checked_pages(storage.verified(), b, off, pgno, span, max_txnid)
}

/// `read_pages` for bytes `b` already taken at `off` from the storage whose verified-page table
/// is `seen` (a transaction that mapped its whole snapshot once, and looked the table up once):
/// the same checks of the image. Inlined into every page read: a cursor walk reads a page per
/// step or two.
#[inline(always)]
pub(crate) fn checked_pages<'a>(
    seen: &VerifiedPages,
    b: &'a [u8],
    off: u64,
    pgno: u64,
    span: u64,
    max_txnid: u64,
) -> Result<&'a [u8]> {
    let id = format::page_id(b)?;
    let own = if id.kind == format::KIND_OVERFLOW {
        id.span
    } else {
        1
    };
    if own != span {
        return Err(Error::corrupted(format!(
            "page {pgno}: spans {own} pages where {span} are expected"
        )));
    }
    if id.txnid > max_txnid {
        return Err(Error::corrupted(format!(
            "page {pgno}: written by transaction {}, after the snapshot's {max_txnid}",
            id.txnid
        )));
    }
    if !seen.is_verified(off, id.txnid) {
        format::verify_page(b, pgno, None)?;
        seen.mark(off, id.txnid);
    }
    Ok(b)
}
