//! Cursor positions: a stack of (page, slot) from the root to a leaf. The stack holds page
//! numbers, not borrowed pages, so it can outlive changes made through a write transaction as
//! long as it is re-seeked after them (the public cursor does that). A position over the
//! sub-tree of a DUPFIXED database reads packed leaves ([`Position::set_packed`]); every
//! other tree's leaves are node pages.

use super::{node_value, packed, tree_page, PageSource, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::format::{DbRecord, KeyCmp, Leaf};

/// Where a cursor stands.
#[derive(Clone, Debug, Default)]
pub struct Position {
    stack: Vec<(u64, usize)>,
    /// Depth of the tree walked (from its record): every leaf must lie at exactly this level.
    depth: usize,
    /// The value size of the packed leaves of the tree walked (None: node leaves).
    packed: Option<usize>,
}

impl Position {
    /// An unpositioned cursor.
    pub fn new() -> Position {
        Position {
            stack: Vec::with_capacity(8),
            depth: 0,
            packed: None,
        }
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

    fn push_edge<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        mut pgno: u64,
        last: bool,
    ) -> Result<bool> {
        loop {
            let Some(p) = self.level_page(src, pgno)? else {
                let l = self.leaf_page(src, pgno)?;
                let n = l.nkeys();
                if n == 0 {
                    // Only a root leaf may be empty (the free tree keeps one).
                    if self.stack.is_empty() {
                        return Ok(false);
                    }
                    return Err(Error::corrupted(format!(
                        "page {pgno}: empty page inside a tree"
                    )));
                }
                self.stack.push((pgno, if last { n - 1 } else { 0 }));
                return Ok(true);
            };
            let n = p.nkeys();
            if n == 0 {
                return Err(Error::corrupted(format!(
                    "page {pgno}: empty page inside a tree"
                )));
            }
            let i = if last { n - 1 } else { 0 };
            self.stack.push((pgno, i));
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
        self.stack.clear();
        self.depth = usize::from(rec.depth).min(MAX_DEPTH);
        if rec.root == 0 {
            return Ok(false);
        }
        self.push_edge(src, rec.root, false)
    }

    /// Moves to the last entry; false if the tree is empty.
    pub fn last<S: PageSource + ?Sized>(&mut self, src: &S, rec: &DbRecord) -> Result<bool> {
        self.stack.clear();
        self.depth = usize::from(rec.depth).min(MAX_DEPTH);
        if rec.root == 0 {
            return Ok(false);
        }
        self.push_edge(src, rec.root, true)
    }

    /// Moves to the first entry >= `key`; returns (found any, exact match).
    pub fn seek<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        rec: &DbRecord,
        cmp: &KeyCmp,
        key: &[u8],
    ) -> Result<(bool, bool)> {
        self.stack.clear();
        self.depth = usize::from(rec.depth).min(MAX_DEPTH);
        if rec.root == 0 {
            return Ok((false, false));
        }
        let mut pgno = rec.root;
        loop {
            let Some(p) = self.level_page(src, pgno)? else {
                let l = self.leaf_page(src, pgno)?;
                let (i, exact) = match l {
                    Leaf::Nodes(p) => p.lower_bound(key, cmp, 0)?,
                    Leaf::Packed(p) => p.lower_bound(key, cmp),
                };
                self.stack.push((pgno, i));
                if i >= l.nkeys() {
                    // Past this leaf's last key: the answer is the next leaf's first entry.
                    self.stack.last_mut().expect("pushed").1 = l.nkeys().saturating_sub(1);
                    let more = self.next(src)?;
                    return Ok((more, false));
                }
                return Ok((true, exact));
            };
            let i = p.child_index(key, cmp)?;
            self.stack.push((pgno, i));
            pgno = p.child(i)?;
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
        // Fast path: within the leaf.
        if let Some(&(pgno, i)) = self.stack.last() {
            let p = self.leaf_page(src, pgno)?;
            if fwd && i + 1 < p.nkeys() {
                self.stack.last_mut().expect("nonempty").1 = i + 1;
                return Ok(true);
            }
            if !fwd && i > 0 && i <= p.nkeys() {
                self.stack.last_mut().expect("nonempty").1 = i - 1;
                return Ok(true);
            }
        } else {
            return Ok(false);
        }
        // Climb to the first level that can move, then descend to the edge.
        self.stack.pop();
        while let Some(&(pgno, i)) = self.stack.last() {
            let p = tree_page(src, pgno)?;
            let moved = if fwd && i + 1 < p.nkeys() {
                Some(i + 1)
            } else if !fwd && i > 0 {
                Some(i - 1)
            } else {
                None
            };
            if let Some(j) = moved {
                self.stack.last_mut().expect("nonempty").1 = j;
                let child = p.child(j)?;
                return self.push_edge(src, child, !fwd);
            }
            self.stack.pop();
        }
        Ok(false)
    }

    /// The entry under the cursor.
    #[inline]
    pub fn current<'a, S: PageSource + ?Sized>(
        &self,
        src: &'a S,
    ) -> Result<Option<(&'a [u8], &'a [u8])>> {
        let Some(&(pgno, i)) = self.stack.last() else {
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
    /// step stays in it (sorted-duplicates sub-trees walk their values this way). None (and
    /// unpositioned) at the end.
    #[inline]
    pub fn step_key<'a, S: PageSource + ?Sized>(
        &mut self,
        src: &'a S,
        fwd: bool,
    ) -> Result<Option<&'a [u8]>> {
        if let Some(&(pgno, i)) = self.stack.last() {
            let p = self.leaf_page(src, pgno)?;
            let j = if fwd && i + 1 < p.nkeys() {
                Some(i + 1)
            } else if !fwd && i > 0 && i <= p.nkeys() {
                Some(i - 1)
            } else {
                None
            };
            if let Some(j) = j {
                self.stack.last_mut().expect("nonempty").1 = j;
                return Ok(Some(p.key(j)?));
            }
        }
        if self.step(src, fwd)? {
            Ok(self.current(src)?.map(|(k, _)| k))
        } else {
            Ok(None)
        }
    }

    /// The leaf page and slot (for in-place operations).
    #[inline]
    pub fn leaf(&self) -> Option<(u64, usize)> {
        self.stack.last().copied()
    }

    /// Moves to slot `i` of the current leaf (the caller checked `i` against the page).
    #[inline]
    pub fn set_leaf_slot(&mut self, i: usize) {
        if let Some(top) = self.stack.last_mut() {
            top.1 = i;
        }
    }
}
