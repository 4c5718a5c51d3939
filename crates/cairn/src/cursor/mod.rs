//! Public cursors and iterators over one database. This file holds the read cursor and the
//! transaction methods that open them; `iter` the range iterators, `write` the write cursor,
//! `dup` the sorted-duplicate operations and iterator.

use crate::btree::dup::DupOrder;
use crate::btree::{dup_cursor::DupPos, PageSource};
use crate::db::{Database, DbFlags, PutFlags};
use crate::error::{Error, Result};
use crate::format::{DbRecord, KeyCmp, Leaf, Page};
use crate::txn::{RoTxn, RwTxn};

pub(crate) mod dup;
mod iter;
mod write;

pub use iter::Iter;
use std::cmp::Ordering;
use std::ops::Bound;
pub use write::CursorMut;

impl RoTxn<'_> {
    /// A cursor over a database.
    pub fn cursor(&self, db: Database) -> Result<Cursor<'_>> {
        let (rec, cmp) = self.db(db)?;
        let mut c = Cursor::new(self.snapshot(), rec, cmp);
        c.custom_dup_order(&self.env().inner, db, &rec)?;
        Ok(c)
    }

    /// Iterates over all entries in key order (`.rev()` for descending order).
    pub fn iter(&self, db: Database) -> Result<Iter<'_>> {
        let (rec, cmp) = self.db(db)?;
        Iter::new(self.snapshot(), rec, cmp, ..)?.custom_dup_order(&self.env().inner, db)
    }

    /// Iterates over the entries whose keys fall in `range`.
    pub fn range<'k, R: std::ops::RangeBounds<&'k [u8]>>(
        &self,
        db: Database,
        range: R,
    ) -> Result<Iter<'_>> {
        let (rec, cmp) = self.db(db)?;
        Iter::new(self.snapshot(), rec, cmp, range)?.custom_dup_order(&self.env().inner, db)
    }
}

impl<'env> RwTxn<'env> {
    /// A read cursor over a database as this transaction sees it.
    pub fn cursor(&self, db: Database) -> Result<Cursor<'_>> {
        let (rec, cmp) = self.db_ro(db)?;
        let mut c = Cursor::new(self, rec, cmp);
        c.custom_dup_order(&self.env.inner, db, &rec)?;
        Ok(c)
    }

    /// A cursor that can also write at its position.
    pub fn cursor_mut(&mut self, db: Database) -> Result<CursorMut<'_, 'env>> {
        // Positioning needs no guard; the cursor's writes go through put and delete.
        self.db_state_for(db, false)?;
        Ok(CursorMut::new(self, db))
    }

    /// Iterates over all entries in key order (`.rev()` for descending order).
    pub fn iter(&self, db: Database) -> Result<Iter<'_>> {
        let (rec, cmp) = self.db_ro(db)?;
        Iter::new(self, rec, cmp, ..)?.custom_dup_order(&self.env.inner, db)
    }

    /// Iterates over the entries whose keys fall in `range`.
    pub fn range<'k, R: std::ops::RangeBounds<&'k [u8]>>(
        &self,
        db: Database,
        range: R,
    ) -> Result<Iter<'_>> {
        let (rec, cmp) = self.db_ro(db)?;
        Iter::new(self, rec, cmp, range)?.custom_dup_order(&self.env.inner, db)
    }
}

type Entry<'t> = Option<(&'t [u8], &'t [u8])>;

/// A read cursor: LMDB's positioning operations over one database of one transaction. In a
/// DUP_SORT database it stands on one (key, value) pair; the duplicate operations are in
/// `cursor/dup.rs`.
pub struct Cursor<'t> {
    pub(crate) src: &'t dyn PageSource,
    pub(crate) rec: DbRecord,
    pub(crate) cmp: KeyCmp,
    pub(crate) vcmp: KeyCmp,
    pub(crate) pos: DupPos,
    /// The main-tree leaf the last step or seek landed in, so that a step inside it (databases
    /// without sorted duplicates), a seek into it or a chunk read from it reads no page again;
    /// used only while the position is in it (checked by page number).
    pub(crate) walk: Option<(u64, Page<'t>)>,
    /// The sub-tree leaf the last seek or chunk operation stood in (sorted duplicates), so
    /// that the *_MULTIPLE operations read it once; checked against the position before use.
    pub(crate) sub_walk: crate::btree::dup_cursor::SubLeaf<'t>,
}

