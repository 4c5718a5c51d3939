//! A committed snapshot over a storage: the read side of every transaction.

use crate::btree::PageSource;
use crate::error::{Error, Result};
use crate::format::Meta;
use crate::storage::Storage;

/// A committed snapshot over a storage: the read side of every transaction.
pub(crate) struct Snapshot<'a> {
    pub storage: &'a dyn Storage,
    pub meta: Meta,
    /// Bytes `[0, npages * page_size)` of the storage, taken once (None if the storage was
    /// shorter then: every read then checks the length itself, and fails). A view, not a
    /// slice: it also spans free pages, which a writer may be writing in place.
    pub view: Option<crate::os::MapView<'a>>,
    /// The storage's verified-page table, looked up once (every page read consults it).
    verified: &'a crate::storage::VerifiedPages,
}

impl<'a> Snapshot<'a> {
    pub(crate) fn new(storage: &'a dyn Storage, meta: Meta) -> Snapshot<'a> {
        let len = meta
            .npages
            .checked_mul(u64::from(meta.page_size))
            .and_then(|l| usize::try_from(l).ok());
        let view = len.and_then(|l| storage.view(0, l).ok());
        Snapshot {
            storage,
            meta,
            view,
            verified: storage.verified(),
        }
    }
}

impl PageSource for Snapshot<'_> {
    #[inline]
    fn page_size(&self) -> usize {
        self.meta.page_size as usize
    }
    #[inline]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        if pgno >= self.meta.npages || pgno == 0 {
            return Err(Error::corrupted(format!(
                "page {pgno} outside the snapshot"
            )));
        }
        let ps = self.meta.page_size as usize;
        if let Some(v) = self.view {
            // pgno < npages: within the view.
            let off = pgno as usize * ps;
            let b = v.slice(off, ps);
            return crate::storage::checked_pages(
                self.verified,
                b,
                off as u64,
                pgno,
                1,
                self.meta.txnid,
            );
        }
        crate::storage::read_pages(self.storage, ps, pgno, 1, self.meta.txnid)
    }
    fn pages(&self, pgno: u64, span: u64) -> Result<&[u8]> {
        if pgno == 0 || pgno.checked_add(span).is_none_or(|e| e > self.meta.npages) {
            return Err(Error::corrupted(format!(
                "pages {pgno}+{span} outside the snapshot"
            )));
        }
        let ps = self.meta.page_size as usize;
        crate::storage::read_pages(self.storage, ps, pgno, span, self.meta.txnid)
    }
}
