//! The B+tree: search, cursors, insertion with splits, deletion with merges. One module per
//! operation; they share the page access traits below.
//!
//! Invariants of every tree (checked by `check.rs`):
//! - All leaves are at depth `rec.depth`; a branch page has at least one child; slot 0 of a
//!   branch page carries an empty key and covers everything below the key of slot 1.
//! - Keys are strictly increasing within a page and, for child `i` of a branch, every key below
//!   it is >= key(i) and < key(i + 1).
//! - No page but the root is empty; an empty tree has root 0.
//! - Descent is bounded by `MAX_DEPTH`, so a cycle in a corrupted file ends in an error.

pub mod cursor;
pub mod delete;
pub mod dup;
pub mod dup_cursor;
pub mod free;
pub mod insert;
pub mod packed;
pub mod search;

use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp, Node};

/// Deepest tree walked: far beyond any real tree (2 keys per page gives 2^32 entries).
pub const MAX_DEPTH: usize = format::MAX_TREE_DEPTH as usize;

/// Read access to pages of one snapshot (a read transaction, or a write transaction's view).
pub trait PageSource {
    /// Page size.
    fn page_size(&self) -> usize;
    /// The image of page `pgno` (one page), bounds-checked against the snapshot.
    fn page(&self, pgno: u64) -> Result<&[u8]>;
    /// The image of `span` pages starting at `pgno` (an overflow run).
    fn pages(&self, pgno: u64, span: u64) -> Result<&[u8]>;
}

/// Write access for a write transaction.
pub trait PageWriter: PageSource {
    /// Makes `pgno` writable in this transaction: returns it if already dirty, else a copy at a
    /// new page number (the old one is freed).
    fn touch(&mut self, pgno: u64) -> Result<u64>;
    /// The image of a dirty page.
    fn page_mut(&mut self, pgno: u64) -> Result<&mut [u8]>;
    /// Allocates `span` contiguous pages with a zeroed dirty image.
    fn alloc(&mut self, span: u64) -> Result<u64>;
    /// Frees `span` pages starting at `pgno`.
    fn free(&mut self, pgno: u64, span: u64) -> Result<()>;
    /// Whether `pgno` is already writable in this transaction. A dirty page is reachable only
    /// through dirty pages (its parent was rewritten to point at it), so a change made in place
    /// needs no copy up the path. The default (false) is always safe.
    fn is_dirty(&self, _pgno: u64) -> bool {
        false
    }
}

/// The branch pages above a leaf with the slot taken in each, root first, as a descent
/// records them for the splits or merges that may follow; also a cursor position's levels,
/// leaf included. The first levels live inline (a real tree is a few levels deep, and a put,
/// a delete or a fresh cursor then allocates nothing for its path); deeper ones spill to the
/// heap. At most `MAX_DEPTH` levels: a push past that is a corrupted tree.
#[derive(Clone, Debug, Default)]
pub(crate) struct Path {
    inline: [(u64, usize); PATH_INLINE],
    spill: Vec<(u64, usize)>,
    len: usize,
}

const PATH_INLINE: usize = 8;

