//! Public cursors and iterators over one database.

use crate::btree::{cursor::Position, PageSource};
use crate::db::{Database, PutFlags};
use crate::error::{Error, Result};
use crate::format::{DbRecord, KeyCmp};
use crate::txn::RwTxn;
use std::cmp::Ordering;
use std::ops::Bound;

type Entry<'t> = Option<(&'t [u8], &'t [u8])>;

/// A read cursor: LMDB's positioning operations over one database of one transaction.
pub struct Cursor<'t> {
    src: &'t dyn PageSource,
    rec: DbRecord,
    cmp: KeyCmp,
    pos: Position,
}

#[allow(
    clippy::should_implement_trait,
    reason = "LMDB's cursor vocabulary; the iterator is Iter"
)]
impl<'t> Cursor<'t> {
    pub(crate) fn new(src: &'t dyn PageSource, rec: DbRecord, cmp: KeyCmp) -> Cursor<'t> {
        Cursor {
            src,
            rec,
            cmp,
            pos: Position::new(),
        }
    }

    fn here(&self) -> Result<Entry<'t>> {
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
        if self.pos.next(self.src)? {
            self.here()
        } else {
            Ok(None)
        }
    }
    /// MDB_PREV (from an unpositioned cursor: the last entry).
    pub fn prev(&mut self) -> Result<Entry<'t>> {
        if !self.pos.is_set() {
            return self.last();
        }
        if self.pos.prev(self.src)? {
            self.here()
        } else {
            Ok(None)
        }
    }
    /// MDB_SET / MDB_SET_KEY: positions at exactly `key`.
    pub fn set(&mut self, key: &[u8]) -> Result<Entry<'t>> {
        let (found, exact) = self.pos.seek(self.src, &self.rec, &self.cmp, key)?;
        if found && exact {
            self.here()
        } else {
            self.pos.clear();
            Ok(None)
        }
    }
    /// MDB_SET_RANGE: positions at the first key >= `key`.
    pub fn set_range(&mut self, key: &[u8]) -> Result<Entry<'t>> {
        let (found, _) = self.pos.seek(self.src, &self.rec, &self.cmp, key)?;
        if found {
            self.here()
        } else {
            Ok(None)
        }
    }
    /// MDB_GET_CURRENT.
    pub fn current(&self) -> Result<Entry<'t>> {
        self.here()
    }
}

/// An iterator over a key range, forward or (with `.rev()`) backward.
pub struct Iter<'t> {
    src: &'t dyn PageSource,
    cmp: KeyCmp,
    front: Position,
    back: Position,
    started: (bool, bool),
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    rec: DbRecord,
    done: bool,
}

impl<'t> Iter<'t> {
    pub(crate) fn new<'k, R: std::ops::RangeBounds<&'k [u8]>>(
        src: &'t dyn PageSource,
        rec: DbRecord,
        cmp: KeyCmp,
        range: R,
    ) -> Result<Iter<'t>> {
        let own = |b: Bound<&&[u8]>| b.cloned().map(<[u8]>::to_vec);
        Ok(Iter {
            src,
            cmp,
            front: Position::new(),
            back: Position::new(),
            started: (false, false),
            lo: own(range.start_bound()),
            hi: own(range.end_bound()),
            rec,
            done: false,
        })
    }

    fn below_hi(&self, k: &[u8]) -> bool {
        match &self.hi {
            Bound::Unbounded => true,
            Bound::Included(h) => self.cmp.cmp(k, h) != Ordering::Greater,
            Bound::Excluded(h) => self.cmp.cmp(k, h) == Ordering::Less,
        }
    }
    fn above_lo(&self, k: &[u8]) -> bool {
        match &self.lo {
            Bound::Unbounded => true,
            Bound::Included(l) => self.cmp.cmp(k, l) != Ordering::Less,
            Bound::Excluded(l) => self.cmp.cmp(k, l) == Ordering::Greater,
        }
    }

    fn step_front(&mut self) -> Result<Entry<'t>> {
        let moved = if !self.started.0 {
            self.started.0 = true;
            match &self.lo {
                Bound::Unbounded => self.front.first(self.src, &self.rec)?,
                Bound::Included(l) | Bound::Excluded(l) => {
                    let l = l.clone();
                    let (found, exact) = self.front.seek(self.src, &self.rec, &self.cmp, &l)?;
                    if found && exact && matches!(self.lo, Bound::Excluded(_)) {
                        self.front.next(self.src)?
                    } else {
                        found
                    }
                }
            }
        } else {
            self.front.next(self.src)?
        };
        if !moved {
            return Ok(None);
        }
        self.front.current(self.src)
    }

    fn step_back(&mut self) -> Result<Entry<'t>> {
        let moved = if !self.started.1 {
            self.started.1 = true;
            match &self.hi {
                Bound::Unbounded => self.back.last(self.src, &self.rec)?,
                Bound::Included(h) | Bound::Excluded(h) => {
                    let h = h.clone();
                    let (found, exact) = self.back.seek(self.src, &self.rec, &self.cmp, &h)?;
                    if found && exact && matches!(self.hi, Bound::Included(_)) {
                        true
                    } else if found {
                        self.back.prev(self.src)?
                    } else {
                        self.back.last(self.src, &self.rec)?
                    }
                }
            }
        } else {
            self.back.prev(self.src)?
        };
        if !moved {
            return Ok(None);
        }
        self.back.current(self.src)
    }

    fn crossed(&self, k: &[u8], forward: bool) -> bool {
        // Stop when the two ends meet.
        let other = if forward { &self.back } else { &self.front };
        let started = if forward {
            self.started.1
        } else {
            self.started.0
        };
        if !started {
            return false;
        }
        match other.current(self.src) {
            Ok(Some((ok, _))) => {
                let o = self.cmp.cmp(k, ok);
                if forward {
                    o != Ordering::Less
                } else {
                    o != Ordering::Greater
                }
            }
            _ => true,
        }
    }
}

