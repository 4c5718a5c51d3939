//! Nested transactions: each level keeps an undo record (`Frame`); the first change a child
//! makes to a dirty page saves the page's prior image (or its absence), and the free set,
//! records and high-water mark are restored from the level's mark on abort.

use crate::error::Result;
use crate::pagebuf::PageBuf;
use crate::pageset::PageMap;
use std::collections::hash_map::Entry;

use super::write::TxnDb;
use super::RwTxn;

/// Page buffers kept for reuse at most (the writer state's pool, as `finish` keeps it).
const POOL_MAX: usize = 1024;

/// Undo record of one nesting level.
pub(crate) struct Frame {
    pub(super) saved: PageMap<Option<Box<[u8]>>>,
    free_mark: usize,
    npages: u64,
    dbs: Vec<Option<TxnDb>>,
    freed_clean: usize,
    changed: bool,
    /// Where the log's effects stood (None: not logged already).
    effects: Option<usize>,
}

impl<'env> RwTxn<'env> {
    /// Begins a nested transaction: its changes join this one on `commit`, or vanish alone.
    pub fn nested(&mut self) -> Result<Nested<'_, 'env>> {
        let frame = Frame {
            // Room for the pages a typical level changes (a document and its feed record and
            // index entries: ~8), so the map is not regrown page by page.
            saved: PageMap::with_capacity_and_hasher(16, Default::default()),
            free_mark: self.ws().free.mark(),
            npages: self.npages,
            dbs: self.dbs.clone(),
            freed_clean: self.freed_clean.len(),
            changed: self.changed,
            effects: self.effects.as_ref().map(|e| e.mark()),
        };
        self.frames.push(frame);
        Ok(Nested {
            txn: self,
            done: false,
        })
    }

    /// Opens a nesting level without a `Nested` guard (group commit runs each closure in one);
    /// returns the depth to give `settle_frames`.
    pub(crate) fn push_frame(&mut self) -> usize {
        let depth = self.frames.len();
        std::mem::forget(self.nested());
        depth
    }

    /// Closes every level above `depth`: merged into the one below when `keep`, else undone.
    /// Levels a closure left open (a `Nested` forgotten with `mem::forget`) are settled the
    /// same way, so the transaction's undo records stay balanced.
    pub(crate) fn settle_frames(&mut self, depth: usize, keep: bool) {
        while self.frames.len() > depth {
            if keep {
                self.merge_frame();
            } else {
                self.rollback_frame();
            }
        }
    }

    fn rollback_frame(&mut self) {
        self.dirty_epoch += 1;
        let f = self.frames.pop().expect("frame");
        for (pgno, old) in f.saved {
            match (old, self.dirty.get_mut(&pgno)) {
                // Still in place in the map: its prior image goes back where it lies.
                (Some(img), Some(PageBuf::Map(m))) if m.len() == img.len() => {
                    m.copy_from_slice(&img);
                }
                (Some(img), _) => {
                    self.dirty.insert(pgno, PageBuf::Heap(img));
                }
                (None, _) => {
                    self.dirty.remove(&pgno);
                }
            }
        }
        self.ws().free.rollback(f.free_mark);
        self.npages = f.npages;
        self.dbs = f.dbs;
        self.freed_clean.truncate(f.freed_clean);
        self.changed = f.changed;
        // A change the log cannot carry stays recorded as such (the commit will be steady).
        match (f.effects, &mut self.effects) {
            (Some(mark), Some(e)) => e.truncate(mark),
            _ => self.effects = None,
        }
    }

    fn merge_frame(&mut self) {
        let f = self.frames.pop().expect("frame");
        let ps = self.env.inner.page_size;
        let pool = &mut self.ws.as_mut().expect("writer state").pool;
        // Images no level needs any more (the parent saved the page before, or there is no
        // parent) go back to the page buffers' pool: a group commit saves several pages per
        // job, and allocating each image was a third of saving it.
        let mut recycle = |img: Option<Box<[u8]>>| {
            if let Some(img) = img {
                if img.len() == ps && pool.len() < POOL_MAX {
                    pool.push(img);
                }
            }
        };
        if let Some(parent) = self.frames.last_mut() {
            for (pgno, old) in f.saved {
                match parent.saved.entry(pgno) {
                    Entry::Occupied(_) => recycle(old),
                    Entry::Vacant(v) => {
                        v.insert(old);
                    }
                }
            }
        } else {
            f.saved.into_values().for_each(recycle);
        }
    }

    #[inline]
    pub(super) fn save_for_frame(&mut self, pgno: u64) {
        if let Some(f) = self.frames.last_mut() {
            let (dirty, ws, ps) = (&self.dirty, &mut self.ws, self.env.inner.page_size);
            f.saved.entry(pgno).or_insert_with(|| {
                dirty.get(&pgno).map(|b| {
                    // A page-sized image reuses a pooled buffer (every byte is overwritten).
                    match ws.as_mut().and_then(|w| w.pool.pop()) {
                        Some(mut buf) if b.len() == ps => {
                            buf.copy_from_slice(b);
                            buf
                        }
                        other => {
                            if let (Some(buf), Some(w)) = (other, ws.as_mut()) {
                                w.pool.push(buf);
                            }
                            Box::from(&b[..])
                        }
                    }
                })
            });
        }
    }
}

/// A nested write transaction. Derefs to the parent [`RwTxn`]; `commit` merges its changes
/// into the parent, dropping it (or `abort`) undoes them.
pub struct Nested<'p, 'env> {
    txn: &'p mut RwTxn<'env>,
    done: bool,
}

impl Nested<'_, '_> {
    /// Folds the changes into the parent transaction.
    pub fn commit(mut self) -> Result<()> {
        self.txn.merge_frame();
        self.done = true;
        Ok(())
    }
    /// Undoes the changes.
    pub fn abort(self) {}
}

impl<'env> std::ops::Deref for Nested<'_, 'env> {
    type Target = RwTxn<'env>;
    fn deref(&self) -> &RwTxn<'env> {
        self.txn
    }
}

impl<'env> std::ops::DerefMut for Nested<'_, 'env> {
    fn deref_mut(&mut self) -> &mut RwTxn<'env> {
        self.txn
    }
}

impl Drop for Nested<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            self.txn.rollback_frame();
        }
    }
}