impl Path {
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(crate) fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keeps the first `len` levels.
    #[inline]
    pub(crate) fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.len = len;
            self.spill.truncate(len.saturating_sub(PATH_INLINE));
        }
    }

    /// Sets the slot of level `k` (< len).
    #[inline]
    pub(crate) fn set_slot(&mut self, k: usize, slot: usize) {
        debug_assert!(k < self.len);
        match self.inline.get_mut(k) {
            Some(s) => s.1 = slot,
            None => self.spill[k - PATH_INLINE].1 = slot,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, step: (u64, usize)) -> Result<()> {
        if self.len >= MAX_DEPTH {
            return Err(Error::corrupted(format!(
                "page {}: below the depth limit of {MAX_DEPTH} levels",
                step.0
            )));
        }
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = step,
            None => self.spill.push(step),
        }
        self.len += 1;
        Ok(())
    }

    /// The deepest level, removed.
    pub(crate) fn pop(&mut self) -> Option<(u64, usize)> {
        self.len = self.len.checked_sub(1)?;
        if self.len < PATH_INLINE {
            Some(self.inline[self.len])
        } else {
            self.spill.pop()
        }
    }

    /// The deepest level.
    #[inline]
    pub(crate) fn last(&self) -> Option<(u64, usize)> {
        let i = self.len.checked_sub(1)?;
        if i < PATH_INLINE {
            Some(self.inline[i])
        } else {
            self.spill.last().copied()
        }
    }

    /// Level `k` (< len), from the root.
    #[inline]
    pub(crate) fn at(&self, k: usize) -> (u64, usize) {
        if k < PATH_INLINE {
            self.inline[k]
        } else {
            self.spill[k - PATH_INLINE]
        }
    }

    fn set_page(&mut self, k: usize, pg: u64) {
        if k < PATH_INLINE {
            self.inline[k].0 = pg;
        } else {
            self.spill[k - PATH_INLINE].0 = pg;
        }
    }
}

/// Makes writable the pages a read-only search went through (`find_leaf_path`): `path` holds
/// each branch from the root down with the child slot taken there, `leaf` the page it ended
/// on. Top-down, each page is made writable, its parent pointed at the copy and its entry in
/// `path` renamed; returns the leaf's writable page number. No search is repeated: a copy
/// keeps its page's content, so the slots stay right.
pub(crate) fn touch_path<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    path: &mut Path,
    leaf: u64,
) -> Result<u64> {
    let first = if path.len == 0 { leaf } else { path.at(0).0 };
    if first != rec.root {
        return Err(Error::internal("search path does not start at the root"));
    }
    let mut parent = None;
    for k in 0..path.len {
        let (old, slot) = path.at(k);
        let new = touch_under(w, rec, parent, old)?;
        path.set_page(k, new);
        parent = Some((new, slot));
    }
    touch_under(w, rec, parent, leaf)
}

/// Makes page `pg` writable below `parent` (its dirty parent and the slot pointing at it;
/// None: `pg` is the root), pointing the parent (or the record) at the copy if one was made;
/// returns the page's writable number.
fn touch_under<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    parent: Option<(u64, usize)>,
    pg: u64,
) -> Result<u64> {
    let new = w.touch(pg)?;
    match parent {
        None => rec.root = new,
        Some((pp, slot)) if new != pg => {
            format::PageMut::new(w.page_mut(pp)?)
                .value_area_mut(slot)?
                .copy_from_slice(&new.to_le_bytes());
        }
        Some(_) => {}
    }
    Ok(new)
}

/// The copy-on-write descent of every change: makes each page from the root to the leaf where
/// `key` belongs (the rightmost leaf with `append`) writable, pointing each parent at its
/// child's copy, and records the branches and slots in `path`; returns the (dirty) leaf and
/// its view. Each page is read once; `depth - 1` branches (`child` refuses a leaf), then a
/// leaf.
pub(crate) fn touch_descend<'w, W: PageWriter + ?Sized>(
    w: &'w mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
    append: bool,
    path: &mut Path,
) -> Result<(u64, format::Page<'w>)> {
    let depth = usize::from(rec.depth);
    let pg = touch_branches(w, rec, cmp, key, append, path)?;
    let p = tree_page(w, pg)?;
    if !p.is_leaf() {
        return Err(Error::corrupted(format!(
            "page {pg}: a branch at the leaf level of a tree of depth {depth}"
        )));
    }
    Ok((pg, p))
}