impl<'t> Iterator for Iter<'t> {
    type Item = Result<(&'t [u8], &'t [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step_front() {
            Ok(Some((k, v))) if self.below_hi(k) => {
                if self.crossed(k, true) {
                    self.done = true;
                    return None;
                }
                Some(Ok((k, v)))
            }
            Ok(_) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step_back() {
            Ok(Some((k, v))) if self.above_lo(k) => {
                if self.crossed(k, false) {
                    self.done = true;
                    return None;
                }
                Some(Ok((k, v)))
            }
            Ok(_) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A cursor of a write transaction: positioning plus put and delete at the position. Each
/// change re-seeks the cursor, so it stays valid whatever the change did to the pages.
pub struct CursorMut<'t, 'env> {
    txn: &'t mut RwTxn<'env>,
    db: Database,
    key: Option<Vec<u8>>,
}

#[allow(clippy::should_implement_trait, reason = "LMDB's cursor vocabulary")]
impl<'t, 'env> CursorMut<'t, 'env> {
    pub(crate) fn new(txn: &'t mut RwTxn<'env>, db: Database) -> CursorMut<'t, 'env> {
        CursorMut { txn, db, key: None }
    }

    fn with<F>(&mut self, f: F) -> Result<Option<(Vec<u8>, Vec<u8>)>>
    where
        F: for<'a> FnOnce(&mut Cursor<'a>, Option<&[u8]>) -> Result<Entry<'a>>,
    {
        let key = self.key.clone();
        let e = {
            let mut c = self.txn.cursor(self.db)?;
            if let Some(k) = &key {
                c.set_range(k)?;
            }
            f(&mut c, key.as_deref())?.map(|(k, v)| (k.to_vec(), v.to_vec()))
        };
        self.key = e.as_ref().map(|(k, _)| k.clone());
        Ok(e)
    }

    /// MDB_FIRST.
    pub fn first(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.with(|c, _| c.first())
    }
    /// MDB_LAST.
    pub fn last(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.with(|c, _| c.last())
    }
    /// MDB_NEXT: the entry after the current key (even if that key was deleted).
    pub fn next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.with(|c, k| match k {
            None => c.first(),
            Some(k) => match c.current()? {
                Some((ck, _)) if ck == k => c.next(),
                other => Ok(other),
            },
        })
    }
    /// MDB_PREV.
    pub fn prev(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.with(|c, k| match k {
            None => c.last(),
            Some(_) => match c.current()? {
                Some(_) => c.prev(),
                None => c.last(),
            },
        })
    }
    /// MDB_SET.
    pub fn set(&mut self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let k = key.to_vec();
        self.key = None;
        self.with(move |c, _| c.set(&k))
    }
    /// MDB_SET_RANGE.
    pub fn set_range(&mut self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let k = key.to_vec();
        self.key = None;
        self.with(move |c, _| c.set_range(&k))
    }
    /// MDB_GET_CURRENT.
    pub fn current(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(k) = self.key.clone() else {
            return Ok(None);
        };
        let e = self.txn.get(self.db, &k)?.map(|v| (k.clone(), v.to_vec()));
        Ok(e)
    }
    /// Puts `key`/`value` and moves the cursor there.
    pub fn put(&mut self, key: &[u8], value: &[u8], flags: PutFlags) -> Result<()> {
        self.txn.put(self.db, key, value, flags)?;
        self.key = Some(key.to_vec());
        Ok(())
    }
    /// MDB_CURRENT: replaces the value at the cursor.
    pub fn put_current(&mut self, value: &[u8]) -> Result<()> {
        let k = self
            .key
            .clone()
            .ok_or_else(|| Error::Invalid("cursor is not positioned".into()))?;
        self.txn.put(self.db, &k, value, PutFlags::empty())
    }
    /// Deletes the entry at the cursor; the cursor then stands before the next entry.
    pub fn del_current(&mut self) -> Result<()> {
        let k = self
            .key
            .clone()
            .ok_or_else(|| Error::Invalid("cursor is not positioned".into()))?;
        if !self.txn.delete(self.db, &k)? {
            return Err(Error::Invalid("cursor entry no longer exists".into()));
        }
        Ok(())
    }
}

// RoTxn must stay Send (read transactions move between threads).
const _: fn() = || {
    fn is_send<T: Send>() {}
    is_send::<crate::RoTxn<'static>>();
};