#[allow(
    clippy::should_implement_trait,
    reason = "LMDB's cursor vocabulary; the iterator is Iter"
)]
impl<'t> Cursor<'t> {
    pub(crate) fn new(src: &'t dyn PageSource, rec: DbRecord, cmp: KeyCmp) -> Cursor<'t> {
        Cursor {
            src,
            pos: DupPos::new(&rec),
            vcmp: DupOrder::of(rec.flags).cmp,
            rec,
            cmp,
            walk: None,
            sub_walk: None,
        }
    }

    /// Takes the database's user-supplied value order, if it has one (Env::set_dup_order).
    pub(crate) fn custom_dup_order(
        &mut self,
        env: &crate::state::EnvInner,
        db: Database,
        rec: &DbRecord,
    ) -> Result<()> {
        if let Some(v) = env.dup_order_of(db, rec)? {
            self.vcmp = v;
        }
        Ok(())
    }

    pub(crate) fn here(&self) -> Result<Entry<'t>> {
        self.pos.current(self.src)
    }

    /// MDB_FIRST.
    pub fn first(&mut self) -> Result<Entry<'t>> {
        if self.pos.first(self.src, &self.rec)? {
            self.here()
        } else {
            Ok(None)
        }
    }
    /// MDB_LAST.
    pub fn last(&mut self) -> Result<Entry<'t>> {
        if self.pos.last(self.src, &self.rec)? {
            self.here()
        } else {
            Ok(None)
        }
    }
    /// MDB_NEXT (from an unpositioned cursor: the first entry).
    pub fn next(&mut self) -> Result<Entry<'t>> {
        if !self.pos.is_set() {
            return self.first();
        }
        if let Some(e) = self.walk_step(true)? {
            return Ok(Some(e));
        }
        if self.pos.next(self.src)? {
            self.landed()
        } else {
            Ok(None)
        }
    }
    /// MDB_PREV (from an unpositioned cursor: the last entry).
    pub fn prev(&mut self) -> Result<Entry<'t>> {
        if !self.pos.is_set() {
            return self.last();
        }
        if let Some(e) = self.walk_step(false)? {
            return Ok(Some(e));
        }
        if self.pos.prev(self.src)? {
            self.landed()
        } else {
            Ok(None)
        }
    }

    /// A step inside the leaf of the previous step, if the position is still there and the
    /// step stays in it (no sorted duplicates): no page read, no descent.
    #[inline(always)]
    fn walk_step(&mut self, fwd: bool) -> Result<Entry<'t>> {
        let (Some((pg, p)), Some((at, i))) = (self.walk, self.pos.main_slot()) else {
            return Ok(None);
        };
        if pg != at || i >= p.nkeys() {
            return Ok(None);
        }
        let j = if fwd { i + 1 } else { i.wrapping_sub(1) };
        if j >= p.nkeys() {
            return Ok(None);
        }
        self.pos.set_main_slot(j);
        let n = p.node(j)?;
        Ok(Some((n.key, crate::btree::node_value(self.src, &n)?)))
    }

    /// The pair under the cursor after a step that left the leaf, remembering the new leaf.
    fn landed(&mut self) -> Result<Entry<'t>> {
        self.walk = match self.pos.main_slot() {
            Some((pg, _)) => Some((pg, crate::btree::tree_page(self.src, pg)?)),
            None => None,
        };
        self.here()
    }
    /// MDB_SET / MDB_SET_KEY: positions at exactly `key` (its first value).
    pub fn set(&mut self, key: &[u8]) -> Result<Entry<'t>> {
        let s = self
            .pos
            .seek_pair(self.src, &self.rec, &self.cmp, key, true, self.walk)?;
        self.walk = s.leaf;
        self.sub_walk = s.sub;
        if s.found && s.exact {
            Ok(s.pair)
        } else {
            self.pos.clear();
            Ok(None)
        }
    }
    /// MDB_SET_RANGE: positions at the first key >= `key` (its first value).
    pub fn set_range(&mut self, key: &[u8]) -> Result<Entry<'t>> {
        let s = self
            .pos
            .seek_pair(self.src, &self.rec, &self.cmp, key, false, self.walk)?;
        self.walk = s.leaf;
        self.sub_walk = s.sub;
        if s.found {
            Ok(s.pair)
        } else {
            Ok(None)
        }
    }
    /// MDB_GET_CURRENT.
    pub fn current(&self) -> Result<Entry<'t>> {
        self.here()
    }
}

const _: fn() = || {
    fn is_send<T: Send>() {}
    is_send::<crate::RoTxn<'static>>();
};