/// The branch part of [`touch_descend`]: makes the root and every branch down to the leaf
/// level writable and returns the (dirty) leaf's page number, unread, for trees whose leaves
/// are not node pages (packed leaves, `btree/packed.rs`).
pub(crate) fn touch_branches<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
    append: bool,
    path: &mut Path,
) -> Result<u64> {
    let depth = usize::from(rec.depth);
    if rec.root == 0 || depth == 0 || depth > MAX_DEPTH {
        return Err(Error::corrupted(format!(
            "tree of depth {depth}, root {}",
            rec.root
        )));
    }
    let mut pg = touch_under(w, rec, None, rec.root)?;
    for _ in 1..depth {
        let p = tree_page(w, pg)?;
        let i = if append {
            p.nkeys().saturating_sub(1)
        } else {
            p.child_index(key, cmp)?
        };
        let child = p.child(i)?;
        path.push((pg, i))?;
        pg = touch_under(w, rec, Some((pg, i)), child)?;
    }
    Ok(pg)
}

/// A tree-page view of `pgno`.
#[inline]
pub fn tree_page<S: PageSource + ?Sized>(src: &S, pgno: u64) -> Result<format::Page<'_>> {
    format::Page::new(src.page(pgno)?, pgno)
}

/// The value of a leaf node, following an overflow reference if needed.
#[inline(always)]
pub fn node_value<'a, S: PageSource + ?Sized>(src: &'a S, n: &Node<'a>) -> Result<&'a [u8]> {
    // The common case inline in every read; the rest out of line.
    if n.flags == 0 {
        return Ok(n.val);
    }
    node_value_flagged(src, n)
}

#[inline(never)]
fn node_value_flagged<'a, S: PageSource + ?Sized>(src: &'a S, n: &Node<'a>) -> Result<&'a [u8]> {
    // Sorted-duplicate nodes are read through `dups`; met here, the file lies about its
    // database's flags (LMDB's CVE-2019-16227).
    if n.is_dups() {
        return Err(Error::corrupted(
            "sorted-duplicates node read as a single value (database without DUPSORT?)",
        ));
    }
    if !n.is_big() {
        return Ok(n.val);
    }
    let pgno = format::decode_u64(n.val)?;
    let span = format::overflow_pages(src.page_size(), n.vlen as usize);
    let b = src.pages(pgno, span)?;
    format::overflow_value(b, pgno, n.vlen as usize)
}

/// The refusal of a put or delete that met a named database's node ([`format::NF_DB`]): its
/// key is written only by creating or dropping that database (LMDB's MDB_INCOMPATIBLE).
#[cold]
pub(crate) fn db_node_error(key: &[u8]) -> Error {
    Error::Incompatible {
        existing: 0,
        requested: 0,
        what: format!(
            "key {:?} is a named database's name: only creating or dropping that database \
             writes it",
            String::from_utf8_lossy(key)
        ),
    }
}

/// The error for a node that is (`found_db`) or is not a named database's where the other
/// was expected: a put or delete of a name is the caller's mistake ([`db_node_error`]); a
/// record written over a plain key is a bug (callers check the key first).
#[cold]
pub(crate) fn db_node_mismatch(key: &[u8], found_db: bool) -> Error {
    if found_db {
        db_node_error(key)
    } else {
        Error::internal(format!(
            "named database {:?} written over a plain key of the main database",
            String::from_utf8_lossy(key)
        ))
    }
}

/// An owned node, used when pages are rebuilt (splits and merges).
#[derive(Clone, Debug)]
pub struct OwnedNode {
    /// NF_* flags.
    pub flags: u8,
    /// Key.
    pub key: Vec<u8>,
    /// Stored value area.
    pub val: Vec<u8>,
    /// Real value length.
    pub vlen: u32,
}

impl OwnedNode {
    fn of(n: &Node) -> OwnedNode {
        OwnedNode {
            flags: n.flags,
            key: n.key.to_vec(),
            val: n.val.to_vec(),
            vlen: n.vlen,
        }
    }
    fn as_in(&self) -> format::NodeIn<'_> {
        format::NodeIn {
            flags: self.flags,
            key: &self.key,
            val: &self.val,
            vlen: self.vlen,
        }
    }
}

/// All nodes of a page, owned.
pub(crate) fn page_nodes(p: &format::Page) -> Result<Vec<OwnedNode>> {
    (0..p.nkeys())
        .map(|i| p.node(i).map(|n| OwnedNode::of(&n)))
        .collect()
}

