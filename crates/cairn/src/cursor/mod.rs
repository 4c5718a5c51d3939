//! Public cursors and iterators over one database.

use crate::btree::dup::DupOrder;
use crate::btree::{dup_cursor::DupPos, PageSource};
use crate::db::{Database, DbFlags, PutFlags};
use crate::error::{Error, Result};
use crate::format::{DbRecord, KeyCmp, Leaf, Page};
use crate::txn::{RoTxn, RwTxn};

pub(crate) mod dup;
use std::cmp::Ordering;
use std::ops::Bound;

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

/// An iterator over the (key, value) pairs of a key range, forward or (with `.rev()`)
/// backward; in a DUP_SORT database every value of a key in turn.
pub struct Iter<'t> {
    src: &'t dyn PageSource,
    cmp: KeyCmp,
    vcmp: KeyCmp,
    front: DupPos,
    back: DupPos,
    started: (bool, bool),
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    rec: DbRecord,
    done: bool,
    /// Per end (front, back): the key being walked and the sub-tree leaf of its values with
    /// the slot reached, so that a step inside the leaf reads no page again (DUP_SORT).
    leaf: [Option<(&'t [u8], Leaf<'t>, usize)>; 2],
    /// Per end: the main-tree leaf being walked and the slot reached (databases without
    /// sorted duplicates), so that a step inside the leaf reads no page again.
    main: [Option<(Page<'t>, usize)>; 2],
    /// Pairs yielded so far, both ends: more than the record counts means a crafted tree
    /// (children shared between branches), reported instead of walked for ever.
    yielded: u64,
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
            vcmp: DupOrder::of(rec.flags).cmp,
            front: DupPos::new(&rec),
            back: DupPos::new(&rec),
            started: (false, false),
            lo: own(range.start_bound()),
            hi: own(range.end_bound()),
            rec,
            done: false,
            leaf: [None, None],
            main: [None, None],
            yielded: 0,
        })
    }

    /// Takes the database's user-supplied value order, if it has one (Env::set_dup_order):
    /// the two ends compare pairs to find where they meet.
    pub(crate) fn custom_dup_order(
        mut self,
        env: &crate::state::EnvInner,
        db: Database,
    ) -> Result<Iter<'t>> {
        if let Some(v) = env.dup_order_of(db, &self.rec)? {
            self.vcmp = v;
        }
        Ok(self)
    }

    /// A step of end `side` inside the sub-tree leaf it walks, if the step stays there.
    #[inline]
    fn leaf_step(&mut self, side: usize) -> Result<Entry<'t>> {
        // The slot moves in place: the leaf view is not copied out and back each step.
        let Some((k, p, i)) = &mut self.leaf[side] else {
            return Ok(None);
        };
        let (k, p) = (*k, *p);
        let j = if side == 0 { *i + 1 } else { i.wrapping_sub(1) };
        if j >= p.nkeys() {
            return Ok(None);
        }
        *i = j;
        let pos = if side == 0 {
            &mut self.front
        } else {
            &mut self.back
        };
        // The position follows, for the other end's crossing test.
        pos.set_sub_slot(j);
        Ok(Some((k, p.key(j)?)))
    }

    /// A step of end `side` inside the main-tree leaf it walks, if the step stays there.
    #[inline(always)]
    fn main_step(&mut self, side: usize) -> Result<Entry<'t>> {
        let Some((p, i)) = self.main[side] else {
            return Ok(None);
        };
        let j = if side == 0 { i + 1 } else { i.wrapping_sub(1) };
        if j >= p.nkeys() {
            return Ok(None);
        }
        self.main[side] = Some((p, j));
        let pos = if side == 0 {
            &mut self.front
        } else {
            &mut self.back
        };
        // The position follows, for the other end's crossing test and the slow path.
        pos.set_main_slot(j);
        let n = p.node(j)?;
        Ok(Some((n.key, crate::btree::node_value(self.src, &n)?)))
    }

    /// The pair under end `side` after a move, remembering its sub-tree leaf.
    fn landed(&mut self, side: usize) -> Result<Entry<'t>> {
        let pos = if side == 0 { &self.front } else { &self.back };
        self.main[side] = pos.main_leaf(self.src)?;
        let e = pos.current(self.src)?;
        self.leaf[side] = match (e, pos.sub_leaf(self.src)?) {
            (Some((k, _)), Some((p, i))) => Some((k, p, i)),
            _ => None,
        };
        Ok(e)
    }

    #[inline]
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

    #[inline]
    fn step_front(&mut self) -> Result<Entry<'t>> {
        let moved = if !self.started.0 {
            self.started.0 = true;
            match &self.lo {
                Bound::Unbounded => self.front.first(self.src, &self.rec)?,
                Bound::Included(l) | Bound::Excluded(l) => {
                    let l = l.clone();
                    let (found, exact) = self.front.seek(self.src, &self.rec, &self.cmp, &l)?;
                    if found && exact && matches!(self.lo, Bound::Excluded(_)) {
                        self.front.next_nodup(self.src)?
                    } else {
                        found
                    }
                }
            }
        } else {
            if let Some(e) = self.main_step(0)? {
                return Ok(Some(e));
            }
            if let Some(e) = self.leaf_step(0)? {
                return Ok(Some(e));
            }
            self.front.next(self.src)?
        };
        if !moved {
            return Ok(None);
        }
        self.landed(0)
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
                        self.back.last_dup(self.src)?
                    } else if found {
                        self.back.prev_nodup(self.src)?
                    } else {
                        self.back.last(self.src, &self.rec)?
                    }
                }
            }
        } else {
            if let Some(e) = self.main_step(1)? {
                return Ok(Some(e));
            }
            if let Some(e) = self.leaf_step(1)? {
                return Ok(Some(e));
            }
            self.back.prev(self.src)?
        };
        if !moved {
            return Ok(None);
        }
        self.landed(1)
    }

    /// Counts a pair about to be yielded; an error once there are more than the record holds.
    #[inline]
    fn count_one(&mut self) -> Option<Error> {
        self.yielded += 1;
        (self.yielded > self.rec.entries).then(|| {
            self.done = true;
            Error::corrupted(format!(
                "iteration yields more than the {} entries the database records",
                self.rec.entries
            ))
        })
    }

    fn crossed(&self, k: &[u8], v: &[u8], forward: bool) -> bool {
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
            Ok(Some((ok, ov))) => {
                let o = self.cmp.cmp(k, ok).then_with(|| self.vcmp.cmp(v, ov));
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

impl<'t> Iter<'t> {
    /// One step of `next` (`forward`) or `next_back`: the pair, if it is still inside the range
    /// and short of the other end's position; the iteration ends at the first that is not, and
    /// after an error. Inlined into both with `forward` a constant.
    #[inline(always)]
    fn advance(&mut self, forward: bool) -> Option<Result<(&'t [u8], &'t [u8])>> {
        if self.done {
            return None;
        }
        let step = if forward {
            self.step_front()
        } else {
            self.step_back()
        };
        match step {
            Ok(Some((k, v)))
                if (if forward {
                    self.below_hi(k)
                } else {
                    self.above_lo(k)
                }) =>
            {
                if self.crossed(k, v, forward) {
                    self.done = true;
                    return None;
                }
                if let Some(e) = self.count_one() {
                    return Some(Err(e));
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

impl<'t> Iterator for Iter<'t> {
    type Item = Result<(&'t [u8], &'t [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        self.advance(true)
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.advance(false)
    }
}

/// A cursor of a write transaction: positioning plus put and delete at the position. Each
/// change re-seeks the cursor, so it stays valid whatever the change did to the pages. In a
/// DUP_SORT database it stands on a (key, value) pair.
///
/// Invariant: `leaf`, when set, is a dirty leaf of the database's tree and the slot where the
/// last `put` landed. The cursor borrows the transaction exclusively, so only its own methods change the
/// tree: `put` keeps the hint valid (it frees no tree page), every other change clears it.
pub struct CursorMut<'t, 'env> {
    txn: &'t mut RwTxn<'env>,
    db: Database,
    at: Option<(Vec<u8>, Vec<u8>)>,
    leaf: Option<(u64, usize)>,
    /// The position is the pair at `leaf` (set), not `at` (stale): a put leaves the copy of
    /// its pair to the first method that needs it, since runs of puts (putmulti) need none.
    landed: bool,
}

type Owned = Option<(Vec<u8>, Vec<u8>)>;

#[allow(clippy::should_implement_trait, reason = "LMDB's cursor vocabulary")]
impl<'t, 'env> CursorMut<'t, 'env> {
    pub(crate) fn new(txn: &'t mut RwTxn<'env>, db: Database) -> CursorMut<'t, 'env> {
        CursorMut {
            txn,
            db,
            at: None,
            leaf: None,
            landed: false,
        }
    }

    /// Copies the pair the last put landed on into `at`, if that is the position.
    fn settle(&mut self) -> Result<()> {
        if !self.landed {
            return Ok(());
        }
        self.landed = false;
        self.at = None;
        let Some((pg, slot)) = self.leaf else {
            return Ok(());
        };
        // Read where the put left it; `node_value` follows an overflow reference.
        let src: &RwTxn<'env> = self.txn;
        let n = crate::btree::tree_page(src, pg)?.node(slot)?;
        self.at = Some((n.key.to_vec(), crate::btree::node_value(src, &n)?.to_vec()));
        Ok(())
    }

    /// Runs `f` on a read cursor re-seeked to the first pair at or after the remembered one,
    /// and remembers where it ends.
    fn with<F>(&mut self, f: F) -> Result<Owned>
    where
        F: for<'a> FnOnce(&mut Cursor<'a>, Option<(&[u8], &[u8])>) -> Result<Entry<'a>>,
    {
        self.settle()?;
        let at = self.at.take();
        let e = {
            let mut c = self.txn.cursor(self.db)?;
            if let Some((k, v)) = &at {
                c.seek_pair(k, v)?;
            }
            f(&mut c, at.as_ref().map(|(k, v)| (&k[..], &v[..])))?
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
        };
        self.at = e.clone();
        Ok(e)
    }

    /// MDB_FIRST.
    pub fn first(&mut self) -> Result<Owned> {
        self.with(|c, _| c.first())
    }
    /// MDB_LAST.
    pub fn last(&mut self) -> Result<Owned> {
        self.with(|c, _| c.last())
    }
    /// MDB_NEXT: the pair after the current one (even if that one was deleted).
    pub fn next(&mut self) -> Result<Owned> {
        self.with(|c, at| match at {
            None => c.first(),
            Some(at) => match c.current()? {
                Some(cur) if cur == at => c.next(),
                other => Ok(other),
            },
        })
    }
    /// MDB_PREV.
    pub fn prev(&mut self) -> Result<Owned> {
        self.with(|c, at| match at {
            None => c.last(),
            Some(_) => match c.current()? {
                Some(_) => c.prev(),
                None => c.last(),
            },
        })
    }
    /// MDB_NEXT_NODUP: the first value of the next key.
    pub fn next_nodup(&mut self) -> Result<Owned> {
        self.with(|c, at| match at {
            None => c.first(),
            Some((k, _)) => match c.current()? {
                Some((ck, _)) if ck == k => c.next_nodup(),
                other => Ok(other),
            },
        })
    }
    /// MDB_NEXT_DUP: the next value of the current key.
    pub fn next_dup(&mut self) -> Result<Owned> {
        self.settle()?;
        let at = self.at.clone();
        let e = self.with(|c, at| match (at, c.current()?) {
            (Some(at), Some(cur)) if cur == at => c.next_dup(),
            (Some((k, _)), Some(cur)) if cur.0 == k => Ok(Some(cur)),
            _ => Ok(None),
        })?;
        if e.is_none() {
            self.at = at;
        }
        Ok(e)
    }
    /// MDB_SET.
    pub fn set(&mut self, key: &[u8]) -> Result<Owned> {
        self.at = None;
        self.landed = false;
        self.with(|c, _| c.set(key))
    }
    /// MDB_SET_RANGE.
    pub fn set_range(&mut self, key: &[u8]) -> Result<Owned> {
        self.at = None;
        self.landed = false;
        self.with(|c, _| c.set_range(key))
    }
    /// MDB_GET_BOTH.
    pub fn get_both(&mut self, key: &[u8], value: &[u8]) -> Result<Owned> {
        self.at = None;
        self.landed = false;
        self.with(|c, _| c.get_both(key, value))
    }
    /// MDB_GET_CURRENT.
    pub fn current(&mut self) -> Result<Owned> {
        self.settle()?;
        let Some((k, v)) = self.at.clone() else {
            return Ok(None);
        };
        let mut c = self.txn.cursor(self.db)?;
        Ok(match c.seek_pair(&k, &v)? {
            Some(e) if e == (&k[..], &v[..]) => Some((k, v)),
            _ => None,
        })
    }
    /// mdb_cursor_count: the number of values of the current key.
    pub fn count(&mut self) -> Result<u64> {
        self.settle()?;
        match &self.at {
            Some((k, _)) => self.txn.count(self.db, k),
            None => Ok(0),
        }
    }
    /// Puts `key`/`value` and moves the cursor there.
    ///
    /// A put whose key falls within the leaf the previous put landed in goes straight there
    /// (LMDB's shortcut), so a run of sorted puts does not descend from the root each time.
    pub fn put(&mut self, key: &[u8], value: &[u8], flags: PutFlags) -> Result<()> {
        let hint = self.leaf;
        match self.txn.put_hinted(self.db, key, value, flags, hint) {
            Ok(Some(l)) => {
                self.leaf = Some(l);
                self.landed = true;
                return Ok(());
            }
            Ok(None) => self.leaf = None,
            Err(e) => {
                // KeyExists changed nothing: the position and hint stand. After any other
                // failure the tree may have changed under both.
                if !matches!(e, Error::KeyExists) {
                    self.leaf = None;
                    if self.landed {
                        self.landed = false;
                        self.at = None;
                    }
                }
                return Err(e);
            }
        }
        self.landed = false;
        // The position's buffers are reused.
        match &mut self.at {
            Some((k, v)) => {
                k.clear();
                k.extend_from_slice(key);
                v.clear();
                v.extend_from_slice(value);
            }
            None => self.at = Some((key.to_vec(), value.to_vec())),
        }
        Ok(())
    }
    /// MDB_CURRENT: replaces the value at the cursor (in a DUP_SORT database: the pair at the
    /// cursor by `key`/`value`).
    pub fn put_current(&mut self, value: &[u8]) -> Result<()> {
        self.settle()?;
        let (k, old) = self
            .at
            .clone()
            .ok_or_else(|| Error::Invalid("cursor is not positioned".into()))?;
        self.leaf = None;
        let idx = self.txn.env.inner.check_db(self.db)?;
        if self.txn.env.inner.db_flags(idx).contains(DbFlags::DUP_SORT) {
            // The old pair goes; the new one takes its place in the value order.
            self.txn.delete_pair(self.db, &k, &old)?;
        }
        self.txn.put(self.db, &k, value, PutFlags::empty())?;
        self.at = Some((k, value.to_vec()));
        Ok(())
    }
    /// Deletes the pair at the cursor; the cursor then stands before the next pair.
    pub fn del_current(&mut self) -> Result<()> {
        self.settle()?;
        let (k, v) = self
            .at
            .clone()
            .ok_or_else(|| Error::Invalid("cursor is not positioned".into()))?;
        self.leaf = None;
        if !self.txn.delete_pair(self.db, &k, &v)? {
            return Err(Error::Invalid("cursor entry no longer exists".into()));
        }
        Ok(())
    }
    /// MDB_NODUPDATA delete: deletes the current key with all its values.
    pub fn del_current_all(&mut self) -> Result<()> {
        self.settle()?;
        let (k, _) = self
            .at
            .clone()
            .ok_or_else(|| Error::Invalid("cursor is not positioned".into()))?;
        self.leaf = None;
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
