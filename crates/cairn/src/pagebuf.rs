//! Dirty-page buffers: where a write transaction's copy of a page lives until commit. One of
//! the three modules allowed `unsafe` (with `os` and `storage`): it makes the in-place buffers
//! out of the storage's writable map, for the write transaction (docs/safety.md §8).

use crate::os::MapPages;
use crate::storage::Storage;

/// The bytes of a dirty page (or overflow run): a heap buffer, written into the file with
/// pwrite at commit; or, in a lazy environment that writes in place (`EnvOptions::
/// map_writes`), the page itself in the writable map, sealed where it lies at commit.
pub(crate) enum PageBuf {
    Heap(Box<[u8]>),
    Map(MapPages),
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        match self {
            PageBuf::Heap(b) => b,
            PageBuf::Map(m) => m,
        }
    }
}

impl std::ops::DerefMut for PageBuf {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            PageBuf::Heap(b) => b,
            PageBuf::Map(m) => m,
        }
    }
}

impl PageBuf {
    /// The `len` bytes at `off` in the storage's writable map, as a buffer to build dirty pages
    /// in (None where the storage writes through `write_at` only).
    ///
    /// Contract (docs/safety.md §8), kept by the only caller, `RwTxn::page_buf`: the range
    /// holds pages just allocated to the write transaction, the only one (writer lock), which
    /// keeps the buffer in its dirty map and drops it when it ends, before the environment
    /// that owns the storage.
    pub(crate) fn in_map(storage: &dyn Storage, off: u64, len: u64) -> Option<PageBuf> {
        // SAFETY: docs/safety.md §8: these pages were just allocated to this write
        // transaction, the only one (writer lock): no snapshot reaches them (they were
        // reusable, or past the last commit's npages) and no other dirty entry covers them
        // (an allocation hands a page out once until it is freed, and a freed dirty entry is
        // removed first). The buffer lives in `dirty`, dropped when the transaction ends,
        // before the environment that owns the storage.
        unsafe { storage.map_pages(off, len) }.map(PageBuf::Map)
    }
}
