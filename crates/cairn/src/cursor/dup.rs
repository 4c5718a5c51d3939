//! Sorted-duplicates operations of the read cursor (LMDB's `*_DUP`, `*_NODUP`, `GET_BOTH*` and
//! `*_MULTIPLE` cursor ops) and the iterator over the values of one key.
//!
//! In a database without DUP_SORT every key has exactly one value, so the `*_DUP` operations
//! see one value per key and `*_NODUP` are `next`/`prev`; the `*_MULTIPLE` operations need
//! DUP_FIXED and fail with `Error::Invalid` otherwise.

use crate::btree::dup_cursor::DupPos;
use crate::btree::PageSource;
use crate::cursor::Cursor;
use crate::db::{Database, DbFlags};
use crate::error::{Error, Result};
use crate::format::{DbRecord, KeyCmp, Leaf};
use crate::txn::{RoTxn, RwTxn};

type Entry<'t> = Option<(&'t [u8], &'t [u8])>;

#[allow(
    clippy::should_implement_trait,
    reason = "LMDB's cursor vocabulary; the iterators are Iter and DupIter"
)]
impl RoTxn<'_> {
    /// Iterates over the values of `key` in value order (`.rev()` for descending order);
    /// empty if the key is absent.
    ///
    /// ```
    /// use cairn::{DbFlags, Env, PutFlags};
    /// let dir = tempfile::tempdir()?;
    /// let env = Env::open(dir.path())?;
    /// let mut w = env.write_txn()?;
    /// let tags = w.create_db(Some("tags"), DbFlags::CREATE | DbFlags::DUP_SORT)?;
    /// for t in ["rust", "db", "mmap"] {
    ///     w.put(tags, b"post1", t.as_bytes(), PutFlags::empty())?;
    /// }
    /// w.commit()?;
    /// let r = env.read_txn()?;
    /// assert_eq!(r.count(tags, b"post1")?, 3);
    /// let vals: Vec<&[u8]> = r.iter_dup(tags, b"post1")?.collect::<cairn::Result<_>>()?;
    /// assert_eq!(vals, [&b"db"[..], b"mmap", b"rust"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter_dup(&self, db: Database, key: &[u8]) -> Result<DupIter<'_>> {
        let (rec, cmp) = self.db(db)?;
        DupIter::new(self.snapshot(), rec, &cmp, key)
    }
}

impl RwTxn<'_> {
    /// Iterates over the values of `key` as this transaction sees them.
    pub fn iter_dup(&self, db: Database, key: &[u8]) -> Result<DupIter<'_>> {
        let (rec, cmp) = self.db_ro(db)?;
        DupIter::new(self, rec, &cmp, key)
    }
}

