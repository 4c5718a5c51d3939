//! The storage seam: every byte the engine writes, every flush and every change of length
//! passes through [`Storage`]. The real file and the fault-injecting simulator implement it;
//! crash tests swap one for the other. This file holds the trait; `file` the real file, `sim`
//! the simulator, `verified` the table of pages whose checksum was verified and the page reads
//! that use it.
//!
//! Invariants:
//! - `bytes(off, len)` only succeeds for ranges below `len()`: a read past the end of the file
//!   through the map would fault, so the range is checked here, once, for every page access.
//! - Data written by `write_at` is visible to `bytes` at once (the map is coherent with writes);
//!   it is durable only after `sync` returns.
//! - Tree and overflow pages reach the engine through `read_pages`, which verifies a page's
//!   checksum the first time this process reads it: a bit flipped on the disk is an error, never
//!   wrong data. [`VerifiedPages`] remembers what was verified by (offset, writer txnid);
//!   `write_at` forgets every page it overwrites, so a remembered entry always vouches for the
//!   bytes now at its offset. Another process's writes carry new txnids, which miss the table.

use crate::error::{Error, Result};
use crate::format::{self, BOOT_ID};
use crate::os::{self, Map, MapPages, MapView};
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Where the data file's bytes live. Sealed: the engine relies on the exact guarantees above.
pub trait Storage: Send + Sync + private::Sealed {
    /// Bytes `[off, off + len)`, which must lie below the current length.
    #[inline]
    fn bytes(&self, off: u64, len: usize) -> Result<&[u8]> {
        Ok(self.view(off, len)?.slice(0, len))
    }
    /// The same range as a view that makes slices of the parts asked for (a snapshot's whole
    /// file, free pages included, must not be one slice: a writer may be writing those).
    fn view(&self, off: u64, len: usize) -> Result<MapView<'_>>;
    /// Current length in bytes.
    fn len(&self) -> u64;
    /// Re-reads the length, which another process may have changed.
    fn refresh_len(&self) -> u64 {
        self.len()
    }
    /// Whether the storage holds no bytes at all (a new file).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Grows to `new_len` bytes, allocating blocks so that later writes are in place.
    fn grow(&self, new_len: u64) -> Result<()>;
    /// Shrinks to `new_len` bytes.
    fn truncate(&self, new_len: u64) -> Result<()>;
    /// Writes `bufs` one after another starting at `off`; a write past the end extends the
    /// storage, as on a file.
    fn write_at(&self, off: u64, bufs: &[&[u8]]) -> Result<()>;
    /// Copies bytes out (for the meta slots, which are rewritten while mapped).
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()>;
    /// Makes everything written so far durable (fdatasync).
    fn sync(&self) -> Result<()>;
    /// Starts writing `[off, off + len)` to the device without waiting: a hint that lets the
    /// device work while the commit goes on; only `sync` makes anything durable.
    fn start_writeback(&self, _off: u64, _len: u64) {}
    /// Pages `[off, off + len)` to be written in place through a writable map (a lazy
    /// environment's dirty pages), or None where pages go through `write_at` only (no
    /// writable map, blocks not known to be allocated, or the range past the end). Handing
    /// them out forgets what was verified there.
    ///
    /// # Safety
    /// docs/safety.md §8: the caller owns the range exclusively until the result is dropped
    /// (pages no snapshot can reach, allocated to one write transaction), and drops the result
    /// before the storage.
    unsafe fn map_pages(&self, _off: u64, _len: u64) -> Option<MapPages> {
        None
    }
    /// Records that `bufs`, written in place at `off` through `map_pages`, are what a commit
    /// wrote there (sealed pages): as durable as a `write_at` of them, that is, after the
    /// next `sync`.
    fn stored(&self, _off: u64, _bufs: &[&[u8]]) {}
    /// Writes a commit's meta slot (`off` inside page 0): with `write_at`, or, where pages are
    /// written in place, through the map too (one write call less per commit).
    fn write_meta(&self, off: u64, meta: &[u8]) -> Result<()> {
        self.write_at(off, &[meta])
    }
    /// Size of the address range reserved for the map.
    fn reserved(&self) -> u64;
    /// Advises random access.
    fn advise_random(&self) {}
    /// Id of the running system boot: commits that are not steady are trusted at open only if
    /// they were written during this boot (a power loss implies a reboot). All zeros when
    /// unknown, which trusts nothing unsynced.
    fn boot_id(&self) -> [u8; BOOT_ID];
    /// Pages whose checksum this process has verified (see `read_pages`).
    #[doc(hidden)]
    fn verified(&self) -> &VerifiedPages;
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::FileStorage {}
    impl Sealed for super::SimStorage {}
}

mod file;
mod sim;
mod verified;
pub use file::*;
pub use sim::*;
pub use verified::*;

#[cfg(test)]
mod tests {
    use super::*;

    const PS: usize = format::MIN_PAGE_SIZE;

    fn leaf(pgno: u64, txnid: u64) -> Vec<u8> {
        let mut page = vec![0u8; PS];
        format::PageMut::init(&mut page, format::KIND_LEAF, true);
        format::seal_page(&mut page, pgno, txnid);
        page
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "the simulator maps memory with MAP_NORESERVE, which miri lacks"
    )]
    fn pages_are_verified_once_and_forgotten_when_overwritten() {
        let sim = SimStorage::new(1 << 20).unwrap();
        sim.grow(4 * PS as u64).unwrap();
        let page = leaf(2, 5);
        sim.write_at(2 * PS as u64, &[&page]).unwrap();
        assert!(read_pages(&sim, PS, 2, 1, 5).is_ok());
        assert!(sim.verified().is_verified(2 * PS as u64, 5));
        // A writer newer than the snapshot, a span other than the header's: refused even once
        // verified.
        assert!(read_pages(&sim, PS, 2, 1, 4).is_err());
        assert!(read_pages(&sim, PS, 2, 2, 5).is_err());
        // Overwritten with a damaged image of the same writer: the entry is gone, the checksum
        // fails.
        let mut bad = page.clone();
        bad[100] ^= 1;
        sim.write_at(2 * PS as u64, &[&bad]).unwrap();
        assert!(!sim.verified().is_verified(2 * PS as u64, 5));
        assert!(read_pages(&sim, PS, 2, 1, 5).is_err());
        // Past the end of the storage, and past every chunk of the table.
        assert!(read_pages(&sim, PS, 4, 1, 5).is_err());
        assert!(read_pages(&sim, PS, u64::MAX / 2, 1, 5).is_err());
        sim.verified().forget(0, u64::MAX);
    }
}
