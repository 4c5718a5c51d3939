//! Cursor positions over a database that may hold sorted duplicates: the main tree's position
//! plus, at a key with several values, the position among them (an index into its inline set,
//! or a position in its sub-tree). In a database without duplicates the extra state stays
//! `One` and costs a branch per step.
//!
//! Invariant: when the main position is set, `at` describes the node under it (`load` runs
//! after every move of the main position), and for `At::Tree` the sub-position is set.

use super::cursor::Position;
use super::dup::{form, is_dupsort, DupOrder, Form};
use super::{node_value, tree_page, PageSource};
use crate::error::{Error, Result};
use crate::format::{DbRecord, DupSet, KeyCmp, Leaf, Page, NF_DUPS, NF_SUBTREE};
use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    One,
    Inline { idx: usize, n: usize },
    Tree,
}

/// What [`DupPos::seek_pair`] found.
pub struct Sought<'a> {
    /// Whether the position stands on a pair.
    pub found: bool,
    /// Whether its key is the one sought.
    pub exact: bool,
    /// The pair, unless not `found` or (asked for exact) not `exact`.
    pub pair: Option<(&'a [u8], &'a [u8])>,
    /// The main-tree leaf the position stands in, when read on the way.
    pub leaf: Option<(u64, Page<'a>)>,
    /// The sub-tree leaf the position stands in, when read on the way.
    pub sub: SubLeaf<'a>,
}

/// A chunk of values: the key, the values packed, the sub-tree leaf they lie in.
pub type Chunk<'a> = (&'a [u8], &'a [u8], SubLeaf<'a>);

/// A sub-tree leaf a caller holds, with its page number.
pub type SubLeaf<'a> = Option<(u64, Leaf<'a>)>;

/// A position among the (key, value) pairs of a database.
#[derive(Clone, Debug)]
pub struct DupPos {
    main: Position,
    dups: bool,
    fixed: bool,
    at: At,
    sub: Position,
    sub_rec: DbRecord,
}

impl DupPos {
    /// An unpositioned cursor over the database of record `rec`.
    pub fn new(rec: &DbRecord) -> DupPos {
        let dups = is_dupsort(rec);
        DupPos {
            main: Position::new(),
            dups,
            fixed: dups && DupOrder::of(rec.flags).fixed,
            at: At::One,
            sub: Position::new(),
            sub_rec: DbRecord::default(),
        }
    }

    /// Whether it points at a pair.
    pub fn is_set(&self) -> bool {
        self.main.is_set()
    }

    /// Forgets the position.
    pub fn clear(&mut self) {
        self.main.clear();
        self.at = At::One;
    }

    /// Reads the node under the main position and stands at its first (or last) value.
    fn load<S: PageSource + ?Sized>(&mut self, src: &S, last: bool) -> Result<()> {
        self.at = At::One;
        if !self.dups {
            return Ok(());
        }
        let Some((pg, _)) = self.main.leaf() else {
            return Ok(());
        };
        self.load_in(src, tree_page(src, pg)?, last)?;
        Ok(())
    }