impl<'t> Cursor<'t> {
    fn after(&mut self, moved: bool) -> Result<Entry<'t>> {
        if moved {
            self.here()
        } else {
            Ok(None)
        }
    }

    /// MDB_FIRST_DUP: the first value of the current key.
    pub fn first_dup(&mut self) -> Result<Entry<'t>> {
        let m = self.pos.first_dup(self.src)?;
        self.after(m)
    }
    /// MDB_LAST_DUP: the last value of the current key.
    pub fn last_dup(&mut self) -> Result<Entry<'t>> {
        let m = self.pos.last_dup(self.src)?;
        self.after(m)
    }
    /// MDB_NEXT_DUP: the next value of the current key; None (position kept) at its last.
    pub fn next_dup(&mut self) -> Result<Entry<'t>> {
        let m = self.pos.next_dup(self.src)?;
        self.after(m)
    }
    /// MDB_PREV_DUP: the previous value of the current key; None (position kept) at its first.
    pub fn prev_dup(&mut self) -> Result<Entry<'t>> {
        let m = self.pos.prev_dup(self.src)?;
        self.after(m)
    }
    /// MDB_NEXT_NODUP: the first value of the next key (unpositioned: the first pair).
    pub fn next_nodup(&mut self) -> Result<Entry<'t>> {
        if !self.pos.is_set() {
            return self.first();
        }
        let m = self.pos.next_nodup(self.src)?;
        self.after(m)
    }
    /// MDB_PREV_NODUP: the last value of the previous key (unpositioned: the last pair).
    pub fn prev_nodup(&mut self) -> Result<Entry<'t>> {
        if !self.pos.is_set() {
            return self.last();
        }
        let m = self.pos.prev_nodup(self.src)?;
        self.after(m)
    }

    /// MDB_GET_BOTH: positions at exactly the pair `key`/`value`.
    pub fn get_both(&mut self, key: &[u8], value: &[u8]) -> Result<Entry<'t>> {
        match self.both(key, value)? {
            Some(true) => self.here(),
            _ => {
                self.pos.clear();
                Ok(None)
            }
        }
    }

    /// MDB_GET_BOTH_RANGE: positions at `key`'s first value >= `value`.
    pub fn get_both_range(&mut self, key: &[u8], value: &[u8]) -> Result<Entry<'t>> {
        match self.both(key, value)? {
            Some(_) => self.here(),
            None => {
                self.pos.clear();
                Ok(None)
            }
        }
    }

    /// Seeks `key` exactly, then its first value >= `value`: None if either is missing, else
    /// whether the value is equal.
    fn both(&mut self, key: &[u8], value: &[u8]) -> Result<Option<bool>> {
        let (found, exact) = self.pos.seek(self.src, &self.rec, &self.cmp, key)?;
        if !(found && exact) {
            return Ok(None);
        }
        let (found, exact) = self.pos.seek_dup(self.src, &self.vcmp, value)?;
        Ok(found.then_some(exact))
    }

    /// Positions at the first pair >= (`key`, `value`) in (key, value) order.
    pub(crate) fn seek_pair(&mut self, key: &[u8], value: &[u8]) -> Result<Entry<'t>> {
        let (found, exact) = self.pos.seek(self.src, &self.rec, &self.cmp, key)?;
        if !found {
            return Ok(None);
        }
        if exact {
            let (found, _) = self.pos.seek_dup(self.src, &self.vcmp, value)?;
            if !found {
                let m = self.pos.next_nodup(self.src)?;
                return self.after(m);
            }
        }
        self.here()
    }

    /// mdb_cursor_count: the number of values of the current key (0 if unpositioned).
    pub fn count(&self) -> u64 {
        self.pos.count()
    }

    fn need_fixed(&self) -> Result<()> {
        let f = DbFlags::from_bits_retain(u32::from(self.rec.flags));
        if !f.contains(DbFlags::DUP_SORT | DbFlags::DUP_FIXED) {
            return Err(Error::Invalid(
                "the *_MULTIPLE cursor operations need a DUP_SORT | DUP_FIXED database".into(),
            ));
        }
        Ok(())
    }

    fn chunk(&mut self) -> Result<Option<(&'t [u8], &'t [u8])>> {
        let Some((k, vals, sub)) = self.pos.take_chunk(self.src, self.walk, self.sub_walk)? else {
            return Ok(None);
        };
        self.sub_walk = sub;
        Ok(Some((k, vals)))
    }

    /// MDB_GET_MULTIPLE: the key and the packed values of the current chunk of its values
    /// (LMDB's page of duplicates: the inline set or one packed sub-tree leaf), as they lie in
    /// the map; the cursor then stands at the chunk's last value. DUP_FIXED only.
    pub fn get_multiple(&mut self) -> Result<Option<(&'t [u8], &'t [u8])>> {
        self.need_fixed()?;
        self.chunk()
    }

    /// MDB_NEXT_MULTIPLE: the next chunk of the current key's values (unpositioned: the first
    /// key's first chunk); None after the key's last chunk.
    pub fn next_multiple(&mut self) -> Result<Option<(&'t [u8], &'t [u8])>> {
        self.need_fixed()?;
        let moved = if self.pos.is_set() {
            let (moved, sub) = self.pos.step_chunk(self.src, true, self.sub_walk)?;
            self.sub_walk = sub;
            moved
        } else {
            self.pos.first(self.src, &self.rec)?
        };
        if !moved {
            return Ok(None);
        }
        self.chunk()
    }

    /// MDB_PREV_MULTIPLE: the chunk before the current one, within the current key
    /// (unpositioned: the last key's last chunk).
    pub fn prev_multiple(&mut self) -> Result<Option<(&'t [u8], &'t [u8])>> {
        self.need_fixed()?;
        let moved = if self.pos.is_set() {
            self.pos.chunk_start();
            self.pos.prev_dup(self.src)?
        } else {
            self.pos.last(self.src, &self.rec)?
        };
        if !moved {
            return Ok(None);
        }
        self.chunk()
    }
}

