//! Cursor positions: a stack of (page, slot) from the root to a leaf. The stack holds page
//! numbers, not borrowed pages, so it can outlive changes made through a write transaction as
//! long as it is re-seeked after them (the public cursor does that). A position over the
//! sub-tree of a DUPFIXED database reads packed leaves ([`Position::set_packed`]); every
//! other tree's leaves are node pages.

use super::{node_value, packed, tree_page, PageSource, Path, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::format::{DbRecord, KeyCmp, Leaf};
use std::cmp::Ordering;

/// The slot after (`fwd`) or before slot `i` of a branch of `n` children, if it has one.
#[inline]
fn beside(fwd: bool, i: usize, n: usize) -> Option<usize> {
    if fwd {
        (i + 1 < n).then_some(i + 1)
    } else {
        i.checked_sub(1)
    }
}

/// Where a cursor stands.
#[derive(Clone, Debug, Default)]
pub struct Position {
    stack: Path,
    /// Depth of the tree walked (from its record): every leaf must lie at exactly this level.
    depth: usize,
    /// The value size of the packed leaves of the tree walked (None: node leaves).
    packed: Option<usize>,
}

impl Position {
    /// An unpositioned cursor (allocates nothing: its levels start inline).
    pub fn new() -> Position {
        Position::default()
    }

    /// Sets the kind of leaves of the trees walked from now on: packed leaves of `size`-byte
    /// values (a DUPFIXED sub-tree), or node pages (None).
    #[inline]
    pub fn set_packed(&mut self, size: Option<usize>) {
        self.packed = size;
    }

    /// The leaf `pgno` (the caller knows it is at the leaf level).
    #[inline]
    fn leaf_page<'a, S: PageSource + ?Sized>(&self, src: &'a S, pgno: u64) -> Result<Leaf<'a>> {
        packed::any_leaf(src, pgno, self.packed)
    }

    /// Whether it points at an entry.
    pub fn is_set(&self) -> bool {
        !self.stack.is_empty()
    }

    /// Forgets the position.
    pub fn clear(&mut self) {
        self.stack.clear();
    }

    /// Descends from `pgno` along the first (or last) children and stands at the edge entry
    /// of the leaf reached, which it returns (None: an empty root leaf).
    fn push_edge<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        mut pgno: u64,
        last: bool,
    ) -> Result<Option<Leaf<'a>>> {
        loop {
            let Some(p) = self.level_page(src, pgno)? else {
                let l = self.leaf_page(src, pgno)?;
                let n = l.nkeys();
                if n == 0 {
                    // Only a root leaf may be empty (the free tree keeps one).
                    if self.stack.is_empty() {
                        return Ok(None);
                    }
                    return Err(Error::corrupted(format!(
                        "page {pgno}: empty page inside a tree"
                    )));
                }
                self.stack.push((pgno, if last { n - 1 } else { 0 }))?;
                return Ok(Some(l));
            };
            let n = p.nkeys();
            if n == 0 {
                return Err(Error::corrupted(format!(
                    "page {pgno}: empty page inside a tree"
                )));
            }
            let i = if last { n - 1 } else { 0 };
            self.stack.push((pgno, i))?;
            pgno = p.child(i)?;
        }
    }

    /// The page `pgno` about to be pushed: a branch above the tree's depth, checked to be
    /// one; None at the depth, where the caller reads the leaf (`leaf_page`).
    fn level_page<'a, S: PageSource + ?Sized>(
        &self,
        src: &'a S,
        pgno: u64,
    ) -> Result<Option<crate::format::Page<'a>>> {
        let level = self.stack.len() + 1;
        if level > self.depth {
            return Err(Error::corrupted(format!(
                "page {pgno} below the tree's depth {}",
                self.depth
            )));
        }
        if level == self.depth {
            return Ok(None);
        }
        let p = tree_page(src, pgno)?;
        if p.is_leaf() {
            return Err(Error::corrupted(format!(
                "page {pgno} at level {level} of a tree of depth {}",
                self.depth
            )));
        }
        Ok(Some(p))
    }

    /// Moves to the first entry; false if the tree is empty.
    pub fn first<S: PageSource + ?Sized>(&mut self, src: &S, rec: &DbRecord) -> Result<bool> {
        Ok(self.edge(src, rec, false)?.is_some())
    }

    /// Moves to the last entry; false if the tree is empty.
    pub fn last<S: PageSource + ?Sized>(&mut self, src: &S, rec: &DbRecord) -> Result<bool> {
        Ok(self.edge(src, rec, true)?.is_some())
    }

    /// Moves to the first (or last) entry and returns the leaf it stands in; None if the tree
    /// is empty.
    pub fn edge<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        rec: &DbRecord,
        last: bool,
    ) -> Result<Option<Leaf<'a>>> {
        self.stack.clear();
        self.depth = usize::from(rec.depth).min(MAX_DEPTH);
        if rec.root == 0 {
            return Ok(None);
        }
        self.push_edge(src, rec.root, last)
    }

    /// Moves to the first entry >= `key`; returns (found any, exact match).
    pub fn seek<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        rec: &DbRecord,
        cmp: &KeyCmp,
        key: &[u8],
    ) -> Result<(bool, bool)> {
        let (found, exact, _) = self.seek_leaf(src, rec, cmp, key)?;
        Ok((found, exact))
    }

    /// `seek`, also returning the leaf the position stands in when the descent read it (not
    /// when the entry found is the next leaf's first).
    pub fn seek_leaf<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        rec: &DbRecord,
        cmp: &KeyCmp,
        key: &[u8],
    ) -> Result<(bool, bool, Option<Leaf<'a>>)> {
        self.stack.clear();
        self.depth = usize::from(rec.depth).min(MAX_DEPTH);
        if rec.root == 0 {
            return Ok((false, false, None));
        }
        let mut pgno = rec.root;
        loop {
            let Some(p) = self.level_page(src, pgno)? else {
                let l = self.leaf_page(src, pgno)?;
                let (i, exact) = match l {
                    Leaf::Nodes(p) => p.lower_bound(key, cmp, 0)?,
                    Leaf::Packed(p) => p.lower_bound(key, cmp),
                };
                self.stack.push((pgno, i))?;
                if i >= l.nkeys() {
                    // Past this leaf's last key: the answer is the next leaf's first entry.
                    self.set_leaf_slot(l.nkeys().saturating_sub(1));
                    let more = self.next(src)?;
                    return Ok((more, false, None));
                }
                return Ok((true, exact, Some(l)));
            };
            let i = p.child_index(key, cmp)?;
            self.stack.push((pgno, i))?;
            pgno = p.child(i)?;
        }
    }

    /// When the position stands in a node leaf whose keys span `key` (first <= key <= last),
    /// or in the leaf before the one that does (keys sought in order: the parent's separator
    /// after that one bounds `key`), moves to the first entry >= `key` there and returns that
    /// leaf and whether the key is equal: what a descent from the root finds in a well-formed
    /// tree, without the descent (LMDB's shortcut for MDB_SET on a positioned cursor; the
    /// checker proves leaves and separators ordered). `leaf` is the page of the current leaf
    /// if the caller holds it. None otherwise, the position then to be re-seeked.
    pub fn seek_near<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        cmp: &KeyCmp,
        key: &[u8],
        leaf: Option<(u64, crate::format::Page<'a>)>,
    ) -> Result<Option<(crate::format::Page<'a>, bool)>> {
        let Some((pgno, _)) = self.stack.last() else {
            return Ok(None);
        };
        if self.packed.is_some() {
            return Ok(None);
        }
        let p = match leaf {
            Some((g, p)) if g == pgno => p,
            _ => match self.leaf_page(src, pgno)? {
                Leaf::Nodes(p) => p,
                Leaf::Packed(_) => return Ok(None),
            },
        };
        let n = p.nkeys();
        let (i, exact) = p.lower_bound(key, cmp, 0)?;
        if n == 0 || (i == 0 && !exact) {
            // Before this leaf's first key (or an empty leaf): no shortcut.
            return Ok(None);
        }
        if i < n {
            self.set_leaf_slot(i);
            return Ok(Some((p, exact)));
        }
        // Past this leaf: the next one (keys sought in order) when the parent's separator
        // after it bounds the key; it is then in that leaf or, in the gap before it, the
        // leaf's first entry is the answer.
        let Some(p) = self.next_leaf_for(src, cmp, key)? else {
            return Ok(None);
        };
        let (i, exact) = p.lower_bound(key, cmp, 0)?;
        if i >= p.nkeys() {
            // Past that leaf too (below the separator after it): a descent answers.
            return Ok(None);
        }
        self.set_leaf_slot(i);
        Ok(Some((p, exact)))
    }

    /// For `seek_near`: moves to the leaf after the current one when its parent (the same
    /// parent) bounds `key` from above by the separator after it, and returns it.
    fn next_leaf_for<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        cmp: &KeyCmp,
        key: &[u8],
    ) -> Result<Option<crate::format::Page<'a>>> {
        let d = self.stack.len();
        if d < 2 {
            return Ok(None);
        }
        let (ppg, j) = self.stack.at(d - 2);
        let parent = tree_page(src, ppg)?;
        let m = parent.nkeys();
        if j + 2 >= m || cmp.cmp(key, parent.key(j + 2)?) != Ordering::Less {
            return Ok(None);
        }
        let child = parent.child(j + 1)?;
        self.stack.truncate(d - 1);
        self.stack.set_slot(d - 2, j + 1);
        match self.push_edge(src, child, false)? {
            Some(Leaf::Nodes(p)) => Ok(Some(p)),
            _ => Err(Error::corrupted(format!(
                "page {child}: not a node leaf where one belongs"
            ))),
        }
    }

    /// Steps forward; false (and unpositioned) at the end.
    pub fn next<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.step(src, true)
    }

    /// Steps backward; false (and unpositioned) at the start.
    pub fn prev<S: PageSource + ?Sized>(&mut self, src: &S) -> Result<bool> {
        self.step(src, false)
    }

    fn step<S: PageSource + ?Sized>(&mut self, src: &S, fwd: bool) -> Result<bool> {
        if self.step_keep(src, fwd, None)?.is_some() {
            return Ok(true);
        }
        self.stack.clear();
        Ok(false)
    }

    /// Steps forward (or backward) and returns the leaf it then stands in; None, with the
    /// position kept, at the end (start) of the tree. `leaf` is the page of the leaf the
    /// position stands in, if the caller holds it (read for this tree: same page number).
    pub fn step_keep<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        fwd: bool,
        leaf: Option<(u64, Leaf<'a>)>,
    ) -> Result<Option<Leaf<'a>>> {
        // Fast path: within the leaf.
        let Some((pgno, i)) = self.stack.last() else {
            return Ok(None);
        };
        let p = match leaf {
            Some((g, l)) if g == pgno => l,
            _ => self.leaf_page(src, pgno)?,
        };
        if fwd && i + 1 < p.nkeys() {
            self.set_leaf_slot(i + 1);
            return Ok(Some(p));
        }
        if !fwd && i > 0 && i <= p.nkeys() {
            self.set_leaf_slot(i - 1);
            return Ok(Some(p));
        }
        // Find the lowest level that can move (the levels stay until one does), then
        // descend from it to the edge.
        let mut lvl = self.stack.len() - 1;
        while lvl > 0 {
            lvl -= 1;
            let (pgno, i) = self.stack.at(lvl);
            let p = tree_page(src, pgno)?;
            if let Some(j) = beside(fwd, i, p.nkeys()) {
                self.stack.truncate(lvl + 1);
                self.stack.set_slot(lvl, j);
                let child = p.child(j)?;
                return match self.push_edge(src, child, !fwd)? {
                    Some(l) => Ok(Some(l)),
                    None => Err(Error::corrupted(format!(
                        "page {child}: empty page inside a tree"
                    ))),
                };
            }
        }
        Ok(None)
    }

    /// `step_keep` for a walk over node leaves that holds the leaf it stands in (`held`) and,
    /// when it has it, that leaf's parent (`parent`: the branch one level up, read for this
    /// position): the parent is read only when not held. Returns the leaf it then stands in
    /// and the parent over it when known (None after a climb past the parent, or over a root
    /// leaf); None, position kept, at the end (start).
    pub fn step_leaf<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        fwd: bool,
        held: crate::format::Page<'a>,
        parent: Option<crate::format::Page<'a>>,
    ) -> Result<Option<(Leaf<'a>, Option<crate::format::Page<'a>>)>> {
        let d = self.stack.len();
        let Some((_, i)) = self.stack.last() else {
            return Ok(None);
        };
        let inside = if fwd {
            i + 1 < held.nkeys()
        } else {
            i > 0 && i <= held.nkeys()
        };
        if inside || d < 2 || self.packed.is_some() {
            // Within the leaf, over a root leaf, or packed leaves: the general step.
            let pg = self.stack.last().map_or(0, |t| t.0);
            let l = self.step_keep(src, fwd, Some((pg, Leaf::Nodes(held))))?;
            return Ok(l.map(|l| (l, parent.filter(|_| inside))));
        }
        let (ppg, j) = self.stack.at(d - 2);
        let pp = match parent {
            Some(p) => p,
            None => tree_page(src, ppg)?,
        };
        let Some(j) = beside(fwd, j, pp.nkeys()) else {
            // Past the parent's edge: the climb reads the levels above.
            let pg = self.stack.last().map_or(0, |t| t.0);
            return Ok(self
                .step_keep(src, fwd, Some((pg, Leaf::Nodes(held))))?
                .map(|l| (l, None)));
        };
        self.stack.truncate(d - 1);
        self.stack.set_slot(d - 2, j);
        let child = pp.child(j)?;
        match self.push_edge(src, child, !fwd)? {
            Some(l) => Ok(Some((l, Some(pp)))),
            None => Err(Error::corrupted(format!(
                "page {child}: empty page inside a tree"
            ))),
        }
    }

    /// The entry under the cursor.
    #[inline]
    pub fn current<'a, S: PageSource + ?Sized>(
        &self,
        src: &'a S,
    ) -> Result<Option<(&'a [u8], &'a [u8])>> {
        let Some((pgno, i)) = self.stack.last() else {
            return Ok(None);
        };
        match self.leaf_page(src, pgno)? {
            Leaf::Nodes(p) => {
                if i >= p.nkeys() {
                    return Ok(None);
                }
                let n = p.node(i)?;
                Ok(Some((n.key, node_value(src, &n)?)))
            }
            Leaf::Packed(p) if i < p.nkeys() => Ok(Some((p.key(i)?, &[]))),
            Leaf::Packed(_) => Ok(None),
        }
    }

    /// Steps forward (or backward) and returns the key there, reading the leaf once when the
    /// step stays in it (sorted-duplicates sub-trees walk their values this way). None, with
    /// the position kept, at the end (start).
    #[inline]
    pub fn step_key<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        fwd: bool,
    ) -> Result<Option<&'a [u8]>> {
        let Some(l) = self.step_keep(src, fwd, None)? else {
            return Ok(None);
        };
        let i = self.stack.last().map_or(0, |t| t.1);
        Ok(Some(l.key(i)?))
    }

    /// The leaf page and slot (for in-place operations).
    #[inline]
    pub fn leaf(&self) -> Option<(u64, usize)> {
        self.stack.last()
    }

    /// The levels from the root down to the leaf, each page with the slot taken there (the
    /// leaf's last), as a descent records them (for `touch_path`).
    pub(crate) fn path(&self) -> &Path {
        &self.stack
    }

    /// Moves to slot `i` of the current leaf (the caller checked `i` against the page).
    #[inline]
    pub fn set_leaf_slot(&mut self, i: usize) {
        if let Some(k) = self.stack.len().checked_sub(1) {
            self.stack.set_slot(k, i);
        }
    }
}