    /// The sub-tree leaf `held` if it is the one the position stands in, read for the
    /// current sub-tree (a packed leaf of its value size).
    fn held_sub<'a>(&self, held: SubLeaf<'a>) -> SubLeaf<'a> {
        let (g, l) = held?;
        let size = self.fixed.then(|| super::packed::value_size(&self.sub_rec));
        let ok = self.at == At::Tree
            && self.sub.leaf().map(|t| t.0) == Some(g)
            && match l {
                Leaf::Packed(p) => size == Some(p.size()),
                Leaf::Nodes(_) => size.is_none(),
            };
        ok.then_some((g, l))
    }

    /// Steps to the next (or previous) chunk of the current key's values (the *_MULTIPLE
    /// operations; the position stands at an edge of its chunk); false, position kept, at the
    /// last (first). `held` is the sub-tree leaf the caller holds; returns the one the
    /// position then stands in.
    pub fn step_chunk<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        fwd: bool,
        held: SubLeaf<'a>,
    ) -> Result<(bool, SubLeaf<'a>)> {
        if self.at != At::Tree {
            return Ok((self.step_dup(src, fwd)?, None));
        }
        let held = self.held_sub(held);
        match self.sub.step_keep(src, fwd, held)? {
            Some(l) => Ok((true, self.sub.leaf().map(|(g, _)| (g, l)))),
            None => Ok((false, held)),
        }
    }

    /// `load` from the main leaf `p` the position stands in (read by the caller), returning
    /// the pair it lands on.
    fn load_in<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        p: Page<'a>,
        last: bool,
    ) -> Result<(&'a [u8], &'a [u8], SubLeaf<'a>)> {
        self.at = At::One;
        let mut sub = None;
        let i = self.main.leaf().map_or(0, |t| t.1);
        let n = p.node(i)?;
        let v = if !self.dups {
            // Fails on a duplicates node: the file lies about the database's flags.
            node_value(src, &n)?
        } else if n.flags & NF_DUPS != 0 {
            let s = DupSet::new(n.val, self.fixed)?;
            let idx = if last { s.len() - 1 } else { 0 };
            self.at = At::Inline { idx, n: s.len() };
            s.get(idx)?
        } else if n.flags & NF_SUBTREE != 0 {
            let Form::Tree(r) = form(src, &n, self.fixed)? else {
                return Err(Error::corrupted("sub-tree node without a sub-tree"));
            };
            self.sub_rec = r;
            // A DUPFIXED sub-tree's leaves are packed, of the record's value size.
            self.sub
                .set_packed(self.fixed.then_some(super::packed::value_size(&r)));
            let Some(l) = self.sub.edge(src, &r, last)? else {
                return Err(Error::corrupted("empty sorted-duplicates sub-tree"));
            };
            self.at = At::Tree;
            let (g, j) = self.sub.leaf().unwrap_or_default();
            sub = Some((g, l));
            l.key(j)?
        } else if n.is_db() {
            return Err(Error::corrupted(
                "named-database node in a DUP_SORT database",
            ));
        } else {
            node_value(src, &n)?
        };
        Ok((n.key, v, sub))
    }

    fn moved<S: PageSource + ?Sized>(&mut self, src: &S, ok: bool, last: bool) -> Result<bool> {
        if ok {
            self.load(src, last)?;
        } else {
            self.at = At::One;
        }
        Ok(ok)
    }

    /// Moves to the first pair; false if the database is empty.
    pub fn first<S: PageSource + ?Sized>(&mut self, src: &S, rec: &DbRecord) -> Result<bool> {
        let ok = self.main.first(src, rec)?;
        self.moved(src, ok, false)
    }

    /// Moves to the last pair; false if the database is empty.
    pub fn last<S: PageSource + ?Sized>(&mut self, src: &S, rec: &DbRecord) -> Result<bool> {
        let ok = self.main.last(src, rec)?;
        self.moved(src, ok, true)
    }

    /// Moves to the first value of the first key >= `key`; returns (found any, exact key).
    pub fn seek<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        rec: &DbRecord,
        kcmp: &KeyCmp,
        key: &[u8],
    ) -> Result<(bool, bool)> {
        let (found, exact) = self.main.seek(src, rec, kcmp, key)?;
        self.moved(src, found, false)?;
        Ok((found, exact))
    }

    /// `seek`, also returning the pair found, read from the pages the descent read, and the
    /// main-tree leaf it stands in. A positioned cursor whose leaf spans `key` searches only
    /// that leaf (`leaf`: its page, if the caller holds it). With `exact`, a key that is not
    /// there leaves the position for the caller to clear (its values are not read).
    pub fn seek_pair<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        rec: &DbRecord,
        kcmp: &KeyCmp,
        key: &[u8],
        exact: bool,
        leaf: Option<(u64, Page<'a>)>,
    ) -> Result<Sought<'a>> {
        let near = if self.main.is_set() {
            self.main.seek_near(src, kcmp, key, leaf)?
        } else {
            None
        };
        let (found, hit, leaf) = match near {
            Some((p, hit)) => (true, hit, Some(p)),
            None => match self.main.seek_leaf(src, rec, kcmp, key)? {
                (f, h, Some(Leaf::Nodes(p))) => (f, h, Some(p)),
                (f, h, _) => (f, h, None),
            },
        };
        self.at = At::One;
        let mut out = Sought {
            found,
            exact: hit,
            pair: None,
            leaf: None,
            sub: None,
        };
        if !found || (exact && !hit) {
            return Ok(out);
        }
        match leaf {
            Some(p) => {
                let (k, v, sub) = self.load_in(src, p, false)?;
                out.pair = Some((k, v));
                out.leaf = self.main.leaf().map(|(g, _)| (g, p));
                out.sub = sub;
            }
            None => {
                // The next leaf's first pair: read it again.
                self.load(src, false)?;
                out.pair = self.current(src)?;
                out.found = out.pair.is_some();
            }
        }
        Ok(out)
    }

    /// Steps to the next pair; false (and unpositioned) at the end.
    pub fn next<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        if self.step_dup(src, true)? {
            return Ok(true);
        }
        self.next_nodup(src)
    }

    /// Steps to the previous pair; false (and unpositioned) at the start.
    pub fn prev<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        if self.step_dup(src, false)? {
            return Ok(true);
        }
        self.prev_nodup(src)
    }

    /// First value of the next key.
    pub fn next_nodup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let ok = self.main.next(src)?;
        self.moved(src, ok, false)
    }

    /// Last value of the previous key.
    pub fn prev_nodup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let ok = self.main.prev(src)?;
        self.moved(src, ok, true)
    }

    /// Next value of the same key; false (position kept) at its last value.
    pub fn next_dup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.step_dup(src, true)
    }

    /// Previous value of the same key; false (position kept) at its first value.
    pub fn prev_dup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.step_dup(src, false)
    }

    fn step_dup<S: PageSource + ?Sized>(&mut self, src: &S, fwd: bool) -> Result<bool> {
        match &mut self.at {
            At::One => Ok(false),
            At::Inline { idx, n } => {
                if fwd && *idx + 1 < *n {
                    *idx += 1;
                    Ok(true)
                } else if !fwd && *idx > 0 {
                    *idx -= 1;
                    Ok(true)
                } else {
                    Ok(false)
                }
            }
            // A failed step keeps the sub-position; `next`/`prev` then move the main
            // position, which loads another one.
            At::Tree => Ok(self.sub.step_keep(src, fwd, None)?.is_some()),
        }
    }

    /// Steps to the next (or previous) value of the current key and returns it; None
    /// (position kept) at its last (first) value. In a sub-tree this reads one page a step.
    #[inline]
    pub fn step_dup_value<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        fwd: bool,
    ) -> Result<Option<&'a [u8]>> {
        if self.at != At::Tree {
            if self.step_dup(src, fwd)? {
                return Ok(self.current(src)?.map(|(_, v)| v));
            }
            return Ok(None);
        }
        self.sub.step_key(src, fwd)
    }

    /// The sub-tree leaf under the cursor and the slot in it, when the current key's values
    /// are a sub-tree: a caller may walk that leaf's values directly, then hand the position
    /// back with [`DupPos::set_sub_slot`].
    pub fn sub_leaf<'a, S: PageSource + ?Sized>(
        &self,
        src: &'a S,
    ) -> Result<Option<(Leaf<'a>, usize)>> {
        if self.at != At::Tree {
            return Ok(None);
        }
        let Some((pg, i)) = self.sub.leaf() else {
            return Ok(None);
        };
        let size = self
            .fixed
            .then_some(super::packed::value_size(&self.sub_rec));
        Ok(Some((super::packed::any_leaf(src, pg, size)?, i)))
    }

    /// The main-tree leaf under the cursor and the slot in it, in a database without sorted
    /// duplicates: a caller may walk that leaf directly, then hand the position back with
    /// [`DupPos::set_main_slot`].
    pub fn main_leaf<'a, S: PageSource + ?Sized>(
        &self,
        src: &'a S,
    ) -> Result<Option<(crate::format::Page<'a>, usize)>> {
        if self.dups {
            return Ok(None);
        }
        let Some((pg, i)) = self.main.leaf() else {
            return Ok(None);
        };
        Ok(Some((tree_page(src, pg)?, i)))
    }

    /// The main-tree leaf page number and slot under the cursor, in a database without sorted
    /// duplicates (no page read).
    #[inline]
    pub fn main_slot(&self) -> Option<(u64, usize)> {
        if self.dups {
            return None;
        }
        self.main.leaf()
    }

    /// In a database without sorted duplicates: steps forward (or backward) from `held`, the
    /// main-tree leaf the position stands in (read by the caller), with its parent branch
    /// when the caller holds it, and returns the leaf and slot it then stands in and the
    /// parent over it when known: no page is read when the step stays in `held`, and only the
    /// neighbouring leaf when it stays under the held parent. None, unpositioned, at the end.
    #[allow(clippy::type_complexity, reason = "a leaf, its slot and its parent")]
    pub fn step_main<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        fwd: bool,
        held: Page<'a>,
        parent: Option<Page<'a>>,
    ) -> Result<Option<(Page<'a>, usize, Option<Page<'a>>)>> {
        if self.dups {
            return Err(Error::internal("step_main in a DUP_SORT database"));
        }
        let landed = self.main.step_leaf(src, fwd, held, parent)?;
        self.at = At::One;
        match (landed, self.main.leaf()) {
            (Some((Leaf::Nodes(p), up)), Some((_, i))) => Ok(Some((p, i, up))),
            (Some((Leaf::Packed(_), _)), _) => Err(Error::corrupted(
                "packed leaf in the main tree of a database without duplicates",
            )),
            _ => {
                self.main.clear();
                Ok(None)
            }
        }
    }

    /// Moves to slot `i` of the current main-tree leaf (a slot the caller read from it).
    #[inline]
    pub fn set_main_slot(&mut self, i: usize) {
        if !self.dups {
            self.main.set_leaf_slot(i);
        }
    }

    /// Moves to slot `i` of the current sub-tree leaf (a slot the caller read from it).
    pub fn set_sub_slot(&mut self, i: usize) {
        if self.at == At::Tree {
            self.sub.set_leaf_slot(i);
        }
    }

    /// The value under the cursor.
    #[inline]
    pub fn current_value<'a, S: PageSource + ?Sized>(
        &self,
        src: &'a S,
    ) -> Result<Option<&'a [u8]>> {
        if self.at == At::Tree {
            return Ok(self.sub.current(src)?.map(|(k, _)| k));
        }
        Ok(self.current(src)?.map(|(_, v)| v))
    }

    /// First value of the current key.
    pub fn first_dup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let ok = self.main.is_set();
        self.moved(src, ok, false)
    }

    /// Last value of the current key.
    pub fn last_dup<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        let ok = self.main.is_set();
        self.moved(src, ok, true)
    }

    /// The pair under the cursor.
    #[inline]
    pub fn current<'a, S: PageSource + ?Sized>(
        &self,
        src: &'a S,
    ) -> Result<Option<(&'a [u8], &'a [u8])>> {
        let Some((pg, i)) = self.main.leaf() else {
            return Ok(None);
        };
        let p = tree_page(src, pg)?;
        if i >= p.nkeys() {
            return Ok(None);
        }
        let n = p.node(i)?;
        let v = match self.at {
            At::One => {
                if n.is_dups() {
                    return Err(Error::corrupted(format!(
                        "page {pg}: duplicates node in a database without DUPSORT"
                    )));
                }
                node_value(src, &n)?
            }
            At::Inline { idx, .. } => DupSet::new(n.val, self.fixed)?.get(idx)?,
            At::Tree => {
                self.sub
                    .current(src)?
                    .ok_or_else(|| Error::corrupted("sub-tree cursor"))?
                    .0
            }
        };
        Ok(Some((n.key, v)))
    }

    /// Number of values of the current key (0 if unpositioned).
    pub fn count(&self) -> u64 {
        if !self.main.is_set() {
            return 0;
        }
        match self.at {
            At::One => 1,
            At::Inline { n, .. } => n as u64,
            At::Tree => self.sub_rec.entries,
        }
    }

    /// Within the current key, moves to the first value >= `val`; returns (found, exact).
    /// When none is, the position is unspecified within the key (callers clear it).
    pub fn seek_dup<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        vcmp: &KeyCmp,
        val: &[u8],
    ) -> Result<(bool, bool)> {
        match self.at {
            At::One => {
                let Some((_, v)) = self.current(src)? else {
                    return Ok((false, false));
                };
                let o = vcmp.cmp(v, val);
                Ok((o != Ordering::Less, o == Ordering::Equal))
            }
            At::Inline { n, .. } => {
                let (pg, i) = self.main.leaf().expect("inline implies a position");
                let p = tree_page(src, pg)?;
                let s = DupSet::new(p.node(i)?.val, self.fixed)?;
                let (pos, exact) = s.search(val, vcmp)?;
                if pos >= n {
                    return Ok((false, false));
                }
                self.at = At::Inline { idx: pos, n };
                Ok((true, exact))
            }
            At::Tree => {
                let r = self.sub_rec;
                self.sub.seek(src, &r, vcmp, val)
            }
        }
    }

    /// The key and the values of the current chunk, packed as they lie in the map (the
    /// inline set, or the packed sub-tree leaf: LMDB's "page of duplicates"; no copy), and
    /// stands at the chunk's last value. A DUPFIXED database's; None if unpositioned.
    pub fn take_chunk<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        leaf: Option<(u64, Page<'a>)>,
        held: SubLeaf<'a>,
    ) -> Result<Option<Chunk<'a>>> {
        if !self.fixed {
            return Err(Error::Invalid(
                "the *_MULTIPLE operations need a DUP_FIXED database".into(),
            ));
        }
        let Some((pg, i)) = self.main.leaf() else {
            return Ok(None);
        };
        let p = match leaf {
            Some((g, p)) if g == pg => p,
            _ => tree_page(src, pg)?,
        };
        if i >= p.nkeys() {
            return Ok(None);
        }
        if self.at == At::Tree {
            // The node was read whole when the sub-tree was loaded: its key is enough here.
            let k = p.key(i)?;
            let (g, l) = match self.held_sub(held) {
                Some(h) => h,
                None => match (self.sub.leaf(), self.sub_leaf(src)?) {
                    (Some((g, _)), Some((l, _))) => (g, l),
                    _ => return Err(Error::corrupted("sub-tree cursor")),
                },
            };
            let Leaf::Packed(pl) = l else {
                return Err(Error::corrupted(
                    "a DUPFIXED sub-tree without packed leaves",
                ));
            };
            self.sub.set_leaf_slot(pl.nkeys().saturating_sub(1));
            return Ok(Some((k, pl.values_from(0), Some((g, l)))));
        }
        let n = p.node(i)?;
        let vals = match self.at {
            At::One => node_value(src, &n)?,
            At::Inline { n: len, .. } => {
                let s = DupSet::new(n.val, self.fixed)?;
                if s.len() != len {
                    return Err(Error::corrupted("inline value set changed under a cursor"));
                }
                self.at = At::Inline {
                    idx: len - 1,
                    n: len,
                };
                s.packed_from(0)
            }
            At::Tree => return Err(Error::corrupted("sub-tree cursor")),
        };
        Ok(Some((n.key, vals, None)))
    }

    /// Moves to the first value of the current chunk (see [`DupPos::take_chunk`]).
    pub fn chunk_start(&mut self) {
        match &mut self.at {
            At::One => {}
            At::Inline { idx, .. } => *idx = 0,
            At::Tree => self.sub.set_leaf_slot(0),
        }
    }
}