/// An iterator over the values of one key, in value order (`.rev()` for descending order).
pub struct DupIter<'t> {
    src: &'t dyn PageSource,
    front: DupPos,
    back: DupPos,
    left: u64,
    started: (bool, bool),
    /// The sub-tree leaf each end is walking (front, back) and its slot there: a step inside
    /// it reads no page table and checks no page header again.
    leaf: [Option<(Leaf<'t>, usize)>; 2],
}

impl<'t> DupIter<'t> {
    pub(crate) fn new(
        src: &'t dyn PageSource,
        rec: DbRecord,
        cmp: &KeyCmp,
        key: &[u8],
    ) -> Result<DupIter<'t>> {
        let mut front = DupPos::new(&rec);
        let (found, exact) = front.seek(src, &rec, cmp, key)?;
        let left = if found && exact { front.count() } else { 0 };
        let mut back = front.clone();
        if left > 0 {
            back.last_dup(src)?;
        }
        Ok(DupIter {
            src,
            front,
            back,
            left,
            started: (false, false),
            leaf: [None, None],
        })
    }

    /// The step of end `side` (0 front, 1 back) when it stays inside the sub-tree leaf that
    /// end walks: the leaf's kind is matched, its page neither looked up nor checked again.
    /// None, changing nothing, when the step leaves the leaf or the value cannot be read
    /// (`step` then takes it and reports the error).
    #[inline(always)]
    fn leaf_step(&mut self, side: usize) -> Option<&'t [u8]> {
        if self.left == 0 {
            return None;
        }
        // Set only once the end has started.
        let (leaf, i) = self.leaf[side].as_mut()?;
        let j = if side == 0 { *i + 1 } else { i.wrapping_sub(1) };
        let v = match leaf {
            Leaf::Nodes(p) if j < p.nkeys() => p.key(j).ok()?,
            Leaf::Packed(p) if j < p.nkeys() => p.key(j).ok()?,
            _ => return None,
        };
        *i = j;
        self.left -= 1;
        Some(v)
    }

    #[inline(never)]
    fn step(&mut self, fwd: bool) -> Result<Option<&'t [u8]>> {
        if self.left == 0 {
            return Ok(None);
        }
        let side = usize::from(!fwd);
        let (pos, started) = if fwd {
            (&mut self.front, &mut self.started.0)
        } else {
            (&mut self.back, &mut self.started.1)
        };
        let v = if *started {
            if let Some((p, i)) = &mut self.leaf[side] {
                let j = if fwd { *i + 1 } else { i.wrapping_sub(1) };
                if j < p.nkeys() {
                    *i = j;
                    self.left -= 1;
                    return Ok(Some(p.key(j)?));
                }
                pos.set_sub_slot(*i);
            }
            pos.step_dup_value(self.src, fwd)?
        } else {
            *started = true;
            pos.current_value(self.src)?
        };
        if v.is_none() {
            return Err(crate::Error::corrupted("value count exceeds the values"));
        }
        self.leaf[side] = pos.sub_leaf(self.src)?;
        self.left -= 1;
        Ok(v)
    }
}

impl<'t> Iterator for DupIter<'t> {
    type Item = Result<&'t [u8]>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(v) = self.leaf_step(0) {
            return Some(Ok(v));
        }
        let r = self.step(true).transpose();
        if matches!(r, Some(Err(_))) {
            self.left = 0;
        }
        r
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl DoubleEndedIterator for DupIter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        if let Some(v) = self.leaf_step(1) {
            return Some(Ok(v));
        }
        let r = self.step(false).transpose();
        if matches!(r, Some(Err(_))) {
            self.left = 0;
        }
        r
    }
}