/// Writes `nodes` into a fresh image of the given kind.
pub(crate) fn build_page(b: &mut [u8], kind: u8, hinted: bool, nodes: &[OwnedNode]) -> Result<()> {
    let nodes: Vec<format::NodeIn<'_>> = nodes.iter().map(OwnedNode::as_in).collect();
    build_page_in(b, kind, hinted, &nodes)
}

/// [`build_page`] from borrowed nodes.
pub(crate) fn build_page_in(
    b: &mut [u8],
    kind: u8,
    hinted: bool,
    nodes: &[format::NodeIn<'_>],
) -> Result<()> {
    let mut pm = format::PageMut::init(b, kind, hinted);
    for (i, n) in nodes.iter().enumerate() {
        if !pm.insert(i, n)? {
            return Err(Error::internal("rebuilt page overflows"));
        }
    }
    pm.refresh_prefix()
}

/// Whether pages of a tree with this order keep prefixes and hints.
pub fn hinted(cmp: &KeyCmp) -> bool {
    matches!(cmp, KeyCmp::Bytes)
}

/// Debug builds only: page `pg`, just rebuilt by a split, merge or rebalance, reads back as a
/// tree page of `kind` holding `n` nodes (what the rebuild wrote, whatever the tree held
/// before, so a damaged tree cannot trip it).
#[inline]
pub(crate) fn debug_assert_built<S: PageSource + ?Sized>(src: &S, pg: u64, kind: u8, n: usize) {
    if cfg!(debug_assertions) {
        let p = tree_page(src, pg);
        debug_assert!(
            p.as_ref()
                .is_ok_and(|p| p.is_leaf() == (kind == format::KIND_LEAF) && p.nkeys() == n),
            "page {pg} as rebuilt: {:?}, expected kind {kind} with {n} nodes",
            p.map(|p| (p.is_leaf(), p.nkeys()))
        );
    }
}

/// Adjusts the page counters of a record when a page of `kind` is added or removed.
pub(crate) fn count_page(rec: &mut DbRecord, kind: u8, delta: i64) {
    let c = match kind {
        format::KIND_BRANCH => &mut rec.branch_pages,
        format::KIND_LEAF => &mut rec.leaf_pages,
        _ => &mut rec.overflow_pages,
    };
    *c = c.wrapping_add_signed(delta);
}

#[cfg(test)]
mod path_tests {
    use super::*;

    /// The levels past the inline ones behave as the inline ones, and the depth limit holds.
    #[test]
    fn path_spills_past_inline_levels_and_stops_at_the_limit() {
        let mut s = Path::default();
        assert!(s.is_empty() && s.last().is_none());
        for k in 0..MAX_DEPTH {
            s.push((k as u64 + 100, k)).unwrap();
            assert_eq!(s.last(), Some((k as u64 + 100, k)));
        }
        assert!(s.push((1, 1)).is_err(), "a level past MAX_DEPTH");
        assert_eq!(s.len(), MAX_DEPTH);
        for k in 0..MAX_DEPTH {
            assert_eq!(s.at(k), (k as u64 + 100, k));
            s.set_slot(k, 2 * k);
            assert_eq!(s.at(k), (k as u64 + 100, 2 * k));
        }
        s.truncate(PATH_INLINE + 2);
        assert_eq!(
            s.last(),
            Some(((PATH_INLINE + 1) as u64 + 100, 2 * (PATH_INLINE + 1)))
        );
        s.push((7, 7)).unwrap();
        assert_eq!(s.at(PATH_INLINE + 2), (7, 7));
        s.truncate(3);
        assert_eq!((s.len(), s.last()), (3, Some((102, 4))));
        s.push((9, 9)).unwrap();
        assert_eq!(s.at(3), (9, 9));
        s.clear();
        assert!(s.is_empty() && s.last().is_none());
        s.push((5, 0)).unwrap();
        assert_eq!(s.at(0), (5, 0));
    }
}
